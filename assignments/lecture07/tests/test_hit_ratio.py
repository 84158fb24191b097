"""Public tests of hit_ratio (task hit_ratio). Run: make test TASK=hit_ratio.

Block size 4. Request 1 repeats request 0: all 3 blocks match, but it has only 10 tokens, so 10
hit. Request 2 shares its first block: 4 tokens. Request 3 shares two blocks: 8. 22 of 35 tokens.
The expected values here come from `eviction_checks.unlimited_hits` (capacity None: nothing is
evicted) and, for one trace at capacity 2 (BOUNDED_TRACE), from a count by hand; the grader
replays other traces and capacities through its own LRU and LFU, with the same diagnoses, and
holds each call to the time limit the last test here checks.
"""
from __future__ import annotations

from typing import Any

import pytest

from eviction_checks import (
    GUARD_CAPACITY, SLOW_CAUSE, TIME_LIMIT_SECONDS, describe_call, full_trace, hit_ratio_problem, run_hit_ratio,
    small_trace, time_limit, unlimited_hits,
)
from kvlab.trace import Request

TRACE = [
    Request(0.0, 10, 1, (1, 2, 3)),
    Request(1.0, 10, 1, (1, 2, 3)),
    Request(2.0, 6, 1, (1, 5)),
    Request(3.0, 9, 1, (1, 2, 4)),
]

# Capacity 2 blocks, one block per request: block 1 is used three times, then 2 and 3 arrive. At
# request 4 LRU evicts 1 (used longest ago), LFU evicts 2 (used once). Unlimited, requests 1, 2, 5 and
# 6 hit (16 of 28 tokens); LRU at capacity 2 only 1 and 2 (8: 1 is gone by request 5, and 2 by request
# 6, evicted when 1 came back); LFU 1, 2 and 5 (12).
BOUNDED_TRACE = [Request(float(i), 4, 1, (block,)) for i, block in enumerate((1, 1, 1, 2, 3, 1, 2))]
BOUNDED_HITS = {(None, "lru"): 16, (2, "lru"): 8, (2, "lfu"): 12}
BOUNDED_TOKENS = sum(request.input_len for request in BOUNDED_TRACE)


def hand_replay(trace: Any, capacity: int | None, policy: str, block_size: int, **variant: bool) -> tuple[int, int]:
    """BOUNDED_HITS as hit_ratio_problem's replay of BOUNDED_TRACE; 0 of 0 for the variants it has no count of."""
    if variant or block_size != 4 or (capacity, policy) not in BOUNDED_HITS:
        return 0, 0
    return BOUNDED_HITS[capacity, policy], BOUNDED_TOKENS


@pytest.mark.task("hit_ratio", points=1)
def test_small_trace(student: Any) -> None:
    assert unlimited_hits(TRACE, None, "lru", 4) == (22, 35), "test setup: the hand count is 22 of 35 tokens"
    for policy in ("lru", "lfu"):
        call = describe_call("the 4-request trace above", None, policy, 4)
        got, error = run_hit_ratio(student, TRACE, None, policy, 4)
        problem = hit_ratio_problem(call, got, error, TRACE, None, policy, 4)
        assert problem is None, problem
    unlimited = BOUNDED_HITS[None, "lru"] / BOUNDED_TOKENS
    for capacity, policy in BOUNDED_HITS:
        call = describe_call("the 7-request trace of one block each", capacity, policy, 4)
        got, error = run_hit_ratio(student, BOUNDED_TRACE, capacity, policy, 4)
        assert capacity is None or error is not None or got != unlimited, (
            f"{call} returned {got!r}, the hit ratio with unlimited capacity: the capacity never reached the "
            "cache. Likely cause: the cache must be make_cache(capacity, policy)"
        )
        problem = hit_ratio_problem(call, got, error, BOUNDED_TRACE, capacity, policy, 4, replay=hand_replay)
        assert problem is None, problem
    trace = small_trace(7)
    call = describe_call("make_trace(7, n_requests=1500, duration=300.0)", None, "lru")
    got, error = run_hit_ratio(student, trace, None, "lru")
    problem = hit_ratio_problem(call, got, error, trace, None, "lru")
    assert problem is None, problem


@pytest.mark.task("hit_ratio", points=1)
def test_empty_trace_is_zero(student: Any) -> None:
    call = describe_call("[] (an empty trace)", 3, "lfu")
    got, error = run_hit_ratio(student, [], 3, "lfu")
    problem = hit_ratio_problem(call, got, error, [], None, "lfu")
    assert problem is None, problem
    got, error = run_hit_ratio(student, [], 3, "fifo")
    assert isinstance(error, ValueError), (
        f"hit_ratio([], 3, 'fifo') {'returned ' + repr(got) if error is None else 'raised ' + repr(error)}; expected "
        "ValueError. Likely cause: the policy and capacity are checked first (make_cache raises), even for an empty "
        "trace: an unknown policy is a ValueError before any 0.0")


@pytest.fixture(scope="module")
def synthetic_trace() -> tuple[Request, ...]:
    """make_trace() with its defaults, built outside the time limit of the test that uses it."""
    return full_trace()


# The grader ends any call into your code after TIME_LIMIT_SECONDS (handout: "Time limit"). Here the
# signal ends the test (two calls, each held to the limit); building the trace is not timed.
@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.timeout(2 * TIME_LIMIT_SECONDS, method="signal", func_only=True)
def test_full_synthetic_trace_within_the_time_limit(student: Any, synthetic_trace: tuple[Request, ...]) -> None:
    hit, total = unlimited_hits(synthetic_trace, None, "lru")
    for policy in ("lru", "lfu"):
        call = describe_call("make_trace()", GUARD_CAPACITY, policy)
        # CPU time, the grader's measure of its limit per call: another job does not stretch it.
        with time_limit(call, 2 * TIME_LIMIT_SECONDS):
            (got, error), seconds = student.cpu_seconds(run_hit_ratio, student, synthetic_trace, GUARD_CAPACITY,
                                                        policy)
        assert error is None, f"{call} raised {type(error).__name__}: {error}"
        assert seconds <= TIME_LIMIT_SECONDS, (
            f"{call} did not finish within {TIME_LIMIT_SECONDS} s of CPU time, the grader's limit per call (it took "
            f"{seconds:.1f} s). {SLOW_CAUSE}"
        )
        # A bounded cache holds a subset of what an unlimited one holds, so it hits no more.
        assert isinstance(got, float) and 0.0 <= got <= hit / total, (
            f"{call} returned {got!r}; expected a float between 0.0 and {hit / total!r}, the hit ratio with "
            "unlimited capacity: a cache with less room cannot hit more"
        )
