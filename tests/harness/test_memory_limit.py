"""The trusted process's memory is bounded per test.

What a submission can make the grader compute or hold: the attention scores of a `forward` it asks
for (checked before anything is computed), the arrays of its replies that a test still holds (counted
until the last reference goes; garbage in reference cycles is collected before a refusal, and between
tests once the process has grown), the plain values decoded during one test, and the JSON of one reply.
Each bound is checked here directly, on a real sandbox where it involves the worker, with small
bounds so the checks stay cheap; tests/hostile/test_hostile.py grades the attacks end to end with the whole
grader under a real 768 MB limit.
"""
from __future__ import annotations

import gc
import tracemalloc
import weakref
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from autograder.harness import course
from autograder.harness.course import COURSE, bounded_forward
from autograder.harness.sandbox import Limits, ProtocolError, Sandbox, TooBig, codec, kept
from autograder.harness.sandbox.worker import protocol
from kvlab.model import TINY, config_like, init_params

REPO = Path(__file__).resolve().parents[2]
STUDENT = '''
import numpy as np

def floats(megabytes):
    return np.ones((megabytes << 20) // 8)

def ints(n):
    return list(range(n))
'''


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sandbox]:
    student = tmp_path_factory.mktemp("memory") / "student"
    student.mkdir()
    (student / "heavy.py").write_text(STUDENT)
    # kvlab, which the course's remote functions import, placed as the grader places it.
    with Sandbox(student, [], packages=[REPO / "kvlab"], limits=Limits(call_timeout=10.0), config=COURSE) as box:
        yield box


def test_arrays_held_at_once_are_bounded(sandbox: Sandbox) -> None:
    sandbox.reset()
    sandbox.objects.holding = kept.Holding(array_bytes=10 << 20)
    heavy = sandbox.module("heavy")
    held = [heavy.floats(3), heavy.floats(3), heavy.floats(3)]
    with pytest.raises(TooBig, match="the grader keeps at once"):
        heavy.floats(3)
    live = sandbox.objects.holding.live
    assert live <= 10 << 20, f"{live} bytes counted as held, above the bound"
    del held
    gc.collect()
    live = sandbox.objects.holding.live
    assert live == 0, f"{live} bytes still counted once every array is gone"
    again = heavy.floats(3)
    assert again.nbytes == 3 << 20, "a reply fits again once the earlier ones are released"


class Cycle:
    """Garbage that only a collection frees, as a failed call's traceback and its frames are."""

    def __init__(self, payload: object) -> None:
        self.payload, self.me = payload, self


