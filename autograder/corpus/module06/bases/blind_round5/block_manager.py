"""Module 6, part 2: the KV block manager of a serving engine, with prefix caching as vLLM v1 does it.

The engine (`kvlab.serving.engine`, read it) owns the KV memory: `num_blocks` blocks of
`block_size` token slots. Your `BlockManager` decides which block ids each request's tokens go to,
and which blocks it may share with earlier requests. Lecture 7's `PrefixCache` held a reference to
every cached block until `clear()`; vLLM v1 does better, and so do you:

- A block whose last user finished stays cached: refcount 0, hash kept, in the free queue. It is
  still a possible hit until it is actually reused for something else (lazy eviction).
- The free queue (`FreeBlockQueue`) is kept in eviction order: the head is evicted first. Freed
  blocks go to the tail; a hit on a block that is in the queue takes it out of the middle, in
  O(1): a doubly linked list through the blocks themselves (`prev_free_block`, `next_free_block`),
  not a Python list whose `remove` scans.
- A finished request's blocks are freed in reverse order (last block first), so the tail of a
  sequence is evicted before its head, which other requests are more likely to share.
- Only full blocks are hashed, with lecture 7's chained SHA-256 (`block_hashes`).
- Hits are capped so that at least the last prompt token is computed: the engine needs its logits.

Implement, in this order: `FreeBlockQueue` (task free_queue), `block_hashes` and
`BlockManager.allocate` (task prefix_hits), `BlockManager.append_tokens` and `BlockManager.free`
(task eviction). The engine calls your manager with plain data only (str ids, lists of ints) and
reads plain data back (ints, lists of ints, str or None): in the grader your manager lives in
another process and every call is a round trip.
"""
from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np


class KVBlock:
    """Given: one block's metadata. `block_id` is its index in the engine's KV pool.

    `ref_cnt`: how many running requests use it. `block_hash`: the chained hash of the full block
    of tokens it holds while it is in the prefix cache, else None. `prev_free_block` /
    `next_free_block`: its neighbours while it is in a `FreeBlockQueue` (yours to use as you like).
    """

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: str | None = None
        self.prev_free_block: KVBlock | None = None
        self.next_free_block: KVBlock | None = None

    def __repr__(self) -> str:
        return f"KVBlock({self.block_id}, ref_cnt={self.ref_cnt}, hash={self.block_hash and self.block_hash[:8]})"


class FreeBlockQueue:
    """The free blocks in eviction order, as a doubly linked list (vLLM's FreeKVCacheBlockQueue).

    `FreeBlockQueue(blocks)` holds `blocks` in the given order, the first at the head (an empty
    sequence gives an empty queue: `block_ids()` is [] and `num_free_blocks` 0).
    `num_free_blocks` (an int attribute) is always the number of blocks in the queue.
    `popleft()`, `remove(block)` and `append(block)` each cost O(1), whatever the queue's length.
    """

    def __init__(self, blocks: Sequence[KVBlock]) -> None:
        self._head = KVBlock(-1)
        self._tail = KVBlock(-1)
        self._head.next_free_block = self._tail
        self._tail.prev_free_block = self._head
        self.num_free_blocks = 0
        for block in blocks:
            self.append(block)

    def popleft(self) -> KVBlock:
        """Remove and return the head (the block to evict first). ValueError when the queue is empty."""
        if self.num_free_blocks == 0:
            raise ValueError("popleft from an empty free queue")
        block = self._head.next_free_block
        self.remove(block)
        return block

    def remove(self, block: KVBlock) -> None:
        """Take `block` out of the queue wherever it is, in O(1). ValueError if it is not in the queue."""
        before, after = block.prev_free_block, block.next_free_block
        if before is None or after is None:
            raise ValueError(f"block {block.block_id} is not in the free queue")
        before.next_free_block = after
        after.prev_free_block = before
        block.prev_free_block = None
        block.next_free_block = None
        self.num_free_blocks -= 1

    def append(self, block: KVBlock) -> None:
        """Put `block` at the tail (evicted last). ValueError if it is already in the queue."""
        if block.prev_free_block is not None or block.next_free_block is not None:
            raise ValueError(f"block {block.block_id} is already in the free queue")
        last = self._tail.prev_free_block
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self._tail
        self._tail.prev_free_block = block
        self.num_free_blocks += 1

    def block_ids(self) -> list[int]:
        """The ids of the queued blocks, head (evicted first) to tail. O(num_free_blocks)."""
        ids = []
        node = self._head.next_free_block
        while node is not self._tail:
            ids.append(node.block_id)
            node = node.next_free_block
        return ids


