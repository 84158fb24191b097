"""Public tests of LRUCache, LFUCache and make_cache (task eviction). Run: make test TASK=eviction.

Scripted calls with the cache's contents after every call, `in` not being a use, make_cache's
errors, and the time limit. The grader checks the same rules with the same diagnoses
(eviction_checks.py, in this folder) on other scripts, random calls and the full trace.
"""
from __future__ import annotations

import functools
from typing import Any

import pytest

from conformance_checks import CAPACITIES, EVICTION_PUBLIC_SETTINGS, eviction_machine
from kvlab.testing.conformance import run_machine
from eviction_checks import (
    CLASSES, GUARD_CAPACITY, SLOW_CAUSE, TIME_LIMIT_SECONDS, Script, base_growth_problem, error_problem, full_trace,
    guarded_sequence, script_problem, time_limit,
)
from paged_checks import raise_problem

# LRU, capacity 2.
LRU_SCRIPT: Script = (
    ("insert", [5, 6], None, {5, 6}, "two blocks fit in capacity 2"),
    ("match", [6, 5, 7], 2, {5, 6}, "6 and 5 are present and 7 is not: match counts the leading blocks present"),
    ("insert", [7], None, {5, 7},
     "the cache is full, so 7 evicts the least recently used block, 6: the match used 6, then 5, so matched "
     "blocks must count as used now"),
    ("insert", [5, 8], None, {5, 8}, "insert uses 5 (present), then 8 evicts the least recently used, 7"),
    ("match", [8], 1, {5, 8}, "8 is present"),
    ("insert", [9], None, {8, 9}, "9 evicts 5, used before 8"),
    ("insert", [9], None, {8, 9},
     "9 is present, so inserting it evicts nothing, even in a full cache: a present block only counts as used now"),
    ("match", [8, 7, 9], 1, {8, 9},
     "8 is present and 7 is not: match counts the leading blocks present and stops at the first miss, so 9, "
     "after it, does not count"),
    ("insert", [10], None, {8, 10},
     "10 evicts 9: the match used 8 and not 9, which comes after the miss, so 9 is the least recently used"),
)

# LFU, capacity 2.
LFU_SCRIPT: Script = (
    ("insert", [1, 2], None, {1, 2}, "two blocks fit in capacity 2, with 1 use each"),
    ("match", [1], 1, {1, 2}, "1 now has 2 uses"),
    ("match", [1], 1, {1, 2}, "1 now has 3 uses"),
    ("insert", [3], None, {1, 3}, "3 evicts 2, the block with the fewest uses (1): the matches gave 1 two more"),
    ("insert", [4], None, {1, 4}, "4 evicts 3, the only block with 1 use"),
    ("match", [4], 1, {1, 4}, "4 now has 2 uses"),
    ("insert", [3], None, {1, 3}, "3 comes back and evicts 4 (2 uses; 1 has 3)"),
    ("insert", [3, 3], None, {1, 3}, "3 is present: inserting a present block counts as a use (3 now has 3)"),
    ("insert", [5], None, {3, 5},
     "1 and 3 tie at 3 uses (inserting a present block counts as a use), so 5 evicts 1: the tie goes to the "
     "least recently used"),
    ("insert", [1], None, {1, 3}, "1 comes back and evicts 5, the only block with 1 use"),
    ("insert", [6], None, {3, 6},
     "an evicted block's use count is forgotten: 1 came back with 1 use (not its old 3 + 1), the fewest, so 6 "
     "evicts 1, not 3"),
    ("match", [6, 1, 3], 1, {3, 6},
     "6 is present and 1 is not: match counts the leading blocks present and stops at the first miss, so 3, "
     "after it, does not count"),
)


@pytest.mark.task("eviction", points=0.75)
def test_lru_evicts_least_recently_used(student: Any) -> None:
    # `in` first: the script reads the contents with `in`, so a cache that counts it as a use fails there too.
    cache = student.prefix_cache.LRUCache(2)
    cache.insert([1, 2])
    asked = [1 in cache, 1 in cache]
    cache.insert([3])
    held = [block for block in (1, 2, 3) if block in cache]
    assert asked == [True, True] and held == [2, 3], (
        f"LRUCache(2) after insert([1, 2]), twice `1 in cache` (answered {asked}), then insert([3]) holds {held}; "
        "expected [2, 3]. `in` only asks: it must not count as a use, so 1, inserted before 2, is the least "
        "recently used block"
    )
    problem = script_problem(student, "lru", 2, LRU_SCRIPT)
    assert problem is None, problem


@pytest.mark.task("eviction", points=0.75)
def test_lfu_evicts_least_frequently_used(student: Any) -> None:
    problem = script_problem(student, "lfu", 2, LFU_SCRIPT)
    assert problem is None, problem


