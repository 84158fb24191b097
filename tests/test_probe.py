"""kvlab.probe: many questions to student objects in one step (one round trip when graded)."""
from __future__ import annotations

import pytest

from kvlab.probe import ask, each


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
