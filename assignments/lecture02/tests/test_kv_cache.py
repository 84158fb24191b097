"""Public tests of KVCache (task kv_cache). Run: make test TASK=kv_cache.

The grader runs more tests than these (other models, batch sizes, dtypes and the max_seq limit);
passing here is a start, not a guarantee.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY
from kvlab.testing import array_difference

BATCH = 2


def random_kv(length: int, seed: int) -> np.ndarray:
    """Random keys (or values) for every layer of TINY: [L, BATCH, length, Hkv, d]."""
    shape = (TINY.n_layers, BATCH, length, TINY.n_kv_heads, TINY.d_head)
    return np.random.default_rng(seed).normal(size=shape)


def store(cache: Any, keys: np.ndarray, values: np.ndarray) -> None:
    """Store keys/values [L, B, T, Hkv, d] as forward does: update every layer, then advance(T)."""
    for layer in range(TINY.n_layers):
        cache.update(layer, keys[layer], values[layer])
    cache.advance(keys.shape[2])


@pytest.mark.task("kv_cache", points=1)
def test_new_cache_is_empty(student: Any) -> None:
    cache = student.kv_decode.KVCache(TINY, BATCH)
    assert cache.length == 0, f"a new KVCache should have length 0; got {cache.length}"
    assert cache.nbytes() == 0, f"a new KVCache holds no tokens, so nbytes() should be 0; got {cache.nbytes()}"


@pytest.mark.task("kv_cache", points=1)
def test_update_returns_every_stored_position(student: Any) -> None:
    keys, values = random_kv(4, seed=0), random_kv(4, seed=1)
    cache = student.kv_decode.KVCache(TINY, BATCH)
    # A 3-token prompt, then one decode token: the second update must return all 4 positions.
    for start, end in ((0, 3), (3, 4)):
        for layer in range(TINY.n_layers):
            K, V = cache.update(layer, keys[layer, :, start:end], values[layer, :, start:end])
            for name, got, stored in (("K", K, keys), ("V", V, values)):
                problem = array_difference(
                    f"{name} returned by update(layer={layer}) at length {start} with T={end - start}",
                    got, stored[layer, :, :end],
                )
                assert problem is None, f"{problem} (update returns positions 0 .. length+T-1 of that layer)"
        cache.advance(end - start)


@pytest.mark.task("kv_cache", points=1)
def test_only_advance_changes_length(student: Any) -> None:
    keys, values = random_kv(3, seed=2), random_kv(3, seed=3)
    cache = student.kv_decode.KVCache(TINY, BATCH)
    cache.update(0, keys[0], values[0])
    assert cache.length == 0, f"update must not change length (advance does); length is {cache.length} after update"
    cache.advance(3)
    assert cache.length == 3, f"after advance(3) on a new cache, length should be 3; got {cache.length}"


@pytest.mark.task("kv_cache", points=1)
def test_nbytes_counts_stored_tokens(student: Any) -> None:
    cache = student.kv_decode.KVCache(TINY, BATCH)
    store(cache, random_kv(5, seed=4), random_kv(5, seed=5))
    expected = 2 * TINY.n_layers * BATCH * 5 * TINY.n_kv_heads * TINY.d_head * 8
    assert cache.nbytes() == expected, (
        f"nbytes() with 5 float64 tokens stored should be 2 * L * B * length * Hkv * d * itemsize = "
        f"{expected}; got {cache.nbytes()}"
    )
