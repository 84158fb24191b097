"""Public tests of KVCache (task kv_cache). Run: make test TASK=kv_cache.

The grader checks the same rules with the same diagnoses (decode_checks.py, in this folder) on
other models, batch sizes, chunk sizes and limits. A test's calls on one cache are made in one step
(kvlab.testing.probe.play, as the grader does), then what each answered is checked in their order; then the
same calls are made on another cache one at a time, as forward makes them, and checked the same way
(decode_checks.both_ways).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from conformance_checks import PUBLIC_SETTINGS, kv_cache_machine
from kvlab.testing.conformance import run_machine
from decode_checks import (
    CONFIGS, LENGTH, NBYTES, both_ways, exception_from, filling_problem, kv_chunk, nbytes_problem, past_limit_problem,
    returned_positions_problem, store_steps,
)
from kvlab.model import TINY, config_like

BATCH = 2


@pytest.mark.task("kv_cache", points=0.9)
def test_new_cache_is_empty(student: Any) -> None:
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(TINY, BATCH), [LENGTH, NBYTES]):
        length, nbytes = replies.take(2)
        assert length == 0, f"a new KVCache should have length 0; got {length}"
        problem = nbytes_problem(nbytes, TINY, BATCH, 0, 8, TINY.max_seq)
        assert problem is None, problem


@pytest.mark.task("kv_cache", points=0.9)
def test_update_returns_every_stored_position(student: Any) -> None:
    cfg = CONFIGS["MQA"]
    keys, values = kv_chunk(cfg, BATCH, 5, seed=20), kv_chunk(cfg, BATCH, 5, seed=21)
    # A 2-token prompt, two more tokens at once (T > 1 at length > 0, as a chunked prefill sends them),
    # then one decode token: every update must return all the positions stored so far.
    problem = returned_positions_problem(student, cfg, BATCH, keys, values, (2, 2, 1))
    assert problem is None, problem


@pytest.mark.task("kv_cache", points=0.9)
def test_only_advance_changes_length(student: Any) -> None:
    keys, values = kv_chunk(TINY, BATCH, 3, seed=22), kv_chunk(TINY, BATCH, 3, seed=23)
    steps = [("update", (0, keys[0], values[0])), LENGTH, ("advance", (3,)), LENGTH, ("advance", (0,)), LENGTH]
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(TINY, BATCH), steps):
        _, length = replies.take(2)
        assert length == 0, (
            f"after update(layer=0) with T=3 tokens on a new cache, length is {length}: update must not change "
            "length (forward calls update once per layer and all layers must see the same length; advance(3) moves "
            "it once at the end)"
        )
        _, length = replies.take(2)
        assert length == 3, f"after advance(3) on a new cache, length is {length}; advance(n) must do length += n"
        error = exception_from(replies.next)
        length = None if error else replies.next()
        did = f"raised {type(error).__name__}: {error}" if error else f"left length {length}"
        assert error is None and length == 3, (
            f"advance(0) on a cache of length 3 {did}; advance(n) must do length += n for any n >= 0 (0 is allowed: "
            "nothing new was stored)"
        )


@pytest.mark.task("kv_cache", points=0.9)
def test_nbytes_counts_stored_tokens(student: Any) -> None:
    # Batch 3: with batch 2, a missing factor 2 and a missing batch factor give the same number.
    keys, values = kv_chunk(TINY, 3, 5, seed=24, dtype=np.float32), kv_chunk(TINY, 3, 5, seed=25, dtype=np.float32)
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(TINY, 3, dtype=np.float32),
                             [*store_steps(keys, values, (5,)), NBYTES]):
        replies.take(TINY.n_layers + 1)
        problem = nbytes_problem(replies.next(), TINY, 3, 5, 4, TINY.max_seq)
        assert problem is None, problem


@pytest.mark.task("kv_cache", points=0.9)
def test_stored_dtype_follows_constructor(student: Any) -> None:
    cfg = CONFIGS["MHA"]
    # float64 k, v into a float16 cache: the result shows what the cache stores, not what came in.
    keys, values = kv_chunk(cfg, 1, 3, seed=26), kv_chunk(cfg, 1, 3, seed=27)
    cache = student.kv_decode.KVCache(cfg, 1, dtype=np.float16)
    K, V = cache.update(1, keys[1], values[1])
    for name, got, sent in (("K", K, keys[1]), ("V", V, values[1])):
        assert np.asarray(got).dtype == np.float16, (
            f"KVCache(cfg, 1, dtype=float16).update returned {name} of dtype {np.asarray(got).dtype} for float64 "
            "input: the cache must store keys and values in the dtype given to its constructor"
        )
        assert np.array_equal(got, sent.astype(np.float16)), (
            f"KVCache(dtype=float16).update returned {name} values that are not the stored k/v converted to the "
            "cache's dtype"
        )


# (cfg, max_seq passed to the constructor or None for the default, the resulting limit): other
# limits than the grader's, the default (cfg.max_seq) and an argument that overrides it, smaller
# and larger.
LIMITS = {
    "default": (config_like(CONFIGS["MQA"], max_seq=9), None, 9),
    "custom": (CONFIGS["MQA"], 4, 4),
    "larger": (config_like(CONFIGS["MQA"], max_seq=3), 5, 5),
    "just_smaller": (config_like(CONFIGS["MQA"], max_seq=6), 5, 5),
}


@pytest.mark.task("kv_cache", points=1.8 / len(LIMITS))
@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_cache_fills_to_exactly_max_seq(student: Any, limit: str) -> None:
    cfg, max_seq, size = LIMITS[limit]
    keys, values = kv_chunk(cfg, 2, size, seed=28), kv_chunk(cfg, 2, size, seed=29)
    problem = filling_problem(student, cfg, 2, max_seq, size, keys, values, (1, size - 1))
    assert problem is None, problem


@pytest.mark.task("kv_cache", points=1.8 / len(LIMITS))
@pytest.mark.parametrize("limit", sorted(LIMITS))
def test_update_past_max_seq_raises(student: Any, limit: str) -> None:
    cfg, max_seq, size = LIMITS[limit]
    keys, values = kv_chunk(cfg, 2, size + 2, seed=30), kv_chunk(cfg, 2, size + 2, seed=31)
    problem = past_limit_problem(student, cfg, 2, max_seq, size, keys, values)
    assert problem is None, problem


# Random update / advance calls on caches of every stated kind (conformance_checks.py: max_seq 0 and
# None, float32 storage, repeated updates of a layer, layers skipped): length, nbytes and what update
# returns after each call.
@pytest.mark.task("kv_cache", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(kv_cache_machine(student), PUBLIC_SETTINGS)