def block_hashes(tokens: Any, block_size: int, parent: str | None = None) -> list[str]:
    """Lecture 7's chained hashes: one lowercase hex SHA-256 digest (64 characters) per FULL block.

    Digest i covers `parent` and every token of blocks 0 .. i; a trailing partial block gets none.
    Exactly (the grader compares digests): digest i = sha256(prev + block i's tokens as little-endian
    int64 bytes).hexdigest(), where prev is, for block 0, `parent` encoded as ASCII (b"" for None)
    and then digest i-1's hex text encoded as ASCII. The digests depend only on the integer values
    (list, tuple or ndarray of any integer dtype) and are the same in every process. Continuing a chain:
    block_hashes(a + b, n) == block_hashes(a, n) + block_hashes(b, n, parent=block_hashes(a, n)[-1])
    when len(a) is a non-zero multiple of n. ValueError for tokens that are not a 1-D sequence of
    integers (floats, or a 2-D array, even of integers); an empty sequence gives []. Negative
    integers are integers: block_hashes hashes them like any other value (as int64) and never
    refuses them (`allocate` and `append_tokens` refuse token ids < 0 before hashing anything).
    """
    array = np.asarray(tokens)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"tokens must be a 1-D sequence of integers; got {array.dtype} {array.shape}")
    values = array.astype("<i8")
    chain = b"" if parent is None else parent.encode("ascii")
    digests: list[str] = []
    for start in range(0, (len(values) // block_size) * block_size, block_size):
        digest = hashlib.sha256(chain + values[start:start + block_size].tobytes()).hexdigest()
        digests.append(digest)
        chain = digest.encode("ascii")
    return digests


def check_tokens(tokens: Any) -> list[int]:
    """Given: `tokens` as a list of Python ints; ValueError unless it is 1-D integers >= 0."""
    array = np.asarray(tokens)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)) or (array.size and array.min() < 0):
        raise ValueError(f"tokens must be a 1-D sequence of integers >= 0; got {array.dtype} {array.shape}")
    return [int(t) for t in array]


