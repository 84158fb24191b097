"""What a course tells the sandbox: which types cross by value, how lists of them travel, and
which library functions run in the trusted process. The sandbox itself names no course.

A course builds one `SandboxConfig` (see autograder/harness/course.py) and passes it to
`Sandbox(config=...)`. The worker learns its part in the init message: the names of the wire types
and the column layouts of the codecs, never code.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

# "package.module:attribute": how every type and function is named across the sandbox.
NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
QUALNAME = f"{NAME}:{NAME}"
# Column dtypes a codec may use: fixed-size numbers, so a column is one array's bytes.
COLUMN_DTYPES = frozenset({"<f8", "<f4", "<i8", "<i4", "<u8", "<u4", "|b1"})


def check_qualname(name: str) -> str:
    """name, or ValueError when it is not "package.module:attribute"."""
    if not (isinstance(name, str) and re.fullmatch(QUALNAME, name)):
        raise ValueError(f'expected "package.module:name", got {name!r}')
    return name


@dataclass(frozen=True)
class ColumnCodec:
    """A list or tuple of one wire type sent (trusted to worker) as numeric columns, one array
    per column, instead of a tagged tree node per field per item.

    `scalars`: (field, dtype) of one number per item. `ragged`: (field, dtype) of a tuple of numbers
    per item, sent as its lengths and all its values back to back. Every init field of the type
    must be listed in exactly one of the two.
    """

    type: str
    scalars: tuple[tuple[str, str], ...]
    ragged: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        check_qualname(self.type)
        names = [name for name, _ in (*self.scalars, *self.ragged)]
        if len(set(names)) != len(names):
            raise ValueError(f"codec of {self.type}: a field is listed twice: {names}")
        for name, dtype in (*self.scalars, *self.ragged):
            if not re.fullmatch(r"[A-Za-z_]\w*", name) or dtype not in COLUMN_DTYPES:
                raise ValueError(f"codec of {self.type}: bad column {name!r} of dtype {dtype!r}")

    def to_wire(self) -> dict[str, Any]:
        """What the worker is told (plain JSON)."""
        return {"type": self.type, "scalars": [list(c) for c in self.scalars],
                "ragged": [list(c) for c in self.ragged]}


def _frozen(mapping: Mapping[str, Callable[..., Any]] | None) -> Mapping[str, Callable[..., Any]]:
    return MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class SandboxConfig:
    """A course's choices for the sandbox.

    `wire_types`: dataclasses ("module:Class") that cross by value in both directions, their fields
    checked against their annotations when they come back. `codecs`: column layouts for long lists
    of one of them. `remote`: library functions ("module:function" -> the trusted process's
    callable) that run in the trusted process whenever code in the worker calls them; the worker's
    copy is replaced by a stand-in before any student code runs. They must not write into their
    arguments: an array the worker hands back by number reaches them as the trusted process's own
    read-only copy, not a new one (the weights of every forward of a decode). `trusted_packages`:
    top-level packages (the course library) whose functions `Sandbox.call(name, ...)` runs in the
    trusted process, its own copy, on proxies of the student's objects. `trusted_calls`: callables that
    `Sandbox.call` runs here for some names instead (a bounded variant, say). `worker_calls`: names
    of those packages that `Sandbox.call` runs in the worker nonetheless, for library objects that
    must live beside the student's (a store the student's code writes into); nothing a verdict
    needs may come from them. Any other name runs in the worker.
    """

    wire_types: tuple[str, ...] = ()
    codecs: tuple[ColumnCodec, ...] = ()
    remote: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    trusted_calls: Mapping[str, Callable[..., Any]] = field(default_factory=dict)
    trusted_packages: tuple[str, ...] = ()
    worker_calls: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in (*self.wire_types, *self.remote, *self.trusted_calls, *self.worker_calls):
            check_qualname(name)
        for codec in self.codecs:
            if codec.type not in self.wire_types:
                raise ValueError(f"a codec for {codec.type}, which is not one of the wire types")
        if len({codec.type for codec in self.codecs}) != len(self.codecs):
            raise ValueError("two codecs for one type")
        # Read-only mappings: a config is shared by every sandbox of a grading run.
        object.__setattr__(self, "remote", _frozen(self.remote))
        object.__setattr__(self, "trusted_calls", _frozen(self.trusted_calls))
        object.__setattr__(self, "wire_types", tuple(self.wire_types))
        object.__setattr__(self, "codecs", tuple(self.codecs))
        object.__setattr__(self, "worker_calls", frozenset(self.worker_calls))
        object.__setattr__(self, "trusted_packages", tuple(self.trusted_packages))
        for package in self.trusted_packages:
            if not re.fullmatch(r"[A-Za-z_]\w*", package):
                raise ValueError(f"not a top-level package name: {package!r}")

    def for_worker(self) -> dict[str, Any]:
        """The worker's part, for its init message: names and layouts only."""
        return {"wire_types": list(self.wire_types), "codecs": [c.to_wire() for c in self.codecs],
                "remote": sorted(self.remote)}
