"""What the hidden lecture-7 tests of LRU/LFU eviction and hit_ratio keep to themselves: trusted
reference caches, the scripts, the hand trace, random calls against the references, and the real
trace. What the public tests share with them (the script interpreter, the synthetic traces, the time
limit, the hit-ratio diagnosis) is in the public folder's eviction_checks.py.

`ReferenceLRU` and `ReferenceLFU` are written another way than the reference solution (which keeps
an OrderedDict for LRU and one recency-ordered group per use count for LFU): both keep use-stamped
entries with lazy deletion (a queue in stamp order for LRU, a heap for LFU), kept here, never
shipped, so that the expected values of the trace tests come from the tests themselves. What makes
them trustworthy is checked in tests/suites/test_lecture07_references.py: they replay the hand-derived
scripts below, and they agree with brute-force oracles (a list scan for LRU, a minimum scan over
use counts for LFU) on random operation sequences. Every `*_problem` function returns None when
the student's values agree, else the message the student sees.
"""
from __future__ import annotations

import functools
import heapq
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from eviction_checks import CLASSES, Script, held_blocks
from kvlab.trace import BLOCK, Request, load_mooncake_trace, mooncake_dir
from paged_checks import describe_error, outcome

# CPU-time limit for a full-trace run at capacity about 100,000, the grader's own processes included.
# Each call into student code already ends at call_timeout_seconds = 10 s of CPU time (assignment.json,
# the limit the handout states and the public timed tests use); this one is a little longer so that the
# call's limit, not this one, names a slow call. The tests' wall-clock marks, two to four times this
# (the capacity guard may time six runs), only stop a call that sleeps: the wall clock, which another
# job on the machine stretches, decides nothing.
GUARD_SECONDS = 12


