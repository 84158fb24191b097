"""Public tests of greedy_decode (task greedy_decode). Run: make test TASK=greedy_decode.

The reference is `kvlab.model.generate`, which recomputes the whole sequence at every step; your
cached decode must give the same tokens and, within LOGIT_ATOL, the same logits. The grader also
checks other models and batch sizes, float32 params, ties, and how many positions go through forward.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY, generate, init_params
from kvlab.testing import array_difference, shape_problem

PARAMS = init_params(TINY, seed=0)


def prompt(batch: int, length: int) -> np.ndarray:
    return np.random.default_rng(length).integers(0, TINY.vocab, size=(batch, length))


@pytest.mark.task("greedy_decode", points=2)
def test_returns_prompt_then_new_tokens(student: Any) -> None:
    tokens_in = prompt(1, 3)
    tokens, step_logits = student.kv_decode.greedy_decode(PARAMS, TINY, tokens_in, 4)
    problem = shape_problem("tokens", tokens, (1, 7))
    assert problem is None, f"{problem} (the prompt's 3 tokens, then the 4 new ones)"
    assert np.array_equal(tokens[:, :3], tokens_in), "tokens should start with the prompt, unchanged"
    assert len(step_logits) == 4, f"step_logits should hold n_new = 4 arrays; got {len(step_logits)}"
    for step, logits in enumerate(step_logits):
        problem = shape_problem(f"step_logits[{step}]", logits, (1, TINY.vocab))
        assert problem is None, problem


@pytest.mark.task("greedy_decode", points=3)
def test_small_decode_matches_generate(student: Any) -> None:
    tokens_in = prompt(2, 3)
    expected_tokens, expected_logits = generate(PARAMS, TINY, tokens_in, 5)
    tokens, step_logits = student.kv_decode.greedy_decode(PARAMS, TINY, tokens_in, 5)
    assert len(step_logits) == 5, f"step_logits should hold n_new = 5 arrays; got {len(step_logits)}"
    for step, (got, expected) in enumerate(zip(step_logits, expected_logits)):
        problem = array_difference(f"step_logits[{step}]", got, expected)
        assert problem is None, (
            f"{problem}. If step 0 is wrong, look at the prefill; if step 0 is right and step 1 is not, "
            "check that the prefill fills the cache you decode with and that each new token goes in at "
            "position cache.length"
        )
    assert np.array_equal(tokens, expected_tokens), (
        f"the logits match but the tokens do not: got {np.asarray(tokens).tolist()}, expected "
        f"{expected_tokens.tolist()}; greedy takes argmax over the vocabulary (the last axis)"
    )


@pytest.mark.task("greedy_decode", points=1)
def test_zero_new_tokens_returns_the_prompt(student: Any) -> None:
    tokens_in = prompt(1, 4)
    tokens, step_logits = student.kv_decode.greedy_decode(PARAMS, TINY, tokens_in, 0)
    assert np.array_equal(tokens, tokens_in), f"with n_new=0 the tokens should be the prompt; got {tokens!r}"
    assert len(step_logits) == 0, f"with n_new=0 step_logits should be []; got {len(step_logits)} arrays"
