"""Lecture 7, part 2: prefix caching.

A serving system recognises a prefix it has computed before by hashing token blocks in a chain
(digest i covers blocks 0 .. i, so equal digests mean equal prefixes), shares the cached blocks
without copying them, and decides what to keep when memory runs out. Implement, in this order:

1. `block_hashes` (task block_hashes): chained SHA-256 digests of full blocks.
2. `PrefixCache` (task prefix_cache): hash -> physical block, holding one reference per block.
3. `prefill` (task prefill): reuse the cached prefix, compute the rest with `kvlab.paged.paged_step`.
4. `LRUCache`, `LFUCache`, `make_cache` (task eviction): which blocks to keep, by id, at a capacity.
5. `hit_ratio` (task hit_ratio): replay a request trace (`kvlab.trace`) through a cache.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from kvlab.model import Config
from kvlab.paged import paged_step
from kvlab.trace import BLOCK, Request
from paged_kv import BlockPool, OutOfBlocks, PagedSequence


def block_hashes(tokens: Any, block_size: int, parent: str | None = None) -> list[str]:
    """One lowercase hex SHA-256 digest (64 characters) per full block of `tokens` (1-D integers).

    Returns a `list` of str (empty when there is no full block). `parent` (a digest or None) is
    passed as a keyword. Digest i covers `parent` and every token of blocks 0 .. i, each token of
    a block included (the first and the last), so it names the whole prefix. A
    trailing partial block gets no digest. The digests depend only on the integer values (a list,
    tuple or ndarray of any integer dtype gives the same digests) and are the same in every
    process (so no Python `hash()`, whose seed changes per process). Continuing a chain:
    block_hashes(a + b, n) == block_hashes(a, n) + block_hashes(b, n, parent=block_hashes(a, n)[-1])
    when len(a) is a non-zero multiple of n. Negative integers are integers: they are hashed like any
    other value (a digest depends on the sign: -1 and 1 give different digests), never refused.
    """
    values = [int(t) for t in np.asarray(tokens).reshape(-1)]
    digests: list[str] = []
    previous = "" if parent is None else parent
    for first in range(0, len(values) - block_size + 1, block_size):
        chunk = values[first:first + block_size]
        text = previous + "|" + ",".join(str(t) for t in chunk)
        previous = hashlib.sha256(text.encode("ascii")).hexdigest()
        digests.append(previous)
    return digests


class PrefixCache:
    """Maps a block's chained hash to the physical block in `pool` that holds its KV.

    `prefix_cache.pool` is the pool given (a public attribute: `prefill` takes its blocks from it).
    The cache holds one reference to each block it caches, so a cached block outlives the
    requests that computed it until `clear()`. `len(cache)` is the number of cached blocks.
    """

    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._table: dict[str, int] = {}

    def lookup(self, hashes: Sequence[str]) -> list[int]:
        """The blocks (a list of int ids) of the longest leading run of `hashes` that is cached.

        It stops at the first hash that is not cached. Refcounts unchanged.
        """
        found: list[int] = []
        for digest in hashes:
            block = self._table.get(digest)
            if block is None:
                break
            found.append(block)
        return found

    def register(self, hashes: Sequence[str], blocks: Sequence[int]) -> None:
        """Cache each (hash, block) pair whose hash is not cached yet, and incref its block."""
        for digest, block in zip(hashes, blocks):
            if digest in self._table:
                continue
            self.pool.incref(block)
            self._table[digest] = int(block)

    def clear(self) -> None:
        """Drop every entry and decref its block."""
        for block in self._table.values():
            self.pool.decref(block)
        self._table = {}

    def __len__(self) -> int:
        """Number of cached blocks."""
        return len(self._table)


def prefill(
    params: dict[str, np.ndarray], cfg: Config, prefix_cache: PrefixCache, tokens: Any
) -> tuple[PagedSequence, np.ndarray, int]:
    """Prefill a prompt (tokens 1-D), sharing its cached prefix.

    Returns the triple (seq, logits of the last position [V], number of tokens computed, an int
    equal to the token positions that went through the model). The new PagedSequence (in
    `prefix_cache.pool`) starts with the leading cached full blocks (incref'd, never copied); the
    rest goes through `paged_step`, once. At least one token is computed: when every token would
    be a hit, the last cached block is not used and its tokens are recomputed into a new block.
    Afterwards every full block of the request is registered in `prefix_cache` (a partial last
    block never is), and seq.length == len(tokens). The logits equal `kvlab.model.forward` on the
    whole prompt.

    All or nothing: when the pool runs out (OutOfBlocks from `paged_step`'s reserve), prefill
    gives back every reference it took (the shared blocks' increfs and any block it allocated),
    registers nothing and re-raises OutOfBlocks: every refcount, num_free and len(prefix_cache)
    are as before the call.
    """
    tokens = np.asarray(tokens)
    pool = prefix_cache.pool
    size = pool.block_size
    digests = block_hashes(tokens, size)
    shared = prefix_cache.lookup(digests)
    if len(shared) * size >= len(tokens):
        shared = shared[:-1]
    seq = PagedSequence(pool)
    for block in shared:
        pool.incref(block)
        seq.blocks.append(block)
    seq.length = len(shared) * size
    try:
        (logits,) = paged_step(params, cfg, [seq], [tokens[seq.length:]])
    except OutOfBlocks:
        seq.free()
        raise
    computed = len(tokens) - len(shared) * size
    prefix_cache.register(digests, seq.blocks[:len(digests)])
    return seq, logits[-1], int(computed)


def _check_capacity(capacity: int | None) -> None:
    """Given: ValueError unless capacity is None (unlimited) or an int >= 1."""
    if capacity is not None and (isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1):
        raise ValueError(f"capacity must be an int >= 1 or None; got {capacity!r}")


class LRUCache:
    """Block ids kept by least-recent use, at most `capacity` of them (None: unlimited).

    `match(blocks)`: the number of leading blocks present; each of those counts as used now.
    `insert(blocks)`: in order, a present block counts as used now; a missing one is added (first
    evicting the least recently used block when the cache is full) and counts as used now.
    Both cost O(len(blocks)) amortized, whatever the capacity (the hidden tests insert the 407,156
    block ids of `make_trace()` at capacity 100,000 within 10 seconds). `match` returns an int;
    `b in cache` only asks (it is not a use); `len(cache)` counts the blocks held. ValueError for
    a capacity that is not None or an int >= 1 (`_check_capacity`).
    """

    def __init__(self, capacity: int | None) -> None:
        _check_capacity(capacity)
        self.capacity = capacity
        self._order: OrderedDict[int, None] = OrderedDict()

    def match(self, blocks: Iterable[int]) -> int:
        hits = 0
        for block in blocks:
            if block not in self._order:
                break
            self._order.move_to_end(block)
            hits += 1
        return hits

    def insert(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if block in self._order:
                self._order.move_to_end(block)
                continue
            if self.capacity is not None and len(self._order) >= self.capacity:
                self._order.popitem(last=False)
            self._order[block] = None

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, block: object) -> bool:
        return block in self._order


class LFUCache:
    """Block ids kept by use count, at most `capacity` of them (None: unlimited).

    The same interface and notion of "use" as `LRUCache`. Evicts the block with the fewest uses,
    ties going to the least recently used; an evicted block's count is forgotten (it starts again
    at 1 if it comes back). Both operations cost O(len(blocks)) amortized (a log factor is
    allowed), whatever the capacity: the same time limit as `LRUCache`.
    """

    def __init__(self, capacity: int | None) -> None:
        _check_capacity(capacity)
        self.capacity = capacity
        self._count: dict[int, int] = {}
        self._buckets: dict[int, OrderedDict[int, None]] = {}
        self._min = 0

    def _use(self, block: int) -> None:
        """Count one more use of a cached block: move it to the next count's bucket, newest last."""
        uses = self._count[block]
        bucket = self._buckets[uses]
        del bucket[block]
        if not bucket:
            del self._buckets[uses]
            if self._min == uses:
                self._min = uses + 1
        self._count[block] = uses + 1
        self._buckets.setdefault(uses + 1, OrderedDict())[block] = None

    def _add(self, block: int) -> None:
        """Cache a missing block with one use, first evicting the victim when the cache is full."""
        if self.capacity is not None and len(self._count) >= self.capacity:
            bucket = self._buckets[self._min]
            victim, _ = bucket.popitem(last=False)
            if not bucket:
                del self._buckets[self._min]
            del self._count[victim]
        self._count[block] = 1
        self._buckets.setdefault(1, OrderedDict())[block] = None
        self._min = 1

    def match(self, blocks: Iterable[int]) -> int:
        hits = 0
        for block in blocks:
            if block not in self._count:
                break
            self._use(block)
            hits += 1
        return hits

    def insert(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if block in self._count:
                self._use(block)
            else:
                self._add(block)

    def __len__(self) -> int:
        return len(self._count)

    def __contains__(self, block: object) -> bool:
        return block in self._count


def make_cache(capacity: int | None, policy: str) -> LRUCache | LFUCache:
    """An empty cache: `LRUCache(capacity)` for policy "lru", `LFUCache(capacity)` for "lfu".

    ValueError for any other policy (the empty string included) and for a bad capacity.
    """
    _check_capacity(capacity)
    if policy == "lru":
        return LRUCache(capacity)
    if policy == "lfu":
        return LFUCache(capacity)
    raise ValueError(f"unknown policy {policy!r}: expected 'lru' or 'lfu'")


def hit_ratio(trace: Sequence[Request], capacity: int | None, policy: str, block_size: int = BLOCK) -> float:
    """Token-weighted prefix-cache hit ratio of `trace` replayed in order through a fresh cache.

    For each request: n = cache.match(r.blocks); hit tokens += min(n * block_size, r.input_len);
    total tokens += r.input_len; then cache.insert(r.blocks). Returns the float hit / total, one
    division of the two integer sums (so it equals the reference exactly), and 0.0 for a trace
    with no tokens (an empty trace included). The policy and capacity are checked first: ValueError
    for a bad one (as `make_cache` raises), even for an empty trace. `block_size` may come
    positionally. Its time is that of the cache's calls: on `make_trace()` (23,608 requests) at
    capacity 100,000 the hidden tests hold it to the cache's limit of 10 seconds.
    """
    cache = make_cache(capacity, policy)
    hit_tokens = 0
    total_tokens = 0
    for request in trace:
        matched = cache.match(request.blocks)
        hit_tokens += min(matched * block_size, request.input_len)
        total_tokens += request.input_len
        cache.insert(request.blocks)
    if total_tokens == 0:
        return 0.0
    return hit_tokens / total_tokens
