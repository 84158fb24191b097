"""Lecture 7, part 1: a paged KV store.

A `BlockPool` owns the KV memory of all requests as fixed-size blocks with reference counts; a
`PagedSequence` is one request's list of blocks. Sharing a block between requests is an incref, not
a copy. Implement, in this order (task block_pool, then paged_sequence):

1. `BlockPool`: allocate / incref / decref / refcount / num_free.
2. `PagedSequence`: reserve / slots / free.

`kvlab.paged.paged_step` uses both to run the model (read it to see how it calls `reserve` and `slots`).
Shapes: L layers, Hkv key/value heads, d head size.
"""
from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from kvlab.model import Config


class OutOfBlocks(RuntimeError):
    """Raised by `BlockPool.allocate` when no block is free."""


def check_block_id(block: Any, n_blocks: int) -> None:
    """Given: ValueError unless `block` is an integer id in 0 .. n_blocks-1 (a bool or a float is not one)."""
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or not 0 <= block < n_blocks:
        raise ValueError(f"unknown block {block!r}: ids are 0 .. {n_blocks - 1}")


class BlockPool:
    """`n_blocks` blocks of `block_size` token slots each, for every layer.

    `BlockPool(cfg, n_blocks, block_size, dtype=np.float64)` (tests may pass dtype positionally).
    Any n_blocks >= 1 and block_size >= 1 is valid, a pool of one block included. Public
    attributes: `n_blocks` and `block_size` (the ints given), `k`, `v`: [n_blocks, L, block_size,
    Hkv, d] arrays of `dtype`, and the property `num_free`. Block ids are the ints 0 .. n_blocks-1
    (Python `int`s, not numpy integers, even where the pool keeps its refcounts in an array).

    A block is free (refcount 0) or in use (refcount >= 1). `allocate()` hands out any free block
    (an int id) with refcount 1; `decref` to 0 frees it again, and it can be allocated again.
    `incref`/`decref` raise ValueError for an unknown id (negative or >= n_blocks) or a free block;
    `refcount` raises ValueError for an unknown id and is 0 for a free block. An unknown id is
    anything `check_block_id` refuses (True and 1.0 included). A call that raises changes nothing.
    """

    def __init__(self, cfg: Config, n_blocks: int, block_size: int, dtype: Any = np.float64) -> None:
        self.cfg = cfg
        self.n_blocks = n_blocks
        self.block_size = block_size
        shape = (n_blocks, cfg.n_layers, block_size, cfg.n_kv_heads, cfg.d_head)
        self.k = np.zeros(shape, dtype=dtype)
        self.v = np.zeros(shape, dtype=dtype)
        self._refs = [0] * n_blocks
        self._free = deque(range(n_blocks))

    def allocate(self) -> int:
        """A free block, now with refcount 1. OutOfBlocks when none is free."""
        if not self._free:
            raise OutOfBlocks(f"all {self.n_blocks} blocks are in use")
        block = self._free.popleft()
        self._refs[block] = 1
        return block

    def incref(self, block: int) -> None:
        """One more user of an in-use block."""
        self._check_in_use(block)
        self._refs[block] += 1

    def decref(self, block: int) -> None:
        """One user fewer; at refcount 0 the block is free again."""
        self._check_in_use(block)
        self._refs[block] -= 1
        if self._refs[block] == 0:
            self._free.append(int(block))

    def refcount(self, block: int) -> int:
        """Users of `block`: 0 when free."""
        check_block_id(block, self.n_blocks)
        return self._refs[block]

    def _check_in_use(self, block: Any) -> None:
        check_block_id(block, self.n_blocks)
        if self._refs[block] == 0:
            raise ValueError(f"block {block} is free")

    @property
    def num_free(self) -> int:
        """How many blocks are free."""
        return len(self._free)


class PagedSequence:
    """One request's KV: `blocks` (block ids in position order) in `pool`, `length` tokens stored.

    Public attributes: `pool` (the pool given), `blocks` (a list of block ids, [] when new) and
    `length` (an int, 0 when new; `kvlab.paged.paged_step` adds to it). Position p lives in block
    `blocks[p // block_size]` at offset `p % block_size`.
    """

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self.blocks: list[int] = []
        self.length = 0

    def reserve(self, n: int) -> None:
        """Allocate blocks until len(blocks) * block_size >= length + n (n >= 0; it never frees).

        All or nothing: if the pool runs out, release the blocks this call allocated and re-raise
        OutOfBlocks, leaving the sequence as it was.
        """
        size = self.pool.block_size
        taken: list[int] = []
        try:
            while (len(self.blocks) + len(taken)) * size < self.length + n:
                taken.append(self.pool.allocate())
        except OutOfBlocks:
            for block in reversed(taken):
                self.pool.decref(block)
            raise
        self.blocks.extend(taken)

    def slots(self, start: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(block ids, offsets within the block) of positions start .. start+n-1: two int arrays [n].

        A pair of integer ndarrays of shape (n,): slots(start, 0) returns two empty int arrays
        (dtype int, even when the sequence holds no block). ValueError for a negative start or n,
        and for a position beyond the reserved blocks (start + n > len(blocks) * block_size).
        """
        if start < 0 or n < 0:
            raise ValueError(f"slots({start}, {n}): start and n must be >= 0")
        size = self.pool.block_size
        if start + n > len(self.blocks) * size:
            raise ValueError(
                f"slots({start}, {n}) reaches past the {len(self.blocks)} reserved blocks of {size} slots"
            )
        positions = np.arange(start, start + n, dtype=np.int64)
        table = np.array(self.blocks, dtype=np.int64)
        return table[positions // size], positions % size

    def free(self) -> None:
        """Decref every block (the newest first), then blocks = [] and length = 0."""
        for block in reversed(self.blocks):
            self.pool.decref(block)
        self.blocks = []
        self.length = 0
