"""External KV stores for module 6, part 3 (LMCache's idea: KV kept outside the engine, shared by engines).

- `MemoryStore(maxmemory_bytes=None)`: an in-process store with the subset of redis-py's client API a
  KV connector uses (`get`, `set`, `mget`, `exists`, `pipeline(transaction=False)`, plus `delete`,
  `dbsize`, `flushdb`, `ping` for tests and tools), bounded in bytes and evicting the least recently
  used keys first, as Redis does with `maxmemory` and `maxmemory-policy allkeys-lru`. The tests give
  students' connectors this store (no network in the sandbox; in the grader, through a StoreClient);
  it counts `commands` and `round_trips`.
- `lend(store)` and `StoreClient(handle)`: a MemoryStore used from another process. The grader keeps
  the store (and so its counters) in its own process and gives the student's connector a
  `StoreClient`, made in the student's process, whose every request runs on the lent store through
  `serve` (a call the sandbox sends back to the grader): what the store counts is what reached it.
- `redis_server(...)`: a context manager that runs a Redis server for the duration of a `with` and
  yields its URL: the system `redis-server` where it is installed, else `EmbeddedRedisServer`, a small
  server in this process speaking the same wire protocol (RESP) over a `MemoryStore`.
- `open_store(url)`: a client for a URL: `memory://` (a new MemoryStore), `redis://host:port` or
  `unix:///path` (a redis-py client; the `redis` package is imported only then).
- `model_fingerprint(cfg, dtype)`: the string that prefixes every key, so that KV of one model, dtype
  or KV layout is never loaded into another.

`python -m kvlab.kvstore [--maxmemory-mb 64] [--backend auto|system|embedded]` runs `redis_server` until
Ctrl-C and prints its URL, for servers started by hand with `--kv-store URL`.

Byte accounting of MemoryStore and the embedded server: a key costs len(key) + len(value) bytes. Real
Redis adds its own per-key overhead (tens of bytes) and rounds allocations, so with the same bound it
keeps slightly fewer entries.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import re
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from kvlab.model import Config

# What redis-py accepts as a key or value, encoded the way its Encoder does.
Encodable = bytes | bytearray | memoryview | str | int | float


def encode(value: Any) -> bytes:
    """bytes for a key or value as redis-py sends it: bytes as they are, str as UTF-8, numbers as text."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(value).encode()
    raise TypeError(f"a key or value must be bytes, str, int or float (as for redis-py); got {type(value).__name__}")


