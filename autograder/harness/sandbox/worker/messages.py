"""The wire format's names, shared by both ends of the sandbox: the tag of each kind of value, and
the header of each message (`protocol.py` says how they are framed).

Standard library only, like the rest of this package: the worker imports its own copy.

A header travels as a JSON object whose keys are its fields, in the order the class lists them;
`header(message)` makes that object, leaving out the fields that are `ABSENT`, and
`read(cls, object)` reads one back (a key it lacks is the field's default, else None), so every use
reads by field name. Reading never validates: the trusted side checks each field of what the worker
sends where it uses it.
"""
from __future__ import annotations

import functools
from typing import Any, NamedTuple, TypeVar


class Tag:
    """The first item of a value's tree, one letter each (the rest of the tree follows the colon).

    A blob is an index into the message's blobs; `protocol.array_form` describes an array as
    [dtype, shape, order].
    """

    NONE = "N"  # ["N"]
    BOOL = "B"  # ["B", b]
    INT = "I"  # ["I", i]
    FLOAT = "F"  # ["F", x]
    STR = "S"  # ["S", s]
    BYTES = "Y"  # ["Y", blob]
    LIST = "L"  # ["L", [tree, ...]]
    TUPLE = "T"  # ["T", [tree, ...]]
    DICT = "D"  # ["D", [[str key, tree], ...]] (, number: see ECHO)
    ARRAY = "A"  # ["A", blob, dtype, shape, order] a numeric ndarray (, number: see ECHO)
    SCALAR = "G"  # ["G", blob, dtype, [], "C"] a numpy scalar, as its 0-d array
    # ["P", dtype.str, DTYPE_OBJECT or DTYPE_TYPE] a numeric numpy dtype (np.dtype("<f4")) or
    # scalar type (np.float32).
    DTYPE = "P"
    # ["C", "module:Class", [[field, tree], ...]] a configured wire type (, number for a frozen
    # one: see ECHO).
    WIRE_TYPE = "C"
    REFERENCE = "R"  # ["R", number, type name] an object of the worker's object table
    # ["X", module, qualname, [[module, qualname], ...MRO]] an exception class (worker to trusted only).
    EXCEPTION_CLASS = "X"
    MODULE = "M"  # ["M", module] a module by name (trusted to worker only)
    # ["Q", "module:attr.path"] a library object, or a module's function or class, by name
    # (trusted to worker only).
    NAMED = "Q"
    INT_LIST = "J"  # ["J", blob, "<i8", [n], "C"] a long list of ints as one int64 array (both ways)
    # ["W", "module:Class", LIST or TUPLE, [blob, dtype, shape, order], ...] a list or tuple of one
    # wire type as the columns of its configured codec (trusted to worker only).
    COLUMNS = "W"
    # ["E", number]: an array, dict or frozen wire-type value the trusted side sent with that
    # number, handed back unchanged (worker to trusted only).
    ECHO = "E"


# The last item of a DTYPE tree.
DTYPE_OBJECT = "dtype"
DTYPE_TYPE = "type"

# The operations of a request that are not in the worker's table of operations on an object.
RESET = "reset"  # drop the object table and the echoes (between tests)
NEXT = "next"  # next(target); the reply says "stop" at StopIteration
INIT = "init"  # the init message's op
RETURN = "return"  # a callback's result


class _Absent:
    """The value of a field a header leaves out."""

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()

Message = TypeVar("Message", bound=tuple)


def header(message: NamedTuple) -> dict[str, Any]:
    """The JSON object of a message: its fields in order, but those that are ABSENT."""
    return {name: value for name, value in zip(message._fields, message) if value is not ABSENT}


def read(cls: type[Message], received: dict[str, Any]) -> Message:
    """A message of type `cls` from its JSON object: a key it lacks is the field's default (None
    for a field without one); keys of no field (the blob table) are left out."""
    return cls._make(map(received.get, cls._fields, _defaults(cls)))  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=None)
def _defaults(cls: type) -> tuple[Any, ...]:
    """Each field's default, None for a field without one (read once a class: `read` runs at
    every request and reply)."""
    return tuple(cls._field_defaults.get(name) for name in cls._fields)  # type: ignore[attr-defined]


class Request(NamedTuple):
    """Trusted to worker: an operation (`op`, of the worker's table or RESET or NEXT) on `target`
    (a tree), with argument trees. `seq` is given as it is sent, after the rest."""

    op: str
    target: Any
    local: Any = ABSENT  # True: the course library's `remote` functions run in the worker
    args: Any = ()
    kwargs: Any = ()  # [[name, tree], ...]
    seq: Any = ABSENT


class Reply(NamedTuple):
    """Worker to trusted: the answer to request `seq`. ok: `value` (absent for a reset; `stop`
    for NEXT at the end; `method` or `named` for a getattr, see protocol.py); not ok: `error`, an
    ExceptionReport, or `internal` when even that failed."""

    seq: Any
    ok: Any
    stop: Any = ABSENT
    method: Any = ABSENT
    named: Any = ABSENT
    value: Any = ABSENT
    error: Any = ABSENT
    internal: Any = ABSENT


class ExceptionReport(NamedTuple):
    """Worker to trusted: what the student's code raised (a Reply's error)."""

    module: Any
    qualname: Any
    mro: Any  # [[module, qualname], ...]
    message: Any
    traceback: Any  # the student's and course library's frames only
    where: Any  # "file, line n, in name" of the last of them


class Init(NamedTuple):
    """Trusted to worker, the first message: where the student's files are, the limits to take,
    and the course's part of the configuration (`config.SandboxConfig.for_worker`)."""

    seq: int
    op: str
    home: str
    seed: str
    lib_dirs: list[str]
    site_packages: list[str]
    limits: dict[str, int]
    landlock: bool
    wire_types: list[str]
    codecs: list[Any]
    remote: list[str]


class Started(NamedTuple):
    """Worker to trusted, the reply to Init: the worker's pid, numpy's version, and the worker's own
    words about the seccomp filter (None: installed) and Landlock ([ABI, lines] or why not)."""

    seq: Any
    ok: Any
    pid: Any
    numpy: Any
    unfiltered: Any
    landlock: Any


class Callback(NamedTuple):
    """Worker to trusted, while it answers request `seq`: run the `remote` library function
    "module:name" on these argument trees."""

    seq: Any
    callback: Any
    args: Any
    kwargs: Any  # [[name, tree], ...]


class Return(NamedTuple):
    """Trusted to worker: a Callback's `value` (ok), or the builtin exception it raised (`error`,
    a Failure)."""

    op: str
    ok: bool
    value: Any = ABSENT
    error: Any = ABSENT


class Failure(NamedTuple):
    """A Return's error: the builtin exception to raise in the worker, by name, and its message."""

    type: Any
    message: Any = ""
