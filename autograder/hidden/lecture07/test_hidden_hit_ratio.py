"""Hidden tests of hit_ratio (task hit_ratio): a hand-made trace with a small block size, an empty
trace, synthetic traces of several seeds and capacities, the full synthetic trace at a capacity near
100,000 within the time limit, and Mooncake's conversation trace; every value equal (==) to the
trusted reference replay.

No check shows the expected value of a non-empty trace (resubmitting cannot collect a table of
answers), and the checks on large inputs draw part of their input (seeds, capacities) from the
grading's seed, a hash of the submitted files. The draws are in the message, where they help no one,
since other files draw others, and in results.json's per-test extra_data for the staff.
"""
from __future__ import annotations

from typing import Any

import pytest

from _eviction_checks import GUARD_SECONDS, HAND_BLOCK, HAND_TRACE, conversation_trace, reference_hits
from eviction_checks import (
    GUARD_CAPACITY, SLOW_CAUSE, describe_call, full_trace, hit_ratio_problem, run_hit_ratio, small_trace, time_limit,
)
from kvlab.testing.draws import drawn
from kvlab.trace import Request


@pytest.fixture(scope="module")
def synthetic_trace() -> tuple[Request, ...]:
    """make_trace() with its defaults, built outside the time limit of the test that uses it."""
    return full_trace()


@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_hand_trace(student: Any, policy: str) -> None:
    # At capacity 2 (the public tests replay it unlimited): only request 3's first block survives.
    # At a drawn capacity of 3 or more, request 1 repeats request 0 whole, partial last block included,
    # so its hits are capped at its input length.
    for capacity in (2, drawn(3, 8)):
        call = describe_call("the 4-request hand trace", capacity, policy, HAND_BLOCK)
        got, error = run_hit_ratio(student, HAND_TRACE, capacity, policy, HAND_BLOCK)
        # Fixed data: the message names the likely mistake, not the expected value (worked out by hand
        # from the handout's rules, but not to be collected by resubmitting).
        problem = hit_ratio_problem(call, got, error, HAND_TRACE, capacity, policy, HAND_BLOCK, replay=reference_hits,
                                    reveal=False)
        assert problem is None, problem


@pytest.mark.task("hit_ratio", points=1)
def test_empty_trace_is_zero(student: Any) -> None:
    for policy in ("lru", "lfu"):
        call = describe_call("[] (an empty trace)", 10, policy)
        got, error = run_hit_ratio(student, [], 10, policy)
        problem = hit_ratio_problem(call, got, error, [], 10, policy, replay=reference_hits)
        assert problem is None, problem
    for capacity, policy in ((10, "LFU"), (0, "lru")):
        got, error = run_hit_ratio(student, [], capacity, policy)
        assert isinstance(error, ValueError), (
            f"hit_ratio([], {capacity}, {policy!r}) {'returned ' + repr(got) if error is None else 'raised ' + repr(error)}; "
            "expected ValueError. Likely cause: the policy and capacity are checked first (make_cache raises), even "
            "for an empty trace: a bad one is a ValueError before any 0.0")


@pytest.mark.task("hit_ratio", points=1)
def test_synthetic_traces(student: Any) -> None:
    for seed in (drawn(10, 10**6), drawn(10, 10**6)):
        trace = small_trace(seed)
        for capacity in (None, drawn(500, 1_500), drawn(50, 150)):
            for policy in ("lru", "lfu"):
                call = describe_call(f"make_trace({seed}, n_requests=1500, duration=300.0)", capacity, policy)
                got, error = run_hit_ratio(student, trace, capacity, policy)
                problem = hit_ratio_problem(call, got, error, trace, capacity, policy, replay=reference_hits,
                                            reveal=False)
                assert problem is None, problem


# CPU time decides (GUARD_SECONDS); the wall-clock mark only stops a call that sleeps (signal method:
# only this test fails; func_only: building the trace is not timed).
@pytest.mark.task("hit_ratio", points=1)
@pytest.mark.timeout(2 * GUARD_SECONDS, method="signal", func_only=True)
@pytest.mark.parametrize("policy", ["lru", "lfu"])
def test_full_trace_at_capacity_100k(student: Any, policy: str, synthetic_trace: tuple[Request, ...]) -> None:
    trace = synthetic_trace
    capacity = drawn(GUARD_CAPACITY - 5_000, GUARD_CAPACITY + 5_000)
    call = describe_call("make_trace()", capacity, policy)
    with time_limit(call, 2 * GUARD_SECONDS):
        (got, error), seconds = student.cpu_seconds(run_hit_ratio, student, trace, capacity, policy)
    problem = hit_ratio_problem(call, got, error, trace, capacity, policy, replay=reference_hits, reveal=False)
    assert problem is None, problem
    assert seconds <= GUARD_SECONDS, (
        f"{call} took {seconds:.1f} s of CPU time (limit {GUARD_SECONDS:g} s; the reference solution takes about "
        f"1 s). {SLOW_CAUSE}")


@pytest.mark.task("hit_ratio", points=1)
def test_conversation_trace(student: Any) -> None:
    trace = conversation_trace()
    if trace is None:
        pytest.skip("Mooncake's conversation_trace.jsonl is not installed (see kvlab.trace.mooncake_dir)")
    for capacity, policy in ((drawn(5_000, 15_000), "lru"), (drawn(500, 1_500), "lfu"),
                             (drawn(5_000, 15_000), "lfu"), (drawn(500, 1_500), "lru")):
        call = describe_call("Mooncake's conversation trace", capacity, policy)
        got, error = run_hit_ratio(student, trace, capacity, policy)
        problem = hit_ratio_problem(call, got, error, trace, capacity, policy, replay=reference_hits, reveal=False)
        assert problem is None, problem
