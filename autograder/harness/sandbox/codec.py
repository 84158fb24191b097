"""The trusted side's half of the wire format (described in `worker/protocol.py`).

Encoding refuses anything that is not plain data, a configured wire type or a proxy of the same
sandbox. Decoding treats the bytes as hostile: every tag, type, index and size is checked, arrays
are raw bytes of a numeric dtype looked up in a fixed table (never a pickle), and any failure is a
`ProtocolError`.

One module on purpose (over 400 lines): encoding and decoding are the two directions of one format and
share its wire types and array handling, so a change to the trusted side of the wire is made in one
place.
"""
from __future__ import annotations

import dataclasses
import functools
import importlib
import itertools
import json
import operator
import types
import typing
from typing import Any, Callable

import numpy as np

from .config import ColumnCodec, SandboxConfig
from .errors import ProtocolError, student_exception_class
from .kept import ITEM_BYTES, Holding, Sent
from .worker.protocol import (
    HEADER,
    MAX_DECODE_DEPTH,
    MAX_JSON_BYTES,
    MAX_MESSAGE_BYTES,
    NUMERIC_KINDS,
    array_form,
    int_column,
    load_array,
    numeric_dtypes,
)
from .worker.messages import DTYPE_OBJECT, DTYPE_TYPE, Tag

__all__ = ["Decoder", "Reader", "WireTypes", "encode"]

class WireTypes:
    """A config's wire types as this (trusted) process imports them, and their column codecs.

    Resolved when the Sandbox is made, before any worker runs: a worker that can write the library
    folder (a reduced isolation) must not get its edits imported into the grader later. A type
    that does not import here cannot cross at all.
    """

    def __init__(self, config: SandboxConfig) -> None:
        self.classes: dict[str, type] = {}
        for name in config.wire_types:
            module, cls_name = name.split(":")
            try:
                cls = getattr(importlib.import_module(module), cls_name)
            except (ImportError, AttributeError):
                continue
            if not dataclasses.is_dataclass(cls):
                raise TypeError(f"wire type {name} is not a dataclass")
            self.classes[name] = cls
        self.names = {cls: name for name, cls in self.classes.items()}
        self.codecs: dict[type, ColumnCodec] = {
            self.classes[c.type]: c for c in config.codecs if c.type in self.classes
        }
        for cls, codec in self.codecs.items():
            init_fields = {f.name for f in dataclasses.fields(cls) if f.init}
            listed = {name for name, _ in (*codec.scalars, *codec.ragged)}
            if listed != init_fields:
                raise ValueError(f"the codec of {codec.type} lists {sorted(listed)}, its fields are "
                                 f"{sorted(init_fields)}")

    def described(self) -> str:
        """The wire types' class names, for messages ("Config, Request" for a course that has those)."""
        return ", ".join(name.split(":")[1] for name in self.classes)


class Reader:
    """Incremental parser for one message from the worker, enforcing the size caps up front.

    The buffer grows with what actually arrives, so a worker announcing a huge message costs the
    grader nothing until it sends the bytes (and never more than MAX_MESSAGE_BYTES).
    """

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.total = HEADER.size  # grows to the whole message once the fixed header is in
        self.json_length = -1

    def wanted(self) -> int:
        """Bytes still missing (0 when the message is complete); never read more than this."""
        return self.total - len(self.buffer)

    def feed(self, chunk: bytes) -> None:
        """Append what was read; check the announced sizes as soon as they are known."""
        self.buffer += chunk
        if self.json_length < 0 and len(self.buffer) == HEADER.size:
            json_length, blob_length = HEADER.unpack(self.buffer)
            if json_length > MAX_JSON_BYTES:
                raise ProtocolError(
                    f"a result of {json_length / (1 << 20):.1f} MB of plain data (lists, numbers, text), more "
                    f"than the {MAX_JSON_BYTES >> 20} MB the grader accepts: return large data as numpy arrays"
                )
            if json_length + blob_length > MAX_MESSAGE_BYTES:
                raise ProtocolError(
                    f"the worker announced a {json_length + blob_length}-byte message "
                    f"(limit {MAX_MESSAGE_BYTES} bytes)"
                )
            self.json_length = json_length
            self.total += json_length + blob_length

    def message(self) -> tuple[dict[str, Any], list[memoryview]]:
        """The parsed header (a dict) and the blobs it lists."""
        view = memoryview(self.buffer)[HEADER.size:]
        try:
            # UTF-8 only (what json.dumps writes), decoded straight from the buffer.
            header = json.loads(str(view[: self.json_length], "utf-8"))
        except (ValueError, RecursionError) as exc:  # includes UnicodeDecodeError, huge ints
            raise ProtocolError(f"the worker sent a malformed header: {exc}") from None
        if type(header) is not dict:
            raise ProtocolError("the worker sent a header that is not an object")
        lengths = header.get("blobs", [])
        if type(lengths) is not list or not all(type(n) is int and n >= 0 for n in lengths):
            raise ProtocolError("the worker sent a malformed blob table")
        if sum(lengths) != len(view) - self.json_length:
            raise ProtocolError("the worker's blob table does not match the message size")
        blobs, position = [], self.json_length
        for length in lengths:
            blobs.append(view[position:position + length])
            position += length
        return header, blobs


