"""What the hidden lecture-7 tests of LRU/LFU eviction and hit_ratio share: trusted reference
caches, the script interpreter, the traces, and the diagnosis of a wrong hit ratio.

`ReferenceLRU` and `ReferenceLFU` are written another way than the reference solution (which keeps
an OrderedDict for LRU and one recency-ordered group per use count for LFU): both are a heap of
use-stamped entries with lazy deletion, kept here, never shipped, so that the expected values of
the trace tests come from the tests themselves. What makes them trustworthy is checked in
tests/test_lecture07_references.py: they replay the hand-derived scripts below, and they agree
with brute-force oracles (a list scan for LRU, a minimum scan over use counts for LFU) on random
operation sequences. Every `*_problem` function
returns None when the student's values agree, else the message the student sees.
"""
from __future__ import annotations

import functools
import heapq
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

from _paged_checks import describe_error, outcome
from kvlab.trace import BLOCK, Request, load_mooncake_trace, make_trace, mooncake_dir

# Wall-clock limit for a full-trace run at capacity 100,000. The reference solution needs about
# 0.1-0.3 s and an eviction that scans the cache (O(capacity) per miss) needs minutes, so the limit
# separates the two by far on a busy machine. Sandboxed grading also ends the call at the worker's
# own per-call wall timeout (assignment.json: call_timeout_seconds = 10); this in-process limit is a
# little longer so that there the worker's timeout, not this one, ends a slow call.
GUARD_SECONDS = 12
GUARD_CAPACITY = 100_000

# Traces up to this many requests are replayed with each usual mistake to name the one made.
DIAGNOSED_REQUESTS = 2_000


class ReferenceLRU:
    """LRU by block id: a heap of (last use, block) entries with lazy deletion.

    Every use pushes a new entry; an entry is current only while its tick is the block's last use,
    so the smallest current entry is the least recently used block.
    """

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.last: dict[int, int] = {}
        self.heap: list[tuple[int, int]] = []
        self.clock = 0

    def _use(self, block: int) -> None:
        self.clock += 1
        self.last[block] = self.clock
        heapq.heappush(self.heap, (self.clock, block))

    def _evict(self) -> None:
        while True:
            tick, block = heapq.heappop(self.heap)
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

# Scripted calls: (operation, blocks, what match returns or None, contents afterwards, why).
Script = tuple[tuple[str, list[int], int | None, set[int], str], ...]

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

CLASSES = {"lru": "LRUCache", "lfu": "LFUCache"}


def script_problem(
    student: Any, policy: str, capacity: int | None,
    steps: Sequence[tuple[str, list[int], int | None, set[int], str]],
) -> str | None:
    """Run a scripted sequence on the student's LRUCache / LFUCache.

    Rows: (operation "match" or "insert", blocks, what match returns (None for insert), the cache's
    contents afterwards, why). After every row the return value, len(cache) and `b in cache` for
    every block of the script are compared; `why` explains the row to the student.
    """
    name = f"{CLASSES[policy]}(capacity={capacity})"
    cache = getattr(student.prefix_cache, CLASSES[policy])(capacity)
    universe = sorted({block for _, blocks, _, _, _ in steps for block in blocks})
    done: list[str] = []
    for number, (op, blocks, want_n, contents, why) in enumerate(steps, 1):
        where = f"{name}, step {number}: {op}({blocks}) after [{'; '.join(done) or 'nothing'}]"
        got, error = outcome(functools.partial(getattr(cache, op), list(blocks)))
        if error is not None:
            return f"{where} raised {describe_error(error)}"
        if op == "match" and got != want_n:
            return f"{where} returned {got!r}; expected {want_n}: {why}"
        held = [block for block in universe if block in cache]
        if held != sorted(contents):
            evicted = sorted(set(contents) - set(held))
            kept = sorted(set(held) - set(contents))
            detail = (f" ({', '.join(map(str, kept))} should have been evicted, not {', '.join(map(str, evicted))})"
                      if evicted and kept else "")
            return f"{where}: the cache holds {held}; expected {sorted(contents)}{detail}: {why}"
        size = len(cache)
        if size != len(contents):
            return f"{where}: len(cache) is {size!r}; expected {len(contents)}, the number of blocks it holds"
        done.append(f"{op}({blocks})" + (f" -> {got}" if op == "match" else ""))
    return None


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
        held = [block for block in range(universe) if block in cache]
        expected = [block for block in range(universe) if block in reference]
        if held != expected:
            return (f"{where}: the cache holds {held}; expected {expected}. Likely cause: "
                    + ("LRU evicts the least recently used block; match and insert both count as a use"
                       if policy == "lru" else
                       "LFU evicts the block with the fewest uses, ties to the least recently used, and an evicted "
                       "block's count is forgotten"))
    return None