@pytest.fixture
def no_automatic_collection() -> Iterator[None]:
    """Python's own collections would free the cycles at moments these tests do not choose."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def test_garbage_does_not_count_as_held(sandbox: Sandbox, no_automatic_collection: None) -> None:
    sandbox.reset()
    sandbox.objects.holding = kept.Holding(array_bytes=10 << 20)
    heavy = sandbox.module("heavy")
    for number in range(6):  # 18 MB of replies, each left in a cycle: garbage, never held at once
        Cycle(heavy.floats(3))
        live = sandbox.objects.holding.live
        assert live <= 10 << 20, f"reply {number}: {live} bytes counted as held"
    held = heavy.floats(3)
    gc.collect()
    assert held.nbytes == 3 << 20 and sandbox.objects.holding.live == 3 << 20, (
        f"{sandbox.objects.holding.live} bytes counted as held once the garbage is gone; 3 MB are")


@pytest.mark.parametrize(("megabytes", "collected"), [(kept.GARBAGE_GROWTH_BYTES * 3 // 2 >> 20, True), (1, False)])
def test_a_new_test_frees_the_garbage_once_the_process_has_grown(no_automatic_collection: None, megabytes: int,
                                                                  collected: bool) -> None:
    """Between tests a full collection runs once the process has grown by GARBAGE_GROWTH_BYTES since
    the last (what a failed test left in cycles is then freed), and not for less: it costs 40-50 ms."""
    holding = kept.Holding()
    garbage = Cycle(np.ones((megabytes << 20) // 8))
    alive = weakref.ref(garbage)
    del garbage
    holding.new_test()
    assert (alive() is None) == collected, (
        f"{megabytes} MB of garbage {'survived' if collected else 'was collected by'} new_test (the process grew "
        f"{'more' if collected else 'less'} than {kept.GARBAGE_GROWTH_BYTES >> 20} MB since the last collection)")


@pytest.mark.parametrize(("megabytes", "collected"), [(kept.LARGE_ARRAY_BYTES >> 20, True), (1, False)])
def test_a_large_array_frees_the_garbage_before_it_is_taken(no_automatic_collection: None, megabytes: int,
                                                             collected: bool) -> None:
    """Garbage a test's failed calls left in cycles is freed before a large array is taken, so the
    array does not come on top of it; a small one does not pay for a collection."""
    holding = kept.Holding()
    garbage = Cycle(np.ones((1 << 20) // 8))
    alive = weakref.ref(garbage)
    del garbage
    holding.take_array(megabytes << 20)
    assert (alive() is None) == collected, (
        f"taking an array of {megabytes} MB: the garbage {'survived' if collected else 'was collected'}; arrays of "
        f"at least {kept.LARGE_ARRAY_BYTES >> 20} MB collect first, smaller ones do not")


def test_plain_values_of_one_test_are_bounded(sandbox: Sandbox) -> None:
    sandbox.reset()
    sandbox.objects.holding = kept.Holding(plain_items=10_000)
    heavy = sandbox.module("heavy")
    assert len(heavy.ints(6_000)) == 6_000, "the first list is within the bound"
    with pytest.raises(TooBig, match="more than the grader keeps for one test"):
        heavy.ints(6_000)
    sandbox.reset()
    assert len(heavy.ints(6_000)) == 6_000, "each test starts with the whole bound"


def test_refusals_are_the_students_failures_and_the_worker_lives_on(sandbox: Sandbox) -> None:
    sandbox.reset()
    sandbox.objects.holding = kept.Holding(array_bytes=1 << 20)
    heavy = sandbox.module("heavy")
    with pytest.raises(TooBig):
        heavy.floats(2)
    sandbox.objects.holding = kept.Holding()
    assert heavy.ints(3) == [0, 1, 2], "the same worker answers the next request"


def test_no_cache_attention_is_refused_before_it_is_computed() -> None:
    narrow = config_like(TINY, n_heads=1, n_kv_heads=1, d_head=2, d_model=4, d_ff=4, max_seq=1 << 14)
    params = init_params(narrow)
    tokens = np.zeros((1, 1 << 13), dtype=np.int64)
    tracemalloc.start()
    try:
        with pytest.raises(TooBig, match="attention scores"):
            bounded_forward(params, narrow, tokens)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"refusing took {peak >> 20} MB: the bound must act before the scores exist"


@pytest.mark.parametrize(("batch", "positions"), [(3, 300), (1, 1024)])
def test_forward_sizes_tests_use_still_run(batch: int, positions: int) -> None:
    """A no-cache forward as a decode that recomputes its prefix makes (lecture 2's tests: a few
    hundred positions) runs; the bound is far below what exhausts the grader, far above this."""
    scores = batch * TINY.n_heads * positions * positions
    assert scores <= course.MAX_FORWARD_FLOATS, f"{scores} scores: this size should be allowed"
    logits = bounded_forward(init_params(TINY), TINY, np.zeros((batch, positions), dtype=np.int64), last_only=True)
    assert logits.shape == (batch, 1, TINY.vocab), f"last_only logits have shape {logits.shape}"


def test_plain_data_beyond_the_json_cap_is_refused_before_it_is_read() -> None:
    reader = codec.Reader()
    with pytest.raises(ProtocolError, match="MB of plain data"):
        reader.feed(protocol.HEADER.pack(protocol.MAX_JSON_BYTES + 1, 0))
    assert len(reader.buffer) == protocol.HEADER.size, "nothing beyond the fixed header was kept"


def test_one_reply_fits_beside_the_held_arrays_in_the_grader() -> None:
    """The worst case the grader holds for a submission: a reply in flight and its copy, the arrays
    still held, a forward's intermediates (about four of MAX_FORWARD_FLOATS float64s), and the
    parsed JSON of a reply (up to ~25 times its size), with the grader's own ~200 MB (numpy, pytest,
    a Mooncake trace) inside Gradescope's 768 MB, leaving the worker room to be the one killed."""
    grader_own = 200 << 20
    held = (2 * protocol.MAX_MESSAGE_BYTES + kept.HELD_ARRAY_BYTES + 4 * 8 * course.MAX_FORWARD_FLOATS
            + 25 * protocol.MAX_JSON_BYTES)
    assert grader_own + held <= 768 << 20, f"the bounds add up to {(grader_own + held) >> 20} MB"

