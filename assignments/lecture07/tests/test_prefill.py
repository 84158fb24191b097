"""Public tests of prefill (task prefill). Run: make test TASK=prefill.

A second request starting with the same two full blocks shares them and computes only the rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY, forward, init_params
from kvlab.testing import array_difference


@pytest.mark.task("prefill", points=1)
def test_second_request_reuses_the_prefix(student: Any) -> None:
    params = init_params(TINY, seed=0)
    rng = np.random.default_rng(1)
    prefix = rng.integers(0, TINY.vocab, size=32)
    first, second = (np.concatenate([prefix, rng.integers(0, TINY.vocab, size=n)]) for n in (5, 9))
    pool = student.paged_kv.BlockPool(TINY, 16, 16)
    cache = student.prefix_cache.PrefixCache(pool)
    _, _, computed = student.prefix_cache.prefill(params, TINY, cache, first)
    assert computed == 37, f"the first request has nothing cached: all 37 tokens are computed; got {computed}"
    seq, logits, computed = student.prefix_cache.prefill(params, TINY, cache, second)
    assert computed == 9, f"the second request shares 2 cached blocks of 16 and computes 41 - 32 = 9 tokens; got {computed}"
    problem = array_difference("the second request's logits", logits, forward(params, TINY, second[None])[0, -1])
    assert problem is None, problem
    assert seq.length == 41, f"after prefill seq.length should be 41; got {seq.length}"
