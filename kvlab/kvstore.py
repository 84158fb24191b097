"""External KV stores for module 6, part 3 (LMCache's idea: KV kept outside the engine, shared by engines).

- `MemoryStore(maxmemory_bytes=None)`: an in-process store with the subset of redis-py's client API a
  KV connector uses (`get`, `set`, `mget`, `exists`, `pipeline(transaction=False)`, plus `delete`,
  `dbsize`, `flushdb`, `ping` for tests and tools), bounded in bytes and evicting the least recently
  used keys first, as Redis does with `maxmemory` and `maxmemory-policy allkeys-lru`. The tests give
  students' connectors this store (no network in the sandbox; in the grader, through a
  `kvlab.testing.store_loan.StoreClient`); it counts `commands` and `round_trips`.
- `open_store(url)`: a client for a URL: `memory://` (a new MemoryStore), `redis://host:port` or
  `unix:///path` (a redis-py client; the `redis` package is imported only then).
- `model_fingerprint(cfg, dtype)`: the string that prefixes every key, so that KV of one model, dtype
  or KV layout is never loaded into another.

A real Redis server to point `open_store` at is `kvlab.redis_server`'s.

Byte accounting of MemoryStore: a key costs len(key) + len(value) bytes. Real Redis adds its own
per-key overhead (tens of bytes) and rounds allocations, so with the same bound it keeps slightly
fewer entries.
"""
from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Protocol

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


class RunsBatches(Protocol):
    """What a pipeline sends its queued commands to: a MemoryStore, or a client of one (the tests'
    `kvlab.testing.store_loan.StoreClient`)."""

    def _run(self, batch: list[tuple[str, tuple[Any, ...]]]) -> list[Any]:
        """Run `batch`'s commands in order as one round trip; their results, one per command."""


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

    def __init__(self, store: RunsBatches, transaction: bool = True) -> None:
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
