"""Hidden tests of PrefixCache (task prefix_cache): a scripted walk of register / lookup / clear
with every refcount and len(cache) after each step, and the cache's `pool`."""
from __future__ import annotations

from typing import Any

import pytest

from conformance_checks import HIDDEN_SETTINGS, prefix_machine
from kvlab.testing.conformance import run_machine
from prefix_checks import pool_given_problem, prefix_walk_problem

WALK_BLOCKS = 6
HELD = {"a": 1, "b": 1, "c": 1, "d": 1}

# (operation, the blocks a lookup must return, refcount of every named block, len(cache)), in order.
# h0 .. h3 stand for block hashes; the test holds one reference to each block it allocates.
PREFIX_WALK: tuple[tuple[str, list[str] | None, dict[str, int], int], ...] = (
    ("allocate a b c d", None, HELD, 0),
    ("register h0 h1 : a b", None, {**HELD, "a": 2, "b": 2}, 2),
    ("lookup h0 h1 h2", ["a", "b"], {**HELD, "a": 2, "b": 2}, 2),
    ("lookup h1 h0", ["b", "a"], {**HELD, "a": 2, "b": 2}, 2),
    ("lookup h2 h0 h1", [], {**HELD, "a": 2, "b": 2}, 2),  # the first hash misses: nothing counts
    ("lookup h0 h2 h1", ["a"], {**HELD, "a": 2, "b": 2}, 2),
    ("lookup", [], {**HELD, "a": 2, "b": 2}, 2),
    # h0 is cached already (block a): it is skipped, so c gains one reference, for h2 only.
    ("register h0 h2 : c c", None, {**HELD, "a": 2, "b": 2, "c": 2}, 3),
    ("lookup h0 h2 h1", ["a", "c", "b"], {**HELD, "a": 2, "b": 2, "c": 2}, 3),
    ("register h3 h1 : d d", None, {"a": 2, "b": 2, "c": 2, "d": 2}, 4),
    # The test lets go of its own references: the cache's keep every block in use.
    ("release a b c d", None, HELD, 4),
    ("lookup h3 h1", ["d", "b"], HELD, 4),
    ("clear", None, {"a": 0, "b": 0, "c": 0, "d": 0}, 0),
    ("lookup h0 h1", [], {}, 0),
    ("allocate e", None, {"e": 1}, 0),
    ("register h1 : e", None, {"e": 2}, 1),  # after clear a hash can be cached again
    ("lookup h1", ["e"], {"e": 2}, 1),
    ("release e", None, {"e": 1}, 1),
    ("clear", None, {"e": 0}, 0),
)


@pytest.mark.task("prefix_cache", points=4.8)
def test_prefix_cache_walk(student: Any) -> None:
    problem = prefix_walk_problem(student, PREFIX_WALK, WALK_BLOCKS, reveal=False)
    assert problem is None, problem


@pytest.mark.task("prefix_cache", points=0.8)
def test_cache_pool_is_the_pool_given(student: Any) -> None:
    problem = pool_given_problem(student, n_blocks=3, block_size=2)
    assert problem is None, problem


# Generated register / lookup / clear calls (conformance_checks.py): every lookup, len and refcount
# after each call, more and longer sequences than the public run.
@pytest.mark.task("prefix_cache", points=1)
def test_generated_calls_match_the_rules(student: Any) -> None:
    run_machine(prefix_machine(student), HIDDEN_SETTINGS)