@pytest.mark.task("eviction", points=0.75)
def test_make_cache_and_bad_arguments(student: Any) -> None:
    module = student.prefix_cache
    cases = {
        "make_cache(2, 'LRU')": functools.partial(module.make_cache, 2, "LRU"),
        "make_cache(2, 'random')": functools.partial(module.make_cache, 2, "random"),
        "LFUCache(-1)": functools.partial(module.LFUCache, -1),
        "LRUCache(-1)": functools.partial(module.LRUCache, -1),
        "LRUCache(0)": functools.partial(module.LRUCache, 0),
        "make_cache(0, 'lfu')": functools.partial(module.make_cache, 0, "lfu"),
    }
    for call, run in cases.items():
        problem = raise_problem(call, run, ValueError,
                                "the policy must be 'lru' or 'lfu' and the capacity an int >= 1 or None")
        assert problem is None, problem
    # 1 is used most and 2 last: LRU evicts 1, LFU evicts 2.
    for policy, want in (("lru", [2, 3]), ("lfu", [1, 3])):
        cache = module.make_cache(2, policy)
        cache.insert([1, 2])
        for blocks in ([1], [1], [2]):
            cache.match(blocks)
        cache.insert([3])
        held = [block for block in (1, 2, 3) if block in cache]
        assert held == want, (
            f"make_cache(2, {policy!r}) after insert([1, 2]), match([1]), match([1]), match([2]), insert([3]) holds "
            f"{held}; expected {want} as {CLASSES[policy]} would: make_cache must return an empty "
            f"{CLASSES[policy]}(capacity)"
        )


@pytest.fixture(scope="module")
def trace_blocks() -> list[int]:
    """Every block id of make_trace() in trace order (407,156 ids, 190,838 distinct)."""
    return [block for request in full_trace() for block in request.blocks]


# The grader ends any call into your code after TIME_LIMIT_SECONDS; here the signal ends the test
# (each call held to the limit, up to GROWTH_PAIRS pairs of runs per class), and building the trace
# (func_only) is not timed. The CPU time of
# the insert and of the questions after it is what counts: work an insert leaves for later calls
# is timed with them. The same calls at capacity GROWTH_BASE_CAPACITY are the baseline of the
# growth check (eviction_checks.base_growth_problem): the cost must not grow with the capacity.
@pytest.mark.task("eviction", points=0.75)
@pytest.mark.timeout(6 * TIME_LIMIT_SECONDS, method="signal", func_only=True)
def test_cost_does_not_grow_with_capacity(student: Any, trace_blocks: list[int]) -> None:
    last = trace_blocks[-8:]
    probes, asked = [trace_blocks[start:start + 8] for start in range(0, len(trace_blocks), 20_000)], trace_blocks[::2_000]
    for name in CLASSES.values():
        cache = getattr(student.prefix_cache, name)(GUARD_CAPACITY)
        call = (f"{name}({GUARD_CAPACITY:,}).insert(every block of make_trace(), {len(trace_blocks):,} ids, "
                f"{len(set(trace_blocks)) - GUARD_CAPACITY:,} evictions)")
        sequence = f"{call}, then {len(probes)} match calls, {len(asked)} `in` questions and len()"
        with time_limit(sequence, 6 * TIME_LIMIT_SECONDS):
            (inserted, matches, answers, length), seconds = student.cpu_seconds(
                guarded_sequence, cache, trace_blocks, probes, asked)
        assert inserted[1] is None, error_problem(call, inserted[1])
        failed = next((error for _, error in [*matches, *answers, length] if error is not None), None)
        assert failed is None, error_problem(f"a call after {call}", failed)
        assert length[0] == GUARD_CAPACITY, f"after {call} len(cache) is {length[0]}; expected {GUARD_CAPACITY}"
        assert all(type(got) is int and 0 <= got <= 8 for got, _ in matches), (
            f"after {call} match returned {[got for got, _ in matches]}; each should be an int from 0 to 8")
        held = cache.match(last)
        assert held == 8, f"after {call} and the questions, match(the last 8 blocks inserted) is {held}; expected 8"
        assert seconds <= TIME_LIMIT_SECONDS, (
            f"{sequence} took {seconds:.1f} s of CPU time, more than the grader's {TIME_LIMIT_SECONDS} s per call. "
            f"{SLOW_CAUSE}"
        )
        problem = base_growth_problem(student, name, trace_blocks, probes, asked, sequence, seconds,
                                      (matches, answers, length), 6 * TIME_LIMIT_SECONDS)
        assert problem is None, problem


# Random match / insert calls with empty, repeated, tuple and numpy-integer block lists
# (conformance_checks.py): what follows from membership alone, after each call.
@pytest.mark.task("eviction", points=1)
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_generated_calls_keep_the_rules(student: Any, policy: str) -> None:
    for capacity in CAPACITIES:
        run_machine(eviction_machine(student, policy, capacity), EVICTION_PUBLIC_SETTINGS)