@functools.lru_cache(maxsize=None)
def full_trace() -> tuple[Request, ...]:
    """make_trace() with its defaults: 23,608 requests, the shape of Mooncake's tool-and-agent trace."""
    return tuple(make_trace())


@functools.lru_cache(maxsize=None)
def small_trace(seed: int) -> tuple[Request, ...]:
    """A cheaper synthetic trace: 1,500 requests in 5 minutes, dense enough for session hits."""
    return tuple(make_trace(seed, n_requests=1_500, duration=300.0))


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


def describe_call(label: str, capacity: int | None, policy: str, block_size: int = BLOCK) -> str:
    args = "" if block_size == BLOCK else f", block_size={block_size}"
    return f"hit_ratio({label}, capacity={capacity}, policy={policy!r}{args})"


def run_hit_ratio(
    student: Any, trace: Sequence[Request], capacity: int | None, policy: str, block_size: int = BLOCK
) -> tuple[Any, BaseException | None]:
    """The student's hit_ratio(trace, capacity, policy, block_size): (value, None) or (None, error)."""
    return outcome(functools.partial(student.prefix_cache.hit_ratio, list(trace), capacity, policy, block_size))


SLOW_CAUSE = ("Likely cause: evicting costs O(capacity), e.g. min() over every cached block's timestamp or count: "
              "match and insert must cost O(len(blocks)) whatever the capacity. Keep the blocks in recency order "
              "(OrderedDict) and, for LFU, one recency-ordered group per use count")


@contextmanager
def time_limit(call: str) -> Iterator[None]:
    """Turn pytest-timeout's failure inside the block into a message naming the call and the cause."""
    try:
        yield
    except pytest.fail.Exception:
        pytest.fail(f"{call} did not finish within {GUARD_SECONDS} s (the reference solution takes about 0.2 s). "
                    + SLOW_CAUSE, pytrace=False)


def error_problem(call: str, error: BaseException) -> str:
    """What a call raised; a grader's per-call timeout (sandboxed grading) gets the likely cause too."""
    slow = type(error).__name__ == "WorkerTimeout"
    return f"{call} raised {describe_error(error)}" + (f". {SLOW_CAUSE}" if slow else "")


def hit_ratio_problem(
    call: str, got: Any, error: BaseException | None, trace: Sequence[Request], capacity: int | None, policy: str,
    block_size: int = BLOCK,
) -> str | None:
    """The student's hit_ratio against the reference replay, exactly (==): the same integers, one division."""
    if error is not None:
        return error_problem(call, error)
    hit, total = reference_hits(trace, capacity, policy, block_size)
    if got == hit / total:
        return None
    said = f"{call} returned {got!r}; expected {hit / total!r} = {hit} hit tokens / {total} input tokens"
    if not isinstance(got, float):
        return f"{said}. It must be a float, hit / total"
    mistakes = {
        "a request's hit tokens are not capped at its input length: a fully matched request whose last block is "
        "partial hits min(n * block_size, input_len) tokens, not n whole blocks":
            functools.partial(reference_hits, cap_at_input=False),
        "the request's blocks are inserted before they are matched, so every request hits itself: match first, "
        "then insert": functools.partial(reference_hits, insert_first=True),
        "the ratio is a mean of per-request ratios; it must be token-weighted: the sum of every request's hit "
        "tokens over the sum of their input lengths": functools.partial(reference_hits, per_request=True),
        "the other policy ran: 'lru' must give LRUCache and 'lfu' LFUCache":
            lambda t, c, p, b: reference_hits(t, c, "lfu" if p == "lru" else "lru", b),
        f"block_size is ignored: tokens must be counted with the block_size argument ({block_size}), not BLOCK":
            lambda t, c, p, b: reference_hits(t, c, p, BLOCK),
    }
    # Replaying long traces once per mistake would cost seconds; the short traces name the mistake.
    for cause, variant in mistakes.items() if len(trace) <= DIAGNOSED_REQUESTS else ():
        v_hit, v_total = variant(trace, capacity, policy, block_size)
        if got == v_hit / v_total:
            return f"{said}. Likely cause: {cause}"
    return (f"{said}. Likely causes: the ratio is token-weighted (sum of hits over sum of input lengths, not a mean "
            f"of per-request ratios); each request is matched, then inserted, in trace order, through one cache "
            f"made by make_cache; or the {policy.upper()} eviction differs from the contract")