def _array(array: np.ndarray, what: str, blobs: list[Any]) -> list[Any]:
    """[blob index, dtype, shape, order] of an array whose bytes are appended to `blobs`
    (`protocol.array_form`), or TypeError for a dtype that must not cross."""
    if array.dtype.str not in numeric_dtypes(np):  # a structured or object dtype has a "|V"/"|O" name
        raise TypeError(
            f"cannot send {what} of dtype {array.dtype} to student code: only numeric and bool arrays cross"
        )
    form, blob = array_form(np, array)
    blobs.append(blob)
    return [len(blobs) - 1, *form]


def _sent_array(value: np.ndarray, blobs: list[Any], sent: Sent | None, small_too: bool = False) -> list[Any]:
    """An array's tree, with the number `sent` gives it if it keeps it (see kept.Sent.offer)."""
    array = np.asarray(value)  # an ndarray subclass crosses as a plain ndarray
    tree = [Tag.ARRAY, *_array(array, "an array", blobs)]
    number = sent.offer(array, small_too) if sent is not None else None
    return tree if number is None else [*tree, number]


def _numeric_dtype(value: np.dtype | type) -> np.dtype:
    """The dtype of a numeric dtype or concrete numpy scalar type, or TypeError."""
    if isinstance(value, type) and value not in set(np.sctypeDict.values()):
        raise TypeError(f"cannot send the abstract numpy type {value!r} to student code")
    dtype = np.dtype(value)
    if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None:
        raise TypeError(f"cannot send dtype {dtype} to student code: only numeric and bool dtypes cross")
    return dtype


