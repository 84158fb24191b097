"""Paged attention: one forward step for several sequences whose KV lives in a shared block pool.

A sequence's KV is not one contiguous array but a list of fixed-size blocks (`seq.blocks`) in a
pool (`seq.pool.k`, `seq.pool.v`, each [n_blocks, L, block_size, Hkv, d]); `seq.slots(start, n)`
maps token positions to (block id, offset) pairs. Sequences that share a prefix can point at the
same physical blocks, which is what makes prefix caching free of copies (lecture 7).

The step is the model's ordinary `forward` (so paged logits equal dense logits), run once per
sequence with a small adapter that speaks the KV-cache protocol on top of the sequence's slots.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kvlab.model import Config, forward


def assign_into(owner: Any, attribute: str, index: Any, values: np.ndarray) -> None:
    """`getattr(owner, attribute)[index] = values`, written in place where the array lives.

    On an ordinary object (a student's run, the reference) that is plain numpy. The
    `__assign_into__` hook exists for the grader and nothing else: the grader runs `paged_step` in
    its own process on a proxy of the student's pool, whose `pool.k` is a copy; the proxy's class
    (autograder/harness/sandbox/proxy.py) provides `__assign_into__(attribute, index, values)`, which
    does the same write in the student's process. Students never define it.
    """
    remote = getattr(type(owner), "__assign_into__", None)
    if remote is not None:
        remote(owner, attribute, index, values)
    else:
        getattr(owner, attribute)[index] = values


class _PagedCache:
    """The KV-cache protocol (`length`, `update`, `advance`) over one paged sequence, batch 1."""

    def __init__(self, seq: Any) -> None:
        self.seq = seq
        self.length = seq.length

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pool, T = self.seq.pool, k.shape[1]
        blocks, offsets = self.seq.slots(self.length, T)
        assign_into(pool, "k", (blocks, layer, offsets), k[0])
        assign_into(pool, "v", (blocks, layer, offsets), v[0])
        blocks, offsets = self.seq.slots(0, self.length + T)
        return pool.k[blocks, layer, offsets][None], pool.v[blocks, layer, offsets][None]

    def advance(self, n: int) -> None:
        self.length += n


def paged_step(
    params: dict[str, np.ndarray], cfg: Config, seqs: list[Any], new_tokens: list[Any]
) -> list[np.ndarray]:
    """Feed new_tokens[i] (1-D, T_i >= 1) to seqs[i]; return one [T_i, V] logits array per sequence.

    For each sequence: `seq.reserve(T_i)`, write the new K/V into the pool at
    `seq.slots(seq.length, T_i)`, attend over `seq.slots(0, seq.length + T_i)`, then
    `seq.length += T_i`.
    """
    if len(seqs) != len(new_tokens):
        raise ValueError(f"{len(seqs)} sequences but {len(new_tokens)} token arrays")
    out = []
    for seq, tokens in zip(seqs, new_tokens):
        tokens = np.asarray(tokens)
        if tokens.ndim != 1 or tokens.size == 0:
            raise ValueError(f"each new_tokens entry must be 1-D with at least one token; got shape {tokens.shape}")
        seq.reserve(tokens.size)
        cache = _PagedCache(seq)
        logits = forward(params, cfg, tokens[None], cache=cache)
        seq.length = cache.length
        out.append(logits[0])
    return out
