"""The wire format, shared by both ends of the sandbox: framing, size caps and the array helpers.

The trusted side imports it as `autograder.harness.sandbox.worker.protocol`; the worker, which runs
as `python -I -S -B -c "...import worker.main..."` from a private folder without the grader's
packages, imports the copy of its package the sandbox places there (see `process.launch`). So
this module uses the standard library only, and takes numpy as an argument (the worker imports
numpy only after its limits are in force).

A message (both directions): HEADER = (JSON length, total blob length), the UTF-8 JSON header, then
the blobs back to back; `header["blobs"]` lists the blob lengths. The headers are named in
`messages.py` (Request, Reply, Init, Started, Callback, Return), and so are the values' tags
(`messages.Tag`): a value is a JSON list whose first item is its tag.
An array crosses as its raw bytes (`array_form`, `load_array`): the blob holds its elements in C
order (order "C") or, for an array that is only Fortran-contiguous, in Fortran order ("F"); dtype
is a `dtype.str` of `numeric_dtypes` (bool, int, uint, float, complex, either byte order), shape a
list of at most MAX_NDIM ints in [0, 2**63), and the blob's length must be exactly the elements'.
No pickle, and an array's dtype is looked up in that table, never parsed.
An array the trusted side sends may carry a number, [Tag.ARRAY, blob, dtype, shape, order, number];
so may a dict whose values are all numbered arrays, [Tag.DICT, [[key, value], ...], number], and a
configured wire type that is a frozen dataclass, [Tag.WIRE_TYPE, "module:Class", [[field, value],
...], number]. While the test lasts, the worker may send that same array, dict or value back,
unchanged (a dict with the same keys in the same order, holding the same unchanged arrays), as
[Tag.ECHO, number] (worker to trusted only).

A request names an operation of the worker's table (getattr, call, callmethod, len, ...); a reply to
getattr may say "method": true when the attribute is a method of the object's class that nothing
of the object's own shadows, and the trusted side then sends the next `obj.name(...)` as one
callmethod request (the worker looks the name up again at the call). A reply to getattr on a
module may say "named": true when the attribute is a function or a class: the trusted side then
names it as [Tag.NAMED, "module:name"] from then on, which the worker looks up at each use.

The first message on the request pipe is the init message (`messages.Init`); the worker answers it
with `messages.Started`.
"""
from __future__ import annotations

import functools
import json
import math
import os
import struct
from typing import Any

HEADER = struct.Struct("<IQ")
# Parsed JSON costs the grader up to ~25 times its size in Python objects (a list of empty lists);
# the largest honest reply (module 6) is 2.5 MB.
MAX_JSON_BYTES = 4 << 20
# The grader holds a whole reply plus the arrays it becomes (2 x 64 MB), beside the arrays earlier
# replies of the same test still hold (kept.Holding) and the worker, all in Gradescope's 768 MB.
MAX_MESSAGE_BYTES = 64 << 20
# Messages up to this size are joined into one buffer.
JOIN_BYTES = 64 << 10
# Arrays sent to the worker that it may hand back by number (kept.Sent): at least this large (any
# size in a dict of arrays, which is numbered as a whole), and at most this much of them kept per
# test, on each side.
ECHO_MIN_BYTES = 2 << 10
ECHO_KEPT_BYTES = 64 << 20
# Parts handed to one writev (Linux's IOV_MAX is 1024).
WRITEV_PARTS = 1024
# Dimensions of an array that crosses (numpy's own limit since 2.0); each at most MAX_DIM, which
# keeps a hostile shape's product a small int (a zero-size array may still claim huge dimensions).
MAX_NDIM = 64
MAX_DIM = (1 << 63) - 1
# Containers nested deeper than this cross as references (worker to trusted); this also turns cycles
# into references. The trusted side refuses deeper trees than MAX_DECODE_DEPTH.
MAX_DEPTH = 64
MAX_DECODE_DEPTH = 100
# Array dtype kinds that cross by value: bool, signed, unsigned, float, complex.
NUMERIC_KINDS = "biufc"
# JSON carries ints as decimal text, which Python refuses to parse beyond 4300 digits.
MAX_INT_BITS = 10000
# Longest message / traceback text sent back for one exception.
TEXT_LIMIT = 64 << 10
# Calls into the trusted process (remote functions) nested inside each other at most this deep
# (forward called from a cache's update called by forward ...).
MAX_CALLBACK_DEPTH = 8
# Lists of ints at least this long (block ids for a cache) travel as one int64 array (Tag.INT_LIST), not as a
# tree node per item, both ways: 400,000 ids take milliseconds instead of seconds, and module 6's
# cost guard (300 allocates returning about 110 block ids each) 0.23 s of the grader's CPU, not 0.48.
INT_LIST_MIN = 64


# A message header's JSON, by one encoder made once (json.dumps makes a new one at every call); no
# circular check: the trees are depth-bounded.
dumps = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def read_exact(fd: int, n: int) -> bytearray | None:
    """Read exactly n bytes from a blocking fd; None at end of file."""
    buffer = bytearray(n)
    view, filled = memoryview(buffer), 0
    while filled < n:
        count = os.readv(fd, [view[filled:]])
        if not count:
            return None
        filled += count
    return buffer


