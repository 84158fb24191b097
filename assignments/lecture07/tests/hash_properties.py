"""block_hashes on generated token lists, checked against what its stub states.

Each example draws a block size (1 .. 5), a parent (None or a digest) and a token list of 0 to 5
blocks and a partial one, its ids from the whole stated domain: 0, small, negative and large
integers up to the int64 range. `hashes_property` (public and hidden) checks the stated properties
on it: one digest per full block and none for the partial one; the same digests for a tuple and
for integer arrays of the same values; equal prefixes, equal digests; changing token j (its sign,
or by one) changes every digest from block j // block_size on and none before; a chain continued
through `parent` equals the whole; a parent changes every digest. `family_property` (hidden)
compares with the reference up to the freedom the contract leaves (the bytes hashed are the
student's choice): over a family of token lists sharing prefixes, two digests are equal exactly when
the reference's are, i.e. when their parents and whole prefixes are. A failure names the call, what
came back, what the rule gives and the rule's sentence (conformance_checks.RULES, quoted from the
stub).
"""
from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from conformance_checks import PUBLIC_SETTINGS, RULES
from kvlab.testing.conformance import Rule, Transcript, outcome_of, short
from prefix_checks import digests_problem

INT64 = (-2**63, 2**63 - 1)
# Token ids: 0 and its neighbours, a vocabulary's range, and anything an int64 holds.
TOKENS = st.one_of(st.integers(-3, 3), st.integers(0, 200_000), st.integers(*INT64))
BLOCK_SIZES = st.integers(1, 5)
PARENTS = st.one_of(st.none(), st.binary(max_size=8).map(lambda data: hashlib.sha256(data).hexdigest()))


def _call(tokens: Any, size: int, parent: str | None) -> str:
    shown = short(tokens if isinstance(tokens, (list, tuple)) else tokens.tolist(), 90)
    kind = "" if isinstance(tokens, list) else (" as a tuple" if isinstance(tokens, tuple) else
                                                 f" as an array of {tokens.dtype}")
    return f"block_hashes({shown}{kind}, {size}{'' if parent is None else f', parent={parent[:12]}...'})"


