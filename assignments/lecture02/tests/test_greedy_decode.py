"""Public tests of greedy_decode (task greedy_decode). Run: make test TASK=greedy_decode.

The reference is `kvlab.model.generate`, which recomputes the whole sequence at every step; your
cached decode must give the same tokens and, within LOGIT_ATOL, the same logits, with exactly
T0 + n_new - 1 token positions through forward, and CPU time that grows linearly with n_new. The grader checks the same rules with the same
diagnoses (decode_checks.py, in this folder) on other models, prompts and batch sizes.
"""
from __future__ import annotations

from typing import Any

import pytest

from decode_checks import (
    CONFIGS, decode_problem, decoded, dtype_switch_problem, float32_decode_problem, params_for, positions_once_problem,
    prompt_for, tie_problem, zero_new_problem,
)
from kvlab.model import generate


@pytest.mark.task("greedy_decode", points=2)
def test_returns_prompt_then_new_tokens(student: Any) -> None:
    cfg, params = CONFIGS["GQA"], params_for("GQA")
    prompt = prompt_for(cfg, 1, 3, seed=3)
    expected_tokens, expected_logits = generate(params, cfg, prompt, 4)
    result = decoded(student, params, cfg, prompt, 4)
    problem = decode_problem(result, prompt, 4, expected_tokens, expected_logits, params, cfg)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=3)
def test_small_decode_matches_generate(student: Any) -> None:
    cfg, params = CONFIGS["MHA"], params_for("MHA")
    prompt = prompt_for(cfg, 2, 3, seed=30)
    expected_tokens, expected_logits = generate(params, cfg, prompt, 5)
    result = decoded(student, params, cfg, prompt, 5)
    problem = decode_problem(result, prompt, 5, expected_tokens, expected_logits, params, cfg)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
def test_zero_new_tokens_returns_the_prompt(student: Any) -> None:
    problem = zero_new_problem(student, "GQA", batch=1, prompt_len=4, seed=4)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
@pytest.mark.parametrize(("batch", "prompt_len", "n_new"), [(1, 2, 3), (3, 5, 4)])
def test_forward_sees_each_position_once(student: Any, batch: int, prompt_len: int, n_new: int) -> None:
    # And the right tokens, and work that grows linearly with n_new (decode_checks.work_problem: the
    # CPU time of 16 and of 96 new tokens), however the logits are computed.
    problem = positions_once_problem(student, "MQA", batch, prompt_len, n_new, seed=40 + n_new)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
def test_float32_params_decode_in_float32(student: Any) -> None:
    problem = float32_decode_problem(student, "MHA", batch=1, length=3, seed=50, n_new=4)
    assert problem is None, problem
    # And one call after another of the other dtype: each decodes in its own params' dtype.
    problem = dtype_switch_problem(student, "GQA", batch=1, length=3, seed=51, n_new=3)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
def test_ties_go_to_the_lowest_index(student: Any) -> None:
    problem = tie_problem(student, range(700, 800), n_new=3)
    assert problem is None, problem
