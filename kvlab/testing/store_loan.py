"""A MemoryStore used from another process: `lend(store)` in the grader's process, a
`StoreClient(handle)` beside the student's connector, `serve` between them.

For module 6's connector tests. The grader keeps the store (and so its counters) in its own process
and gives the student's connector a `StoreClient`, made in the student's process, whose every
request runs on the lent store through `serve` (a call the sandbox sends back to the grader): what
the store counts is what reached it. Students' own code never needs this: outside the tests a
connector gets a `kvlab.kvstore.open_store` client.
"""
from __future__ import annotations

import itertools
import weakref
from typing import Any

from kvlab.kvstore import MemoryStore

# Lending a store to another process. The grader's store lives in the grader's process, where a test
# reads its counters; the student's connector, in the sandbox's worker, gets a StoreClient whose
# requests reach the store only through `serve`, which the sandbox runs in the grader's process
# (autograder/harness/course.py lists it as `remote`). Nothing the worker does to its own objects can
# then change what the store holds or counts, except by sending it commands.

_LENT: weakref.WeakValueDictionary[int, MemoryStore] = weakref.WeakValueDictionary()
_HANDLES = itertools.count(1)
# The commands a client may send: how many encoded arguments each takes (None: any number).
ARITY: dict[str, int | None] = {"get": 1, "set": 2, "mget": None, "exists": None, "delete": None,
                                "dbsize": 0, "flushdb": 0, "ping": 0}


def lend(store: MemoryStore) -> int:
    """A handle (an int) naming `store` in this process, for `StoreClient(handle)` and `serve`.

    The handle stays valid while the store lives (the table holds it weakly); lending a store
    twice gives two handles to the same store.
    """
    if not isinstance(store, MemoryStore):
        raise TypeError(f"only a MemoryStore can be lent; got {type(store).__name__}")
    handle = next(_HANDLES)
    _LENT[handle] = store
    return handle


def serve(handle: int, batch: list[tuple[str, tuple[bytes, ...]]]) -> list[Any]:
    """Run `batch`, a list of (command name, encoded arguments), on the store lent under `handle`,
    as one request (one round trip, each command counted); the list of their results.

    Every command is checked before any runs (a name of ARITY, bytes arguments, its number of them):
    a malformed batch raises TypeError, and nothing of it runs or is counted. ValueError for a
    handle that names no living lent store. In the grader this runs in the grader's process
    whenever a StoreClient in the worker sends a request.
    """
    store = _LENT.get(handle) if type(handle) is int else None
    if store is None:
        raise ValueError(f"no store is lent under handle {handle!r}")
    if type(batch) not in (list, tuple):
        raise TypeError(f"a batch is a list of (command, arguments); got {type(batch).__name__}")
    checked: list[tuple[str, tuple[Any, ...]]] = []
    for command in batch:
        name, args = command if type(command) in (list, tuple) and len(command) == 2 else (None, None)
        if type(name) is not str or name not in ARITY or type(args) not in (list, tuple):
            raise TypeError(f"not a store command: {str(command)[:80]}")
        if not all(type(arg) is bytes for arg in args) or ARITY[name] not in (None, len(args)):
            raise TypeError(f"{name} takes {ARITY[name] if ARITY[name] is not None else 'any number of'} "
                            f"bytes arguments; got {len(args)} arguments of types "
                            f"{sorted({type(arg).__name__ for arg in args})}")
        checked.append((name, tuple(args)))
    return store._run(checked)


class StoreClient:
    """A client of the MemoryStore lent under `handle` (see `lend`): MemoryStore's `get`, `set`, `mget`,
    `exists`, `delete`, `dbsize`, `flushdb`, `ping` and `pipeline`, with the same arguments and
    results; each plain command, and each `execute()` of a non-empty pipeline, is one request to
    the store through `serve` (one round trip, as the store counts it). It holds no data and no
    counters of its own: read those on the store.
    """

    def __init__(self, handle: int) -> None:
        self.handle = handle

    get = MemoryStore.get
    mget = MemoryStore.mget
    set = MemoryStore.set
    exists = MemoryStore.exists
    delete = MemoryStore.delete
    dbsize = MemoryStore.dbsize
    flushdb = MemoryStore.flushdb
    ping = MemoryStore.ping
    pipeline = MemoryStore.pipeline

    def _run(self, batch: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Send encoded commands as one request to the lent store; their results."""
        return list(serve(self.handle, batch))

    def __repr__(self) -> str:
        return f"<StoreClient of the MemoryStore lent under handle {self.handle}>"
