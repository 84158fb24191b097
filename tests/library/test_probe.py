"""kvlab.testing.probe: many questions to student objects in one step (one round trip when graded)."""
from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest

import kvlab.testing.probe
from kvlab.testing.probe import Step, TooMuchAtOnce, ask, each, play


class Pool:
    def __init__(self) -> None:
        self.num_free = 3
        self.asked: list[int] = []

    def refcount(self, block: int) -> int:
        self.asked.append(block)
        if block < 0:
            raise ValueError(f"no block {block}")
        return block * 10


def test_ask_answers_calls_and_attributes_in_order() -> None:
    pool = Pool()
    answers = ask([(pool, "refcount", (2,)), (pool, "num_free", None), (pool, "refcount", (0,))])
    assert answers == [20, 3, 0], f"ask must answer each question in order: {answers}"
    assert pool.asked == [2, 0], f"ask must call the methods once each, in order: {pool.asked}"


def test_ask_stops_at_the_first_exception() -> None:
    pool = Pool()
    with pytest.raises(ValueError, match="no block -1"):
        ask([(pool, "refcount", (1,)), (pool, "refcount", (-1,)), (pool, "refcount", (2,))])
    assert pool.asked == [1, -1], f"questions after the one that raised must not be asked: {pool.asked}"


def test_each_calls_one_method_per_item() -> None:
    pool = Pool()
    assert each(pool.refcount, [(1,), (3,)]) == [10, 30], "each must return method(*args) per item"


class Buffer:
    """A student object that answers with a view of its one buffer, as a cache may."""

    def __init__(self, made: list[Buffer]) -> None:
        self.data = np.zeros(3)
        self.calls: list[tuple[int, float]] = []
        made.append(self)

    def put(self, index: int, value: float) -> np.ndarray:
        self.calls.append((index, value))
        if value < 0:
            raise ValueError(f"negative value {value}")
        self.data[index] = value
        return self.data


class WorkerTimeout(Exception):
    """Named as the sandbox's exception for a call past its time limit (kvlab.testing.probe sees only the name)."""


class Student:
    """The `student` fixture's `call` (kvlab.testing.Submission's), counting the calls; `answer`
    stands in for the student's process when set: what `call` returns or raises instead."""

    def __init__(self, answer: Any = None) -> None:
        self.calls = 0
        self.answer = answer

    def call(self, qualname: str, *args: Any) -> Any:
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer is not None:
            return self.answer
        module, _, function = qualname.partition(":")
        return getattr(importlib.import_module(module), function)(*args)


STEPS: list[Step] = [("put", (0, 1.0)), ("data", None), ("put", (0, 2.0))]


def test_play_asks_every_step_in_one_call_and_keeps_each_answer_as_given() -> None:
    student, made = Student(), []
    replies = play(student, lambda: Buffer(made), STEPS)
    first, data, second = replies.take(3)
    assert student.calls == 1 and len(made) == 1, (
        f"play must ask all the steps of one new object in one call: {student.calls} calls, {len(made)} objects"
    )
    assert first.tolist() == [1.0, 0.0, 0.0] and data.tolist() == [1.0, 0.0, 0.0], (
        f"each answer must be as the step gave it, not as a later step left the buffer: {first}, {data}"
    )
    assert second.tolist() == [2.0, 0.0, 0.0] and replies.target is made[0]


@pytest.mark.parametrize("answer", [ValueError("negative value -1.0"), [np.zeros(3)], "not a list"],
                         ids=["a step raised", "too few answers", "not a list"])
def test_play_makes_the_steps_again_as_they_are_read_when_the_call_fails(answer: Any) -> None:
    student, made = Student(answer), []
    steps: list[Step] = [("put", (1, 5.0)), ("put", (2, -1.0)), ("put", (0, 7.0))]
    replies = play(student, lambda: Buffer(made), steps)
    assert len(made) == 2 and replies.target is made[1], "the steps must be made again on a second object"
    assert made[1].calls == [], f"no step may be made before the test reads it: {made[1].calls}"
    assert replies.next().tolist() == [0.0, 5.0, 0.0], "the first step's answer, made when read"
    with pytest.raises(ValueError, match="negative value -1.0"):
        replies.next()
    assert made[1].calls == [(1, 5.0), (2, -1.0)], (
        f"each step must be made once, when it is read, as a direct call would be: {made[1].calls}"
    )


def test_play_does_not_run_again_a_call_past_its_time_limit() -> None:
    student, made = Student(WorkerTimeout("kvlab.testing.probe:ask(...) did not finish")), []
    with pytest.raises(WorkerTimeout):
        play(student, lambda: Buffer(made), STEPS)
    assert len(made) == 1, "a call that ran out of time must not be run again (it would use the limit again)"


def test_ask_holds_a_bounded_size_of_arrays_and_play_then_goes_one_step_at_a_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Each answer is the 3-float buffer (24 bytes): two fit under 50 bytes, the third passes it.
    monkeypatch.setattr(kvlab.testing.probe, "ASK_ARRAY_BYTES", 50)
    buffer = Buffer([])
    with pytest.raises(TooMuchAtOnce):
        ask([(buffer, "put", (index, 1.0)) for index in range(4)])
    assert len(buffer.calls) == 3, f"ask must stop at the answer that passes the bound: {buffer.calls}"
    made = []
    replies = play(Student(), lambda: Buffer(made), [("put", (index, 1.0)) for index in range(3)])
    assert len(made) == 2 and replies.next().tolist() == [1.0, 0.0, 0.0] and made[1].calls == [(0, 1.0)], (
        "play must make the calls one at a time, as they are read, when ask holds too much"
    )