def receive(fd: int) -> tuple[dict[str, Any], list[memoryview]] | None:
    """One message from the trusted side, for the worker (trusted, so not validated); None at end
    of file. The trusted side reads the worker's messages with `codec.Reader`, which validates."""
    head = read_exact(fd, HEADER.size)
    if head is None:
        return None
    json_length, blob_length = HEADER.unpack(head)
    body = read_exact(fd, json_length + blob_length)
    if body is None:
        return None
    view = memoryview(body)
    header = json.loads(str(view[:json_length], "utf-8"))
    blobs, position = [], json_length
    for length in header.get("blobs", []):
        blobs.append(view[position:position + length])
        position += length
    return header, blobs


def frame(header: dict[str, Any], blobs: list[Any]) -> list[Any]:
    """The buffers of one message: fixed header and JSON, then the blobs. A small message is joined
    into one buffer (one write, one wake-up of the reader); a large one is left unjoined so its
    arrays are not copied once more."""
    header["blobs"] = [len(blob) for blob in blobs]
    text = dumps(header).encode()
    parts = [HEADER.pack(len(text), sum(header["blobs"])) + text, *blobs]
    return [b"".join(parts)] if len(text) + sum(header["blobs"]) <= JOIN_BYTES else parts


def send(fd: int, header: dict[str, Any], blobs: list[Any]) -> None:
    """Write one message to a blocking fd, all its parts in each system call (see `written`)."""
    pending = [memoryview(part).cast("B") for part in frame(header, blobs)]
    while pending:
        pending = written(pending, os.writev(fd, pending[:WRITEV_PARTS]))


def written(pending: list[memoryview], count: int) -> list[memoryview]:
    """What is left of the parts `pending` after a write of `count` bytes from their start.

    One writev per pipe-full, not one write per part: each write wakes the reader, and on a busy
    core every wake-up is a switch between the two processes (a message of 20 arrays was 20)."""
    while pending and count >= len(pending[0]):
        count -= len(pending[0])
        pending = pending[1:]
    if count:
        pending = [pending[0][count:], *pending[1:]]
    return pending


@functools.lru_cache(maxsize=None)
def numeric_dtypes(np: Any) -> dict[str, Any]:
    """dtype.str -> dtype for every dtype an array may cross with: the numeric ones (NUMERIC_KINDS)
    in either byte order. Looked up, never parsed: a hostile dtype string reaches no parser."""
    table = {}
    for char in np.typecodes["AllInteger"] + np.typecodes["AllFloat"] + "?":
        for order in "<>":
            name = np.dtype(char).newbyteorder(order).str
            table[name] = np.dtype(name)  # as the name parses: "<i8" is int64, whichever char made it
    return table


def array_form(np: Any, array: Any) -> tuple[list[Any], Any]:
    """([dtype, shape, order], blob) of a numeric ndarray (see the module docstring). The blob is a
    view of the array's memory when it is contiguous (a copy otherwise), so it must be written
    before the array can change; no copy and no header to format (np.save took ~15 us a small
    array, this ~1 us)."""
    if array.flags.c_contiguous:
        order, flat = "C", array.reshape(-1)
    elif array.flags.f_contiguous:
        order, flat = "F", array.T.reshape(-1)
    else:
        order, flat = "C", np.ascontiguousarray(array).reshape(-1)
    return [array.dtype.str, list(array.shape), order], memoryview(flat.view(np.uint8))


def int_column(np: Any, value: Any) -> Any:
    """A list of at least INT_LIST_MIN plain ints (no bools) as one int64 array, the Tag.INT_LIST form;
    None for anything else, ints beyond 64 bits included (they travel one by one)."""
    if type(value) is not list or len(value) < INT_LIST_MIN or set(map(type, value)) != {int}:
        return None
    try:
        return np.fromiter(value, dtype=np.int64, count=len(value))
    except OverflowError:
        return None


def load_array(np: Any, blob: Any, form: Any) -> Any:
    """A new (writable, aligned) ndarray from a blob and its [dtype, shape, order], copied once;
    ValueError when they are malformed or do not fit each other."""
    if type(form) is not list or len(form) != 3:
        raise ValueError("malformed array description")
    name, shape, order = form
    dtype = numeric_dtypes(np).get(name) if type(name) is str else None
    if dtype is None:
        raise ValueError(f"an array of dtype {str(name)[:20]!r}")
    if type(shape) is not list or len(shape) > MAX_NDIM or not all(
            type(n) is int and 0 <= n <= MAX_DIM for n in shape):
        raise ValueError(f"malformed shape {str(shape)[:80]}")
    if order != "C" and order != "F":
        raise ValueError(f"malformed order {str(order)[:20]!r}")
    count = math.prod(shape)
    if count * dtype.itemsize != len(blob):
        raise ValueError(f"{len(blob)} bytes do not hold a {dtype} array of shape {tuple(shape)}")
    flat = np.frombuffer(blob, dtype=dtype, count=count)
    return flat.reshape(shape, order=order).copy(order="K")
