"""What the public and hidden tests of kv_connector.py share: the KV and the store they use, and the
checks of keys, round trips, misses, lookups, counters and edge cases.

Every `*_problem` function returns None when the student's code keeps the contract, else the message
the student sees: what differed, where, and the likely cause. Each test passes its own inputs (its
fingerprint, prompts and expected values). The byte layout of a serialized chunk and of a key digest
is the student's choice, so those are checked by their properties, never against fixed values. The
store is a `kvlab.kvstore.MemoryStore` in the test's process, where the tests change it and read its
`commands` and `round_trips`; the connector gets a `kvlab.testing.store_loan.StoreClient` of it, made
beside the student's code (`student.call`), whose every request runs on that store.
"""
from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kvlab.kvstore import MemoryStore
from kvlab.testing.store_loan import lend

# A small KV layout: L=3 layers, Hkv=2 heads of d=4. Three layers, not two: a layer count equal to the
# K/V axis (2) would hide a swap of the two axes.
LAYERS, KV_HEADS, HEAD_DIM = 3, 2, 4

# What each connector counter counts, for the messages.
COUNTS = {
    "hits": "chunks returned by successful loads (chunks, not tokens; nothing for a failed load)",
    "misses": "full chunks outside the run lookup found (chunks the engine must compute)",
    "bytes_loaded": "len() of every value load received from the store",
    "bytes_stored": "len() of every value store sent to the store (the serialized bytes, header included)",
    "chunks_stored": "values store sent (chunks already in the store are not sent again)",
}


def outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, the exception): lets a test turn a raise into a message it writes."""
    try:
        return call(), None
    except Exception as error:  # a student's exception of any type is a finding, not a crash
        return None, error


def describe_error(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}"
    if "not callable" in str(error):
        text += (" (likely cause: an instance attribute named like a method, e.g. self.store = store in "
                 "__init__, hides the method store: keep the store under another name)")
    return text


def kv_array(n_tokens: int, dtype: Any = np.float64, seed: int = 0) -> np.ndarray:
    """KV of n_tokens tokens, [L, 2, n_tokens, Hkv, d], from a fixed seed."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((LAYERS, 2, n_tokens, KV_HEADS, HEAD_DIM)).astype(dtype)


def tokens_of(n: int, seed: int, high: int = 50_000) -> list[int]:
    """n token ids below `high`, from a fixed seed."""
    return [int(t) for t in np.random.default_rng(seed).integers(0, high, size=n)]


def lent_store(student: Any, store: MemoryStore | None = None) -> tuple[MemoryStore, Any]:
    """(store, client): `store` (a new MemoryStore when None), kept in the test's process, whose `commands`
    and `round_trips` the tests read, and a kvlab.testing.store_loan.StoreClient of it for the student's
    connector (the same commands as a MemoryStore, each request sent to that store). Made beside the
    student's code (`student.call`): run locally, a plain object; in the grader, in the student's process,
    while the store stays in the grader's."""
    store = MemoryStore() if store is None else store
    return store, student.call("kvlab.testing.store_loan:StoreClient", lend(store))