def encode(
    value: Any, blobs: list[Any], reference: Callable[[Any], list[Any] | None], wire_types: WireTypes,
    depth: int = 0, sent: Sent | None = None,
) -> list[Any]:
    """A trusted value for the worker. `reference(value)` gives the tree for a proxy, else None;
    arrays `sent` numbers may come back as that number."""
    if depth > MAX_DECODE_DEPTH:
        raise TypeError("cannot send data nested this deeply (or a cyclic structure) to student code")
    tree = reference(value)
    if tree is not None:
        return tree
    if value is None:
        return [Tag.NONE]
    # numpy first: np.float64 is a float subclass and must keep its dtype.
    if isinstance(value, np.ndarray):
        return _sent_array(value, blobs, sent)
    if isinstance(value, np.generic):
        return [Tag.SCALAR, *_array(np.asarray(value), "a numpy scalar", blobs)]
    if isinstance(value, bool):
        return [Tag.BOOL, value]
    if isinstance(value, int):
        return [Tag.INT, int(value)]
    if isinstance(value, float):
        return [Tag.FLOAT, float(value)]
    if isinstance(value, str):
        return [Tag.STR, str.__str__(value)]
    if isinstance(value, bytes):
        blobs.append(bytes(value))
        return [Tag.BYTES, len(blobs) - 1]
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return [Tag.DTYPE, _numeric_dtype(value).str, DTYPE_OBJECT if isinstance(value, np.dtype) else DTYPE_TYPE]
    # Item types checked as one set, at C speed (a generator's step per item cost more than the arrays).
    codec = wire_types.codecs.get(type(value[0])) if type(value) in (list, tuple) and value else None
    if codec is not None and len(set(map(type, value))) == 1:
        return _encode_columns(value, codec, blobs)
    column = int_column(np, value)
    if column is not None:
        return [Tag.INT_LIST, *_array(column, "a list of ints", blobs)]
    if isinstance(value, (list, tuple)):
        items = [encode(item, blobs, reference, wire_types, depth + 1, sent) for item in value]
        return [Tag.LIST if isinstance(value, list) else Tag.TUPLE, items]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise TypeError("cannot send a dict with non-str keys to student code")
        if sent is not None and value and all(isinstance(v, np.ndarray) for v in value.values()):
            # Weights: numbered as a whole, so every forward of a decode can name them in one number.
            pairs = [[str.__str__(k), _sent_array(v, blobs, sent, small_too=True)] for k, v in value.items()]
            if all(len(tree) == 6 for _, tree in pairs):
                return [Tag.DICT, pairs, sent.offer_value({key: tree[5] for key, tree in pairs})]
            return [Tag.DICT, pairs]
        return [Tag.DICT, [[str.__str__(k), encode(v, blobs, reference, wire_types, depth + 1, sent)]
                      for k, v in value.items()]]
    name = wire_types.names.get(type(value))
    if name is not None:
        fields = [f.name for f in dataclasses.fields(value) if f.init]
        tree = [Tag.WIRE_TYPE, name, [[f, encode(getattr(value, f), blobs, reference, wire_types, depth + 1, sent)]
                            for f in fields]]
        if sent is not None and type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
            tree.append(sent.offer_value(value))  # the Config of every forward of a decode
        return tree
    if callable(value):
        raise TypeError(
            f"cannot pass the trusted-side callable {value!r} to student code: only plain data and "
            "objects that came from the student's process cross the sandbox"
        )
    raise TypeError(
        f"cannot pass a {type(value).__qualname__} to student code: only None, bool, int, float, str, "
        "bytes, list, tuple, dict, numeric ndarrays, numpy scalars and dtypes, "
        f"{wire_types.described() or 'no other types'} and objects that came from the student's process "
        "cross the sandbox"
    )


def _encode_columns(items: list[Any] | tuple[Any, ...], codec: ColumnCodec, blobs: list[Any]) -> list[Any]:
    """A list or tuple of one wire type as the columns of its codec (see worker/messages.py, Tag.COLUMNS).

    A trace of 23,608 requests holds ~400,000 block ids: one tagged tree node per int would cost
    seconds per call, a few arrays cost milliseconds.
    """
    columns = [np.array(list(map(operator.attrgetter(name), items)), dtype=dtype) for name, dtype in codec.scalars]
    for name, dtype in codec.ragged:
        values = list(map(operator.attrgetter(name), items))
        columns.append(np.fromiter(map(len, values), dtype=np.int64, count=len(values)))
        columns.append(np.fromiter(itertools.chain.from_iterable(values), dtype=dtype))
    return [Tag.COLUMNS, codec.type, Tag.LIST if type(items) is list else Tag.TUPLE,
            *(_array(column, f"a column of {codec.type}", blobs) for column in columns)]


def _conforms(value: Any, hint: Any) -> bool:
    """Whether a decoded field value matches a dataclass annotation (the kinds plain-data dataclasses use)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if hint is str:
        return type(value) is str
    if origin is tuple:
        if type(value) is not tuple:
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_conforms(item, args[0]) for item in value)
        return len(args) == len(value) and all(map(_conforms, value, args))
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in args)
    return False


@functools.lru_cache(maxsize=None)
def _fields_of(cls: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A wire type's annotations and init fields, read once: get_type_hints evaluates every string
    annotation anew, and a forward callback brings a Config on every decode step."""
    return typing.get_type_hints(cls), frozenset(f.name for f in dataclasses.fields(cls) if f.init)


def _rebuild(name: str, fields: dict[str, Any], wire_types: WireTypes) -> Any:
    """A wire type's value from the worker, its field types checked against the annotations."""
    cls = wire_types.classes.get(name)
    cls_name = name.split(":")[1]
    if cls is None:
        raise ProtocolError(f"the worker sent a {cls_name}, which the grader cannot import")
    hints, expected = _fields_of(cls)
    if set(fields) != expected:
        raise ProtocolError(
            f"the worker sent a {cls_name} with fields {sorted(fields)}, expected {sorted(expected)}"
        )
    for field, value in fields.items():
        if not _conforms(value, hints[field]):
            raise ProtocolError(f"the worker sent a {cls_name} whose {field} is a {type(value).__name__}")
    try:
        return cls(**fields)
    except Exception as exc:
        raise ProtocolError(f"the worker sent an invalid {cls_name}: {exc}") from None


