"""`Proxy`: a student object (or module) living in the worker, as the trusted side holds it."""
from __future__ import annotations

import time
from functools import lru_cache
from typing import Any, Iterator, Protocol

import numpy as np

from .errors import BadValue, ProtocolError, StudentException, WorkerTimeout
from .limits import Limits
from .wireformat import TEXT_LIMIT

# Dunder attributes worth a round trip; other dunder probes (numpy's __array_interface__,
# inspect's __wrapped__, ...) fail locally, as they would on an object without them.
REMOTE_DUNDERS = {"__name__", "__qualname__", "__module__", "__doc__", "__dict__"}
STOP = object()  # what a "next" request returns when the iterator is exhausted
# What one round trip of an iteration counts at least: an endless iterator whose items cost the
# worker nothing must still use up the limit (10,000 items a second of the limit).
ROUND_TRIP_FLOOR = 1e-4


class Owner(Protocol):
    """What a proxy needs of its sandbox (`sandbox.Sandbox`)."""

    limits: Limits
    last_call_cpu: float | None
    methods: set[tuple[Any, str]]  # (proxy key, name): a method of the object's class, per the worker

    def _request(self, op: str, target: Any, args: Any, kwargs: dict[str, Any], label: str) -> Any:
        """One round trip about `target`."""

    def _protocol_failure(self, detail: str, label: str) -> ProtocolError:
        """Stop the worker and describe what it sent."""


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
        # None: a module, or a module's attribute by name (["Q", ...]): valid across restarts.
        object.__setattr__(self, "_sbx_generation", generation)
        object.__setattr__(self, "_sbx_label", label)  # the expression that produced it, for messages
        object.__setattr__(self, "_sbx_type", type_name)

    def _sbx(self, op: str, *args: Any, label: str, **kwargs: Any) -> Any:
        return self._sbx_box._request(op, self, args, kwargs, label)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") and name not in REMOTE_DUNDERS:
            raise AttributeError(name)
        if (self._sbx_key(), name) in self._sbx_box.methods:
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
            item = iterator._sbx("next", label=f"next(iter({self._sbx_label}))")
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
        if self._sbx_target[0] == "M":
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
