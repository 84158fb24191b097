"""What the trusted side keeps of one test's traffic with the worker: `Holding`, the student's
replies it still holds (bounded, see below), and `Sent`, the arrays (and dicts of them, and
frozen wire-type values) it sent that the worker may hand back by number. Both are reset at every
test (`Sandbox.reset`).
"""
from __future__ import annotations

import gc
import os
import weakref
from typing import Any

import numpy as np

from .errors import ProtocolError, TooBig
from .worker.protocol import ECHO_KEPT_BYTES, ECHO_MIN_BYTES

__all__ = ["Holding", "Sent"]

# What the trusted process holds at once of the student's replies (its memory, bounded): arrays decoded
# and still alive (honest tests: at most 37 MB in all, over a whole test), and plain values decoded
# during one test, strings and bytes counted by their size (honest tests: at most 200,000).
HELD_ARRAY_BYTES = 128 << 20
HELD_PLAIN_ITEMS = 2_000_000
# A str or bytes costs one item per this many characters or bytes (about an item's own size).
ITEM_BYTES = 64
# A failed call's traceback keeps its frames alive in reference cycles, and with them the replies
# and the trusted forward's intermediate arrays (the attention term) that were in flight. Python
# frees cycles only when a collection runs, which it triggers by counts of objects, not bytes: a
# submission whose calls fail with large arrays in flight held the trusted process at 836 MB
# (tests/hostile/payloads/large_replies_held) with the held arrays within their bound. So between tests the
# garbage is collected once the process has grown this much since the last collection (a full
# collection costs 40-50 ms with lecture 7's traces loaded, too much for every test), and before
# refusing an array, since the arrays counted as held may be garbage already.
GARBAGE_GROWTH_BYTES = 64 << 20
# Within one test the garbage of failed calls may pile up to that much before the next test frees
# it, and a large reply would come on top of it (the whole grading peaked 60 MB higher in
# tests/hostile/payloads/large_replies_held): an array this large collects first. Honest replies stay far
# below it (the largest, module 6's free queue, is 1.6 MB), so honest gradings do not pay.
LARGE_ARRAY_BYTES = 16 << 20


class Holding:
    """What the trusted process holds of the student's replies, bounded: live arrays (tracked until
    the last reference to each goes) and the plain values decoded since `new_test()`. Going over
    raises TooBig in the test that asked, before the memory is taken."""

    def __init__(self, array_bytes: int = HELD_ARRAY_BYTES, plain_items: int = HELD_PLAIN_ITEMS) -> None:
        self.array_bytes, self.plain_items = array_bytes, plain_items
        self.live = 0
        self.items = 0
        self.resident_after_collection = resident_bytes()

    def new_test(self) -> None:
        """Between tests: nothing decoded so far counts for the next, and garbage the last test left
        in reference cycles is freed once the process has grown by GARBAGE_GROWTH_BYTES."""
        self.items = 0
        resident = resident_bytes()
        if resident is None or self.resident_after_collection is None \
                or resident - self.resident_after_collection > GARBAGE_GROWTH_BYTES:
            self.collect()

    def take_items(self, count: int) -> None:
        self.items += count
        if self.items > self.plain_items:
            raise TooBig(
                f"your code's results in this test hold more than {self.plain_items:,} values (lists, "
                "numbers, text), more than the grader keeps for one test: return numpy arrays, or less"
            )

    def take_array(self, nbytes: int) -> None:
        if nbytes >= LARGE_ARRAY_BYTES or self.live + nbytes > self.array_bytes:
            self.collect()  # the arrays of a failed call, garbage in a cycle, no longer count once freed
        if self.live + nbytes > self.array_bytes:
            raise TooBig(
                f"an array of {nbytes >> 20} MB from your code, with the {self.live >> 20} MB of its arrays "
                f"the test still holds, is more than the {self.array_bytes >> 20} MB the grader keeps at once"
            )

    def collect(self) -> None:
        """A full collection, and the size it left, from which new_test measures the growth (so a
        test that has just collected before a large array does not collect again at its end)."""
        gc.collect()
        self.resident_after_collection = resident_bytes()

    def track(self, array: np.ndarray, nbytes: int) -> np.ndarray:
        self.live += nbytes
        weakref.finalize(array, self._release, nbytes)
        return array

    def _release(self, nbytes: int) -> None:
        self.live -= nbytes


def resident_bytes() -> int | None:
    """This process's resident memory (Linux's /proc/self/statm), None where unreadable."""
    try:
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


class Sent:
    """What this process sent the worker during the current test, by number, which the worker may
    hand back as [Tag.ECHO, number] instead of its bytes (worker/messages.py): arrays, dicts of
    them, and frozen wire-type values.

    A decode passes its weights to every forward callback (1.1 MB in 21 arrays per step of lecture
    2's work check): sent back as one number, they cost neither the copies nor the pipe, nor a tree
    node per array. Trusting the number gives the worker nothing: it can only name what this process
    sent itself, which it could have sent back verbatim, and arrays are decoded and held like any
    reply. Arrays below ECHO_MIN_BYTES are not numbered (the number would save little) unless they
    belong to a dict of arrays, nor any beyond ECHO_KEPT_BYTES in one test.
    """

    def __init__(self) -> None:
        self.arrays: dict[int, np.ndarray] = {}
        # Dicts of numbered arrays (key -> the array's number), and frozen wire-type values as sent.
        self.values: dict[int, Any] = {}
        self.kept = 0
        self.next = 1  # never reused by one sandbox, so a number from an earlier test names nothing

    def offer(self, array: np.ndarray, small_too: bool = False) -> int | None:
        """The number of an array about to be sent, or None when it is not kept. What is kept is a
        read-only copy: the request carries a view of the caller's array, which may change later."""
        if (array.nbytes < ECHO_MIN_BYTES and not small_too) or self.kept + array.nbytes > ECHO_KEPT_BYTES:
            return None
        number = self._number()
        self.arrays[number] = kept = array.copy(order="K")
        kept.flags.writeable = False
        self.kept += array.nbytes
        return number

    def offer_value(self, value: dict[str, int] | Any) -> int:
        """The number of a dict of array numbers, or of a frozen wire-type value (immutable, so kept
        as it is)."""
        number = self._number()
        self.values[number] = value
        return number

    def _number(self) -> int:
        number, self.next = self.next, self.next + 1
        return number

    def array(self, number: Any) -> np.ndarray:
        """The (read-only) array this process sent as `number`: callers copy it."""
        kept = self.arrays.get(number) if type(number) is int else None
        if kept is None:
            raise ProtocolError(f"the worker handed back an array {str(number)[:20]!r} the grader never sent it")
        return kept

    def value(self, number: Any) -> Any:
        """What this process sent as `number`: an array (read-only: callers copy it), a dict of array
        numbers, or a frozen wire-type value."""
        if type(number) is int and number in self.values:
            return self.values[number]
        return self.array(number)

    @property
    def numbered(self) -> bool:
        """Whether anything was sent by number since the last clear (the worker then keeps it)."""
        return bool(self.arrays or self.values)

    def clear(self) -> None:
        """A new test (or a new worker): the numbers sent so far name nothing any more."""
        self.arrays.clear()
        self.values.clear()
        self.kept = 0
