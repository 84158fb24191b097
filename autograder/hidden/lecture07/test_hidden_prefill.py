"""Hidden tests of prefill (task prefill): the lecture's 8 requests sharing an 80-token and a
341-token few-shot prefix (vLLM paper, figure 16) at block size 16: tokens computed per request,
logits, the refcount of every block, and an empty pool at the end; a fully cached prompt; a prefill
that runs out of blocks (all or nothing); a prompt shorter than one block. Every verdict on a
prefill also reads the pool here: it must hold each prompt's K and V where the sequence's blocks
say (pool_checks), as what prefill returns could be right without the work being done."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from paged_checks import CFG, describe_error, outcome, tokens_for
from prefix_checks import (
    PREFILL_BLOCK, all_or_nothing_problem, computed_problem, describe_request, full_blocks,
    fully_cached_problem, logits_problem, prefill_counted, shared_refcounts_problem,
)
from pool_checks import kv_in_pool_problem, run_shared_prefix_in_pool

PREFIXES = [80, 341]
# Room for every request's blocks even if nothing were shared, so a copying prefill reaches the
# refcount checks instead of running out of blocks.
N_BLOCKS = 256


@pytest.mark.task("prefill", points=2)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_tokens_computed_per_request(student: Any, prefix_len: int) -> None:
    _, _, results = run_shared_prefix_in_pool(student, prefix_len, N_BLOCKS)
    shared = prefix_len // PREFILL_BLOCK
    for index, result in enumerate(results):
        hits = shared if index else 0
        problem = computed_problem(describe_request(index, prefix_len, result), result,
                                   len(result.tokens) - hits * PREFILL_BLOCK, hits)
        assert problem is None, problem


@pytest.mark.task("prefill", points=1)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_logits_equal_dense(student: Any, prefix_len: int) -> None:
    _, _, results = run_shared_prefix_in_pool(student, prefix_len, N_BLOCKS)
    for index, result in enumerate(results):
        problem = logits_problem(describe_request(index, prefix_len, result), result)
        assert problem is None, problem


@pytest.mark.task("prefill", points=2)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_prefix_blocks_shared_with_exact_refcounts(student: Any, prefix_len: int) -> None:
    pool, cache, results = run_shared_prefix_in_pool(student, prefix_len, N_BLOCKS)
    problem = shared_refcounts_problem(pool, cache, results, prefix_len, N_BLOCKS)
    assert problem is None, problem


@pytest.mark.task("prefill", points=1)
@pytest.mark.parametrize("prefix_len", PREFIXES)
def test_free_and_clear_leave_the_pool_empty(student: Any, prefix_len: int) -> None:
    pool, cache, results = run_shared_prefix_in_pool(student, prefix_len, N_BLOCKS)
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


@pytest.mark.task("prefill", points=1)
def test_fully_cached_prompt_recomputes_its_last_block(student: Any) -> None:
    tokens = tokens_for(3 * PREFILL_BLOCK, seed=21)
    problem = fully_cached_problem(student, tokens, 16)
    assert problem is None, problem
    # The same two prefills again, on a pool read here afterwards: the recomputed block's K and V too.
    pool = student.paged_kv.BlockPool(CFG, 16, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    attempts = ("a prompt of exactly 3 blocks", "the same 3-block prompt again (every block cached)")
    results = [prefill_counted(student, cache, tokens, attempt) for attempt in attempts]
    problem = kv_in_pool_problem(pool, results, lambda index, result: attempts[index])
    assert problem is None, problem


@pytest.mark.task("prefill", points=1)
def test_failed_prefill_changes_nothing(student: Any) -> None:
    # 3 full blocks cached and a partial one held by the first sequence leave 2 of 7 blocks free; the
    # second prompt shares the 3 cached blocks and needs 5 more.
    first = tokens_for(3 * PREFILL_BLOCK + 5, seed=23)
    second = np.concatenate([first[:3 * PREFILL_BLOCK], tokens_for(70, seed=24)])
    problem = all_or_nothing_problem(student, first, second, 7)
    assert problem is None, problem


@pytest.mark.task("prefill", points=1)
def test_prompt_shorter_than_a_block(student: Any) -> None:
    pool = student.paged_kv.BlockPool(CFG, 4, PREFILL_BLOCK)
    cache = student.prefix_cache.PrefixCache(pool)
    tokens = tokens_for(10, seed=22)
    for attempt in ("a 10-token prompt", "the same 10-token prompt again"):
        result = prefill_counted(student, cache, tokens, attempt)
        problem = (computed_problem(attempt, result, 10, 0) or logits_problem(attempt, result)
                   or kv_in_pool_problem(pool, [result], lambda index, result: attempt))
        assert problem is None, f"{problem}. A partial block is never cached, so nothing of it can be reused"
        blocks = list(result.seq.blocks)
        assert result.seq.length == 10 and len(blocks) == 1 and pool.refcount(blocks[0]) == 1, (
            f"after prefill of {attempt} the sequence has length {result.seq.length!r} and blocks {blocks} (refcount "
            f"{[pool.refcount(b) for b in blocks]}); expected length 10 and one block with refcount 1"
        )
    assert len(cache) == 0, f"after prefills of a 10-token prompt the cache holds {len(cache)} blocks; expected 0 (no full block)"