class ReferenceLRU:
    """LRU by block id: a queue of (last use, block) entries in use order, with lazy deletion.

    Every use appends a new entry; an entry is current only while its tick is the block's last use,
    so the oldest current entry is the least recently used block. Ticks only grow, so the queue is
    in tick order without a heap: each entry is appended and popped once (O(1) amortized per use).
    """

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.last: dict[int, int] = {}
        self.queue: deque[tuple[int, int]] = deque()
        self.clock = 0

    def _use(self, block: int) -> None:
        self.clock += 1
        self.last[block] = self.clock
        self.queue.append((self.clock, block))

    def _evict(self) -> None:
        while True:
            tick, block = self.queue.popleft()
            if self.last.get(block) == tick:
                del self.last[block]
                return

    def match(self, blocks: Iterable[int]) -> int:
        n = 0
        for block in blocks:
            if block not in self.last:
                break
            self._use(block)
            n += 1
        return n

    def insert(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if block not in self.last and self.capacity is not None and len(self.last) >= self.capacity:
                self._evict()
            self._use(block)

    def __contains__(self, block: object) -> bool:
        return block in self.last

    def __len__(self) -> int:
        return len(self.last)


class ReferenceLFU:
    """LFU by block id, ties to the least recently used; a heap of (uses, last use, block) entries.

    Every use pushes a new entry; an entry is current only while its last-use tick is the block's.
    """

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.uses: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.heap: list[tuple[int, int, int]] = []
        self.clock = 0

    def _use(self, block: int) -> None:
        self.clock += 1
        self.uses[block] = self.uses.get(block, 0) + 1
        self.last[block] = self.clock
        heapq.heappush(self.heap, (self.uses[block], self.clock, block))

    def _evict(self) -> None:
        while True:
            _, tick, block = heapq.heappop(self.heap)
            if self.last.get(block) == tick:
                del self.uses[block], self.last[block]
                return

    def match(self, blocks: Iterable[int]) -> int:
        n = 0
        for block in blocks:
            if block not in self.uses:
                break
            self._use(block)
            n += 1
        return n

    def insert(self, blocks: Iterable[int]) -> None:
        for block in blocks:
            if block not in self.uses and self.capacity is not None and len(self.uses) >= self.capacity:
                self._evict()
            self._use(block)

    def __contains__(self, block: object) -> bool:
        return block in self.uses

    def __len__(self) -> int:
        return len(self.uses)


REFERENCES = {"lru": ReferenceLRU, "lfu": ReferenceLFU}

# Scripted calls: see eviction_checks.Script.
# LRU, capacity 3.
LRU_SCRIPT: Script = (
    ("insert", [1, 2, 3], None, {1, 2, 3}, "three blocks fit in capacity 3"),
    ("match", [1, 4, 2], 1, {1, 2, 3},
     "1 is present and 4 is not: match counts the leading blocks present and stops at the first miss"),
    ("insert", [4], None, {1, 3, 4},
     "the cache is full, so 4 evicts the least recently used block, 2: the match used 1 (and not 2, which "
     "comes after the miss), so matched blocks must count as used now"),
    ("insert", [3, 5], None, {3, 4, 5}, "insert uses 3 (present), then 5 evicts the least recently used, 1"),
    ("match", [4, 3, 5], 3, {3, 4, 5}, "all three are present"),
    ("insert", [6, 4], None, {4, 5, 6},
     "6 evicts 4 (the match used 4, 3, 5 in that order), then 4 comes back and evicts 3: blocks of one call "
     "are handled in order"),
    ("match", [5, 6], 2, {4, 5, 6}, "both are present"),
    ("insert", [7, 7], None, {5, 6, 7},
     "7 evicts 4, the least recently used; the repeated 7 is present by then and only counts as a use"),
)

# LFU, capacity 3.
LFU_SCRIPT: Script = (
    ("insert", [1, 2, 3], None, {1, 2, 3}, "three blocks fit in capacity 3, with 1 use each"),
    ("match", [1, 2], 2, {1, 2, 3}, "both are present; 1 and 2 now have 2 uses"),
    ("match", [1], 1, {1, 2, 3}, "1 now has 3 uses"),
    ("insert", [4], None, {1, 2, 4}, "4 evicts 3, the block with the fewest uses (1): the matches gave 1 and 2 more"),
    ("insert", [5], None, {1, 2, 5}, "5 evicts 4, the only block with 1 use"),
    ("match", [5], 1, {1, 2, 5}, "5 now has 2 uses, as many as 2"),
    ("insert", [6], None, {1, 5, 6},
     "2 and 5 tie at 2 uses; the tie goes to the least recently used, 2 (last used at step 2), not 5"),
    ("insert", [2], None, {1, 2, 5}, "2 comes back and evicts 6, the only block with 1 use"),
    ("insert", [7], None, {1, 5, 7},
     "an evicted block's use count is forgotten: 2 came back with 1 use (not its old 2 + 1), the fewest, so "
     "7 evicts 2, not 5"),
    ("insert", [5, 8], None, {1, 5, 8}, "5 is present and gains a use; 8 evicts 7, the only block with 1 use"),
    ("match", [1, 5, 8, 9], 3, {1, 5, 8}, "three leading blocks are present; 9 is not"),
    ("insert", [8, 8], None, {1, 5, 8}, "8 is present: inserting a present block counts as a use (8 now has 4)"),
    ("insert", [9], None, {5, 8, 9},
     "1, 5 and 8 tie at 4 uses (inserting a present block counts as a use), so 9 evicts the least recently "
     "used of them, 1"),
)

# Capacity 1, for both policies.
TINY_SCRIPT: Script = (
    ("insert", [1], None, {1}, "capacity 1 holds one block"),
    ("match", [1], 1, {1}, "1 is present"),
    ("match", [1], 1, {1}, "1 is present"),
    ("insert", [2], None, {2}, "with capacity 1 a missing block evicts the only one, however often it was used"),
    ("match", [1, 2], 0, {2}, "1 was evicted, so the first block misses and nothing counts"),
    ("insert", [3, 4], None, {4}, "3 evicts 2, then 4 evicts 3"),
)

# Block size 4. Request 1 repeats request 0, partial last block included, so all 3 blocks match but
# only its 10 tokens hit; request 2 shares one block. Unlimited: 0 + 10 + 4 + 8 = 22 of 35 tokens;
# capacity 2: only request 3's first block survives (4 of 35).
HAND_TRACE = (
    Request(0.0, 10, 1, (1, 2, 3)),
    Request(1.0, 10, 1, (1, 2, 3)),
    Request(2.0, 6, 1, (1, 5)),
    Request(3.0, 9, 1, (1, 2, 4)),
)
HAND_BLOCK = 4
# (capacity, policy) -> (hit tokens, input tokens), worked out by hand as above.
HAND_HITS = {(None, "lru"): (22, 35), (None, "lfu"): (22, 35), (2, "lru"): (4, 35), (2, "lfu"): (4, 35)}


def replay_problem(student: Any, policy: str, capacity: int, seed: int, n_ops: int, universe: int) -> str | None:
    """Random match/insert calls on the student's cache and on the reference, compared after each."""
    rng = np.random.default_rng(seed)
    name = f"{CLASSES[policy]}(capacity={capacity})"
    cache = getattr(student.prefix_cache, CLASSES[policy])(capacity)
    reference = REFERENCES[policy](capacity)
    recent: list[str] = []
    for number in range(1, n_ops + 1):
        op = "match" if rng.random() < 0.5 else "insert"
        blocks = [int(b) for b in rng.integers(0, universe, size=int(rng.integers(1, 5)))]
        got, error = outcome(functools.partial(getattr(cache, op), blocks))
        want = getattr(reference, op)(blocks)
        recent = (recent + [f"{op}({blocks})" + (f" -> {want}" if op == "match" else "")])[-8:]
        where = f"{name}, random call {number} of {n_ops} (seed {seed}), the last calls being [{'; '.join(recent)}]"
        if error is not None:
            return f"{where}: {op} raised {describe_error(error)}"
        if op == "match" and got != want:
            return f"{where}: match returned {got!r}; expected {want}"
        held = held_blocks(student, cache, range(universe))
        expected = [block for block in range(universe) if block in reference]
        if held != expected:
            return (f"{where}: the cache holds {held}; expected {expected}. Likely cause: "
                    + ("LRU evicts the least recently used block; match and insert both count as a use"
                       if policy == "lru" else
                       "LFU evicts the block with the fewest uses, ties to the least recently used, and an evicted "
                       "block's count is forgotten"))
    return None


@functools.lru_cache(maxsize=None)
def conversation_trace() -> tuple[Request, ...] | None:
    """Mooncake's conversation trace (FAST'25 release), or None where the data is not installed."""
    path = mooncake_dir() / "conversation_trace.jsonl"
    return tuple(load_mooncake_trace(path)) if path.is_file() else None


def reference_hits(
    trace: Sequence[Request], capacity: int | None, policy: str, block_size: int = BLOCK, *,
    cap_at_input: bool = True, insert_first: bool = False, per_request: bool = False,
) -> tuple[float, int]:
    """(hit tokens, input tokens) of the contract's replay; the keywords give the usual mistakes.

    per_request: (sum of per-request hit fractions, number of requests) instead, whose quotient is
    the mean of per-request ratios.
    """
    cache = REFERENCES[policy](capacity)
    hit = total = 0
    for request in trace:
        if insert_first:
            cache.insert(request.blocks)
        n = cache.match(request.blocks)
        hits = min(n * block_size, request.input_len) if cap_at_input else n * block_size
        hit += hits / request.input_len if per_request else hits
        total += 1 if per_request else request.input_len
        if not insert_first:
            cache.insert(request.blocks)
    return hit, total