class HashRun:
    """The student's block_hashes, each call checked for form and recorded for the message."""

    def __init__(self, student: Any) -> None:
        self.function = student.prefix_cache.block_hashes
        self.log = Transcript("from prefix_cache import block_hashes")

    def digests(self, tokens: Any, size: int, parent: str | None = None) -> list[str]:
        keyword = {} if parent is None else {"parent": parent}
        call = _call(tokens, size, parent)
        got = outcome_of(functools.partial(self.function, tokens, size, **keyword))
        self.log.add(call, got)
        self.log.check(got.error is None, call, f"it {got.describe()}; the rule gives a list of digests",
                       RULES["hash_negative"] if any(int(t) < 0 for t in tokens) else RULES["hash_format"])
        problem = digests_problem(call, got.value, len(tokens), size)
        partial = isinstance(got.value, list) and len(got.value) == -(-len(tokens) // size) != len(tokens) // size
        self.log.check(problem is None, call, str(problem),
                       RULES["hash_partial"] if partial else RULES["hash_list"])
        return got.value

    def same(self, got: list[str], want: list[str], call: str, what: str, rule: Rule) -> None:
        """got == want, else which digest differs first."""
        at = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        self.log.check(at is None and len(got) == len(want), call,
                       f"{what}: digest {at} differs" if at is not None else f"{what}: {len(got)} digests, not "
                       f"{len(want)}", rule)


def check_properties(student: Any, tokens: list[int], size: int, parent: str | None, j: int, flip: bool,
                     k: int) -> None:
    """Every stated property of block_hashes on one drawn input (`j`: the token changed, `flip`:
    by its sign, else by one; `k`: where the chain is cut, in blocks)."""
    run = HashRun(student)
    whole = run.digests(tokens, size, parent)
    n = len(whole)
    call = _call(tokens, size, parent)
    # The same values in other forms: a tuple, an int64 array, and the narrowest array that holds them.
    forms: list[Any] = [tuple(tokens), np.array(tokens, dtype=np.int64)]
    narrow = next((d for d in (np.int8, np.uint16, np.int32) if tokens and all(
        np.can_cast(np.min_scalar_type(value), d) for value in (min(tokens), max(tokens)))), None)
    if narrow is not None:
        forms.append(np.array(tokens, dtype=narrow))
    for form in forms:
        run.same(run.digests(form, size, parent), whole, _call(form, size, parent),
                 f"the same values as a list gave {call}'s digests", RULES["hash_values"])
    # Equal prefixes, equal digests: the first k blocks alone give the first k digests.
    cut = min(k, n) * size
    run.same(run.digests(tokens[:cut], size, parent), whole[:min(k, n)], _call(tokens[:cut], size, parent),
             f"its first {min(k, n)} blocks are those of {call}, whose digests differ", RULES["hash_chain"])
    if n:
        # Changing one token of a full block: digests before its block stay, every later one changes.
        j %= n * size
        changed = list(tokens)
        if flip and tokens[j] not in (0, INT64[0]):
            changed[j] = -tokens[j]
        else:
            changed[j] = tokens[j] + (1 if tokens[j] < INT64[1] else -1)
        after = run.digests(changed, size, parent)
        kept = [i for i in range(n) if after[i] == whole[i]]
        want = list(range(j // size))
        run.log.check(kept == want, _call(changed, size, parent),
                      f"token {j} (block {j // size}) changed from {tokens[j]} to {changed[j]}: digests {kept} are "
                      f"those of {call}; the rule gives {want} (every digest from block {j // size} on covers it)",
                      RULES["hash_negative"] if changed[j] == -tokens[j] else RULES["hash_chain"])
        # Continuing a chain: cut after k (>= 1) full blocks, the rest with the last digest as parent.
        head = max(1, min(k, n)) * size
        rest = run.digests(tokens[head:], size, whole[head // size - 1])
        run.same(whole[:head // size] + rest, whole, _call(tokens[head:], size, "<digest %d>" % (head // size - 1)),
                 f"{call} cut after {head // size} blocks and continued with that digest as parent differs from the "
                 "whole", RULES["hash_continue"])
        # A parent changes every digest.
        other = hashlib.sha256(b"another parent" + (parent or "").encode()).hexdigest()
        moved = run.digests(tokens, size, other)
        same = [i for i in range(n) if moved[i] == whole[i]]
        run.log.check(not same, _call(tokens, size, other), f"digests {same} equal those with parent "
                      f"{parent if parent is None else parent[:12] + '...'}; the rule gives all different",
                      RULES["hash_chain"])


def hashes_property(student: Any, max_examples: int) -> Callable[[], None]:
    """A Hypothesis test of `check_properties` over the stated domain (run it with conformance.run_given)."""
    @PUBLIC_SETTINGS.__class__(PUBLIC_SETTINGS, max_examples=max_examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        size = data.draw(BLOCK_SIZES)
        # 0 to 5 full blocks, then a partial one (maybe empty).
        tokens = data.draw(st.lists(TOKENS, max_size=6 * size - 1))
        check_properties(student, tokens, size, data.draw(PARENTS),
                         data.draw(st.integers(0, 2**16)), data.draw(st.booleans()), data.draw(st.integers(0, 5)))

    return check


def check_family(student: Any, base: list[int], size: int, parents: list[str | None],
                 edits: list[tuple[int, int, int]]) -> None:
    """Lists made from `base` (each cut at some length, maybe one token changed: `edits` (cut, j,
    value)), each hashed under each parent: two digests are equal exactly when the reference's are,
    i.e. when the parent and the whole prefix they cover are."""
    run = HashRun(student)
    seen: dict[str, tuple[tuple[Any, ...], str]] = {}
    keys: dict[tuple[Any, ...], tuple[str, str]] = {}
    lists = [base] + [base[:cut] if not len(base[:cut]) else
                      [value if i == j % len(base[:cut]) else t for i, t in enumerate(base[:cut])]
                      for cut, j, value in edits]
    for tokens in lists:
        for parent in parents:
            call = _call(tokens, size, parent)
            for i, digest in enumerate(run.digests(tokens, size, parent)):
                key = (parent, tuple(tokens[:(i + 1) * size]))
                where = f"digest {i} of {call}"
                if key in keys:
                    run.log.check(keys[key][0] == digest, call, f"{where} differs from {keys[key][1]}, which "
                                  "covers the same parent and prefix", RULES["hash_chain"])
                elif digest in seen:
                    run.log.check(False, call, f"{where} equals {seen[digest][1]}, which covers another "
                                  f"{'parent' if seen[digest][0][0] != parent else 'prefix'}; the rule gives "
                                  "different digests (a digest names its whole prefix)", RULES["hash_chain"])
                keys[key], seen[digest] = (digest, where), (key, where)


def family_property(student: Any, max_examples: int) -> Callable[[], None]:
    """A Hypothesis test of `check_family` (run it with conformance.run_given)."""
    @PUBLIC_SETTINGS.__class__(PUBLIC_SETTINGS, max_examples=max_examples)
    @given(st.data())
    def check(data: st.DataObject) -> None:
        size = data.draw(BLOCK_SIZES)
        base = data.draw(st.lists(TOKENS, min_size=size, max_size=4 * size))
        parents = data.draw(st.lists(PARENTS, min_size=1, max_size=2, unique=True))
        edits = data.draw(st.lists(st.tuples(st.integers(0, len(base)), st.integers(0, 2**16), TOKENS), max_size=3))
        check_family(student, base, size, parents, edits)

    return check
