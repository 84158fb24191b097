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
    chained as in lecture 7: digest_i is the SHA-256 of the UTF-8 text that stands for key i-1 (the
    whole key, as the reference hashes it, or digest_{i-1} alone: the tests accept either) followed by
    the token ids of chunk i written as fixed-width integers (one width and byte order of your
    choice); for i = 0 nothing comes before chunk 0's token ids, so digest_0 is the same whatever the
    fingerprint. So changing any token of chunk j changes keys j, j+1, ... and no key before j, and
    another fingerprint changes every key (each starts with it) but not digest_0. Keys depend only on
    the integer values (not on the sequence type or integer dtype) and are the same in every process,
    whatever PYTHONHASHSEED (no Python `hash()`).
    ValueError for tokens that are not 1-D integers, a chunk_size < 1 or a fingerprint that is not a
    non-empty str, and for a chunk_size that is not an int (True, 2.0, "4").
    """
    # YOUR CODE HERE
    raise NotImplementedError("chunk_keys (task kv_connector)")


def serialize_chunk(kv: np.ndarray, fingerprint: str) -> bytes:
    """One chunk's KV as bytes: a header, the raw array bytes, a checksum. Never pickle.

    kv: an ndarray of dtype float16, float32 or float64, in either byte order (any shape, any memory
    layout; the connector passes [L, 2, chunk_size, Hkv, d]); the tests pass ndarrays only, so what
    serialize_chunk does with a list or another array-like is yours (the reference reads it with
    np.asarray). The bytes must say everything `deserialize_chunk` needs to
    rebuild exactly this array and to refuse anything else: a format marker and version, the dtype,
    the shape, the fingerprint, and a checksum over all of it (so a flipped or missing byte anywhere
    is detected). The layout is yours; the reference writes, little-endian: b"KVLC", version 1, a dtype
    code, ndim, the fingerprint's length, the payload's length, the shape (ndim x uint64), the
    fingerprint (UTF-8), the C-order payload, then the CRC-32 of everything before it. Another process
    reads the bytes (another engine, through the store; the tests read chunks a fresh process wrote):
    nothing kept in this process's memory may be needed to read them.
    ValueError for another dtype (an integer array, say) or a fingerprint that is not a non-empty str.
    """
    # YOUR CODE HERE
    raise NotImplementedError("serialize_chunk (task kv_connector)")


def deserialize_chunk(data: Any, fingerprint: str) -> np.ndarray | None:
    """The array `serialize_chunk(kv, fingerprint)` wrote, or None (a miss) for anything else.

    `data`: bytes, a bytearray or a memoryview of bytes (all read alike). Returns an ndarray equal to
    kv bit for bit: same dtype, same shape, same values. Returns None, never raising and never
    returning other values, for anything that is not exactly what serialize_chunk wrote for this
    fingerprint: `data` of another type (None, a str, ...), empty, truncated, with bytes appended, with
    any byte changed, written for another fingerprint (compared whole: "m" is not "m2"), an unknown
    marker, version or dtype, or a header that disagrees with the data (a shape or a length that does
    not match the bytes that follow), even when its checksum is valid. Never unpickles anything.
    `fingerprint` is a non-empty str, as for serialize_chunk; the tests pass no other, so what
    deserialize_chunk does with another (None, b"...", "") is yours (the reference returns None for
    "" and for data that fails a check before the fingerprint is compared, and raises AttributeError
    for a non-str one with valid data).
    """
    # YOUR CODE HERE
    raise NotImplementedError("deserialize_chunk (task kv_connector)")


class KVConnector:
    """Loads and stores a prompt's KV, chunk by chunk, in an external `store` shared by engines.

    KVConnector(store, fingerprint, chunk_size=256): `store` as described at the top of this file;
    `fingerprint` a non-empty str naming the model (kvlab.kvstore.model_fingerprint); chunk_size an
    int >= 1, not a bool (ValueError otherwise). Chunk i of a prompt is stored under chunk_keys(tokens,
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
        # YOUR CODE HERE
        raise NotImplementedError("KVConnector.__init__ (task kv_connector)")

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
        # YOUR CODE HERE
        raise NotImplementedError("KVConnector.lookup (task kv_connector)")

    def load(self, tokens: Any, n: int) -> np.ndarray | None:
        """The KV of tokens 0 .. n-1, [L, 2, n, Hkv, d], read from the store, or None.

        n: an int (not a bool: True is refused), 1 <= n <= len(tokens) // chunk_size * chunk_size (ValueError otherwise, raised
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
        # YOUR CODE HERE
        raise NotImplementedError("KVConnector.load (task kv_connector)")

    def store(self, tokens: Any, kv: np.ndarray) -> int:
        """Store every full chunk of `tokens` whose key is not in the store yet; return how many it stored.

        kv: an ndarray [L, 2, T, Hkv, d] (any L >= 1) holding the KV of tokens 0 .. T-1,
        T >= len(tokens) // chunk_size * chunk_size (extra positions, e.g. a trailing partial chunk, are
        ignored); float16, float32 or float64. ValueError for another number of dimensions, an axis 1 other than 2,
        or a T too short, raised before any value is sent: nothing is stored and no counter changes.
        Chunk i is kv[:, :, i*chunk_size:(i+1)*chunk_size], stored with `set` under its key as
        serialize_chunk's bytes: another engine, in another process, loads them through the store (the
        tests read a stored value with deserialize_chunk in a fresh process), so nothing kept in this
        process's memory may be needed to read them. A chunk already in the store (`exists`) is not
        sent again. The EXISTS and SET commands may go one by one (as the reference sends them) or
        in pipelines: the tests count the values sent (`set` commands), not round trips. Adds to
        `chunks_stored` and `bytes_stored`.
        """
        # YOUR CODE HERE
        raise NotImplementedError("KVConnector.store (task kv_connector)")
