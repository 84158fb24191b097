"""Hidden tests of greedy_decode (task greedy_decode): logits and tokens step by step against the
no-cache reference, the work done through forward, the cache's dtype, and tie-breaking."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from decode_checks import (
    CONFIGS, decode_problem, decoded, float32_decode_problem, params_for, positions_once_problem, prompt_for,
    tie_problem, use_trusted_decode, zero_new_problem,
)
from kvlab.model import Config, forward, generate


class _TrustedCache:
    """The contract's KVCache, preallocated: what the position budget's trusted decode runs on."""

    def __init__(self, cfg: Config, batch: int, dtype: Any) -> None:
        shape = (cfg.n_layers, batch, cfg.max_seq, cfg.n_kv_heads, cfg.d_head)
        self.k, self.v, self.length = np.zeros(shape, dtype=dtype), np.zeros(shape, dtype=dtype), 0

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        end = self.length + k.shape[1]
        self.k[layer, :, self.length:end], self.v[layer, :, self.length:end] = k, v
        return self.k[layer, :, :end], self.v[layer, :, :end]

    def advance(self, n: int) -> None:
        self.length += n


def _trusted_decode(params: dict[str, np.ndarray], cfg: Config, prompt: np.ndarray,
                    n_new: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """A correct cached greedy decode, run in the grader's process: the position budget's yardstick.
    Registered as this module is collected, before any test runs, so the public position-budget test
    graded with it is judged the same way (decode_checks.measure_against_trusted)."""
    tokens = np.asarray(prompt)
    cache = _TrustedCache(cfg, tokens.shape[0], params["embed"].dtype)
    logits = forward(params, cfg, tokens, cache=cache, last_only=True)[:, -1]
    step_logits = []
    for step in range(n_new):
        step_logits.append(logits)
        new = logits.argmax(axis=-1)[:, None].astype(tokens.dtype)
        tokens = np.concatenate([tokens, new], axis=1)
        if step < n_new - 1:
            logits = forward(params, cfg, new, cache=cache)[:, -1]
    return tokens, step_logits


use_trusted_decode(_trusted_decode)

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
        ("MQA", 2, 3, 40),
    ],
)
def test_matches_reference(student: Any, config: str, batch: int, prompt_len: int, n_new: int) -> None:
    cfg, params = CONFIGS[config], params_for(config)
    prompt = prompt_for(cfg, batch, prompt_len, seed=100 + prompt_len)
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    result = decoded(student, params, cfg, prompt, n_new)
    problem = decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, cfg)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=2)
# Several steps first: a decode that recomputes is told so by its count of positions, before
# (1, 1, 1) times its work.
@pytest.mark.parametrize(("batch", "prompt_len", "n_new"), [(2, 4, 5), (1, 6, 10), (1, 1, 1), (2, 4, 1)])
def test_forward_sees_each_position_once(student: Any, batch: int, prompt_len: int, n_new: int) -> None:
    # The decode must also be right, and its work grow linearly with n_new: the right count of
    # positions over junk, with the answer taken from an uncounted copy of the model, earns nothing.
    problem = positions_once_problem(student, "GQA", batch, prompt_len, n_new, seed=200 + n_new)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=1)
@pytest.mark.parametrize(("batch", "prompt_len"), [(1, 1), (2, 5)])
def test_zero_new_tokens_calls_nothing(student: Any, batch: int, prompt_len: int) -> None:
    problem = zero_new_problem(student, "GQA", batch, prompt_len, seed=300)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=3)
def test_float32_params_decode_in_float32(student: Any) -> None:
    problem = float32_decode_problem(student, "GQA", batch=2, length=4, seed=400, n_new=6)
    assert problem is None, problem


@pytest.mark.task("greedy_decode", points=3)
def test_ties_go_to_the_lowest_index(student: Any) -> None:
    problem = tie_problem(student, range(500, 600), n_new=4)
    assert problem is None, problem
