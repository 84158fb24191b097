"""Hidden tests of hit_ratio (task hit_ratio): a hand-made trace with a small block size, synthetic
traces of several seeds and capacities, the full synthetic trace at capacity 100,000 within a time
limit, and Mooncake's conversation trace; every value equal (==) to the trusted reference replay."""
from __future__ import annotations

from typing import Any

import pytest

from _eviction_checks import (
    GUARD_CAPACITY, GUARD_SECONDS, HAND_BLOCK, HAND_TRACE, conversation_trace, describe_call, full_trace,
    hit_ratio_problem, run_hit_ratio, small_trace, time_limit,
)
from kvlab.trace import Request


@pytest.fixture(scope="module")
def synthetic_trace() -> tuple[Request, ...]:
    """make_trace() with its defaults, built outside the time limit of the test that uses it."""
    return full_trace()


@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.parametrize(("capacity", "policy"), [(None, "lru"), (2, "lru"), (2, "lfu")])
def test_hand_trace(student: Any, capacity: int | None, policy: str) -> None:
    call = describe_call("the 4-request hand trace", capacity, policy, HAND_BLOCK)
    got, error = run_hit_ratio(student, HAND_TRACE, capacity, policy, HAND_BLOCK)
    problem = hit_ratio_problem(call, got, error, HAND_TRACE, capacity, policy, HAND_BLOCK)
    assert problem is None, problem


@pytest.mark.task("hit_ratio", points=2)
def test_synthetic_traces(student: Any) -> None:
    for seed in (1, 2):
        trace = small_trace(seed)
        for capacity in (None, 1_000, 100):
            for policy in ("lru", "lfu"):
                call = describe_call(f"make_trace({seed}, n_requests=1500, duration=300.0)", capacity, policy)
                got, error = run_hit_ratio(student, trace, capacity, policy)
                problem = hit_ratio_problem(call, got, error, trace, capacity, policy)
                assert problem is None, problem


# The grader's worker ends any call at its own wall timeout; in-process runs rely on this mark
# (signal method: only this test fails; func_only: building the trace is not timed).
@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.timeout(GUARD_SECONDS, method="signal", func_only=True)
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_full_trace_at_capacity_100k(student: Any, policy: str, synthetic_trace: tuple[Request, ...]) -> None:
    trace = synthetic_trace
    call = describe_call("make_trace()", GUARD_CAPACITY, policy)
    with time_limit(call):
        got, error = run_hit_ratio(student, trace, GUARD_CAPACITY, policy)
    problem = hit_ratio_problem(call, got, error, trace, GUARD_CAPACITY, policy)
    assert problem is None, problem


@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_conversation_trace(student: Any, policy: str) -> None:
    trace = conversation_trace()
    if trace is None:
        pytest.skip("Mooncake's conversation_trace.jsonl is not installed (see kvlab.trace.mooncake_dir)")
    for capacity in (10_000, 1_000):
        call = describe_call("Mooncake's conversation trace", capacity, policy)
        got, error = run_hit_ratio(student, trace, capacity, policy)
        problem = hit_ratio_problem(call, got, error, trace, capacity, policy)
        assert problem is None, problem