# Names the worker sends: a proxy's type name (the worker cuts "module.Class" to this), exception
# class names, dict keys, wire-type fields and keyword names.
TYPE_NAME_LIMIT = 200
NAME_LIMIT = 300


def checked_name(text: Any, what: str, limit: int = NAME_LIMIT, shortest: int = 1) -> str:
    """`text`, a name from the worker, if it is printable text (no NUL, no control character) of
    `shortest` to `limit` characters; else ProtocolError, the student's failure (a NUL in a class name would make
    the proxy's type creation raise inside the grader)."""
    if type(text) is not str or not shortest <= len(text) <= limit or not text.isprintable():
        shown = repr(text[:60]) if type(text) is str else type(text).__name__
        raise ProtocolError(f"the student's process sent {what} that is not printable text of at most {limit} "
                            f"characters: {shown}{' (cut)' if type(text) is str and len(text) > 60 else ''}")
    return text


def _read_array(blob: memoryview | bytes, form: Any) -> np.ndarray:
    """A numeric ndarray from its bytes and [dtype, shape, order] (`load_array`), or ProtocolError."""
    try:
        return load_array(np, blob, form)
    except Exception as exc:  # numpy's reshape raises ValueError or OverflowError for absurd shapes
        raise ProtocolError(f"the worker sent a malformed array: {exc}") from None


# The plain scalars' tags and the one type each must carry.
_SCALAR_TYPES = {Tag.BOOL: bool, Tag.INT: int, Tag.FLOAT: float, Tag.STR: str}


