"""Hidden tests of greedy_decode (task greedy_decode): logits and tokens step by step against the
no-cache reference, the work done through forward, the cache's dtype, and tie-breaking."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from decode_checks import (
    CONFIGS, FLOAT32_LOGIT_ATOL, count_problem, decode_problem, describe, params_for, prompt_for, tied_params,
)
from kvlab.model import TINY, config_like, forward, generate, init_params

# The position budget, measured as work: a decode that does not use its cache recomputes the whole
# sequence each step, T0 + i positions at step i, so its CPU time grows with n_new squared (and
# attention's part with its cube), however it computes its logits (a private copy of the model
# runs uncounted, but not untimed). A model wide enough that one position's matmuls outweigh a
# step's fixed costs, and n large enough that a recomputing decode's short run outweighs a call's
# fixed costs (a counted forward ships the weights from the worker: a few ms). Measured on 2 cores
# for n = 48: a cached decode takes 5.7-6.5x the CPU time for 6n new tokens as for n in the grader
# (the cache's K/V cross the sandbox each step, hence a little over 6x), about 6x in process; a
# recomputing one over 25x in the grader, over 100x in process. The limit sits between.
COST_CFG = config_like(TINY, vocab=128, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_head=16, d_ff=256,
                       max_seq=512, name="tiny-wide")
COST_N_NEW, COST_FACTOR, COST_RATIO_LIMIT = 48, 6, 12.0


@pytest.mark.task("greedy_decode", points=2)
@pytest.mark.parametrize(
    ("config", "batch", "prompt_len", "n_new"),
    [
        ("GQA", 1, 1, 1),
        ("GQA", 1, 5, 8),
        ("MHA", 2, 3, 6),
        ("MQA", 3, 4, 6),
        ("GQA", 2, 7, 1),
        ("MHA", 1, 1, 10),
        ("MQA", 2, 3, 120),
    ],
)
def test_matches_reference(student: Any, config: str, batch: int, prompt_len: int, n_new: int) -> None:
    cfg, params = CONFIGS[config], params_for(config)
    prompt = prompt_for(cfg, batch, prompt_len, seed=100 + prompt_len)
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    result = student.kv_decode.greedy_decode(params, cfg, prompt, n_new)
    problem = decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, cfg)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
@pytest.mark.parametrize(("batch", "prompt_len", "n_new"), [(1, 1, 1), (2, 4, 1), (2, 4, 5), (1, 6, 10)])
def test_forward_sees_each_position_once(student: Any, batch: int, prompt_len: int, n_new: int) -> None:
    cfg, params = CONFIGS["GQA"], params_for("GQA")
    prompt = prompt_for(cfg, batch, prompt_len, seed=200 + n_new)
    result, counts = student.call(
        "kvlab.counter:run_counted", student.kv_decode.greedy_decode, params, cfg, prompt, n_new
    )
    # The decode must also be right: the right count of positions over junk, with the answer taken
    # from an uncounted copy of the model, earns nothing.
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    problem = count_problem(counts, prompt_len, n_new, batch) or decode_problem(
        result, prompt, n_new, expected_tokens, expected_logits, params, cfg
    )
    assert problem is None, problem


def timed_decode(student: Any, params: dict[str, np.ndarray], seed: int, n_new: int) -> float:
    """CPU seconds of one counted greedy_decode of a one-token prompt on COST_CFG (every process it
    ran in, measured by the grader); fails the test if the decode is wrong or sends the wrong count
    of positions. A new prompt each time: an answer remembered from an earlier call costs nothing."""
    prompt = prompt_for(COST_CFG, 1, 1, seed=seed)
    (result, counts), seconds = student.cpu_seconds(
        student.call, "kvlab.counter:run_counted", student.kv_decode.greedy_decode, params, COST_CFG, prompt, n_new
    )
    expected_tokens, expected_logits = teacher_forced(params, prompt, n_new, result)
    problem = count_problem(counts, prompt.shape[1], n_new, prompt.shape[0]) or decode_problem(
        result, prompt, n_new, expected_tokens, expected_logits, params, COST_CFG
    )
    assert problem is None, problem
    return seconds


def teacher_forced(params: dict[str, np.ndarray], prompt: np.ndarray, n_new: int,
                   result: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """The reference decode, as decode_problem takes it, from one no-cache forward over the student's
    tokens [1, T0+n_new] (the reference `generate` would cost as much as the decode this test refuses):
    each step's logits given the tokens before it, each new token their argmax. Up to the first
    token the student got wrong this is `generate`'s answer, and decode_problem reports that first
    divergence. Tokens that are not ids of the right shape get `generate`'s answer (their problem is
    reported before any value is compared)."""
    T0 = prompt.shape[1]
    tokens = result[0] if isinstance(result, (tuple, list)) and len(result) == 2 else None
    if not (isinstance(tokens, np.ndarray) and tokens.shape == (1, T0 + n_new)
            and np.issubdtype(tokens.dtype, np.integer) and np.all((0 <= tokens) & (tokens < COST_CFG.vocab))):
        return generate(params, COST_CFG, prompt, n_new)
    logits = forward(params, COST_CFG, tokens[:, :-1])
    steps = [logits[:, T0 - 1 + i] for i in range(n_new)]
    expected = np.concatenate([prompt, np.stack([step.argmax(axis=-1) for step in steps], axis=1)], axis=1)
    return expected, steps


@pytest.mark.task("greedy_decode", points=4)
def test_decode_work_grows_linearly(student: Any) -> None:
    params = init_params(COST_CFG, seed=7)
    n, k = COST_N_NEW, COST_FACTOR
    shorts, longs = [], []
    # A second try only when the first looks superlinear: one unlucky pause must not cost the points.
    # The least CPU time of each size is its least disturbed measure.
    for attempt in range(2):
        seed = 700 + 2 * attempt
        shorts.append(timed_decode(student, params, seed, n))
        longs.append(timed_decode(student, params, seed + 1, k * n))
        ratio = min(longs) / max(min(shorts), 1e-6)
        if ratio <= COST_RATIO_LIMIT:
            return
    assert ratio <= COST_RATIO_LIMIT, (
        f"greedy_decode of {k * n} new tokens took {ratio:.1f} times the CPU time of {n} new tokens on "
        f"{describe(COST_CFG)}; with the cache the work per step stays nearly constant, so {k} times the tokens "
        f"costs about {k} times the time (the limit is {COST_RATIO_LIMIT:g}x). Likely cause: each step recomputes "
        "the whole sequence (with kvlab.model.forward or any other copy of the model) instead of feeding only "
        "the newest token to forward with the cache"
    )


@pytest.mark.task("greedy_decode", points=1)
@pytest.mark.parametrize(("batch", "prompt_len"), [(1, 1), (2, 5)])
def test_zero_new_tokens_calls_nothing(student: Any, batch: int, prompt_len: int) -> None:
    cfg, params = CONFIGS["GQA"], params_for("GQA")
    prompt = prompt_for(cfg, batch, prompt_len, seed=300)
    result, counts = student.call(
        "kvlab.counter:run_counted", student.kv_decode.greedy_decode, params, cfg, prompt, 0
    )
    problem = decode_problem(result, prompt, 0, prompt, [], params, cfg) or count_problem(
        counts, prompt_len, 0, batch
    )
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=3)
def test_float32_params_decode_in_float32(student: Any) -> None:
    cfg, params = CONFIGS["GQA"], params_for("GQA", dtype=np.float32)
    prompt = prompt_for(cfg, 2, 4, seed=400)
    n_new = 6
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    top2 = np.sort(np.stack(expected_logits), axis=-1)[..., -2:]
    assert np.min(top2[..., 1] - top2[..., 0]) > 100 * FLOAT32_LOGIT_ATOL, (
        "test setup: the float32 reference has a near tie, so float32 rounding could pick either token"
    )
    result = student.kv_decode.greedy_decode(params, cfg, prompt, n_new)
    problem = decode_problem(
        result, prompt, n_new, expected_tokens, expected_logits, params, cfg, atol=FLOAT32_LOGIT_ATOL
    )
    assert problem is None, f"with float32 params: {problem}"


@pytest.mark.task("greedy_decode", points=3)
def test_ties_go_to_the_lowest_index(student: Any) -> None:
    cfg = CONFIGS["GQA"]
    params, prompt, low, high = tied_params(range(500, 600))
    n_new = 4
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    first = expected_logits[0][0]
    assert low < high and first[low] == first[high] == first.max() and expected_tokens[0, 3] == low, (
        f"test setup: tokens {low} and {high} should tie exactly at the top of step 0"
    )
    result = student.kv_decode.greedy_decode(params, cfg, prompt, n_new)
    problem = decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, cfg)
    assert problem is None, problem
