"""Public tests of prefill (task prefill). Run: make test TASK=prefill.

Requests sharing leading full blocks share them (incref'd, never copied) and compute only the rest;
a fully cached prompt recomputes its last block; a prefill that runs out of blocks changes nothing;
after a shared-prefix run the pool holds every prompt token's K and V where its sequence's blocks
say (pool_checks.py). The grader checks the same rules with the same diagnoses (prefix_checks.py and
pool_checks.py, in this folder) on the lecture's few-shot prompts.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from paged_checks import tokens_for
from pool_checks import run_shared_prefix_in_pool
from prefix_checks import (
    PREFILL_BLOCK, all_or_nothing_problem, computed_problem, fully_cached_problem, logits_problem,
    shared_refcounts_problem,
)

# Three requests sharing a 48-token prefix (3 full blocks of 16), with tails of 5, 16 and 21 tokens.
PREFIX, TAILS, N_BLOCKS = 48, (5, 16, 21), 32


@pytest.mark.task("prefill", points=1)
def test_second_request_reuses_the_prefix(student: Any) -> None:
    _, _, results = run_shared_prefix_in_pool(student, PREFIX, N_BLOCKS, TAILS)
    shared = PREFIX // PREFILL_BLOCK
    for index, result in enumerate(results):
        hits = shared if index else 0
        what = f"request {index} ({PREFIX}-token shared prefix + {TAILS[index]} tokens of its own)"
        problem = computed_problem(what, result, len(result.tokens) - hits * PREFILL_BLOCK, hits) or logits_problem(
            what, result)
        assert problem is None, problem


@pytest.mark.task("prefill", points=1)
def test_shared_blocks_have_exact_refcounts(student: Any) -> None:
    pool, cache, results = run_shared_prefix_in_pool(student, PREFIX, N_BLOCKS, TAILS)
    problem = shared_refcounts_problem(pool, cache, results, PREFIX, N_BLOCKS)
    assert problem is None, problem


@pytest.mark.task("prefill", points=1)
def test_fully_cached_prompt_recomputes_its_last_block(student: Any) -> None:
    problem = fully_cached_problem(student, tokens_for(3 * PREFILL_BLOCK, seed=41), 8)
    assert problem is None, problem


@pytest.mark.task("prefill", points=1)
def test_failed_prefill_changes_nothing(student: Any) -> None:
    # 2 full blocks cached and a partial one held by the first sequence leave 2 of 5 blocks free; the
    # second prompt shares the 2 cached blocks and needs 4 more.
    first = tokens_for(2 * PREFILL_BLOCK + 8, seed=42)
    second = np.concatenate([first[:2 * PREFILL_BLOCK], tokens_for(60, seed=43)])
    problem = all_or_nothing_problem(student, first, second, 5)
    assert problem is None, problem
