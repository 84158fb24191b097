"""Module 6, part 3: reusing KV across requests and engines through an external store (LMCache's idea).

An engine with prefix caching keeps KV in its own memory; LMCache also puts it in a store outside the
engine (CPU memory, disk, Redis), so another process, even another machine, can load a prompt's KV
instead of recomputing it. Tokens are cut into chunks of `chunk_size` (LMCache's default: 256); each
full chunk is stored under a key that names the whole prefix up to it and the model. Implement, in
this order (all in task kv_connector):

1. `chunk_keys`: one key per full chunk: the model fingerprint and a chained SHA-256 digest.
2. `serialize_chunk` / `deserialize_chunk`: one chunk's KV as bytes that cannot run code when read
   (no pickle), with a header and a checksum; anything damaged or foreign reads back as a miss.
3. `KVConnector`: `lookup` (how many tokens can be loaded), `load`, `store`, and what they moved.

The store is any object with redis-py's `get(key) -> bytes | None`, `set(key, value)`,
`mget(keys) -> list[bytes | None]`, `exists(*keys) -> int` and `pipeline(transaction=False)`: a
`redis.Redis` client, or `kvlab.kvstore.MemoryStore` (the tests and the grader give your connector a
`kvlab.testing.store_loan.StoreClient` of one, with the same commands). A pipeline
queues commands (`pipe.get(key)`, `pipe.exists(key)`, ...: each returns the pipeline, no reply yet),
then `pipe.execute()` sends them all at once and returns the list of their replies, in order: one
round trip to the store, however many commands. Every plain call (`store.get(key)`, `store.mget(keys)`,
...) is one round trip. A store may drop any key at any time (Redis evicts under `maxmemory`), so
nothing read from it is trusted before it is checked.

Shapes: L layers, Hkv key/value heads, d head size, T tokens. One chunk's KV is [L, 2, chunk_size, Hkv, d]
(index 0 of axis 1 holds K, index 1 holds V).
"""
from __future__ import annotations

import hashlib
import struct
import zlib
from typing import Any

import numpy as np

# The dtypes a chunk may hold, by their one-byte code in the header.
DTYPES = {1: np.dtype("<f2"), 2: np.dtype("<f4"), 3: np.dtype("<f8")}
# The header's fixed part: magic, format version, dtype code, number of dimensions, fingerprint
# length in bytes, payload length in bytes. Little-endian, no padding.
MAGIC = b"KVLC"
VERSION = 1
FIXED = struct.Struct("<4sBBBHQ")
# Trailing CRC-32 of everything before it (header and payload).
CHECKSUM = struct.Struct("<I")


