"""What the public and hidden lecture-7 tests of prefix_cache.py share: hash checks, the prefix-cache walk and
the shared-prefix prefill scenario.

Every `*_problem` function returns None when the student's code does what the contract says, else
the message the student sees: what differed, where, and the likely cause. Expected values come
from the tests' own tables and arithmetic, or from `kvlab.model.forward` without a cache; never
from student code. The byte layout of a digest is the student's choice, so hash tests check the
contract's properties (format, chaining, continuation, dtype and process independence), not values.

One module on purpose (over 400 lines): every check of prefix_cache.py (its block_hashes,
PrefixCache and prefill tasks) under the one name that the public tests, the hidden tests and
pool_checks import, so a student reads in one place what the grader asks of that file.
"""
from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from paged_checks import CFG, describe_error, differs, outcome, params, pool_state_problem
from kvlab.model import forward
from kvlab.testing.compare import array_difference

HEX_DIGEST = re.compile(r"[0-9a-f]{64}")


def digests_problem(call: str, digests: Any, n_tokens: int, block_size: int) -> str | None:
    """A block_hashes result: a list of n_tokens // block_size lowercase 64-character hex strings."""
    if not isinstance(digests, list):
        return f"{call} returned {type(digests).__name__}; expected a list of hex digest strings"
    want = n_tokens // block_size
    if len(digests) != want:
        if len(digests) == -(-n_tokens // block_size):
            cause = "the trailing partial block got a digest: only full blocks are hashed"
        elif len(digests) == n_tokens:
            cause = "one digest per token: hash whole blocks of block_size tokens"
        else:
            cause = "one digest per full block of block_size tokens"
        return (f"{call} returned {len(digests)} digests for {n_tokens} tokens; expected {n_tokens} // "
                f"{block_size} = {want}. Likely cause: {cause}")
    for index, digest in enumerate(digests):
        if not isinstance(digest, str) or not HEX_DIGEST.fullmatch(digest):
            kind = "" if type(digest) is str else f" of type {type(digest).__name__}"
            return (f"{call}: digest {index} is {digest!r}{kind}; expected a lowercase hex SHA-256 digest of 64 "
                    "characters (hashlib.sha256(...).hexdigest())")
    return None


def negative_ids_problem(student: Any, call: str, signed: list[int], block_size: int, compared: list[int],
                         compared_as: str) -> str | None:
    """None if block_hashes(signed, block_size), some ids negative, gives one digest per full block and none
    equal to the digests of `compared` (the same ids with their signs changed, `compared_as` in words);
    else what differed."""
    try:
        digests = student.prefix_cache.block_hashes(signed, block_size)
    except Exception as error:  # a student's exception of any type is a finding
        return (f"{call} raised {type(error).__name__}: {error}. Likely cause: negative integers are integers: "
                "block_hashes hashes them like any other value and never refuses them")
    problem = digests_problem(call, digests, len(signed), block_size)
    if problem:
        return problem
    same = [i for i, (a, b) in enumerate(zip(digests, checked_hashes(student, compared, block_size))) if a == b]
    if same:
        return (f"{call} gave digests {same} equal to those of the same ids {compared_as}. Likely cause: a digest "
                "depends on the token values, sign included (-1 and 1 are different tokens)")
    return None


def checked_hashes(student: Any, tokens: Any, block_size: int, parent: str | None = None) -> list[str]:
    """The student's block_hashes(tokens, block_size, parent); fail the test unless well-formed."""
    call = f"block_hashes(<{len(tokens)} tokens>, {block_size}{'' if parent is None else ', parent=...'})"
    digests, error = outcome(functools.partial(student.prefix_cache.block_hashes, tokens, block_size, parent=parent))
    if error is not None:
        pytest.fail(f"{call} raised {describe_error(error)}", pytrace=False)
    problem = digests_problem(call, digests, len(tokens), block_size)
    if problem:
        pytest.fail(problem, pytrace=False)
    return digests


def first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """Index of the first position where a and b differ (a length difference counts), or None."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def every_token_problem(student: Any, tokens: np.ndarray, block_size: int) -> str | None:
    """Changing the token at any offset of block j (the first and the last included) must change
    digests j onwards and leave the earlier ones; tokens [n_blocks * block_size]."""
    n_blocks = len(tokens) // block_size
    original = checked_hashes(student, tokens, block_size)
    for j in range(n_blocks):
        for offset in range(block_size):
            changed = tokens.copy()
            changed[j * block_size + offset] += 1
            digests = checked_hashes(student, changed, block_size)
            same = [i for i in range(n_blocks) if digests[i] == original[i]]
            want = list(range(j))
            if same == want:
                continue
            where = {0: " (the first token of the block)", block_size - 1: " (the last token of the block)"}
            return (f"changing the token at offset {offset}{where.get(offset, '')} of block {j} (of {n_blocks} "
                    f"blocks of {block_size}) left digests {same} unchanged; expected exactly {want} unchanged. "
                    "Likely cause: " + (
                        "the digests do not cover every token of their block: digest i must hash all block_size "
                        "tokens of block i, the first and the last included (check the slice bounds), so that "
                        "different prefixes never share a digest"
                        if j in same else
                        "digest i must cover blocks 0 .. i only: a later block must not change an earlier digest"
                        if any(i < j for i in range(n_blocks) if i not in same) else
                        "the digests are not chained: digest i must cover every token of blocks 0 .. i"))
    return None


def distinct_prefixes_problem(student: Any, pairs: Sequence[tuple[list[int], list[int]]], block_size: int) -> str | None:
    """Each pair is two token lists of equal length that differ in some block: from the first block
    where they differ on, their digests must differ (equal hashes mean equal prefixes)."""
    for a, b in pairs:
        first = next(i for i in range(len(a)) if a[i] != b[i]) // block_size
        da, db = checked_hashes(student, a, block_size), checked_hashes(student, b, block_size)
        same = [i for i in range(first, len(da)) if da[i] == db[i]]
        if not same:
            continue
        k = same[0]
        block_a, block_b = a[k * block_size:(k + 1) * block_size], b[k * block_size:(k + 1) * block_size]
        cause = ("different prefixes must give different bytes to hash: encode each value unambiguously (fixed-width "
                 "bytes, e.g. np.asarray(tokens).astype('<i8').tobytes(), or a separator between values)")
        if "".join(map(str, block_a)) == "".join(map(str, block_b)):
            cause = (f"the values are written as decimal text without a separator, so {block_a} and {block_b} both "
                     f"give {''.join(map(str, block_a))!r}: {cause}")
        return (f"block_hashes({a}, {block_size}) and block_hashes({b}, {block_size}) give digest {k} the same value, "
                f"though the prefixes differ from block {first} on: equal hashes must mean equal prefixes (digest i "
                f"names the whole prefix, the values of every token of blocks 0 .. i). Likely cause: {cause}")
    return None


def fake_digest(name: str) -> str:
    """A 64-character hex string standing for a block hash in the prefix-cache walk."""
    return hashlib.sha256(f"walk:{name}".encode()).hexdigest()


def prefix_walk_problem(
    student: Any, steps: Sequence[tuple[str, list[str] | None, dict[str, int], int]], n_blocks: int,
    reveal: bool = True,
) -> str | None:
    """Walk `steps` on a PrefixCache over a new BlockPool(n_blocks, block_size=2).

    Rows: (operation, the blocks a lookup must return (names) or None, refcount of every named block,
    len(cache)). Operations: "allocate a b" (the test takes blocks a and b), "register h0 h1 : a b",
    "lookup h0 h1", "release a b" (the test's decref of its own references), "clear". A block not
    named in a row must be free; num_free must be n_blocks minus the named blocks in use. reveal=False
    (hidden walks): messages say how a value is off, not the expected value (paged_checks.differs).
    """
    pool = student.paged_kv.BlockPool(CFG, n_blocks, 2)
    cache = student.prefix_cache.PrefixCache(pool)
    ids: dict[str, int] = {}
    done: list[str] = []
    for number, (op, want_lookup, refs, size) in enumerate(steps, 1):
        action, *words = op.split()
        where = f"prefix-cache walk step {number}, `{op}`, after [{'; '.join(done) or 'nothing'}]"
        if action == "allocate":
            for name in words:
                ids[name] = int(pool.allocate())
        elif action == "register":
            split = words.index(":")
            hashes, blocks = [fake_digest(h) for h in words[:split]], [ids[b] for b in words[split + 1:]]
            _, error = outcome(functools.partial(cache.register, hashes, blocks))
            if error is not None:
                return f"{where}: register raised {describe_error(error)}"
        elif action == "lookup":
            got, error = outcome(functools.partial(cache.lookup, [fake_digest(h) for h in words]))
            if error is not None:
                return f"{where}: lookup raised {describe_error(error)}"
            problem = lookup_problem(where, got, [ids[name] for name in want_lookup or []], words, ids, reveal)
            if problem:
                return problem
        elif action == "release":
            for name in words:
                pool.decref(ids[name])
        elif action == "clear":
            _, error = outcome(cache.clear)
            if error is not None:
                return f"{where}: clear raised {describe_error(error)}"
        done.append(op)
        in_use = {ids[name]: rc for name, rc in refs.items() if rc}
        labels = {ids[name]: name for name in refs}
        problem = pool_state_problem(pool, where, action, False, in_use, n_blocks - len(in_use), n_blocks, labels,
                                     reveal)
        if problem:
            return problem
        got_size = len(cache)
        if got_size != size:
            cause = {
                "clear": "clear must drop every entry",
                "register": "register caches each hash that is not cached yet, one entry per hash",
            }.get(action, "only register adds entries and only clear removes them")
            return f"{where}: len(cache) is {got_size!r}; {differs(got_size, size, reveal)}. Likely cause: {cause}"
    return None


def lookup_problem(where: str, got: Any, want: list[int], hashes: list[str], ids: dict[str, int],
                   reveal: bool = True) -> str | None:
    """A lookup's result against the blocks of the longest leading run of cached hashes (`reveal`:
    paged_checks.differs)."""
    if not isinstance(got, (list, tuple)) or not all(isinstance(b, (int, np.integer)) for b in got):
        return f"{where}: lookup returned {got!r}; expected a list of block ids{f' {want}' if reveal else ''}"
    got = [int(b) for b in got]
    if got == want:
        return None
    if len(got) > len(want):
        first_miss = f" ({hashes[len(want)]})" if reveal else ""
        cause = (f"after the first hash that is not cached{first_miss} nothing counts: lookup returns "
                 "the longest leading run of cached hashes and stops at the first miss")
    else:
        cause = "every leading hash that is cached counts, in the order given, each giving the block registered for it"
    names = {block: name for name, block in ids.items()}
    expected = (f"expected {want} {[names[b] for b in want]}" if reveal else
                f"{'more' if len(got) > len(want) else 'fewer' if len(got) < len(want) else 'other'} blocks than the rule gives")
    return f"{where}: lookup returned blocks {got} {[names.get(b, '?') for b in got]}; {expected}. Likely cause: {cause}"


def pool_given_problem(student: Any, n_blocks: int, block_size: int) -> str | None:
    """PrefixCache(pool).pool must be `pool` itself (a BlockPool(CFG, n_blocks, block_size)): a block
    allocated through it is taken from the pool given."""
    pool = student.paged_kv.BlockPool(CFG, n_blocks, block_size)
    cache = student.prefix_cache.PrefixCache(pool)
    block = cache.pool.allocate()
    if (pool.num_free, pool.refcount(block)) == (n_blocks - 1, 1):
        return None
    return (f"after cache.pool.allocate() returned block {block}, the pool given to PrefixCache has num_free "
            f"{pool.num_free} and refcount({block}) {pool.refcount(block)}; expected {n_blocks - 1} and 1: "
            "prefix_cache.pool must be the pool passed to PrefixCache(pool), not a new one")


PREFILL_BLOCK = 16
# Each request is the shared few-shot prefix plus its own tail of a few dozen tokens. 16 and 11 make
# some requests block-aligned (80 + 16 = 96 and 341 + 11 = 352 tokens): a full last block.
TAILS = (37, 24, 45, 16, 50, 29, 11, 41)


def shared_prefix_prompts(prefix_len: int, tails: Sequence[int] = TAILS) -> list[np.ndarray]:
    """The lecture's requests sharing a `prefix_len`-token prefix (vLLM paper, figure 16: 80 or 341),
    one per tail length.

    Tail i starts with token i+1, so no two requests share anything beyond the prefix.
    """
    rng = np.random.default_rng(prefix_len)
    prefix = rng.integers(0, CFG.vocab, size=prefix_len, dtype=np.int64)
    prompts = []
    for index, length in enumerate(tails):
        tail = rng.integers(0, CFG.vocab, size=length, dtype=np.int64)
        tail[0] = index + 1
        prompts.append(np.concatenate([prefix, tail]))
    return prompts


@dataclass(frozen=True)
class Prefilled:
    """One prefill call: what it returned, how many token positions went through the model, and in
    how many model calls (one per paged_step call of one sequence)."""

    tokens: np.ndarray
    seq: Any
    logits: Any
    computed: Any
    positions: int
    calls: int


def prefill_counted(student: Any, cache: Any, tokens: np.ndarray, what: str, hint: str = "") -> Prefilled:
    """Run the student's prefill under kvlab.counter; fail the test with a message (and `hint`) if it raises."""
    result, error = outcome(functools.partial(
        student.call, "kvlab.counter:run_counted", student.prefix_cache.prefill, params(), CFG, cache, tokens))
    if error is not None:
        pytest.fail(f"prefill of {what} ({len(tokens)} tokens) raised {describe_error(error)}. {hint}", pytrace=False)
    returned, counts = result
    if not isinstance(returned, (tuple, list)) or len(returned) != 3:
        pytest.fail(f"prefill of {what} returned {type(returned).__name__}; expected (seq, logits, n_computed)",
                    pytrace=False)
    seq, logits, computed = returned
    return Prefilled(tokens, seq, logits, computed, counts["positions"], counts["forward_calls"])


def run_shared_prefix(
    student: Any, prefix_len: int, n_blocks: int, tails: Sequence[int] = TAILS
) -> tuple[Any, Any, list[Prefilled]]:
    """Prefill the shared-prefix requests in order into one PrefixCache; (pool, cache, results)."""
    pool = student.paged_kv.BlockPool(CFG, n_blocks, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    results = [prefill_counted(student, cache, tokens, f"request {index} (prefix {prefix_len} + tail {len(tokens) - prefix_len})")
               for index, tokens in enumerate(shared_prefix_prompts(prefix_len, tails))]
    return pool, cache, results


def full_blocks(result: Prefilled) -> int:
    return len(result.tokens) // PREFILL_BLOCK


def all_blocks(result: Prefilled) -> int:
    return -(-len(result.tokens) // PREFILL_BLOCK)


def describe_request(index: int, prefix_len: int, result: Prefilled) -> str:
    return f"request {index} ({prefix_len}-token shared prefix + {len(result.tokens) - prefix_len} tokens of its own)"


def shared_refcounts_problem(pool: Any, cache: Any, results: Sequence[Prefilled], prefix_len: int, n_blocks: int) -> str | None:
    """After run_shared_prefix: every request shares the prefix's blocks (the same ids), and every
    block's refcount, len(cache) and num_free are those of sharing without copying."""
    shared, live = prefix_len // PREFILL_BLOCK, len(results)
    prefix_blocks = list(results[0].seq.blocks)[:shared]
    # Sharing first, for every request: a copied prefix shows up there, before any refcount.
    held = [list(result.seq.blocks) for result in results]
    for index, (result, blocks) in enumerate(zip(results, held)):
        what = describe_request(index, prefix_len, result)
        length = result.seq.length
        if length != len(result.tokens):
            return f"after prefill of {what}, seq.length is {length!r}; expected {len(result.tokens)}"
        if len(blocks) != all_blocks(result):
            return (f"after prefill of {what}, the sequence holds {len(blocks)} blocks; expected ceil("
                    f"{len(result.tokens)} / {PREFILL_BLOCK}) = {all_blocks(result)}")
        if blocks[:shared] != prefix_blocks:
            return (f"the first {shared} blocks of {what} are {blocks[:shared]}, but request 0 computed the shared "
                    f"prefix into blocks {prefix_blocks}: a cached block must be shared (the same block id, "
                    "incref'd), never copied into a new block")
    for index, (result, blocks) in enumerate(zip(results, held)):
        what = describe_request(index, prefix_len, result)
        for position, block in enumerate(blocks):
            if position < shared:
                want, role = 1 + live, f"a shared prefix block, held by the prefix cache and the {live} live sequences"
            elif position < full_blocks(result):
                want, role = 2, "a full block of its own, held by its sequence and by the prefix cache (registered)"
            else:
                want, role = 1, "its partial last block, held by its sequence only (partial blocks are not cached)"
            got = pool.refcount(block)
            if got != want:
                return (f"after all {live} prefills, block {position} of {what} (block id {block}) has refcount "
                        f"{got!r}; expected {want}: {role}. Likely cause: prefill increfs each cached block it "
                        "shares, and registers every full block of the request once (register increfs only blocks "
                        "whose hash is new)")
    cached = shared + sum(full_blocks(r) - shared for r in results)
    if len(cache) != cached:
        return (f"after the {live} prefills the prefix cache holds {len(cache)} blocks; expected {cached}: the "
                f"{shared} shared prefix blocks once, plus every other full block of every request (prefill "
                "registers all full blocks)")
    in_use = shared + sum(all_blocks(r) - shared for r in results)
    if pool.num_free != n_blocks - in_use:
        return (f"after the {live} prefills num_free is {pool.num_free}; expected {n_blocks} - {in_use} blocks in "
                f"use = {n_blocks - in_use}: shared blocks are used once, not copied")
    return None


def fully_cached_problem(student: Any, tokens: np.ndarray, n_blocks: int) -> str | None:
    """Prefill a prompt of exactly 3 full blocks twice: the second time every block is cached, so the
    last cached block is not used and its tokens are recomputed into a new block."""
    pool = student.paged_kv.BlockPool(CFG, n_blocks, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    first = prefill_counted(student, cache, tokens, "a prompt of exactly 3 blocks")
    what = "the same 3-block prompt again (every block cached)"
    hint = (f"Every block of this prompt is cached, so prefill must not use the last cached block: it recomputes "
            f"its {PREFILL_BLOCK} tokens, so that at least one token goes through the model and gives logits")
    second = prefill_counted(student, cache, tokens, what, hint)
    if second.computed == 1:
        return (f"prefill of {what} computed 1 token; expected {PREFILL_BLOCK}: the last cached block is not used "
                "at all, so all of its tokens are recomputed into a new block")
    problem = computed_problem(what, second, PREFILL_BLOCK, 2) or logits_problem(what, second)
    if problem:
        return f"{problem}. {hint}"
    old, new = list(first.seq.blocks), list(second.seq.blocks)
    if second.seq.length != len(tokens) or len(new) != 3:
        return (f"after prefill of {what} the sequence has length {second.seq.length!r} and {len(new)} blocks; "
                f"expected {len(tokens)} and 3")
    if new[:2] != old[:2] or new[2] in old:
        return (f"prefill of {what} holds blocks {new}; the first prompt's are {old}: expected the first two shared "
                "and a new block for the recomputed last block")
    want = {old[0]: 3, old[1]: 3, old[2]: 2, new[2]: 1}
    got = {block: pool.refcount(block) for block in want}
    if got != want:
        return (f"after both prefills the refcounts of blocks {list(want)} are {list(got.values())}; expected "
                f"{list(want.values())}: the two shared blocks are held by the cache and both sequences, the first "
                "prompt's last block by the cache and its sequence, and the recomputed block by the second sequence "
                "only (its hash is cached already, so register skips it)")
    if len(cache) != 3 or pool.num_free != n_blocks - 4:
        return (f"after both prefills the cache holds {len(cache)} blocks and num_free is {pool.num_free}; expected "
                f"3 and {n_blocks - 4}")
    return None


def all_or_nothing_problem(student: Any, first: np.ndarray, second: np.ndarray, n_blocks: int) -> str | None:
    """Prefill `first`, then `second`, which shares first's cached blocks but needs more new blocks
    than are free: the second prefill must raise OutOfBlocks and leave every refcount, num_free and
    len(cache) as they were."""
    # The BlockPool prefix_cache.py imported (given in the stub), so that the pool's OutOfBlocks is
    # the one its PagedSequence.reserve catches even where paged_kv.py was imported twice.
    pool_class = getattr(student.prefix_cache, "BlockPool", None) or student.paged_kv.BlockPool
    pool = pool_class(CFG, n_blocks, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    prefill_counted(student, cache, first, f"a {len(first)}-token prompt")
    before = ([pool.refcount(b) for b in range(n_blocks)], pool.num_free, len(cache))
    what = (f"prefill of a {len(second)}-token prompt sharing the first prompt's cached blocks, with only "
            f"{pool.num_free} free blocks of {PREFILL_BLOCK}")
    result, error = outcome(functools.partial(student.prefix_cache.prefill, params(), CFG, cache, second))
    if not (isinstance(error, RuntimeError) and type(error).__name__ == "OutOfBlocks"):
        said = f"raised {describe_error(error)}" if error else f"returned {type(result).__name__}"
        return f"{what} {said}; expected OutOfBlocks: the pool cannot hold the blocks it needs"
    after = ([pool.refcount(b) for b in range(n_blocks)], pool.num_free, len(cache))
    if after == before:
        return None
    changed = [b for b in range(n_blocks) if after[0][b] != before[0][b]]
    return (f"after a failed {what}: refcounts of blocks {changed} are {[after[0][b] for b in changed]} (before: "
            f"{[before[0][b] for b in changed]}), num_free {after[1]} (before: {before[1]}), len(cache) {after[2]} "
            f"(before: {before[2]}). prefill is all or nothing: on OutOfBlocks it gives back every reference it "
            "took (the increfs of the shared blocks too: seq.free() does it) and registers nothing, then re-raises")


def computed_problem(what: str, result: Prefilled, expected: int, shared_blocks: int) -> str | None:
    """The count prefill returned and the positions that went through the model, against `expected`."""
    n = len(result.tokens)
    if result.computed != expected:
        if result.computed == n and shared_blocks:
            cause = (f"nothing was reused, though its first {shared_blocks} blocks were computed by an earlier "
                     "request: look up the prompt's block hashes in the prefix cache, share the leading cached "
                     "blocks, and register every full block after computing so later requests find them")
        elif result.computed == 0:
            cause = "at least one token is always computed, so that the last position has logits"
        elif result.computed != result.positions:
            cause = "the count must be the number of tokens that went through the model (len(tokens) - shared tokens)"
        elif shared_blocks and result.computed == n - shared_blocks:
            cause = (f"seq.length counts tokens stored, not blocks: a sequence sharing {shared_blocks} cached blocks "
                     f"starts with length {shared_blocks} * {PREFILL_BLOCK} (the shared tokens), and only the tokens "
                     "after them are computed")
        else:
            cause = ("only the leading full blocks whose chained hashes are cached are shared; every token after "
                     "them is computed")
        return (f"prefill of {what} ({n} tokens, block size {PREFILL_BLOCK}) returned {result.computed!r} tokens "
                f"computed; expected {expected} ({shared_blocks} cached blocks shared). Likely cause: {cause}")
    if result.positions != expected:
        return (f"prefill of {what} says it computed {expected} tokens, but {result.positions} token positions went "
                "through the model: run only the uncached tokens, once, with paged_step")
    if result.calls != 1:
        return (f"prefill of {what} ran the model {result.calls} times; expected once: the uncached tokens go "
                "through `paged_step`, once, in one call (not a call per block or per token)")
    return None


@functools.lru_cache(maxsize=64)
def _dense_last_logits(tokens: bytes) -> np.ndarray:
    return forward(params(), CFG, np.frombuffer(tokens, dtype=np.int64)[None], last_only=True)[0, -1]


def dense_last_logits(tokens: np.ndarray) -> np.ndarray:
    """forward on the whole prompt without a cache, logits of its last position [V]; cached, as the
    same prompts come back in several tests."""
    return _dense_last_logits(np.asarray(tokens, dtype=np.int64).tobytes())


def logits_problem(what: str, result: Prefilled) -> str | None:
    """prefill's logits against forward on the whole prompt, without a cache."""
    expected = dense_last_logits(result.tokens)
    problem = array_difference(f"the logits prefill returned for {what}", result.logits, expected)
    if problem is None:
        return None
    return (f"{problem}. Likely cause: the shared blocks must be the cached blocks themselves (same KV), seq.length "
            "must equal the shared tokens before paged_step runs the rest, and the logits are those of the last "
            "position, [V]")