class Decoder:
    """Turns trees from the worker into trusted values; `make_proxy(number, type_name)` builds references."""

    def __init__(self, blobs: list[memoryview], make_proxy: Callable[[int, str], Any],
                 wire_types: WireTypes, holding: Holding | None = None, sent: Sent | None = None,
                 shared: bool = False) -> None:
        # shared: arrays handed back by number are the kept read-only arrays themselves, not new
        # copies (for the config's `remote` functions, which never write into their arguments).
        self.shared = shared
        self.blobs = blobs
        self.make_proxy = make_proxy
        self.wire_types = wire_types
        self.holding = holding or Holding()
        self.sent = sent or Sent()

    def array(self, index: Any, form: Any) -> np.ndarray:
        """The array in blob `index` described by `form`, counted as held (TooBig before it is copied out)."""
        blob = self.blob(index)
        self.holding.take_array(len(blob))
        return self.holding.track(_read_array(blob, form), len(blob))

    def echo(self, number: Any) -> Any:
        """What this process sent as `number`: a frozen wire-type value as it was, a dict anew, and
        an array as a new copy counted as held (or, `shared`, the kept read-only array)."""
        kept = self.sent.value(number)
        if type(kept) is dict:
            return {key: self.echo(item) for key, item in kept.items()}
        if not isinstance(kept, np.ndarray):
            return kept
        if self.shared:
            return kept
        self.holding.take_array(kept.nbytes)
        return self.holding.track(kept.copy(order="K"), kept.nbytes)

    def blob(self, index: Any) -> memoryview:
        if type(index) is not int or not 0 <= index < len(self.blobs):
            raise ProtocolError(f"the worker referred to a missing blob {index!r}")
        return self.blobs[index]

    def decode(self, tree: Any, depth: int = 0) -> Any:
        """The value `tree` stands for."""
        if depth > MAX_DECODE_DEPTH:
            raise ProtocolError("the worker sent data nested too deeply")
        if type(tree) is not list or not tree or type(tree[0]) is not str:
            raise ProtocolError(f"the worker sent a malformed value {str(tree)[:80]!r}")
        tag, rest = tree[0], tree[1:]
        text = len(rest[0]) if tag == Tag.STR and len(rest) == 1 and type(rest[0]) is str else 0
        self.holding.take_items(1 + text // ITEM_BYTES)
        if tag == Tag.NONE and not rest:
            return None
        if tag in _SCALAR_TYPES and len(rest) == 1 and type(rest[0]) is _SCALAR_TYPES[tag]:
            return rest[0]
        if tag == Tag.BYTES and len(rest) == 1:
            blob = self.blob(rest[0])
            self.holding.take_items(len(blob) // ITEM_BYTES)
            return bytes(blob)
        if tag in (Tag.LIST, Tag.TUPLE) and len(rest) == 1 and type(rest[0]) is list:
            items = [self.decode(item, depth + 1) for item in rest[0]]
            return items if tag == Tag.LIST else tuple(items)
        if tag == Tag.DICT and len(rest) == 1 and type(rest[0]) is list:
            return dict(self.pair(item, depth) for item in rest[0])
        if tag == Tag.ARRAY and len(rest) == 4:
            return self.array(rest[0], rest[1:])
        if tag == Tag.ECHO and len(rest) == 1:
            return self.echo(rest[0])
        if tag == Tag.INT_LIST and len(rest) == 4 and rest[1] in ("<i8", ">i8") and type(rest[2]) is list \
                and len(rest[2]) == 1:
            blob = self.blob(rest[0])
            self.holding.take_items(len(blob) // 8)  # before the list is made: one item per int
            return _read_array(blob, rest[1:]).tolist()
        if tag == Tag.SCALAR and len(rest) == 4:
            array = _read_array(self.blob(rest[0]), rest[1:])
            if array.ndim != 0:
                raise ProtocolError("the worker sent a numpy scalar that is not 0-d")
            return array[()]
        if (tag == Tag.WIRE_TYPE and len(rest) == 2 and type(rest[0]) is str and rest[0] in self.wire_types.classes
                and type(rest[1]) is list):
            return _rebuild(rest[0], dict(self.pair(item, depth) for item in rest[1]), self.wire_types)
        if tag == Tag.REFERENCE and len(rest) == 2 and type(rest[0]) is int and rest[0] > 0 and type(rest[1]) is str:
            return self.make_proxy(rest[0], checked_name(rest[1], "a type name", TYPE_NAME_LIMIT))
        if tag == Tag.DTYPE and len(rest) == 2 and rest[1] in (DTYPE_OBJECT, DTYPE_TYPE):
            try:
                if type(rest[0]) is not str or len(rest[0]) > 8:
                    raise ValueError
                dtype = np.dtype(rest[0])
            except Exception:  # numpy's dtype parser raises SyntaxError for some strings
                raise ProtocolError(f"the worker sent an unknown dtype {rest[0]!r}") from None
            if dtype.kind not in NUMERIC_KINDS or dtype.fields is not None:
                raise ProtocolError(f"the worker sent dtype {dtype}")
            return dtype if rest[1] == DTYPE_OBJECT else dtype.type
        if tag == Tag.EXCEPTION_CLASS and len(rest) == 3:
            module, qualname, mro = rest
            return student_exception_class(*self.exception_names(module, qualname, mro))
        raise ProtocolError(f"the worker sent a malformed value {str(tree)[:80]!r}")

    def pair(self, item: Any, depth: int) -> tuple[str, Any]:
        """A [str key, value] pair of a dict, a dataclass or a call's keyword arguments."""
        if type(item) is not list or len(item) != 2 or type(item[0]) is not str:
            raise ProtocolError("the worker sent a malformed dict entry")
        return checked_name(item[0], "a key (or field or keyword name)", shortest=0), self.decode(item[1], depth + 1)

    @staticmethod
    def exception_names(module: Any, qualname: Any, mro: Any) -> tuple[str, str, list[tuple[str, str]]]:
        """Validated (module, qualname, MRO pairs) of an exception class."""
        if type(mro) is not list or len(mro) > 100:
            raise ProtocolError("the worker sent a malformed exception MRO")
        module, qualname = checked_name(module, "an exception's module"), checked_name(qualname, "an exception's name")
        pairs = []
        for entry in mro:
            if type(entry) is not list or len(entry) != 2:
                raise ProtocolError("the worker sent a malformed exception MRO")
            pairs.append((checked_name(entry[0], "an exception base's module"),
                          checked_name(entry[1], "an exception base's name")))
        return module, qualname, pairs