def keys_problem(call: str, keys: Any, n_tokens: int, chunk_size: int, fingerprint: str) -> str | None:
    """A chunk_keys result: n_tokens // chunk_size strings fingerprint + ":" + 64 lowercase hex."""
    if not isinstance(keys, list):
        return f"{call} returned {type(keys).__name__}; expected a list of str keys"
    want = n_tokens // chunk_size
    if len(keys) != want:
        cause = ("the trailing partial chunk got a key: only full chunks are keyed (and stored)"
                 if len(keys) == -(-n_tokens // chunk_size) else "one key per full chunk of chunk_size tokens")
        return (f"{call} returned {len(keys)} keys for {n_tokens} tokens; expected {n_tokens} // {chunk_size} = "
                f"{want}. Likely cause: {cause}")
    pattern = re.compile(re.escape(fingerprint) + ":[0-9a-f]{64}")
    for index, key in enumerate(keys):
        if not isinstance(key, str) or not pattern.fullmatch(key):
            return (f"{call}: key {index} is {key!r}; expected the fingerprint, ':' and a lowercase hex SHA-256 "
                    "digest of 64 characters. Likely cause: the key must start with the model fingerprint, so KV "
                    "of one model is never loaded into another")
    return None


def array_mismatch(what: str, got: Any, expected: np.ndarray) -> str | None:
    """None if `got` is `expected` exactly (dtype, shape, every bit of every value); else what differs."""
    if not isinstance(got, np.ndarray):
        return f"{what} returned {type(got).__name__}; expected an ndarray {expected.dtype} {expected.shape}"
    if got.dtype != expected.dtype:
        return (f"{what} has dtype {got.dtype}; expected {expected.dtype}. Likely cause: the dtype is not kept: "
                "write it into the header and rebuild the array in that dtype, so float32 stays float32")
    if got.shape != expected.shape:
        return f"{what} has shape {got.shape}; expected {expected.shape}"
    if not np.array_equal(got, expected):
        where = tuple(int(i) for i in np.argwhere(got != expected)[0])
        return (f"{what}: values differ from the array stored, first at index {where} (a round trip must be exact, "
                "bit for bit). Likely cause: the payload is written in another element order than it is read "
                "(use C order both ways), or a chunk holds the wrong slice of the tokens' KV")
    return None


def read_problem(what: str, read: Callable[[], Any], expected: np.ndarray, cause: str) -> str | None:
    """None if `read()` (a deserialize_chunk call named `what`) returns `expected` exactly; else what it
    did, with `cause` when it returned None."""
    got, error = outcome(read)
    if error is not None:
        return f"{what} raised {describe_error(error)}"
    if got is None:
        return f"{what} returned None; expected the chunk. Likely cause: {cause}"
    return array_mismatch(what, got, expected)


ELSEWHERE_CAUSE = ("the bytes do not carry the chunk (its header and every payload byte): another engine reads them "
                   "through the store, so nothing kept in this process's memory may be needed to read them")


def elsewhere_read_problem(student: Any, data: bytes, fingerprint: str, expected: np.ndarray) -> str | None:
    """None if deserialize_chunk reads back exactly `expected` from `data`, the bytes serialize_chunk wrote
    in another process; else what it did."""
    return read_problem("deserialize_chunk of a chunk serialize_chunk wrote in another process",
                        lambda: student.kv_connector.deserialize_chunk(data, fingerprint), expected, ELSEWHERE_CAUSE)


def stored_elsewhere_problem(student: Any, what: str, data: Any, fingerprint: str, expected: np.ndarray) -> str | None:
    """None if deserialize_chunk, in a fresh process, reads `data` (a value a connector's store sent) back
    as `expected` exactly; else what it did. `what` names the value ("chunk 4 of the first prompt")."""
    return read_problem(
        f"deserialize_chunk in a fresh process (another engine) of {what}, as store sent it,",
        lambda: student.fresh_call("kv_connector", "deserialize_chunk", data, fingerprint), expected,
        "store must send serialize_chunk's bytes: another engine, in another process, loads them through the "
        "store, so nothing kept in this process's memory may be needed to read them")


def miss_problem(student: Any, label: str, data: Any, fingerprint: str, cause: str) -> str | None:
    """None if deserialize_chunk(data, fingerprint) is None; else what it did instead."""
    got, error = outcome(lambda: student.kv_connector.deserialize_chunk(data, fingerprint))
    if error is not None:
        return (f"deserialize_chunk of a chunk {label} raised {describe_error(error)}; expected None (a miss): "
                "damaged or foreign data must never raise, the engine just computes those tokens")
    if got is not None:
        return f"deserialize_chunk of a chunk {label} returned {type(got).__name__}; expected None (a miss). {cause}"
    return None


FOREIGN_CAUSE = ("Likely cause: a valid checksum proves only that the bytes were not damaged, not that they are a "
                 "chunk: check the marker, version and dtype code, and every length and the shape against the "
                 "bytes, before reading the payload")


def docstring_layout(kv: np.ndarray, fingerprint: str, magic: bytes = b"KVLC", version: int = 1, code: int | None = None,
                     shape: Sequence[int] | None = None, extra: bytes = b"", cut: int | None = None) -> bytes:
    """Bytes in the layout serialize_chunk's docstring describes, each field overridable, always under a valid CRC-32:
    what a foreign or buggy writer could put in a shared store. `extra` goes between payload and checksum; `cut`
    keeps only that many bytes before the checksum."""
    code = {np.dtype("float16"): 1, np.dtype("float32"): 2, np.dtype("float64"): 3}[kv.dtype] if code is None else code
    shape = tuple(kv.shape) if shape is None else tuple(shape)
    name, payload = fingerprint.encode(), np.ascontiguousarray(kv).astype(kv.dtype.newbyteorder("<")).tobytes()
    body = (struct.pack("<4sBBBHQ", magic, version, code, len(shape), len(name), len(payload))
            + struct.pack(f"<{len(shape)}Q", *shape) + name + payload + extra)[:cut]
    return body + struct.pack("<I", zlib.crc32(body))


def counters_problem(when: str, got: dict[str, int], expected: dict[str, int]) -> str | None:
    """None if every counter has its expected value; else the first that differs and what it counts."""
    for name, value in expected.items():
        if got[name] != value:
            return f"{when}: connector.{name} is {got[name]!r}; expected {value}. {name} counts {COUNTS[name]}"
    return None


def lookup_problem(label: str, got: Any, want: int, chunk_size: int, prompt_length: int) -> str | None:
    """None if lookup of a prompt (`label`, `prompt_length` tokens) returned `want` tokens; else why not."""
    if got == want:
        return None
    return (f"lookup with {label} returned {got!r}; expected {want} tokens (chunk_size x the leading stored "
            "chunks). Likely cause: "
            + ("lookup counts chunks; it returns tokens" if got == want // chunk_size else
               "a trailing partial chunk is never stored, so it never counts" if got == prompt_length else
               "the run must start at chunk 0 and go on while the chunks are stored"))


def resend_problem(what: str, stored: Any, sets: int, want: int) -> str | None:
    """None if a store call that should send `want` values returned `want` and sent `want` SETs; else why
    not. `what` says which chunks were in the store."""
    if stored == sets == want:
        return None
    return (f"storing {what} returned {stored!r} and sent {sets} values; expected {want} and {want}. Likely cause: "
            + ("a chunk already in the store is sent again (check exists first: the network is the cost LMCache saves)"
               if sets > want else "whether a chunk is in the store is the store's answer (exists), asked at each "
               "store: a chunk stored earlier may have been evicted since" if stored == sets else
               "store returns how many values it sent"))


def edge_problem(student: Any, what: str, call: Callable[[Any, Any], Any], want: Any) -> str | None:
    """None when `call(kv_connector module, a StoreClient of a new MemoryStore)` raises ValueError (`want`
    is ValueError) or returns what `want`, a check of the result (None when right), accepts; else what it did."""
    _, client = lent_store(student)
    result, error = outcome(lambda: call(student.kv_connector, client))
    if want is ValueError:
        if isinstance(error, ValueError):
            return None
        return (f"{what} should raise ValueError (see its docstring); it "
                + (f"raised {describe_error(error)}" if error else f"returned {type(result).__name__}"))
    if error is not None:
        return f"{what} raised {describe_error(error)}; it is valid input (see its docstring)"
    problem = want(result)
    return None if problem is None else f"{what}: {problem}"


def store_counts(store: MemoryStore) -> tuple[int, dict[str, int]]:
    """(round trips, commands per name) the MemoryStore `store` (the test's) counted so far."""
    return store.round_trips, dict(store.commands)


def sent_since(store: MemoryStore, before: tuple[int, dict[str, int]]) -> tuple[int, dict[str, int]]:
    """(round trips, commands per name) the store received since `before` (a store_counts result)."""
    round_trips, commands = store_counts(store)
    return round_trips - before[0], {k: v - before[1].get(k, 0) for k, v in commands.items() if v != before[1].get(k, 0)}


def lookup_reads_problem(label: str, commands: dict[str, int]) -> str | None:
    """None if a lookup (of `label`) sent no GET or MGET among `commands` (a sent_since result); else what."""
    reads = {name: count for name, count in commands.items() if name in ("get", "mget")}
    if not reads:
        return None
    return (f"lookup ({label}) sent {reads} to the store (all its commands: {commands}); expected no GET or "
            "MGET. lookup reads no values (uses `exists`): a GET also refreshes the store's LRU order, "
            "keeping chunks alive that nobody loads, and moves the chunks' bytes for nothing")


def load_reads_problem(call: str, n: int, chunk_size: int, round_trips: int, commands: dict[str, int]) -> str | None:
    """None if a load of `n` tokens (`call`) took at most one round trip and one GET per chunk it needs, and at
    most one MGET; else what it sent."""
    needed = -(-n // chunk_size)
    if round_trips <= needed and commands.get("get", 0) <= needed and commands.get("mget", 0) <= 1:
        return None
    return (f"{call} ({needed} chunks of {chunk_size}) took {round_trips} round trips to the store "
            f"(commands {commands}); expected at most {needed}. load reads only the ceil(n / chunk_size) "
            "chunks that cover tokens 0 .. n-1, each at most once (a GET each, one MGET, or one pipeline)")


def failed_load_bytes_problem(call: str, added: int, received: int) -> str | None:
    """None if a load (`call`) that returned None added the `received` bytes to bytes_loaded; else what it added."""
    if added == received:
        return None
    return (f"{call} returned None and added {added:,} to bytes_loaded; expected {received:,}, the len() of the "
            "values it received. bytes_loaded counts the bytes load received in both cases, success or None: a "
            "failed load moved those bytes too")


def bad_load_problem(connector: Any, store: MemoryStore, tokens: Sequence[int], n: int, chunk_size: int) -> str | None:
    """None if connector.load(tokens, n), for an n outside 1 .. the tokens of the full chunks, raises ValueError
    before sending anything to `store`; else what it did."""
    full = len(tokens) // chunk_size * chunk_size
    before = store_counts(store)
    result, error = outcome(lambda: connector.load(tokens, n))
    if not isinstance(error, ValueError):
        return (f"load(<{len(tokens)} tokens>, {n}) with chunks of {chunk_size} should raise ValueError; it "
                + (f"raised {type(error).__name__}: {error}" if error else f"returned {type(result).__name__}")
                + f". n must be from 1 to the tokens of the full chunks ({full} here)")
    _, sent = sent_since(store, before)
    if sent:
        return (f"load(<{len(tokens)} tokens>, {n}) raised ValueError after sending {sent} to the store; expected the "
                "ValueError before the store is read (Redis refuses an MGET of no keys with another error)")
    return None


def failed_load_problem(what: str, load: Callable[[], Any], cause: str) -> str | None:
    """None if `load()` (a connector's load, named `what`, whose chunks are not all usable) returns None; else
    what it did, with `cause`."""
    got, error = outcome(load)
    if error is None and got is None:
        return None
    return (f"{what} " + (f"raised {type(error).__name__}: {error}" if error else f"returned {type(got).__name__}")
            + f"; expected None (the stated contract: the engine then computes those tokens). Likely cause: {cause}")
