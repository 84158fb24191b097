"""The check that a prefill's work is in the pool (task prefill), public and hidden.

prefill is student code, and in the grader it runs in the student's process, where nothing is
trusted: it may call a copy of `kvlab.paged.paged_step` that the submission replaced, or not call
it at all. What it returns (the logits, the count) and the refcounts it leaves can be right while
the prompt's keys and values were never written where the sequence's blocks say (a dense
recomputation with the model, say). So each verdict on a shared-prefix run also reads the
student's state from the test: the pool's K and V at every position of every request, found by the
rule of PagedSequence's docstring (position p lives in block `blocks[p // block_size]` at offset
`p % block_size`), against the keys and values `kvlab.model.forward` computes, where the test runs,
for the whole prompt; and the student's `seq.slots(0, length)` must name those same slots, as
paged_step writes and reads through it.

Messages name the request, position, layer and block, and how far the values are off; never an
expected value (the prompts are fixed data).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from paged_checks import CFG, describe_error, outcome, params
from prefix_checks import PREFILL_BLOCK, TAILS, Prefilled, describe_request, run_shared_prefix
from kvlab.model import forward
from kvlab.testing.compare import LOGIT_ATOL

# Keys and values written by paged_step in pieces (the shared prefix earlier, the tail now) equal
# the whole prompt's to rounding; the logits' tolerance is as strict.
KV_ATOL = LOGIT_ATOL


class _Recorder:
    """The KV-cache protocol from an empty cache, keeping each layer's new keys and values."""

    def __init__(self) -> None:
        self.length = 0
        self.k: dict[int, np.ndarray] = {}
        self.v: dict[int, np.ndarray] = {}

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.k[layer], self.v[layer] = k, v
        return k, v

    def advance(self, n: int) -> None:
        self.length += n


@functools.lru_cache(maxsize=64)
def _dense_kv(tokens: bytes) -> tuple[np.ndarray, np.ndarray]:
    recorder = _Recorder()
    forward(params(), CFG, np.frombuffer(tokens, dtype=np.int64)[None], cache=recorder, last_only=True)
    layers = range(CFG.n_layers)
    return (np.stack([recorder.k[layer][0] for layer in layers]), np.stack([recorder.v[layer][0] for layer in layers]))


def dense_kv(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The prompt's keys and values, each [L, T, Hkv, d], from forward on the whole prompt here."""
    return _dense_kv(np.asarray(tokens, dtype=np.int64).tobytes())


def pool_array(pool: Any, name: str) -> np.ndarray | str:
    """`pool.k` or `pool.v` read once, as an array [n_blocks, L, block_size, Hkv, d]; else what is wrong."""
    try:
        array = np.asarray(getattr(pool, name))
    except Exception as error:  # a student's exception of any type is a finding
        return f"reading pool.{name} raised {type(error).__name__}: {error}"
    want = (CFG.n_layers, PREFILL_BLOCK, CFG.n_kv_heads, CFG.d_head)
    if array.ndim != 5 or array.shape[1:] != want or not np.issubdtype(array.dtype, np.number):
        return (f"pool.{name} is an array of shape {array.shape} and dtype {array.dtype}; expected a numeric array "
                f"[n_blocks, {', '.join(map(str, want))}] (n_blocks, L, block_size, Hkv, d)")
    return array


def kv_in_pool_problem(pool: Any, results: Sequence[Prefilled], label: Any) -> str | None:
    """None when, for every prefill of `results` (all into `pool`), the pool holds the prompt's keys
    and values at each position's slot (by PagedSequence's rule), else what differs and where.
    `label(index, result)` names a request in messages."""
    arrays = {name: pool_array(pool, name) for name in ("k", "v")}
    for name, array in arrays.items():
        if isinstance(array, str):
            return f"after the prefills, {array}"
    n_blocks = arrays["k"].shape[0]
    for index, result in enumerate(results):
        what, n = label(index, result), len(result.tokens)
        blocks = list(result.seq.blocks)
        needed = -(-n // PREFILL_BLOCK)
        bad = [b for b in blocks[:needed] if isinstance(b, bool) or not isinstance(b, (int, np.integer))
               or not 0 <= b < n_blocks]
        if len(blocks) < needed or bad:
            return (f"after prefill of {what}, the sequence's blocks are {blocks[:12]}{' ...' if len(blocks) > 12 else ''}"
                    f"; expected at least {needed} block ids of the pool (0 .. {n_blocks - 1}) for its {n} tokens")
        positions = np.arange(n)
        ids = np.asarray(blocks[:needed], dtype=np.int64)[positions // PREFILL_BLOCK]
        offsets = positions % PREFILL_BLOCK
        for name, want in zip(("k", "v"), dense_kv(result.tokens)):
            # [T, L, Hkv, d] at the positions' slots, as [L, T, Hkv, d] like the model's.
            got = np.moveaxis(arrays[name][ids, :, offsets], 0, 1).astype(np.float64)
            diff = np.abs(got - want)
            diff[~np.isfinite(diff)] = np.inf
            if diff.max() <= KV_ATOL:
                continue
            layer, position = (int(i) for i in np.unravel_index(diff.argmax(), diff.shape)[:2])
            wrong = int(np.count_nonzero((diff > KV_ATOL).any(axis=(0, 2, 3))))
            return (f"after prefill of {what}, pool.{name} at position {position} (block id {ids[position]}, offset "
                    f"{offsets[position]}), layer {layer}, differs from the prompt's {name.upper()} by up to "
                    f"{diff.max():.3g} (tolerance {KV_ATOL:g}); {wrong} of the {n} positions differ. The logits and "
                    "counts alone do not show the work was done: the pool must hold every token's K and V where "
                    "the sequence's blocks say (position p in block blocks[p // block_size] at offset p % "
                    "block_size). Likely cause: the uncached tokens must go through kvlab.paged.paged_step, which "
                    "writes their K and V into the pool at seq.slots(...), and a shared block is the cached block "
                    "itself, holding the prefix's K and V")
        # paged_step reads and writes through seq.slots: they must name the same slots as the rule.
        slots, error = outcome(functools.partial(result.seq.slots, 0, n))
        try:
            same = error is None and all(np.array_equal(np.asarray(got), want) for got, want in
                                         zip(slots, (ids, offsets), strict=True))
        except (TypeError, ValueError):
            same = False
        if not same:
            said = f"raised {describe_error(error)}" if error else "gave other slots"
            return (f"after prefill of {what}, seq.slots(0, {n}) {said}; the pool must hold every token's K and V "
                    "where the sequence's slots say, which is where its blocks say (position p in block "
                    "blocks[p // block_size] at offset p % block_size): kvlab.paged.paged_step writes and reads "
                    "the pool through seq.slots")
    return None


def run_shared_prefix_in_pool(student: Any, prefix_len: int, n_blocks: int,
                              tails: Sequence[int] = TAILS) -> tuple[Any, Any, list[Prefilled]]:
    """prefix_checks.run_shared_prefix, then the test fails unless the pool holds every request's
    keys and values (kv_in_pool_problem): every verdict on the run stands on the work being there."""
    pool, cache, results = run_shared_prefix(student, prefix_len, n_blocks, tails)
    problem = kv_in_pool_problem(pool, results, lambda index, result: describe_request(index, prefix_len, result))
    if problem:
        pytest.fail(problem, pytrace=False)
    return pool, cache, results
