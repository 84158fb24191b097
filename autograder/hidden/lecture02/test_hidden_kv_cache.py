"""Hidden tests of KVCache (task kv_cache): every rule of the contract, on MHA, GQA and MQA models.

A test's calls on one cache are made in one step (kvlab.testing.probe.play), then checked in their order; then
made again on another cache by direct calls (decode_checks.both_ways) and checked the same way, so a
cache that answers the batched questions right and its real callers wrong earns nothing."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conformance_checks import HIDDEN_SETTINGS, kv_cache_machine
from kvlab.testing.conformance import run_machine
from decode_checks import (
    CONFIGS, LENGTH, NBYTES, both_ways, describe, exception_from, filling_problem, forward_with_cache_problem, kv_chunk,
    nbytes_problem, params_for, past_limit_problem, prompt_for, returned_positions_problem, store_steps,
)
from kvlab.model import config_like, forward
from kvlab.testing.draws import drawn

# Chunk sizes stored one after another: a multi-token prefill, one decode token, then two tokens at
# once, so update is exercised with T > 1 at length > 0 as well.
CHUNKS = (3, 1, 2)


# The length tests come first: a cache whose length goes wrong stores at the wrong positions too,
# and the first failure a student sees should name length, not the positions it misplaced.
@pytest.mark.task("kv_cache", points=1.8)
def test_update_leaves_length_to_advance(student: Any) -> None:
    cfg = CONFIGS["GQA"]
    keys, values = kv_chunk(cfg, 2, 5, seed=3), kv_chunk(cfg, 2, 5, seed=4)
    # The length read after every call.
    steps = [step for stored in store_steps(keys, values, (4, 1)) for step in (stored, LENGTH)]
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(cfg, 2), steps):
        start = 0
        for T in (4, 1):
            for layer in range(cfg.n_layers):
                _, length = replies.take(2)
                assert length == start, (
                    f"after update(layer={layer}) with T={T} tokens on a cache of length {start}, length is "
                    f"{length}: update must not change length (forward calls update once per layer "
                    f"and all layers must see the same length; advance({T}) moves it once at the end)"
                )
            _, length = replies.take(2)
            start += T
            assert length == start, (
                f"after advance({T}) on a cache of length {start - T}, length is {length}; expected {start}: "
                "advance(n) must do length += n")


@pytest.mark.task("kv_cache", points=1.8)
def test_advance_adds_n(student: Any) -> None:
    # Drawn: a cache that answers a fixed series from a table earns nothing.
    adds = (drawn(2, 9), 1, 0, drawn(2, 9))
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(CONFIGS["GQA"], 1),
                             [step for n in adds for step in (("advance", (n,)), LENGTH)]):
        expected = 0
        for n in adds:
            error = exception_from(replies.next)
            assert error is None, (
                f"advance({n}) on a cache of length {expected} raised {type(error).__name__}: {error}; advance(n) "
                "must do length += n for any n >= 0 (0 is allowed: nothing new was stored)"
            )
            expected += n
            length = replies.next()
            assert length == expected, (
                f"after advance calls adding up to {expected}, length is {length}; advance(n) must do "
                f"length += n (the last call was advance({n}))"
            )


@pytest.mark.task("kv_cache", points=1.8)
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_update_returns_every_stored_position(student: Any, config: str, batch: int) -> None:
    cfg = CONFIGS[config]
    keys, values = kv_chunk(cfg, batch, sum(CHUNKS), seed=1), kv_chunk(cfg, batch, sum(CHUNKS), seed=2)
    problem = returned_positions_problem(student, cfg, batch, keys, values, CHUNKS)
    assert problem is None, problem


@pytest.mark.task("kv_cache", points=0.9)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_stored_dtype_follows_constructor(student: Any, dtype: type) -> None:
    cfg = CONFIGS["GQA"]
    # k, v arrive in each of the two other dtypes, float16 in both tests, so the result shows what the
    # cache stores, not what came in: no rule from the incoming dtype alone gives both tests' answers.
    for other in (np.float16, np.float64 if dtype is np.float32 else np.float32):
        keys, values = kv_chunk(cfg, 1, 2, seed=5, dtype=other), kv_chunk(cfg, 1, 2, seed=6, dtype=other)
        cache = student.kv_decode.KVCache(cfg, 1, dtype=dtype)
        K, V = cache.update(0, keys[0], values[0])
        for name, got, sent in (("K", K, keys[0]), ("V", V, values[0])):
            assert np.asarray(got).dtype == np.dtype(dtype), (
                f"KVCache(cfg, 1, dtype={np.dtype(dtype).name}).update returned {name} of dtype "
                f"{np.asarray(got).dtype} for {np.dtype(other).name} input: the cache must store keys and "
                f"values in the dtype given to its constructor"
            )
            assert np.array_equal(got, sent.astype(dtype)), (
                f"KVCache(dtype={np.dtype(dtype).name}).update returned {name} values that are not the "
                f"stored {np.dtype(other).name} k/v converted to the cache's dtype"
            )


@pytest.mark.task("kv_cache", points=0.9)
@pytest.mark.parametrize(
    ("config", "batch", "dtype"),
    [("GQA", 1, np.float64), ("MQA", 2, np.float32), ("MHA", 3, np.float16)],
)
def test_nbytes_counts_stored_tokens(student: Any, config: str, batch: int, dtype: type) -> None:
    cfg = CONFIGS[config]
    itemsize = np.dtype(dtype).itemsize
    keys, values = kv_chunk(cfg, batch, 9, seed=7, dtype=dtype), kv_chunk(cfg, batch, 9, seed=8, dtype=dtype)
    chunks = (5, 1, 3)
    # nbytes() when new, then after each chunk's L updates and advance.
    steps = [NBYTES]
    for step in store_steps(keys, values, chunks):
        steps += [step, NBYTES] if step[0] == "advance" else [step]
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(cfg, batch, dtype=dtype), steps):
        problem = nbytes_problem(replies.next(), cfg, batch, 0, itemsize, cfg.max_seq, reveal=False)
        assert problem is None, problem
        start = 0
        for T in chunks:
            replies.take(cfg.n_layers + 1)
            start += T
            problem = nbytes_problem(replies.next(), cfg, batch, start, itemsize, cfg.max_seq, reveal=False)
            assert problem is None, problem


# (cfg, max_seq passed to the constructor or None for the default, the resulting limit): the
# argument overrides cfg.max_seq whether smaller or larger.
LIMITS = {
    "default": (config_like(CONFIGS["GQA"], max_seq=6), None, 6),
    "custom": (CONFIGS["GQA"], 6, 6),
    "larger": (config_like(CONFIGS["GQA"], max_seq=4), 7, 7),
    "just_larger": (config_like(CONFIGS["GQA"], max_seq=6), 7, 7),
}


@pytest.mark.task("kv_cache", points=1.8 / len(LIMITS))
@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_cache_fills_to_exactly_max_seq(student: Any, limit: str) -> None:
    cfg, max_seq, size = LIMITS[limit]
    keys, values = kv_chunk(cfg, 1, size, seed=9), kv_chunk(cfg, 1, size, seed=10)
    problem = filling_problem(student, cfg, 1, max_seq, size, keys, values, (size - 2, 2))
    assert problem is None, problem


@pytest.mark.task("kv_cache", points=1.8 / len(LIMITS))
@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_update_past_max_seq_raises(student: Any, limit: str) -> None:
    cfg, max_seq, size = LIMITS[limit]
    keys, values = kv_chunk(cfg, 1, size + 1, seed=11), kv_chunk(cfg, 1, size + 1, seed=12)
    problem = past_limit_problem(student, cfg, 1, max_seq, size, keys, values)
    assert problem is None, problem


@pytest.mark.task("kv_cache", points=1.8)
@pytest.mark.parametrize(("config", "batch"), [("MHA", 1), ("GQA", 2), ("MQA", 3)])
def test_forward_with_cache_matches_no_cache(student: Any, config: str, batch: int) -> None:
    cfg = CONFIGS[config]
    params = params_for(config)
    # Chunks fed through forward: a prompt, one token, three at once, one more.
    chunks = (4, 1, 3, 1)
    tokens = prompt_for(cfg, batch, sum(chunks), seed=13)
    expected = forward(params, cfg, tokens)
    cache = student.kv_decode.KVCache(cfg, batch)
    start = 0
    for call, T in enumerate(chunks):
        logits = student.call("kvlab.model:forward", params, cfg, tokens[:, start:start + T], cache=cache)
        step = (f"forward call {call} (positions {start} .. {start + T - 1}, {describe(cfg)}, batch "
                f"{batch}) with your KVCache")
        problem = forward_with_cache_problem(step, logits, expected[:, start:start + T], start, cache.length)
        assert problem is None, problem
        start += T


# Random update / advance calls on caches of every stated kind (conformance_checks.py), more and
# longer sequences than the public run.
@pytest.mark.task("kv_cache", points=3)
def test_generated_calls_match_the_rules(student: Any) -> None:
    run_machine(kv_cache_machine(student), HIDDEN_SETTINGS)