def chunk_keys(tokens: Any, chunk_size: int, fingerprint: str) -> list[str]:
    """One store key per FULL chunk of `tokens`: key i names `fingerprint` and tokens 0 .. (i+1)*chunk_size-1.

    tokens: a 1-D sequence of integers (list, tuple, or ndarray of any integer dtype); chunk_size: an
    int >= 1; fingerprint: a non-empty str (see kvlab.kvstore.model_fingerprint). A trailing partial
    chunk gets no key, so len(result) == len(tokens) // chunk_size.

    Key i is `fingerprint + ":" + digest_i`, digest_i a lowercase hex SHA-256 digest (64 characters)
    chained as in lecture 7: the SHA-256 of what stands for key i-1 (its whole text, or digest_{i-1}
    alone, encoded as UTF-8: either chains, and the tests accept both; nothing for i = 0, so digest_0
    covers chunk 0's token ids only and is the same whatever the fingerprint) followed by the token ids
    of chunk i written as fixed-width integers (one width and byte order of your choice). So changing
    any token of chunk j changes keys j, j+1, ... and no key before j. Keys depend only on the integer values (not on the sequence type or integer
    dtype) and are the same in every process, whatever PYTHONHASHSEED (no Python `hash()`).
    ValueError for tokens that are not 1-D integers, a chunk_size < 1 or a fingerprint that is not a
    non-empty str.
    """
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ValueError(f"fingerprint must be a non-empty str; got {fingerprint!r}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}")
    array = np.asarray(tokens)
    if array.ndim != 1 or (array.size and not np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"tokens must be 1-D integers; got {array.dtype} {array.shape}")
    values = array.astype("<i8")
    keys: list[str] = []
    previous = b""
    for i in range(len(values) // chunk_size):
        chunk = values[i * chunk_size:(i + 1) * chunk_size]
        digest = hashlib.sha256(previous + chunk.tobytes()).hexdigest()
        key = fingerprint + ":" + digest
        keys.append(key)
        previous = key.encode("utf-8")
    return keys


def serialize_chunk(kv: np.ndarray, fingerprint: str) -> bytes:
    """One chunk's KV as bytes: a header, the raw array bytes, a checksum. Never pickle.

    kv: an ndarray of dtype float16, float32 or float64 (any shape, any memory layout; the connector
    passes [L, 2, chunk_size, Hkv, d]). The bytes must say everything `deserialize_chunk` needs to
    rebuild exactly this array and to refuse anything else: a format marker and version, the dtype,
    the shape, the fingerprint, and a checksum over all of it (so a flipped or missing byte anywhere
    is detected). The layout is yours; the reference writes, little-endian: b"KVLC", version 1, a dtype
    code, ndim, the fingerprint's length, the payload's length, the shape (ndim x uint64), the
    fingerprint (UTF-8), the C-order payload, then the CRC-32 of everything before it. Another process
    reads the bytes (another engine, through the store; the tests read chunks a fresh process wrote):
    nothing kept in this process's memory may be needed to read them.
    ValueError for another dtype or a fingerprint that is not a non-empty str.
    """
    if not isinstance(fingerprint, str) or not fingerprint:
        raise ValueError(f"fingerprint must be a non-empty str; got {fingerprint!r}")
    array = np.asarray(kv)
    code = None
    for candidate, dtype in DTYPES.items():
        if array.dtype.kind == "f" and array.dtype.itemsize == dtype.itemsize:
            code = candidate
    if code is None:
        raise ValueError(f"unsupported dtype {array.dtype}: float16, float32 or float64 only")
    payload = np.ascontiguousarray(array, dtype=DTYPES[code]).tobytes()
    name = fingerprint.encode("utf-8")
    header = FIXED.pack(MAGIC, VERSION, code, array.ndim, len(name), len(payload))
    header += struct.pack(f"<{array.ndim}Q", *array.shape) + name
    body = header + payload
    return body + CHECKSUM.pack(zlib.crc32(body))


def deserialize_chunk(data: Any, fingerprint: str) -> np.ndarray | None:
    """The array `serialize_chunk(kv, fingerprint)` wrote, or None (a miss) for anything else.

    `data`: bytes, a bytearray or a memoryview of bytes (all read alike). Returns an ndarray equal to
    kv bit for bit: same dtype, same shape, same values. Returns None, never raising and never
    returning other values, for anything that is not exactly what serialize_chunk wrote for this
    fingerprint: `data` of another type (None, a str, ...), empty, truncated, with bytes appended, with
    any byte changed, written for another fingerprint (compared whole: "m" is not "m2"), an unknown
    marker, version or dtype, or a header that disagrees with the data (a shape or a length that does
    not match the bytes that follow), even when its checksum is valid. Never unpickles anything.
    """
    try:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            return None
        raw = bytes(data)
        if len(raw) < FIXED.size + CHECKSUM.size:
            return None
        body, tail = raw[:-CHECKSUM.size], raw[-CHECKSUM.size:]
        if CHECKSUM.unpack(tail)[0] != zlib.crc32(body):
            return None
        magic, version, code, ndim, name_len, payload_len = FIXED.unpack_from(body, 0)
        if magic != MAGIC or version != VERSION or code not in DTYPES:
            return None
        offset = FIXED.size
        shape = struct.unpack_from(f"<{ndim}Q", body, offset)
        offset += 8 * ndim
        name = body[offset:offset + name_len]
        offset += name_len
        if name != fingerprint.encode("utf-8"):
            return None
        dtype = DTYPES[code]
        count = 1
        for extent in shape:
            count *= extent
        if payload_len != count * dtype.itemsize or len(body) - offset != payload_len:
            return None
        array = np.frombuffer(body, dtype=dtype, count=count, offset=offset)
        return array.reshape(shape).copy()
    except Exception:
        return None


class KVConnector:
    """Loads and stores a prompt's KV, chunk by chunk, in an external `store` shared by engines.

    KVConnector(store, fingerprint, chunk_size=256): `store` as described at the top of this file;
    `fingerprint` a non-empty str naming the model (kvlab.kvstore.model_fingerprint); chunk_size an
    int >= 1 (ValueError otherwise). Chunk i of a prompt is stored under chunk_keys(tokens,
    chunk_size, fingerprint)[i] as serialize_chunk(its KV, fingerprint). Keep the store in an attribute
    of any name but `store`: an instance attribute `store` would hide the method `store`.

    Counters (ints, 0 when new, only ever increased):
    - `hits`: chunks returned by successful `load` calls.
    - `misses`: full chunks of the prompts passed to `lookup` that were not loadable (outside the run
      `lookup` found), i.e. chunks the engine has to compute.
    - `bytes_loaded`: len() of every value `load` received from the store (failed loads included:
      those bytes crossed the wire too).
    - `bytes_stored`: len() of every value `store` sent to the store.
    - `chunks_stored`: values `store` sent to the store.
    """

    def __init__(self, store: Any, fingerprint: str, chunk_size: int = 256) -> None:
        if not isinstance(fingerprint, str) or not fingerprint:
            raise ValueError(f"fingerprint must be a non-empty str; got {fingerprint!r}")
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
            raise ValueError(f"chunk_size must be an int >= 1; got {chunk_size!r}")
        self.backend = store
        self.fingerprint = fingerprint
        self.chunk_size = chunk_size
        self.hits = 0
        self.misses = 0
        self.bytes_loaded = 0
        self.bytes_stored = 0
        self.chunks_stored = 0

    def lookup(self, tokens: Any) -> int:
        """How many leading tokens of `tokens` can be loaded: chunk_size x the number of leading full
        chunks whose keys are all in the store, consecutively from chunk 0 (a missing chunk ends the
        run, whatever follows it). A multiple of chunk_size, <= len(tokens). Reads no values: only
        `exists`, one key per EXISTS (a single EXISTS of many keys says how many exist, not which),
        sent one by one (stopping at the first miss) or in one pipeline (`pipeline(transaction=False)`,
        `exists` per key, `execute()`). A GET would also refresh the store's LRU order, keeping chunks
        nobody loads; and a stored but damaged chunk still counts here and fails at `load`. Adds the
        full chunks outside the run to `misses`.
        """
        keys = chunk_keys(tokens, self.chunk_size, self.fingerprint)
        run = 0
        for key in keys:
            if not self.backend.exists(key):
                break
            run += 1
        self.misses += len(keys) - run
        return run * self.chunk_size

    def load(self, tokens: Any, n: int) -> np.ndarray | None:
        """The KV of tokens 0 .. n-1, [L, 2, n, Hkv, d], read from the store, or None.

        n: an int, 1 <= n <= len(tokens) // chunk_size * chunk_size (ValueError otherwise, raised
        before the store is read: no command reaches it); normally
        what `lookup` returned, or one less when that is the whole prompt (an engine always computes
        the prompt's last token, for its logits). Loads the ceil(n / chunk_size) chunks that cover
        tokens 0 .. n-1, concatenates them along axis 2 in the dtype they were stored in, and returns
        the first n positions. Returns None, loading nothing, when any of those chunks is missing
        (evicted since `lookup`), fails deserialize_chunk, or is not [L, 2, chunk_size, Hkv, d] with
        the same L, Hkv, d and dtype as the first: the engine then computes those tokens instead.
        Reads only those chunks, each at most once: a `get` per chunk (as the reference does: on a
        real Redis one reply per chunk moved chunks faster than one reply of them all, and a load may
        stop at the first chunk that fails), one `mget` of their keys, or one pipeline of GETs
        (`pipeline(transaction=False)`, `get` per key, `execute()`). Adds the number of chunks read to
        `hits` on success only; adds the bytes received (len() of every value the store returned) to
        `bytes_loaded` in both cases, success or None.
        """
        keys = chunk_keys(tokens, self.chunk_size, self.fingerprint)
        limit = len(keys) * self.chunk_size
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= limit:
            raise ValueError(f"n must be an int in 1 .. {limit}; got {n!r}")
        wanted = keys[:-(-n // self.chunk_size)]
        pieces: list[np.ndarray] = []
        for key in wanted:
            value = self.backend.get(key)
            if value is None:
                return None
            self.bytes_loaded += len(value)
            chunk = deserialize_chunk(value, self.fingerprint)
            if chunk is None or chunk.ndim != 5 or chunk.shape[1] != 2 or chunk.shape[2] != self.chunk_size:
                return None
            if pieces and (chunk.shape != pieces[0].shape or chunk.dtype != pieces[0].dtype):
                return None
            pieces.append(chunk)
        self.hits += len(pieces)
        return np.concatenate(pieces, axis=2)[:, :, :n]

    def store(self, tokens: Any, kv: np.ndarray) -> int:
        """Store every full chunk of `tokens` whose key is not in the store yet; return how many it stored.

        kv: an ndarray [L, 2, T, Hkv, d] (any L >= 1) holding the KV of tokens 0 .. T-1,
        T >= len(tokens) // chunk_size * chunk_size (extra positions, e.g. a trailing partial chunk, are
        ignored); float16, float32 or float64. ValueError for another number of dimensions, an axis 1 other than 2, or a T too short.
        Chunk i is kv[:, :, i*chunk_size:(i+1)*chunk_size], stored with `set` under its key as
        serialize_chunk's bytes: another engine, in another process, loads them through the store (the
        tests read a stored value with deserialize_chunk in a fresh process), so nothing kept in this
        process's memory may be needed to read them. A chunk already in the store (`exists`) is not
        sent again. Adds to `chunks_stored` and `bytes_stored`.
        """
        keys = chunk_keys(tokens, self.chunk_size, self.fingerprint)
        kv = np.asarray(kv)
        covered = len(keys) * self.chunk_size
        if kv.ndim != 5 or kv.shape[1] != 2 or kv.shape[2] < covered:
            raise ValueError(f"kv must be [L, 2, T >= {covered}, Hkv, d]; got shape {kv.shape}")
        written = 0
        for i, key in enumerate(keys):
            if self.backend.exists(key):
                continue
            value = serialize_chunk(kv[:, :, i * self.chunk_size:(i + 1) * self.chunk_size], self.fingerprint)
            self.backend.set(key, value)
            written += 1
            self.chunks_stored += 1
            self.bytes_stored += len(value)
        return written
