"""`Proxy`: a student object (or module) living in the worker, as the trusted side holds it."""
from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Iterator, Protocol

import numpy as np

from .errors import BadValue, ProtocolError, StaleObject, StudentException, WorkerTimeout
from .kept import Holding, Sent
from .limits import Limits
from .worker.messages import NEXT, Tag
from .worker.protocol import TEXT_LIMIT

# Dunder attributes worth a round trip; other dunder probes (numpy's __array_interface__,
# inspect's __wrapped__, ...) fail locally, as they would on an object without them.
REMOTE_DUNDERS = {"__name__", "__qualname__", "__module__", "__doc__", "__dict__"}
STOP = object()  # what a NEXT request returns when the iterator is exhausted
# What one round trip of an iteration counts at least: an endless iterator whose items cost the
# worker nothing must still use up the limit (10,000 items a second of the limit).
ROUND_TRIP_FLOOR = 1e-4


class Owner(Protocol):
    """What a proxy needs of its sandbox (`sandbox.Sandbox`)."""

    limits: Limits
    objects: WorkerObjects

    @property
    def last_call_cpu(self) -> float | None:
        """The worker's CPU seconds in the last round trip (None when unknown)."""

    def _request(self, op: str, target: Any, args: Any, kwargs: dict[str, Any], label: str) -> Any:
        """One round trip about `target`."""

    def _protocol_failure(self, detail: str, label: str) -> ProtocolError:
        """Stop the worker and describe what it sent."""


class WorkerObjects:
    """What the trusted side knows of a sandbox's worker objects, and holds of its replies.

    `generation` numbers the worker's object table: bumped whenever the table is dropped (a reset, a
    worker stopped or restarted), so a proxy of another generation is stale. `stopped`: why each
    worker stopped for cause (a timeout, a crash, invalid data), by generation: a proxy of that
    generation used later in the test is the student's failure. `ended_for_fresh`: generations
    whose worker `Sandbox.fresh` ended. `methods`: (proxy key, name) of the attributes the worker
    reported as methods of the object's class (`Proxy.__getattr__` then skips the lookup: one round
    trip per call instead of two), dropped with the table. `holds`: whether the table may hold
    something since the last reset. `holding` bounds what this process keeps of the replies in a
    test (`kept.Holding`), `sent` the arrays sent to the worker in it, which it may hand back by
    number (`kept.Sent`).
    """

    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.generation = 0
        self.stopped: dict[int, str] = {}
        self.ended_for_fresh: set[int] = set()
        self.methods: set[tuple[Any, str]] = set()
        self.holds = False
        self.holding = Holding()
        self.sent = Sent()

    def dropped(self) -> None:
        """The worker's object table is gone: every proxy into it is stale."""
        self.generation += 1
        self.methods.clear()

    def new_worker(self) -> None:
        """A worker starts: it holds nothing yet and was sent nothing."""
        self.holds = False
        self.sent.clear()

    def new_test(self) -> None:
        """Between tests: the worker's table is dropped, and nothing of the last test is kept or
        may come back by number."""
        self.holds = False
        self.dropped()
        self.holding.new_test()
        self.sent.clear()

    def proxy(self, number: int, type_name: str, label: str, generation: int) -> Proxy:
        """The proxy of worker object `number` of `generation`, which the worker now holds."""
        self.holds = True
        return Proxy(self.owner, [Tag.REFERENCE, number], generation, label, type_name)

    def reference(self, value: Any) -> list[Any] | None:
        """The wire form of a proxy argument (the worker object it names), None for other values."""
        if isinstance(value, Proxy):
            if value._sbx_box is not self.owner:
                raise TypeError(f"{value._sbx_label} belongs to another sandbox")
            self.check_fresh(value)
            return value._sbx_target
        if isinstance(value, type) and issubclass(value, StudentException):
            # Only the student's process hands out these classes (a test cannot name one otherwise).
            raise BadValue(f"your code gave the exception class {value.__qualname__} where a value was "
                           "expected; it cannot be passed back to your code")
        return None

    def check_fresh(self, proxy: Proxy) -> None:
        """Raise if `proxy` names an object of a worker table that is gone."""
        if proxy._sbx_generation is not None and proxy._sbx_generation != self.generation:
            why = self.stopped.get(proxy._sbx_generation)
            if why is not None:
                raise StaleObject(
                    f"{proxy._sbx_label} no longer exists: the student's process it lived in was stopped "
                    f"earlier in this test ({why})"
                )
            if proxy._sbx_generation in self.ended_for_fresh:
                raise ReferenceError(
                    f"{proxy._sbx_label} refers to a student object of a worker ended for a fresh call "
                    "(without bubblewrap the main worker does not outlive one): use it before the fresh call"
                )
            raise ReferenceError(
                f"{proxy._sbx_label} refers to a student object from before the sandbox was reset "
                "or its worker restarted"
            )