class MemoryStore:
    """A bounded in-process key-value store with redis-py's `get`/`set`/`mget`/`exists`/`pipeline` (and a few more).

    Keys and values are stored as bytes (str, int and float are encoded as redis-py encodes them);
    `get` returns bytes or None. `maxmemory_bytes` (None: unbounded) bounds the sum of
    len(key) + len(value) over the stored keys: after each `set`, the least recently used keys are
    evicted until the total fits again; a value larger than the whole bound is dropped at once
    (counted as evicted) without evicting anything else. `get`, `mget` and `set` count as a use;
    `exists` does not (as in Redis). Thread-safe.
    `pipeline(transaction=True)`: redis-py's pipeline; its commands are queued and `execute()` runs
    them in one call, returning the list of their results (see MemoryPipeline).
    Counters: `used_memory` (bytes held now), `evicted_keys` (keys evicted so far), `commands`
    (commands so far per name, e.g. {"get": 3, "set": 2}, a pipeline's commands included: what a
    client would send to Redis), `round_trips` (requests a client would wait for: one per plain
    command, one per `execute()` of a non-empty pipeline, whatever it holds).
    """

    def __init__(self, maxmemory_bytes: int | None = None) -> None:
        if maxmemory_bytes is not None and (isinstance(maxmemory_bytes, bool) or not isinstance(maxmemory_bytes, int)
                                            or maxmemory_bytes < 1):
            raise ValueError(f"maxmemory_bytes must be a positive int or None; got {maxmemory_bytes!r}")
        self.maxmemory_bytes = maxmemory_bytes
        self.used_memory = 0
        self.evicted_keys = 0
        self.commands: dict[str, int] = {}
        self.round_trips = 0
        self._data: OrderedDict[bytes, bytes] = OrderedDict()  # least recently used first
        self._lock = threading.Lock()

    def get(self, key: Encodable) -> bytes | None:
        """The value of `key`, or None when it is not stored."""
        return self._run([("get", (encode(key),))])[0]

    def mget(self, keys: Any, *args: Encodable) -> list[bytes | None]:
        """The values of several keys in one call (None for each missing one), as redis-py's `mget`.

        Accepts `mget([k1, k2])` and `mget(k1, k2)`.
        """
        return self._run([("mget", _mget_names(keys, args))])[0]

    def set(self, key: Encodable, value: Encodable) -> bool:
        """Store `value` under `key` (replacing any value), then evict LRU keys beyond the bound. True."""
        return self._run([("set", (encode(key), encode(value)))])[0]

    def exists(self, *keys: Encodable) -> int:
        """How many of `keys` are stored (a key named twice counts twice), as Redis' EXISTS."""
        return self._run([("exists", tuple(encode(key) for key in keys))])[0]

    def delete(self, *keys: Encodable) -> int:
        """Remove `keys`; the number that were stored."""
        return self._run([("delete", tuple(encode(key) for key in keys))])[0]

    def dbsize(self) -> int:
        """Number of stored keys."""
        return self._run([("dbsize", ())])[0]

    def flushdb(self) -> bool:
        """Remove every key. True."""
        return self._run([("flushdb", ())])[0]

    def ping(self) -> bool:
        """True (the store is always there)."""
        return self._run([("ping", ())])[0]

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> MemoryPipeline:
        """A new MemoryPipeline on this store (redis-py's `Redis.pipeline`; `transaction` and
        `shard_hint` are accepted and change nothing: a pipeline here always runs as one unit)."""
        return MemoryPipeline(self, transaction)

    def _run(self, batch: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Run encoded commands as one request (one round trip), under the lock, and count them."""
        with self._lock:
            self.round_trips += 1
            for name, _ in batch:
                self.commands[name] = self.commands.get(name, 0) + 1
            return [getattr(self, f"_do_{name}")(*args) for name, args in batch]

    # The commands themselves, on encoded arguments, called with the lock held.

    def _do_get(self, key: bytes) -> bytes | None:
        return self._read(key)

    def _do_mget(self, *keys: bytes) -> list[bytes | None]:
        return [self._read(key) for key in keys]

    def _do_set(self, key: bytes, value: bytes) -> bool:
        self._remove(key)
        if self.maxmemory_bytes is not None and len(key) + len(value) > self.maxmemory_bytes:
            self.evicted_keys += 1  # could never fit: dropped at once, nothing else evicted for it
            return True
        self._data[key] = value
        self.used_memory += len(key) + len(value)
        while self.maxmemory_bytes is not None and self.used_memory > self.maxmemory_bytes:
            self._remove(next(iter(self._data)))
            self.evicted_keys += 1
        return True

    def _do_exists(self, *keys: bytes) -> int:
        return sum(key in self._data for key in keys)

    def _do_delete(self, *keys: bytes) -> int:
        return sum(self._remove(key) for key in keys)

    def _do_dbsize(self) -> int:
        return len(self._data)

    def _do_flushdb(self) -> bool:
        self._data.clear()
        self.used_memory = 0
        return True

    def _do_ping(self) -> bool:
        return True

    def _read(self, key: bytes) -> bytes | None:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def _remove(self, key: bytes) -> bool:
        value = self._data.pop(key, None)
        if value is None:
            return False
        self.used_memory -= len(key) + len(value)
        return True


def _mget_names(keys: Any, args: tuple[Encodable, ...]) -> tuple[bytes, ...]:
    """The encoded keys of mget([k1, k2]) or mget(k1, k2), as redis-py accepts both."""
    names = [keys] if isinstance(keys, (bytes, bytearray, memoryview, str, int, float)) else list(keys)
    return tuple(encode(name) for name in [*names, *args])


class MemoryPipeline:
    """redis-py's `Pipeline` on a MemoryStore: commands are queued, then sent together by `execute`.

    `get`, `set`, `mget`, `exists`, `delete`, `dbsize`, `flushdb` and `ping` take the store's
    arguments, queue the command and return the pipeline (so calls chain: `pipe.get(a).get(b)`); a
    key or value redis-py could not encode raises TypeError at once, and nothing is sent.
    `execute()` runs the queued commands in order as one request (one round trip, counted once in the
    store's `round_trips`; each command counted in its `commands`), empties the queue and returns
    their results as a list, one per command, what the store's method returns. An empty queue sends
    nothing and returns []. `reset()` drops the queue; `with store.pipeline() as pipe:` resets on exit;
    len(pipe) is the number of commands queued.
    """

    def __init__(self, store: MemoryStore | StoreClient, transaction: bool = True) -> None:
        self.store = store
        self.transaction = transaction
        self._queued: list[tuple[str, tuple[Any, ...]]] = []

    def get(self, key: Encodable) -> MemoryPipeline:
        return self._queue("get", (encode(key),))

    def mget(self, keys: Any, *args: Encodable) -> MemoryPipeline:
        return self._queue("mget", _mget_names(keys, args))

    def set(self, key: Encodable, value: Encodable) -> MemoryPipeline:
        return self._queue("set", (encode(key), encode(value)))

    def exists(self, *keys: Encodable) -> MemoryPipeline:
        return self._queue("exists", tuple(encode(key) for key in keys))

    def delete(self, *keys: Encodable) -> MemoryPipeline:
        return self._queue("delete", tuple(encode(key) for key in keys))

    def dbsize(self) -> MemoryPipeline:
        return self._queue("dbsize", ())

    def flushdb(self) -> MemoryPipeline:
        return self._queue("flushdb", ())

    def ping(self) -> MemoryPipeline:
        return self._queue("ping", ())

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        """The results of the queued commands, in order, from one request to the store; the queue is emptied."""
        batch, self._queued = self._queued, []
        return self.store._run(batch) if batch else []

    def reset(self) -> None:
        """Drop the queued commands."""
        self._queued = []

    def __len__(self) -> int:
        return len(self._queued)

    def __bool__(self) -> bool:
        return True  # as redis-py's: a pipeline is true even with nothing queued

    def __enter__(self) -> MemoryPipeline:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.reset()

    def _queue(self, name: str, args: tuple[Any, ...]) -> MemoryPipeline:
        self._queued.append((name, args))
        return self


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


def model_fingerprint(cfg: Config, dtype: Any, seed: int = 0) -> str:
    """A printable ASCII string naming the model, its weights, the KV dtype and the KV layout.

    Two engines may share KV exactly when their fingerprints are equal: same configuration (every
    field, the name included), same weights (kvlab.model.init_params seed), same KV dtype. The layout
    part spells [L, 2, T, Hkv, d], the shape of one chunk's KV. Example:
    "tiny-3f9a1c2b7d4e/s0/float64/L2x2xTx2x8".
    """
    fields = repr(sorted(vars(cfg).items())).encode()
    digest = hashlib.sha256(fields).hexdigest()[:12]
    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in cfg.name)
    layout = f"L{cfg.n_layers}x2xTx{cfg.n_kv_heads}x{cfg.d_head}"
    return f"{name}-{digest}/s{seed}/{np.dtype(dtype).name}/{layout}"


def open_store(url: str) -> Any:
    """A store client for `url`: "memory://" (a new, unbounded MemoryStore), or "redis://host:port[/db]"
    and "unix:///path/to/socket" (redis-py's `Redis.from_url`; needs the `redis` package)."""
    if url == "memory://":
        return MemoryStore()
    if url.startswith(("redis://", "unix://")):
        import redis  # only the repository's tools and the engine's --kv-store need the client

        return redis.Redis.from_url(url)
    raise ValueError(f"unknown store URL {url!r}: expected memory://, redis://HOST:PORT or unix:///PATH")


# The embedded server: RESP2 and RESP3 (redis-py 8 opens every connection with HELLO 3), the commands
# a KV connector and the tests send. Not a general Redis: no expiry, no other data types.

class _Protocol:
    """RESP encoding of replies for one connection, RESP2 until the client's HELLO 3."""

    def __init__(self) -> None:
        self.version = 2

    def null(self) -> bytes:
        return b"_\r\n" if self.version == 3 else b"$-1\r\n"

    def reply(self, value: Any) -> bytes:
        if value is None:
            return self.null()
        if isinstance(value, bool):
            return b":1\r\n" if value else b":0\r\n"
        if isinstance(value, int):
            return b":%d\r\n" % value
        if isinstance(value, bytes):
            return b"$%d\r\n%s\r\n" % (len(value), value)
        if isinstance(value, list):
            return b"*%d\r\n" % len(value) + b"".join(self.reply(item) for item in value)
        if isinstance(value, dict):
            if self.version == 3:
                head = b"%%%d\r\n" % len(value)
            else:
                head = b"*%d\r\n" % (2 * len(value))
            return head + b"".join(self.reply(k) + self.reply(v) for k, v in value.items())
        raise TypeError(f"no RESP encoding for {type(value).__name__}")

    def pieces(self, value: Any) -> list[bytes]:
        """reply(value) as pieces to send in order: each bulk string of LARGE_VALUE bytes or more alone,
        as it is (not copied into one buffer: a chunk is megabytes), the rest joined."""
        pieces: list[bytes] = []
        small: list[bytes] = []

        def walk(item: Any) -> None:
            if isinstance(item, bytes) and len(item) >= LARGE_VALUE:
                small.append(b"$%d\r\n" % len(item))
                pieces.extend((b"".join(small), item))
                small[:] = [b"\r\n"]
            elif isinstance(item, list):
                small.append(b"*%d\r\n" % len(item))
                for element in item:
                    walk(element)
            else:
                small.append(self.reply(item))

        walk(value)
        pieces.append(b"".join(small))
        return pieces


# A bulk string at least this long is sent as it is, not copied into a reply buffer.
LARGE_VALUE = 1 << 16


def _simple(text: str) -> bytes:
    return f"+{text}\r\n".encode()


def _error(text: str) -> bytes:
    return f"-{text}\r\n".encode()


class _Handler(socketserver.StreamRequestHandler):
    """One client connection: read commands (RESP arrays of bulk strings), answer each in turn.

    A pipeline (redis-py sends its commands back to back, then reads the replies) is served as any
    sequence of commands. Nagle's algorithm is off: with it, the second of two small replies in a row
    waits for the client's delayed ACK (about 40 ms).
    """

    server: EmbeddedRedisServer
    disable_nagle_algorithm = True

    def handle(self) -> None:
        protocol = _Protocol()
        while True:
            try:
                command = self._read_command()
            except (ConnectionError, ValueError):
                return
            if command is None:
                return
            # Large values go out as they are (no copy into one reply buffer): pieces of a reply.
            for piece in self.server.execute_pieces(command, protocol):
                self.wfile.write(piece)
            self.wfile.flush()

    def _read_command(self) -> list[bytes] | None:
        line = self.rfile.readline()
        if not line:
            return None
        if not line.startswith(b"*"):
            return line.split()  # an inline command, as redis-cli and telnet send
        count = int(line[1:])
        parts = []
        for _ in range(count):
            header = self.rfile.readline()
            if not header.startswith(b"$"):
                raise ValueError("expected a bulk string")
            size = int(header[1:])
            data = self.rfile.read(size + 2)
            if len(data) != size + 2:
                raise ConnectionError("the client closed the connection mid-command")
            parts.append(data[:size])
        return parts


class EmbeddedRedisServer(socketserver.ThreadingTCPServer):
    """A Redis stand-in on a loopback TCP port, serving a MemoryStore (LRU-bounded like allkeys-lru).

    Commands: PING, ECHO, HELLO, CLIENT (accepted), SELECT 0, GET, SET key value, MGET, EXISTS, DEL,
    DBSIZE, FLUSHDB, FLUSHALL, INFO (used_memory, maxmemory, evicted_keys), QUIT; pipelined (commands
    sent back to back, as redis-py's pipeline does) or not. `serve_forever` in a thread; `shutdown()`
    then `server_close()` to stop.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, maxmemory_bytes: int | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.store = MemoryStore(maxmemory_bytes)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"redis://{host}:{port}"

    def execute_pieces(self, command: list[bytes], protocol: _Protocol) -> list[bytes]:
        """The RESP reply to one command as pieces to send in order (_Protocol.pieces for GET and MGET,
        whose values may be large; one piece otherwise)."""
        name = command[0].upper() if command else b""
        if name == b"GET" and len(command) == 2:
            return protocol.pieces(self.store.get(command[1]))
        if name == b"MGET" and len(command) > 1:
            return protocol.pieces(self.store.mget(command[1:]))
        return [self.execute(command, protocol)]

    def execute(self, command: list[bytes], protocol: _Protocol) -> bytes:
        """The RESP reply to one command."""
        if not command:
            return _error("ERR empty command")
        name, args = command[0].upper().decode(errors="replace"), command[1:]
        store = self.store
        if name == "PING":
            return protocol.reply(args[0]) if args else _simple("PONG")
        if name == "ECHO" and len(args) == 1:
            return protocol.reply(args[0])
        if name == "HELLO":
            if args and args[0] not in (b"2", b"3"):
                return _error("NOPROTO unsupported protocol version")
            if args:
                protocol.version = int(args[0])
            return protocol.reply({b"server": b"redis", b"version": b"7.0.0", b"proto": protocol.version,
                                   b"mode": b"standalone", b"role": b"master", b"modules": []})
        if name in ("CLIENT", "QUIT") or (name == "SELECT" and args == [b"0"]):
            return _simple("OK")
        if name == "GET" and len(args) == 1:
            return protocol.reply(store.get(args[0]))
        if name == "SET" and len(args) == 2:
            store.set(args[0], args[1])
            return _simple("OK")
        if name == "MGET" and args:
            return protocol.reply(store.mget(args))
        if name == "EXISTS" and args:
            return protocol.reply(store.exists(*args))
        if name == "DEL" and args:
            return protocol.reply(store.delete(*args))
        if name == "DBSIZE" and not args:
            return protocol.reply(store.dbsize())
        if name in ("FLUSHDB", "FLUSHALL"):
            store.flushdb()
            return _simple("OK")
        if name == "INFO":
            text = (f"# Memory\r\nused_memory:{store.used_memory}\r\nmaxmemory:{store.maxmemory_bytes or 0}\r\n"
                    f"maxmemory_policy:allkeys-lru\r\n# Stats\r\nevicted_keys:{store.evicted_keys}\r\n")
            return protocol.reply(text.encode())
        return _error(f"ERR unknown command or wrong number of arguments for '{name.lower()}' (kvlab's embedded server)")


def _redis_pid(address: str | tuple[str, int], timeout: float = 0.5) -> int | None:
    """The process id the Redis server at `address` (a Unix socket path or (host, port)) reports in
    INFO server; None when nothing answers there (yet)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            reply = b""
            while len(reply) < 1 << 16:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                reply += chunk
                found = re.search(rb"\r\nprocess_id:(\d+)\r\n", reply)
                if found:
                    return int(found.group(1))
    except OSError:
        pass
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Tries of a new port when the one found free was taken before redis-server bound it.
PORT_ATTEMPTS = 3


@contextlib.contextmanager
def _system_redis(maxmemory_bytes: int, unix_socket: bool, start_timeout: float) -> Iterator[str]:
    """The system redis-server in a temporary directory, on loopback or a Unix socket; removed after.

    A TCP port is found free (bind 0, then close) before redis-server binds it, so another process
    can take it in between: the server then exits, or another Redis answers there. Ready means the
    Redis at the address reports this process's id; a port taken meanwhile is replaced by another.
    """
    executable = shutil.which("redis-server")
    if executable is None:
        raise FileNotFoundError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
    with tempfile.TemporaryDirectory(prefix="kvlab-redis-") as directory:
        log = Path(directory) / "redis.log"
        for attempt in range(PORT_ATTEMPTS):
            if unix_socket:
                path = str(Path(directory) / "redis.sock")
                where: list[str] = ["--port", "0", "--unixsocket", path, "--unixsocketperm", "700"]
                address: str | tuple[str, int] = path
                url = f"unix://{path}"
            else:
                port = _free_port()
                where = ["--port", str(port), "--bind", "127.0.0.1"]
                address, url = ("127.0.0.1", port), f"redis://127.0.0.1:{port}"
            command = [executable, *where, "--save", "", "--appendonly", "no", "--dir", directory,
                       "--maxmemory", str(maxmemory_bytes), "--maxmemory-policy", "allkeys-lru",
                       "--daemonize", "no", "--protected-mode", "yes", "--logfile", str(log)]
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + start_timeout
                while (pid := _redis_pid(address)) != process.pid:
                    taken = pid is not None or (process.poll() is not None and "already in use" in _tail(log))
                    if taken and attempt + 1 < PORT_ATTEMPTS:
                        break
                    if taken or process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"redis-server did not answer at {url} (exit code {process.poll()}):\n"
                                           f"{_tail(log)}")
                    time.sleep(0.02)
                else:
                    yield url
                    return
            finally:
                _stop(process)


def _tail(log: Path) -> str:
    """The end of redis-server's log ("" before it writes one)."""
    return log.read_text(errors="replace")[-2000:] if log.is_file() else ""


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


@contextlib.contextmanager
def _embedded_redis(maxmemory_bytes: int) -> Iterator[str]:
    server = EmbeddedRedisServer(maxmemory_bytes)
    thread = threading.Thread(target=server.serve_forever, name="kvlab-embedded-redis", daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def redis_server(maxmemory_bytes: int = 64 << 20, backend: str = "auto", unix_socket: bool = False,
                 start_timeout: float = 10.0) -> Iterator[str]:
    """Run a Redis server for the `with` block and yield its URL; stop it and remove its files after.

    backend: "system" (the installed `redis-server`: FileNotFoundError when absent), "embedded"
    (`EmbeddedRedisServer` in this process) or "auto" (system when installed, else embedded).
    The system server listens on 127.0.0.1 at a free port (URL "redis://127.0.0.1:PORT") or, with
    `unix_socket`, on a Unix socket in a temporary directory ("unix:///tmp/.../redis.sock"); it keeps
    nothing on disk (--save "" --appendonly no) and is bounded by --maxmemory `maxmemory_bytes` with
    --maxmemory-policy allkeys-lru. The embedded server always uses TCP on loopback.
    """
    if backend not in ("auto", "system", "embedded"):
        raise ValueError(f"backend must be 'auto', 'system' or 'embedded'; got {backend!r}")
    if backend == "system" or (backend == "auto" and shutil.which("redis-server")):
        with _system_redis(maxmemory_bytes, unix_socket, start_timeout) as url:
            yield url
    else:
        with _embedded_redis(maxmemory_bytes) as url:
            yield url


def main(argv: list[str] | None = None) -> None:
    """Run a store until interrupted (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m kvlab.kvstore", description="a Redis for --kv-store, until Ctrl-C")
    parser.add_argument("--maxmemory-mb", type=float, default=64, help="maxmemory in MiB, LRU beyond (default 64)")
    parser.add_argument("--backend", choices=["auto", "system", "embedded"], default="auto",
                        help="the system redis-server, kvlab's embedded server, or auto (the first where installed)")
    args = parser.parse_args(argv)
    with redis_server(int(args.maxmemory_mb * 2**20), backend=args.backend) as url:
        print(f"KV store at {url} (maxmemory {args.maxmemory_mb:g} MiB, allkeys-lru); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
