"""Hidden tests of prefill (task prefill): the lecture's 8 requests sharing an 80-token and a
341-token few-shot prefix (vLLM paper, figure 16) at block size 16: tokens computed per request,
logits, the refcount of every block, and an empty pool at the end; a fully cached prompt; a prompt
shorter than one block."""
from __future__ import annotations

from typing import Any

import pytest

from _paged_checks import CFG, describe_error, outcome, tokens_for
from _prefix_checks import (
    PREFILL_BLOCK, Prefilled, computed_problem, logits_problem, prefill_counted, run_shared_prefix,
)

PREFIXES = [80, 341]
# Room for every request's blocks even if nothing were shared, so a copying prefill reaches the
# refcount checks instead of running out of blocks.
N_BLOCKS = 256


def full_blocks(result: Prefilled) -> int:
    return len(result.tokens) // PREFILL_BLOCK


def all_blocks(result: Prefilled) -> int:
    return -(-len(result.tokens) // PREFILL_BLOCK)


def describe_request(index: int, prefix_len: int, result: Prefilled) -> str:
    return f"request {index} ({prefix_len}-token shared prefix + {len(result.tokens) - prefix_len} tokens of its own)"


@pytest.mark.task("prefill", points=2)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_tokens_computed_per_request(student: Any, prefix_len: int) -> None:
    _, _, results = run_shared_prefix(student, prefix_len, N_BLOCKS)
    shared = prefix_len // PREFILL_BLOCK
    for index, result in enumerate(results):
        hits = shared if index else 0
        problem = computed_problem(describe_request(index, prefix_len, result), result,
                                   len(result.tokens) - hits * PREFILL_BLOCK, hits)
        assert problem is None, problem


@pytest.mark.task("prefill", points=1)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_logits_equal_dense(student: Any, prefix_len: int) -> None:
    _, _, results = run_shared_prefix(student, prefix_len, N_BLOCKS)
    for index, result in enumerate(results):
        problem = logits_problem(describe_request(index, prefix_len, result), result)
        assert problem is None, problem


@pytest.mark.task("prefill", points=3)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_prefix_blocks_shared_with_exact_refcounts(student: Any, prefix_len: int) -> None:
    pool, cache, results = run_shared_prefix(student, prefix_len, N_BLOCKS)
    shared, live = prefix_len // PREFILL_BLOCK, len(results)
    prefix_blocks = list(results[0].seq.blocks)[:shared]
    # Sharing first, for every request: a copied prefix shows up there, before any refcount.
    held = [list(result.seq.blocks) for result in results]
    for index, (result, blocks) in enumerate(zip(results, held)):
        what = describe_request(index, prefix_len, result)
        length = result.seq.length
        assert length == len(result.tokens), f"after prefill of {what}, seq.length is {length!r}; expected {len(result.tokens)}"
        assert len(blocks) == all_blocks(result), (
            f"after prefill of {what}, the sequence holds {len(blocks)} blocks; expected ceil({len(result.tokens)} / "
            f"{PREFILL_BLOCK}) = {all_blocks(result)}"
        )
        assert blocks[:shared] == prefix_blocks, (
            f"the first {shared} blocks of {what} are {blocks[:shared]}, but request 0 computed the shared prefix into "
            f"blocks {prefix_blocks}: a cached block must be shared (the same block id, incref'd), never copied into "
            "a new block"
        )
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
            assert got == want, (
                f"after all {live} prefills, block {position} of {what} (block id {block}) has refcount {got!r}; "
                f"expected {want}: {role}. Likely cause: prefill increfs each cached block it shares, and registers "
                "every full block of the request once (register increfs only blocks whose hash is new)"
            )
    cached = shared + sum(full_blocks(r) - shared for r in results)
    assert len(cache) == cached, (
        f"after the {live} prefills the prefix cache holds {len(cache)} blocks; expected {cached}: the {shared} shared "
        "prefix blocks once, plus every other full block of every request (prefill registers all full blocks)"
    )
    in_use = shared + sum(all_blocks(r) - shared for r in results)
    assert pool.num_free == N_BLOCKS - in_use, (
        f"after the {live} prefills num_free is {pool.num_free}; expected {N_BLOCKS} - {in_use} blocks in use = "
        f"{N_BLOCKS - in_use}: shared blocks are used once, not copied"
    )


@pytest.mark.task("prefill", points=1)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_free_and_clear_leave_the_pool_empty(student: Any, prefix_len: int) -> None:
    pool, cache, results = run_shared_prefix(student, prefix_len, N_BLOCKS)
    blocks = [list(result.seq.blocks) for result in results]
    for index, result in enumerate(results):
        _, error = outcome(result.seq.free)
        assert error is None, (
            f"seq.free() of request {index} raised {describe_error(error)}. Likely cause: a block was given back more "
            "often than it was referenced: prefill must incref each cached block it shares, so that each sequence "
            "holds its own reference"
        )
    for index, (result, held) in enumerate(zip(results, blocks)):
        for position, block in enumerate(held):
            want = 1 if position < full_blocks(result) else 0
            got = pool.refcount(block)
            assert got == want, (
                f"after every sequence is freed, block {position} of request {index} (block id {block}) has refcount "
                f"{got!r}; expected {want}: " + ("only the prefix cache holds a full block now" if want else
                                                 "a partial block is not cached, so it is free once its sequence is")
            )
    assert pool.num_free == N_BLOCKS - len(cache), (
        f"after every sequence is freed num_free is {pool.num_free}; expected {N_BLOCKS} - {len(cache)} cached blocks"
    )
    cache.clear()
    busy = [block for block in range(N_BLOCKS) if pool.refcount(block)]
    assert not busy and pool.num_free == N_BLOCKS, (
        f"after every sequence is freed and the prefix cache cleared, blocks {busy[:10]} are still in use (num_free "
        f"{pool.num_free} of {N_BLOCKS}). Likely cause: a reference taken and never given back: prefill increfs each "
        "shared block once (freed by seq.free()), register increfs each newly cached block once (freed by clear())"
    )


@pytest.mark.task("prefill", points=3)
def test_fully_cached_prompt_recomputes_its_last_block(student: Any) -> None:
    n_blocks = 16
    pool = student.paged_kv.BlockPool(CFG, n_blocks, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    tokens = tokens_for(3 * PREFILL_BLOCK, seed=21)
    first = prefill_counted(student, cache, tokens, "a prompt of exactly 3 blocks")
    what = "the same 3-block prompt again (every block cached)"
    hint = (f"Every block of this prompt is cached, so prefill must not use the last cached block: it recomputes "
            f"its {PREFILL_BLOCK} tokens, so that at least one token goes through the model and gives logits")
    second = prefill_counted(student, cache, tokens, what, hint)
    if second.computed == 1:
        pytest.fail(f"prefill of {what} computed 1 token; expected {PREFILL_BLOCK}: the last cached block is not used "
                    "at all, so all of its tokens are recomputed into a new block", pytrace=False)
    problem = computed_problem(what, second, PREFILL_BLOCK, 2) or logits_problem(what, second)
    assert problem is None, f"{problem}. {hint}"
    old, new = list(first.seq.blocks), list(second.seq.blocks)
    assert second.seq.length == len(tokens) and len(new) == 3, (
        f"after prefill of {what} the sequence has length {second.seq.length!r} and {len(new)} blocks; expected "
        f"{len(tokens)} and 3"
    )
    assert new[:2] == old[:2] and new[2] not in old, (
        f"prefill of {what} holds blocks {new}; the first prompt's are {old}: expected the first two shared and a new "
        "block for the recomputed last block"
    )
    want = {old[0]: 3, old[1]: 3, old[2]: 2, new[2]: 1}
    got = {block: pool.refcount(block) for block in want}
    assert got == want, (
        f"after both prefills the refcounts of blocks {list(want)} are {list(got.values())}; expected "
        f"{list(want.values())}: the two shared blocks are held by the cache and both sequences, the first prompt's "
        "last block by the cache and its sequence, and the recomputed block by the second sequence only (its hash "
        "is cached already, so register skips it)"
    )
    assert len(cache) == 3 and pool.num_free == n_blocks - 4, (
        f"after both prefills the cache holds {len(cache)} blocks and num_free is {pool.num_free}; expected 3 and "
        f"{n_blocks - 4}"
    )


@pytest.mark.task("prefill", points=1)
def test_prompt_shorter_than_a_block(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 4, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    tokens = tokens_for(10, seed=22)
    for attempt in ("a 10-token prompt", "the same 10-token prompt again"):
        result = prefill_counted(student, cache, tokens, attempt)
        problem = computed_problem(attempt, result, 10, 0) or logits_problem(attempt, result)
        assert problem is None, f"{problem}. A partial block is never cached, so nothing of it can be reused"
        blocks = list(result.seq.blocks)
        assert result.seq.length == 10 and len(blocks) == 1 and pool.refcount(blocks[0]) == 1, (
            f"after prefill of {attempt} the sequence has length {result.seq.length!r} and blocks {blocks} (refcount "
            f"{[pool.refcount(b) for b in blocks]}); expected length 10 and one block with refcount 1"
        )
    assert len(cache) == 0, f"after prefills of a 10-token prompt the cache holds {len(cache)} blocks; expected 0 (no full block)"