class BlockManager:
    """Which blocks each request's tokens live in, with vLLM v1's prefix caching.

    Attributes (plain data, read by the engine and the tests):
      num_blocks, block_size: ints, as given (ValueError unless both are ints >= 1).
      enable_caching: bool, default True. When False nothing is ever hashed, looked up or counted:
        not by `allocate`, and not by `append_tokens` when decoding fills a block (every block_hash
        stays None); every request computes all its tokens, and freed blocks are plain free blocks.
      blocks: list of `KVBlock`, `blocks[i].block_id == i`.
      free_queue: a `FreeBlockQueue`, holding at the start every block in id order 0 .. num_blocks-1.
      req_to_blocks: dict, request id -> list of its KVBlocks in position order, for every request
        that holds blocks (admitted by `allocate`, not yet freed), in admission order.
      prefix_cache_queries, prefix_cache_hits: ints, 0 at the start (vLLM's counters, in tokens):
        each successful `allocate` with caching on adds len(tokens) queries and its num_computed hits.
    The prefix cache maps a block hash to the one block that holds it; a block is in it exactly when
    its `block_hash` is not None. Every block with ref_cnt 0 is in the free queue, and only those.

    Costs: `allocate` and `append_tokens` O(len(tokens) + blocks they touch), `free` O(the request's
    blocks), whatever `num_blocks` is and however many blocks are cached or free.
    """

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = True) -> None:
        for name, value in (("num_blocks", num_blocks), ("block_size", block_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1; got {value!r}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self.free_queue = FreeBlockQueue(self.blocks)
        self.req_to_blocks: dict[str, list[KVBlock]] = {}
        self.prefix_cache_queries = 0
        self.prefix_cache_hits = 0
        self._cached: dict[str, KVBlock] = {}
        self._tokens: dict[str, list[int]] = {}
        self._chain: dict[str, list[str]] = {}

    @property
    def num_free_blocks(self) -> int:
        """Blocks in the free queue (refcount 0, cached or not): what new allocations can take."""
        return self.free_queue.num_free_blocks

    def allocate(self, request_id: str, tokens: Sequence[int]) -> tuple[int, list[int]] | None:
        """Admit a new request whose prompt is `tokens`: returns (num_computed, block_ids), or None.

        With caching on, `num_computed` is block_size times the length of the longest leading run
        of the prompt's full-block hashes found in the prefix cache, capped at
        (len(tokens) - 1) // block_size blocks so that the last token is always computed (a fully
        cached prompt still recomputes its last block). Those hit blocks are shared: each gets
        ref_cnt + 1, and one with ref_cnt 0 is first taken out of the free queue ("touched").
        The rest of the ceil(len(tokens) / block_size) blocks are new: each is popped from the free
        queue's head, and if it still holds a hash, that hash leaves the prefix cache first (lazy
        eviction); it gets ref_cnt 1. Touch before popping, so no hit block is evicted by its own
        request. Pop every new block before hashing any: only then is every new FULL block hashed
        (its chained hash, `block_hashes`) and entered in the prefix cache, unless that hash is
        already there (then the block stays unhashed). Interleaving the two goes wrong when a later
        pop evicts a block holding a hash an earlier new block was left without: that hash is then
        cached nowhere.
        `block_ids`: the request's blocks in position order (hits first).
        Returns None, changing nothing (counters included), when the new blocks needed exceed the
        free blocks that would remain after touching the hits. ValueError for a request_id that
        already holds blocks, or tokens that are empty or not 1-D integers >= 0; these checks come
        first, so bad input is a ValueError even when there is no room (never None).
        """
        if request_id in self.req_to_blocks:
            raise ValueError(f"request {request_id!r} already holds blocks")
        prompt = check_tokens(tokens)
        if not prompt:
            raise ValueError("allocate needs at least one token")
        size = self.block_size
        total_blocks = -(-len(prompt) // size)
        digests = block_hashes(prompt, size) if self.enable_caching else []
        hits: list[KVBlock] = []
        if self.enable_caching:
            limit = (len(prompt) - 1) // size
            for digest in digests[:limit]:
                block = self._cached.get(digest)
                if block is None:
                    break
                hits.append(block)
        idle_hits = sum(1 for block in hits if block.ref_cnt == 0)
        needed = total_blocks - len(hits)
        if needed > self.free_queue.num_free_blocks - idle_hits:
            return None
        for block in hits:
            if block.ref_cnt == 0:
                self.free_queue.remove(block)
            block.ref_cnt += 1
        fresh = [self._take_free_block() for _ in range(needed)]
        for index, block in enumerate(fresh, start=len(hits)):
            if index < len(digests):
                self._cache_block(block, digests[index])
        owned = hits + fresh
        self.req_to_blocks[request_id] = owned
        self._tokens[request_id] = prompt
        self._chain[request_id] = digests
        num_computed = len(hits) * size
        if self.enable_caching:
            self.prefix_cache_queries += len(prompt)
            self.prefix_cache_hits += num_computed
        return num_computed, [block.block_id for block in owned]

    def append_tokens(self, request_id: str, tokens: Sequence[int]) -> list[int] | None:
        """Add `tokens` (decoded ones, whose KV the engine computes next) to a running request.

        Returns the ids of the blocks newly allocated for them, in position order ([] when the
        request's last block has room), or None, changing nothing, when more blocks are needed than
        are free. New blocks come from the free queue's head as in `allocate` (lazy eviction). With
        caching on, every block that these tokens make full is hashed, chained on the request's
        previous full block, and enters the prefix cache unless its hash is already there.
        KeyError for an unknown request_id, checked first (an unknown request_id with bad tokens is
        a KeyError); then ValueError for tokens that are not 1-D integers >= 0. Both come before
        the room check: bad input raises even when no block is free (never None).
        """
        owned = self.req_to_blocks[request_id]
        extra = check_tokens(tokens)
        size = self.block_size
        history = self._tokens[request_id]
        new_length = len(history) + len(extra)
        needed = max(0, -(-new_length // size) - len(owned))
        if needed > self.free_queue.num_free_blocks:
            return None
        fresh = [self._take_free_block() for _ in range(needed)]
        owned.extend(fresh)
        history.extend(extra)
        if self.enable_caching:
            chain = self._chain[request_id]
            full = new_length // size
            if full > len(chain):
                parent = chain[-1] if chain else None
                more = block_hashes(history[len(chain) * size:full * size], size, parent=parent)
                for index, digest in enumerate(more, start=len(chain)):
                    self._cache_block(owned[index], digest)
                chain.extend(more)
        return [block.block_id for block in fresh]

    def free(self, request_id: str) -> None:
        """A request finished: its blocks' ref_cnt - 1, last block first; each block reaching 0 goes to
        the free queue's tail, keeping its hash (it stays a possible hit). The request leaves
        `req_to_blocks`: the engine may allocate it again under the same id (a preempted request
        comes back). KeyError for an unknown request_id."""
        owned = self.req_to_blocks.pop(request_id)
        for block in reversed(owned):
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                self.free_queue.append(block)
        del self._tokens[request_id]
        del self._chain[request_id]

    def _take_free_block(self) -> KVBlock:
        """Pop the free queue's head; if it still holds a hash, drop that hash from the prefix cache and
        set block_hash to None (lazy eviction). Return it with ref_cnt 1."""
        block = self.free_queue.popleft()
        if block.block_hash is not None:
            del self._cached[block.block_hash]
            block.block_hash = None
        block.ref_cnt = 1
        return block

    def _cache_block(self, block: KVBlock, digest: str) -> None:
        """Put a full block into the prefix cache under `digest` (and set its block_hash), unless
        `digest` is cached already (then the block stays unhashed)."""
        if digest in self._cached:
            return
        self._cached[digest] = block
        block.block_hash = digest

    # Given: what the engine and the tests read. Plain data out.

    def block_ids(self, request_id: str) -> list[int]:
        """The request's block ids in position order. KeyError for an unknown request_id."""
        return [block.block_id for block in self.req_to_blocks[request_id]]

    def ref_cnt(self, block_id: int) -> int:
        """blocks[block_id].ref_cnt."""
        return self.blocks[block_id].ref_cnt

    def block_hash(self, block_id: int) -> str | None:
        """blocks[block_id].block_hash."""
        return self.blocks[block_id].block_hash

    def free_block_ids(self) -> list[int]:
        """The free queue's block ids, head (evicted first) to tail."""
        return self.free_queue.block_ids()

    def num_cached_blocks(self) -> int:
        """How many blocks hold a hash (are in the prefix cache), in use or free."""
        return sum(1 for block in self.blocks if block.block_hash is not None)

    def running(self) -> list[str]:
        """The ids of the requests holding blocks, in admission order."""
        return list(self.req_to_blocks)
