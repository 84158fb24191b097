"""Hidden tests of block_hashes (task block_hashes): format and count, chaining, continuation,
independence of the integer dtype, every token counting (different prefixes, different digests),
the parent, and the same digests in a fresh process; then the same properties on generated token
lists, and over generated families of lists sharing prefixes, digests equal exactly when their
parents and prefixes are (hash_properties.py)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from hash_properties import family_property, hashes_property
from kvlab.testing.conformance import run_given
from prefix_checks import (
    checked_hashes, digests_problem, distinct_prefixes_problem, every_token_problem, first_difference,
    negative_ids_problem,
)

# Token ids every integer dtype below can hold (int8 stops at 127), so only the dtype differs.
SMALL_TOKENS = [int(t) for t in np.random.default_rng(5).integers(0, 120, size=43)]


def split_alike_pairs(rng: np.random.Generator, n_pairs: int, digits: int) -> list[tuple[list[int], list[int]]]:
    """Pairs of 3-block token lists (block size 4) that differ only in block 1, where two neighbouring
    values are one digit string split at two different places (as [1, 23] and [12, 3])."""
    pairs = []
    while len(pairs) < n_pairs:
        text = "".join(str(d) for d in rng.integers(1, 10, size=digits))
        i, j = sorted(int(x) for x in rng.choice(np.arange(1, digits), size=2, replace=False))
        common = [int(t) for t in rng.integers(0, 50_000, size=12)]
        a, b = list(common), list(common)
        a[5:7] = [int(text[:i]), int(text[i:])]
        b[5:7] = [int(text[:j]), int(text[j:])]
        pairs.append((a, b))
    return pairs


@pytest.mark.task("block_hashes", points=0.9)
@pytest.mark.parametrize("block_size", [4, 16])
def test_one_hex_digest_per_full_block(student: Any, block_size: int) -> None:
    tokens = np.random.default_rng(block_size).integers(0, 50_000, size=3 * block_size + 1)
    for n in (0, 1, block_size - 1, block_size, 3 * block_size, 3 * block_size + 1):
        call = f"block_hashes(<{n} tokens>, {block_size})"
        problem = digests_problem(call, student.prefix_cache.block_hashes(tokens[:n], block_size), n, block_size)
        assert problem is None, problem
    signed = [int(t) for t in np.random.default_rng(block_size + 1).integers(-50_000, 50_000, size=2 * block_size + 3)]
    problem = negative_ids_problem(student, f"block_hashes(<{len(signed)} tokens, some negative>, {block_size})",
                                   signed, block_size, [-t for t in signed], "with their signs flipped")
    assert problem is None, problem


@pytest.mark.task("block_hashes", points=0.9)
@pytest.mark.parametrize(("a_len", "b_len"), [(8, 0), (8, 5), (16, 8), (24, 19)])
def test_continuing_a_chain(student: Any, a_len: int, b_len: int) -> None:
    n = 8
    tokens = [int(t) for t in np.random.default_rng(a_len + b_len).integers(0, 1000, size=a_len + b_len)]
    a, b = tokens[:a_len], tokens[a_len:]
    whole, head = checked_hashes(student, a + b, n), checked_hashes(student, a, n)
    continued = checked_hashes(student, b, n, parent=head[-1])
    at = first_difference(whole, head + continued)
    assert at is None, (
        f"block_hashes(a + b, 8) differs from block_hashes(a, 8) + block_hashes(b, 8, parent=block_hashes(a, 8)[-1]) "
        f"at digest {at} (len(a) = {a_len}, len(b) = {b_len}). Likely cause: the parent must seed the chain exactly "
        "as the previous block's digest does inside one call: digest i covers the previous digest (the parent for "
        "i = 0) and block i's tokens"
    )


@pytest.mark.task("block_hashes", points=0.9)
def test_integer_dtype_does_not_matter(student: Any) -> None:
    reference = checked_hashes(student, SMALL_TOKENS, 8)
    forms = {"a tuple": tuple(SMALL_TOKENS)}
    forms.update({f"an {np.dtype(d).name} array": np.array(SMALL_TOKENS, dtype=d)
                  for d in (np.int8, np.int32, np.int64, np.uint16)})
    for form, tokens in forms.items():
        got = checked_hashes(student, tokens, 8)
        assert got == reference, (
            f"block_hashes of the same {len(SMALL_TOKENS)} token values as {form} differs from the digests of a "
            f"list (first difference at digest {first_difference(got, reference)}). Likely cause: the bytes hashed "
            "depend on the dtype; convert the values to one fixed integer width and byte order first "
            "(e.g. np.asarray(tokens).astype('<i8')) so that only the values matter"
        )


@pytest.mark.task("block_hashes", points=0.9)
def test_every_token_of_a_block_counts(student: Any) -> None:
    # Every offset of every block, the first and the last included: a digest that leaves a token out
    # lets two different prefixes share it.
    tokens = np.random.default_rng(13).integers(0, 50_000, size=4 * 6)
    problem = every_token_problem(student, tokens, 6)
    assert problem is None, problem
    # Different values that read alike written one after the other: equal hashes must mean equal prefixes.
    problem = distinct_prefixes_problem(student, split_alike_pairs(np.random.default_rng(14), 4, 6), 4)
    assert problem is None, problem


@pytest.mark.task("block_hashes", points=0.9)
def test_changing_block_j_changes_digests_j_onwards(student: Any) -> None:
    n, n_blocks = 8, 5
    tokens = np.random.default_rng(9).integers(0, 1000, size=n * n_blocks)
    original = checked_hashes(student, tokens, n)
    for j in range(n_blocks):
        changed = tokens.copy()
        changed[j * n + 3] += 1
        digests = checked_hashes(student, changed, n)
        same = [i for i in range(n_blocks) if digests[i] == original[i]]
        want = list(range(j))
        assert same == want, (
            f"changing one token of block {j} (of {n_blocks} blocks of {n}) left digests {same} unchanged; expected "
            f"exactly {want} unchanged. Likely cause: "
            + ("the digests are not chained: digest i must cover every token of blocks 0 .. i (hash the previous "
               "digest together with block i), so a change in block j changes digests j, j+1, ..."
               if any(i > j for i in same) else
               "digest i must cover blocks 0 .. i only: a later block must not change an earlier digest")
        )
    repeated = checked_hashes(student, np.tile(tokens[:n], 3), n)
    assert len(set(repeated)) == 3, (
        f"three identical blocks in a row gave digests {[d[:12] + '...' for d in repeated]}; expected three "
        "different digests. Likely cause: the digests are not chained: equal digests must mean equal prefixes, "
        "so digest i covers blocks 0 .. i, not block i alone"
    )


@pytest.mark.task("block_hashes", points=0.9)
def test_parent_changes_every_digest(student: Any) -> None:
    tokens = SMALL_TOKENS[:32]
    plain = checked_hashes(student, tokens, 8)
    parents = [plain[-1], checked_hashes(student, SMALL_TOKENS[32:40], 8)[0]]
    chained = [checked_hashes(student, tokens, 8, parent=p) for p in parents]
    for parent, digests in zip(parents, chained):
        same = [i for i, (x, y) in enumerate(zip(digests, plain)) if x == y]
        assert not same, (
            f"with parent={parent[:12]}... digests {same} equal those without a parent; expected every digest to "
            "change. Likely cause: the parent is ignored; it must seed the chain (it stands for every earlier block)"
        )
    assert chained[0] != chained[1], "two different parents gave the same digests: the parent must be part of what is hashed"
    assert checked_hashes(student, tokens, 8, parent=parents[0]) == chained[0], (
        "block_hashes with the same tokens and parent gave different digests on two calls: it must be deterministic"
    )


@pytest.mark.task("block_hashes", points=0.9)
def test_same_digests_in_a_fresh_process(student: Any) -> None:
    tokens = [int(t) for t in np.random.default_rng(12).integers(0, 50_000, size=70)]
    here = checked_hashes(student, tokens, 16)
    # A fresh process has its own hash seed (a new random one in the grader's sandbox, a different
    # PYTHONHASHSEED in-process): a digest salted per process differs there from here.
    fresh = student.fresh_call("prefix_cache", "block_hashes", tokens, 16)
    assert list(fresh) == list(here), (
        "block_hashes gives different digests in different processes (first digests "
        f"{str(list(fresh)[:1])[:40]} in a fresh process, {here[0][:12]}... here). Likely cause: "
        "Python's hash() of a str or bytes is salted per process (PYTHONHASHSEED) and so is anything derived "
        "from it: hash the bytes with hashlib.sha256 only"
    )


# The stated properties on generated token lists (hash_properties.py), more of them than the public
# run; and over families of lists sharing prefixes, digests equal exactly when the reference's are.
@pytest.mark.task("block_hashes", points=0.5)
def test_generated_tokens_keep_the_properties(student: Any) -> None:
    run_given(hashes_property(student, max_examples=25))


@pytest.mark.task("block_hashes", points=0.5)
def test_generated_families_match_the_reference(student: Any) -> None:
    run_given(family_property(student, max_examples=20))