class Proxy:
    """A student object (or module) living in the worker; every use is a round trip.

    `Proxy(...)` makes an instance of a subclass named after the student's type (`typed`), so that
    a message built from `type(value).__name__` names the student's class, as it does in-process,
    and not this one.
    """

    __slots__ = ("_sbx_box", "_sbx_target", "_sbx_generation", "_sbx_label", "_sbx_type")

    def __new__(cls, box: Owner, target: list[Any], generation: int | None, label: str, type_name: str) -> Proxy:
        return object.__new__(typed(type_name) if cls is Proxy else cls)

    def __init__(
        self, box: Owner, target: list[Any], generation: int | None, label: str, type_name: str,
    ) -> None:
        # object.__setattr__: our own __setattr__ forwards attribute writes to the worker.
        object.__setattr__(self, "_sbx_box", box)
        object.__setattr__(self, "_sbx_target", target)
        # None: a module, or a module's attribute by name (Tag.NAMED): valid across restarts.
        object.__setattr__(self, "_sbx_generation", generation)
        object.__setattr__(self, "_sbx_label", label)  # the expression that produced it, for messages
        object.__setattr__(self, "_sbx_type", type_name)

    def _sbx(self, op: str, *args: Any, label: str, **kwargs: Any) -> Any:
        return self._sbx_box._request(op, self, args, kwargs, label)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") and name not in REMOTE_DUNDERS:
            raise AttributeError(name)
        if (self._sbx_key(), name) in self._sbx_box.objects.methods:
            return Method(self, name)
        return self._sbx("getattr", name, label=f"{self._sbx_label}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._sbx("setattr", name, value, label=f"{self._sbx_label}.{name} = ...")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sbx("call", *args, label=f"{self._sbx_label}(...)", **kwargs)

    def __len__(self) -> int:
        length = self._sbx("len", label=f"len({self._sbx_label})")
        if type(length) is not int or length < 0:
            raise BadValue(f"len() of {self._sbx_label} gave {_kind(length)}, not a non-negative int")
        return length

    def __bool__(self) -> bool:
        return self._sbx("bool", label=f"bool({self._sbx_label})") is True

    def __contains__(self, item: Any) -> bool:
        return self._sbx("contains", item, label=f"... in {self._sbx_label}") is True

    def __getitem__(self, key: Any) -> Any:
        return self._sbx("getitem", key, label=f"{self._sbx_label}[...]")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sbx("setitem", key, value, label=f"{self._sbx_label}[...] = ...")

    def __assign_into__(self, attribute: str, index: Any, values: Any) -> None:
        """`getattr(obj, attribute)[index] = values` in the worker, in place (kvlab.paged's seam):
        `proxy.attribute` alone would be a copy, and writing into it would change nothing there."""
        self._sbx("assign_into", attribute, index, values, label=f"{self._sbx_label}.{attribute}[...] = ...")

    def __iter__(self) -> Iterator[Any]:
        iterator = self._sbx("iter", label=f"iter({self._sbx_label})")
        if not isinstance(iterator, Proxy):
            raise self._sbx_box._protocol_failure("iter() did not return an object reference", "iter()")
        # All the round trips of one iteration share one call's CPU time limit: an endless iterator
        # (numpy converting a student object to an array iterates it) must not hold a test until
        # its whole-test limit.
        box = self._sbx_box
        limit, spent = box.limits.call_timeout, 0.0
        while True:
            started = time.monotonic()
            item = iterator._sbx(NEXT, label=f"next(iter({self._sbx_label}))")
            used = box.last_call_cpu
            # The worker's CPU time (the wall clock when it is unknown), plus the round trip's own cost.
            spent += (time.monotonic() - started) if used is None else max(used, ROUND_TRIP_FLOOR)
            if item is STOP:
                return
            if spent > limit:
                raise WorkerTimeout(
                    f"iterating over {self._sbx_label} took more than {limit:g} s of CPU time in all (the "
                    "time limit of one call) and was stopped: does its iterator ever end?"
                )
            yield item

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        # np.asarray(proxy) converts in the worker, under one call's time limit, and gets the array
        # by value; without this numpy would walk the object's len() and items by round trips (an
        # object whose every item is itself costs exponentially many).
        array = self._sbx("array", label=f"numpy.asarray({self._sbx_label})")
        if not isinstance(array, np.ndarray):
            raise BadValue(f"{self._sbx_label} gave something that is not an array: numpy.asarray of it "
                           f"gave {_kind(array)}, not a numeric array")
        try:
            return array if dtype is None else array.astype(dtype)
        except (TypeError, ValueError) as exc:
            raise BadValue(f"{self._sbx_label} gave an array of dtype {array.dtype}, which does not convert "
                           f"to {dtype}: {exc}") from None

    def __str__(self) -> str:
        text = self._sbx("str", label=f"str({self._sbx_label})")
        return text if isinstance(text, str) else self.__repr__()

    def __repr__(self) -> str:
        # Never raises: pytest and debuggers call repr while reporting other failures.
        if self._sbx_target[0] == Tag.MODULE:
            return f"<student module {self._sbx_target[1]} (sandboxed)>"
        try:
            text = self._sbx("repr", label=f"repr({self._sbx_label})")
        except (StudentException, ReferenceError) as exc:
            return f"<sandboxed {self._sbx_type} from {self._sbx_label}: repr() failed: {exc}>"
        if not isinstance(text, str):
            return f"<sandboxed {self._sbx_type} from {self._sbx_label}>"
        return text[:TEXT_LIMIT]

    # Equality is identity of the worker object: a student __eq__ that always says True must not
    # make a proxy equal to anything on the trusted side.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proxy) and self._sbx_key() == other._sbx_key()

    def __hash__(self) -> int:
        return hash(self._sbx_key())

    def _sbx_key(self) -> tuple[int, tuple[Any, ...], int | None]:
        return id(self._sbx_box), tuple(self._sbx_target), self._sbx_generation


@lru_cache(maxsize=256)  # the worker names the types; a flood of names only costs the cache's misses
def typed(type_name: str) -> type[Proxy]:
    """The Proxy subclass for the student's type `type_name` ("module.Class", at most 200
    characters as decoded): its __name__ and __qualname__ the class's, its __module__ the module's."""
    module, _, name = type_name.rpartition(".")
    return type(name or type_name, (Proxy,), {"__slots__": (), "__qualname__": name or type_name,
                                               "__module__": module or "student"})


class Method:
    """`proxy.name` where the worker said, when it was last looked up, that it is a method of the
    object's class: calling it is one round trip ("callmethod": the worker looks the attribute up
    again and calls what it finds, exactly as getattr then call would).

    Anything but a call fails closed (BadValue in the test that did it): the worker's word that
    `name` is a method must never make a value the test expected compare equal, or unequal, to
    anything, convert, or iterate.
    """

    __slots__ = ("_proxy", "_name")

    def __init__(self, proxy: Proxy, name: str) -> None:
        self._proxy, self._name = proxy, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        proxy = self._proxy
        return proxy._sbx("callmethod", self._name, *args, label=f"{proxy._sbx_label}.{self._name}(...)", **kwargs)

    def __repr__(self) -> str:
        return f"<method {self._name} of {self._proxy._sbx_label}>"

    def _not_a_value(self, *args: Any, **kwargs: Any) -> Any:
        raise BadValue(f"{self._proxy._sbx_label}.{self._name} is a method of your class, where the test "
                       "expected a value")

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __bool__ = __len__ = __iter__ = __contains__ = \
        __getitem__ = __array__ = __index__ = __int__ = __float__ = _not_a_value
    __hash__ = object.__hash__


def _kind(value: object) -> str:
    """What a value from the worker is, in words: "a str", "an object that stays in your process (...)"."""
    if isinstance(value, Proxy):
        return f"an object that stays in your process (a {value._sbx_type}), not plain data"
    name = type(value).__name__
    return f"{'an' if name[:1] in 'aeiou' else 'a'} {name}"
