"""Public tests of PrefixCache (task prefix_cache). Run: make test TASK=prefix_cache.

The cache maps a block hash to a block and holds one reference to each block it caches. The grader
checks the same rules with the same diagnoses (prefix_checks.py, in this folder) on a longer walk.
"""
from __future__ import annotations

from typing import Any

import pytest

from conformance_checks import PUBLIC_SETTINGS, prefix_machine
from kvlab.testing.conformance import run_machine
from prefix_checks import pool_given_problem, prefix_walk_problem

HELD = {"a": 1, "b": 1, "c": 1}

# (operation, the blocks a lookup must return, refcount of every named block, len(cache)); see
# prefix_walk_problem. The test holds one reference to each block it allocates.
PREFIX_WALK: tuple[tuple[str, list[str] | None, dict[str, int], int], ...] = (
    ("allocate a b c", None, HELD, 0),
    ("register h0 h1 : a b", None, {**HELD, "a": 2, "b": 2}, 2),
    ("lookup h0 h1 h2", ["a", "b"], {**HELD, "a": 2, "b": 2}, 2),
    ("lookup h0 h2 h1", ["a"], {**HELD, "a": 2, "b": 2}, 2),  # stops at the first miss
    ("register h1 h2 : c c", None, {**HELD, "a": 2, "b": 2, "c": 2}, 3),  # h1 is cached: skipped
    ("release a b c", None, {**HELD, "c": 1}, 3),
    ("lookup h0 h1 h2", ["a", "b", "c"], HELD, 3),
    ("clear", None, {"a": 0, "b": 0, "c": 0}, 0),
)


@pytest.mark.task("prefix_cache", points=0.8)
def test_register_then_lookup(student: Any) -> None:
    problem = prefix_walk_problem(student, PREFIX_WALK[:5], 5)
    assert problem is None, problem


@pytest.mark.task("prefix_cache", points=0.8)
def test_clear_gives_back_the_references(student: Any) -> None:
    problem = prefix_walk_problem(student, PREFIX_WALK, 5)
    assert problem is None, problem


@pytest.mark.task("prefix_cache", points=0.8)
def test_cache_pool_is_the_pool_given(student: Any) -> None:
    problem = pool_given_problem(student, n_blocks=2, block_size=3)
    assert problem is None, problem


# Random register / lookup / clear calls with empty, repeated and cached hashes (conformance_checks.py):
# every lookup, len(cache) and refcount after each call.
@pytest.mark.task("prefix_cache", points=1)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(prefix_machine(student), PUBLIC_SETTINGS)
