"""Public tests of kv_connector.py (task kv_connector). Run: make test TASK=kv_connector.

Keys: one per full chunk, fingerprint + ":" + a chained SHA-256 digest, the same for any integer type and
in every process. Chunks: exact round trips; damaged, truncated, foreign or pickled data reads as None.
Connector: lookup = the longest run of stored chunks from the start, in tokens, reading no values; load
reading only the chunks it needs, each at most once; load and store through a kvlab.kvstore.MemoryStore, with the counters hits, misses,
bytes_loaded (failed loads included), bytes_stored, chunks_stored; what store sends is read back in a fresh
process, as another engine would.
The hidden tests check the same rules on other inputs.
"""
from __future__ import annotations

import pickle
import re
import struct
import zlib
from typing import Any

import numpy as np
import pytest

from kvlab.kvstore import MemoryStore
from kvlab.testing.store_loan import lend
from connector_conformance_checks import CONNECTOR_PUBLIC, connector_machine, stated_edges_problem
from kvlab.testing.conformance import run_given, run_machine
from keys_property_checks import every_error_problem, keys_given

FINGERPRINT = "public-model/s0/float64/L3x2xTx2x4"
COUNTS = {
    "hits": "chunks returned by successful loads (chunks, not tokens; nothing for a failed load)",
    "misses": "full chunks outside the run lookup found (chunks the engine must compute)",
    "bytes_loaded": "len() of every value load received from the store",
    "bytes_stored": "len() of every value store sent to the store (the serialized bytes, header included)",
    "chunks_stored": "values store sent (chunks already in the store are not sent again)",
}


def kv_array(n_tokens: int, dtype: Any = np.float64, seed: int = 0) -> np.ndarray:
    """KV of n_tokens tokens, [L=3, 2, n_tokens, Hkv=2, d=4] (three layers: a count equal to the K/V
    axis would hide a swap of the two)."""
    return np.random.default_rng(seed).standard_normal((3, 2, n_tokens, 2, 4)).astype(dtype)


def tokens_of(n: int, seed: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, 30_000, size=n)]


def new_store(student: Any) -> tuple[MemoryStore, Any]:
    """(store, client): a MemoryStore in the test's process, whose `commands` and `round_trips` the tests
    read, and a kvlab.testing.store_loan.StoreClient of it for your connector (the same commands as a MemoryStore,
    each request sent to that store). Made beside your code (`student.call`): run here, a plain object;
    in the grader, in your process, while the store stays in the grader's."""
    store = MemoryStore()
    return store, student.call("kvlab.testing.store_loan:StoreClient", lend(store))


def in_docstring_layout(kv: np.ndarray, fingerprint: str, magic: bytes = b"KVLC", version: int = 1, code: int = 2,
                        shape: Any = None, extra: bytes = b"", cut: Any = None) -> bytes:
    """A float32 chunk in serialize_chunk's docstring layout, one field overridden, under a valid CRC-32."""
    shape = kv.shape if shape is None else shape
    name, payload = fingerprint.encode(), np.ascontiguousarray(kv, dtype="<f4").tobytes()
    body = (struct.pack("<4sBBBHQ", magic, version, code, len(shape), len(name), len(payload))
            + struct.pack(f"<{len(shape)}Q", *shape) + name + payload + extra)[:cut]
    return body + struct.pack("<I", zlib.crc32(body))


def check_counters(when: str, connector: Any, expected: dict[str, int]) -> None:
    for name, value in expected.items():
        got = getattr(connector, name)
        assert got == value, f"{when}: connector.{name} is {got!r}; expected {value}. {name} counts {COUNTS[name]}"


def stored(connector: Any, tokens: Any, kv: np.ndarray) -> Any:
    """connector.store(tokens, kv), with the likely cause of a store method hidden by an attribute."""
    try:
        return connector.store(tokens, kv)
    except TypeError as error:
        if "not callable" not in str(error):
            raise
        pytest.fail(f"connector.store(...) raised TypeError: {error}. Likely cause: an instance attribute named "
                    "store (self.store = store in __init__) hides the method store: keep the store under another name",
                    pytrace=False)


@pytest.mark.task("kv_connector", points=0.75)
def test_chunk_keys(student: Any) -> None:
    chunk_keys = student.kv_connector.chunk_keys
    tokens = tokens_of(14, 1)
    keys = chunk_keys(tokens, 4, FINGERPRINT)
    assert isinstance(keys, list) and len(keys) == 3, (
        f"chunk_keys of 14 tokens in chunks of 4 returned {keys!r}; expected 3 keys. Likely cause: the trailing "
        "partial chunk got a key: only full chunks are keyed (and stored)"
    )
    for key in keys:
        assert isinstance(key, str) and re.fullmatch(re.escape(FINGERPRINT) + ":[0-9a-f]{64}", key), (
            f"key {key!r}: expected the fingerprint, ':' and a lowercase hex SHA-256 digest of 64 characters. "
            "Likely cause: the key must start with the model fingerprint, so KV of one model is never loaded "
            "into another"
        )
    assert len(chunk_keys(tokens + [1], 4, FINGERPRINT)) == 3, (
        "chunk_keys of 15 tokens in chunks of 4 should return 3 keys: the 3 trailing tokens are a partial chunk")
    changed = chunk_keys([tokens[0] + 1] + tokens[1:], 4, FINGERPRINT)
    assert all(a != b for a, b in zip(keys, changed)), (
        "changing one token of chunk 0 left some keys unchanged; expected every key to change. Likely cause: the "
        "keys are not chained: key i must cover key i-1 and chunk i"
    )
    changed = chunk_keys(tokens[:7] + [tokens[7] + 1] + tokens[8:], 4, FINGERPRINT)
    assert changed[0] == keys[0] and changed[1] != keys[1], (
        "changing the last token of chunk 1 should change key 1 (and not key 0). Likely cause: key i must cover "
        "every token of chunk i, its first and last included"
    )
    assert len(set(chunk_keys(tokens[:4] * 2, 4, FINGERPRINT))) == 2, (
        "two identical chunks in a row gave equal keys. Likely cause: the keys are not chained"
    )
    assert chunk_keys(np.array(tokens, dtype=np.int32), 4, FINGERPRINT) == keys, (
        "chunk_keys of the same token values as an int32 array differs from the keys of a list. Likely cause: the "
        "bytes hashed depend on the integer dtype; write every token id in one fixed width and byte order"
    )
    assert chunk_keys(tokens + [5, 6, 7], 4, FINGERPRINT)[:3] == keys, (
        "appending tokens changed the keys of the first chunks: key i depends on tokens 0 .. (i+1)*chunk_size-1 only"
    )
    other = chunk_keys(tokens, 4, FINGERPRINT + "-other")
    assert not set(other) & set(keys), (
        "two fingerprints gave equal keys; expected every key to differ: the fingerprint must be in every key"
    )
    digests, other_digests = [key.rsplit(":", 1)[1] for key in keys], [key.rsplit(":", 1)[1] for key in other]
    assert digests[0] == other_digests[0], (
        "with two fingerprints, digest 0 (the part after the last ':' of key 0) differs; expected it equal. Likely "
        "cause: digest 0 covers chunk 0's token ids only (nothing comes before chunk 0): hash no fingerprint into it"
    )


@pytest.mark.task("kv_connector", points=1)
def test_same_keys_in_a_fresh_process(student: Any) -> None:
    tokens = tokens_of(20, 2)
    here = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    there = student.fresh_call("kv_connector", "chunk_keys", tokens, 4, FINGERPRINT)
    assert list(there) == list(here), (
        "chunk_keys gives different keys in different processes. Likely cause: Python's hash() is salted per "
        "process (PYTHONHASHSEED): hash bytes with hashlib.sha256 only"
    )


@pytest.mark.task("kv_connector", points=0.75)
def test_round_trip_and_misses(student: Any) -> None:
    # A chunk another process wrote (another engine, through the store), before any object of this
    # process is made: the grader may end this process for the fresh one.
    elsewhere = kv_array(4, np.float32, seed=4)
    data = student.fresh_call("kv_connector", "serialize_chunk", elsewhere, FINGERPRINT)
    serialize, deserialize = student.kv_connector.serialize_chunk, student.kv_connector.deserialize_chunk
    for dtype, layout in (("float16", "C"), ("float32", "C"), ("float64", "C"), ("float32", "F")):
        kv = kv_array(6, dtype, seed=3)[:, :, 1::2]  # a strided view: not contiguous
        kv[0, 0, 0] = [[np.nan, -0.0, np.inf, -np.inf]] * 2
        kv = np.asfortranarray(kv) if layout == "F" else kv
        what = f"{dtype} chunk" + (" in Fortran memory layout (np.asfortranarray)" if layout == "F" else "")
        try:
            data_here = serialize(kv, FINGERPRINT)
        except Exception as error:
            pytest.fail(f"serialize_chunk of a {what} raised {type(error).__name__}: {error}; float16, float32 and "
                        "float64 (any memory layout) are all KV dtypes", pytrace=False)
        for kind in (bytes, bytearray, memoryview):
            # Made beside your code: the grader's sandbox passes bytes, not a bytearray or memoryview, across.
            got = deserialize(student.call(f"builtins:{kind.__name__}", data_here), FINGERPRINT)
            assert isinstance(got, np.ndarray), (
                f"deserialize_chunk of a {kind.__name__} of a {what} returned {type(got).__name__}; data may be "
                "bytes, a bytearray or a memoryview")
        assert isinstance(got, np.ndarray), f"the round trip of a {what} returned {type(got).__name__}"
        assert got.dtype == kv.dtype, (
            f"the round trip has dtype {got.dtype}; expected {kv.dtype}. Likely cause: the dtype is not kept"
        )
        assert got.shape == kv.shape, f"the round trip has shape {got.shape}; expected {kv.shape}"
        assert got.tobytes() == kv.tobytes(), (
            f"a {what} came back with other values (nan, -0.0 and inf included): a round trip must be exact, "
            "bit for bit. Likely cause: the payload is written in another element order than it is read (C-order "
            "both ways, whatever the memory layout)"
        )
    one, other = serialize(kv, "model-a"), serialize(kv, "model-b")
    differing = sum(a != b for a, b in zip(one, other)) + abs(len(one) - len(other))
    assert differing > 1, (
        f"serialize_chunk of one KV under fingerprints 'model-a' and 'model-b' gives bytes differing in {differing} "
        "byte(s) only: the checksum does not cover the header; it must cover all of it (the reference: the CRC-32 "
        "of everything before it)")
    # The chunk the fresh process wrote: read here, exactly, and its damaged copies as misses, from
    # what its bytes carry alone.
    got = deserialize(data, FINGERPRINT)
    assert isinstance(got, np.ndarray) and got.tobytes() == elsewhere.tobytes(), (
        f"deserialize_chunk of a chunk serialize_chunk wrote in another process returned {type(got).__name__}, not "
        "that chunk. Likely cause: the bytes do not carry the chunk (its header and every payload byte): another "
        "engine reads them through the store, so nothing kept in this process's memory may be needed to read them"
    )
    damaged = {f"byte {i} changed": data[:i] + bytes([data[i] ^ 1]) + data[i + 1:] for i in range(len(data))}
    damaged.update({f"truncated to {n} bytes": data[:n] for n in range(0, len(data), 7)})
    damaged["with a byte appended"] = data + b"\x00"
    for label, value in damaged.items():
        try:
            got = deserialize(value, FINGERPRINT)
        except Exception as error:
            pytest.fail(f"deserialize_chunk of a chunk {label} raised {type(error).__name__}: {error}; expected None "
                        "(a miss): damaged or foreign data must never raise", pytrace=False)
        assert got is None, (
            f"deserialize_chunk of a chunk {label} returned {type(got).__name__}; expected None (a miss). Likely "
            "cause: no checksum over the whole chunk (header and payload), or the lengths are not checked"
        )
    for other in ("another-model", FINGERPRINT + "x", FINGERPRINT[:-1]):
        assert deserialize(data, other) is None, (
            f"a chunk written for {FINGERPRINT!r} and read for {other!r} is not None. Likely cause: the fingerprint "
            "in the header must be compared with the reader's; compare the fingerprints whole"
        )
    assert deserialize(pickle.dumps(kv_array(4, np.float32, seed=4)), FINGERPRINT) is None, (
        "deserialize_chunk of a pickled ndarray is not None: never unpickle what a shared store holds"
    )
    assert b"numpy" not in data, (
        "serialize_chunk's bytes look like a pickle (they name numpy's classes); expected a header and raw array bytes"
    )
    kv = kv_array(4, np.float32, seed=4)
    for label, fields in (("an unknown marker b'NOPE'", {"magic": b"NOPE"}), ("version 0", {"version": 0}),
                          ("dtype code 0", {"code": 0}), ("4 bytes before the checksum", {"extra": bytes(4)}),
                          ("shape (3, 2, 3, 2, 4) for a payload of (3, 2, 4, 2, 4)", {"shape": (3, 2, 3, 2, 4)}),
                          ("only the first 15 bytes of a header", {"cut": 15})):
        value = in_docstring_layout(kv, FINGERPRINT, **fields)
        try:
            got = deserialize(value, FINGERPRINT)
        except Exception as error:
            pytest.fail(f"deserialize_chunk of the docstring's layout with {label}, under a valid CRC-32, raised "
                        f"{type(error).__name__}: {error}; expected None. Likely cause: a valid checksum proves only "
                        "that the bytes were not damaged: check the marker, version, dtype code, every length and "
                        "the shape against the bytes before reading the payload", pytrace=False)
        assert got is None, (
            f"deserialize_chunk of the docstring's layout with {label}, under a valid CRC-32, returned "
            f"{type(got).__name__}; expected None. Likely cause: a valid checksum proves only that the bytes were not "
            "damaged: check the marker, version, dtype code, every length and the shape against the bytes")


@pytest.mark.task("kv_connector", points=0.5)
def test_lookup_is_the_longest_run_from_the_start(student: Any) -> None:
    store, client = new_store(student)
    connector = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    tokens = tokens_of(18, 5)
    stored(connector, tokens, kv_array(18, seed=5))
    for label, prompt, want in (("the stored prompt", tokens, 16), ("a longer prompt", tokens + [1, 2, 3, 4, 5], 16),
                                ("a prompt that differs in chunk 2", tokens[:9] + [tokens[9] + 1] + tokens[10:], 8),
                                ("a prompt shorter than one chunk", tokens[:3], 0)):
        got = connector.lookup(prompt)
        assert got == want, (
            f"lookup of {label} returned {got!r}; expected {want} tokens (chunk_size x the leading stored chunks)"
            + (". Likely cause: lookup counts chunks; it returns tokens" if got == want // 4 else "")
        )
    keys = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    store.delete(keys[1])
    got = connector.lookup(tokens)
    assert got == 4, (
        f"lookup after chunk 1 of 4 was evicted returned {got!r}; expected 4 tokens. Likely cause: a missing middle "
        "chunk must end the run"
    )


@pytest.mark.task("kv_connector", points=1)
def test_store_and_load_across_connectors(student: Any) -> None:
    store, client = new_store(student)
    first = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    tokens = tokens_of(13, 6)
    kv = kv_array(13, seed=6)
    assert stored(first, tokens, kv) == 3, "storing 13 tokens in chunks of 4 into an empty store should store 3 chunks"
    keys = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    sizes = [len(store.get(key)) for key in keys]
    check_counters("after storing 3 chunks", first, {"chunks_stored": 3, "bytes_stored": sum(sizes)})
    sent = store.get(keys[2])  # read in a fresh process at the end (the grader may end this one for it)
    second = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    n = second.lookup(tokens + [7])
    loaded = second.load(tokens, n)
    assert isinstance(loaded, np.ndarray) and loaded.shape == (3, 2, 12, 2, 4) and np.array_equal(loaded, kv[:, :, :12]), (
        "a second connector on the same store should load exactly the KV the first stored, [L, 2, 12, Hkv, d]. Likely "
        "cause: lookup's length, the element order, or a chunk holds the wrong slice of the tokens' KV"
    )
    check_counters("after lookup and load of 3 stored chunks", second,
                   {"hits": 3, "misses": 0, "bytes_loaded": sum(sizes)})
    # An engine whose whole prompt is stored still computes the last token, so it asks for n - 1.
    try:
        partial = second.load(tokens[:12], 11)
    except ValueError as error:
        pytest.fail(f"load(<12 tokens>, 11) raised ValueError: {error}. Likely cause: n need not be a multiple of "
                    "chunk_size: load the chunks that cover the first n tokens and return those n positions",
                    pytrace=False)
    assert isinstance(partial, np.ndarray) and partial.shape[2] == 11 and np.array_equal(partial, kv[:, :, :11]), (
        "load(<12 tokens>, 11) should return the first 11 positions of the 3 stored chunks. Likely cause: n need not "
        "be a multiple of chunk_size: load must read the ceil(n / chunk_size) chunks that cover n tokens and return "
        "the first n positions"
    )
    check_counters("after load(<12 tokens>, 11)", second, {"hits": 6})
    assert np.array_equal(second.load(tokens, 5), kv[:, :, :5]), "load(<13 tokens>, 5) should return 5 positions"
    check_counters("after load(<13 tokens>, 5): load reads only the ceil(5 / 4) = 2 chunks that cover 5 tokens",
                   second, {"hits": 8, "bytes_loaded": 2 * sum(sizes) + sizes[0] + sizes[1]})
    assert np.array_equal(second.load(tokens, 1), kv[:, :, :1]), "load(<13 tokens>, 1) should return 1 position"
    check_counters("after load(<13 tokens>, 1)", second, {"hits": 9})
    store.delete(keys[1])  # evicted: whether a chunk is in the store is the store's answer, asked at each store
    sets = store.commands.get("set", 0)
    count = stored(second, tokens + tokens_of(4, 7), kv_array(17, seed=7))
    sends = store.commands.get("set", 0) - sets
    assert count == sends == 2, (
        f"storing a prompt of 4 full chunks whose chunks 0 and 2 are in the store (chunk 1 was evicted) returned "
        f"{count!r} and sent {sends} values; expected 2 and 2 (chunks 1 and 3). Likely cause: "
        + ("a chunk already in the store is sent again" if sends > 2 else
           "a chunk evicted since it was stored must be sent again: ask the store (exists), not a record of what "
           "was sent" if count == sends else "store returns how many values it sent")
    )
    check_counters("after storing a prompt whose chunks 0 and 2 of 4 were in the store", second, {"chunks_stored": 2})
    third = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    assert third.lookup(tokens_of(12, 8)) == 0, "lookup of a prompt never stored should return 0"
    check_counters("after a lookup finding none of 3 full chunks", third, {"misses": 3})
    original = store.get(keys[2])
    half_chunk = student.kv_connector.serialize_chunk(kv[:, :, :2], FINGERPRINT)
    for label, value, cause in (
        ("was damaged", original[:-1] + bytes([original[-1] ^ 1]), "every chunk must be checked before any is used"),
        ("holds half a chunk", half_chunk, "a chunk of the wrong shape must be refused"),
        ("holds float32 KV (chunks 0 and 1 are float64)",
         student.kv_connector.serialize_chunk(kv[:, :, 8:12].astype(np.float32), FINGERPRINT),
         "every chunk must have the first chunk's dtype, L, Hkv and d"),
        ("was evicted", None, "a missing chunk must not be skipped or raise"),
    ):
        if value is None:
            store.delete(keys[2])
        else:
            store.set(keys[2], value)
        got = second.load(tokens, 12)
        assert got is None, (
            f"load when chunk 2 {label} after lookup returned {type(got).__name__}; expected None (a miss). "
            f"Likely cause: {cause}"
        )
        check_counters(f"after a failed load (chunk 2 {label})", second, {"hits": 9})
    for n in (0, -4, 13):  # n must be from 1 to the 12 tokens of the full chunks
        commands = dict(store.commands)
        with pytest.raises(ValueError):
            second.load(tokens, n)
        assert dict(store.commands) == commands, (
            f"load(<13 tokens>, {n}) sent commands to the store before raising ValueError; expected the ValueError "
            "before the store is read (Redis refuses an MGET of no keys with another error)")
    with pytest.raises(ValueError):
        second.store(tokens, kv[:, :, :8])  # KV of 8 tokens for 3 full chunks
    there = student.fresh_call("kv_connector", "deserialize_chunk", sent, FINGERPRINT)
    assert isinstance(there, np.ndarray) and there.dtype == kv.dtype and np.array_equal(there, kv[:, :, 8:12]), (
        f"deserialize_chunk in a fresh process (another engine) of chunk 2, as store sent it, returned "
        f"{type(there).__name__}, not that chunk. Likely cause: store must send serialize_chunk's bytes: another "
        "engine, in another process, loads them through the store, so nothing kept in this process's memory may be "
        "needed to read them"
    )


@pytest.mark.task("kv_connector", points=0.5)
def test_load_and_lookup_talk_to_the_store_as_stated(student: Any) -> None:
    store, client = new_store(student)
    writer = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    tokens = tokens_of(17, 11)
    assert stored(writer, tokens, kv_array(17, seed=11)) == 4, "storing 17 tokens in chunks of 4 should store 4 chunks"
    keys = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    sizes = [len(store.get(key)) for key in keys]
    connector = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    before = dict(store.commands)
    assert connector.lookup(tokens) == 16, "lookup of a prompt whose 4 full chunks are stored should return 16"
    read = {name: store.commands.get(name, 0) - before.get(name, 0) for name in ("get", "mget")}
    assert not any(read.values()), (
        f"lookup sent {read} to the store; expected no GET or MGET. lookup reads no values (uses `exists`): a GET "
        "also refreshes the store's LRU order, keeping chunks alive that nobody loads"
    )
    for n in (16, 5):
        round_trips, gets = store.round_trips, store.commands.get("get", 0)
        loaded = connector.load(tokens, n)
        assert isinstance(loaded, np.ndarray), f"load(<17 tokens>, {n}) of stored chunks returned {type(loaded).__name__}"
        took, got = store.round_trips - round_trips, store.commands.get("get", 0) - gets
        needed = -(-n // 4)
        assert took <= needed and got <= needed, (
            f"load(<17 tokens>, {n}) took {took} round trips and {got} GETs; expected at most {needed}. load reads only "
            f"the ceil(n / chunk_size) = {needed} chunks that cover tokens 0 .. n-1, each at most once"
        )
    loaded_before = connector.bytes_loaded
    last = store.get(keys[3])
    store.set(keys[3], last[:-1] + bytes([last[-1] ^ 1]))  # the last chunk read, damaged: load fails after all arrive
    assert connector.load(tokens, 16) is None, "load when chunk 3 was damaged should return None (a miss)"
    assert connector.bytes_loaded - loaded_before == sum(sizes), (
        f"a load that failed (chunk 3 damaged) added {connector.bytes_loaded - loaded_before} to bytes_loaded; expected "
        f"{sum(sizes)}, the 4 values received. bytes_loaded counts the bytes load received in both cases, success or "
        "None (those bytes crossed the wire too)"
    )


KV8 = kv_array(8, seed=9)
# (what is called, call(kv_connector module, a MemoryStore), ValueError or the right answer).
EDGES = [
    ("chunk_keys([1.0, 2.0], 1, fp)", lambda kc, st: kc.chunk_keys([1.0, 2.0], 1, FINGERPRINT), ValueError),
    ("chunk_keys([[1, 2]], 1, fp)", lambda kc, st: kc.chunk_keys([[1, 2]], 1, FINGERPRINT), ValueError),
    ("chunk_keys(tokens, -1, fp)", lambda kc, st: kc.chunk_keys([1, 2, 3], -1, FINGERPRINT), ValueError),
    ("len(chunk_keys([5, 6, 7], 1, fp))", lambda kc, st: len(kc.chunk_keys([5, 6, 7], 1, FINGERPRINT)), 3),
    ("chunk_keys(tokens, 4, '')", lambda kc, st: kc.chunk_keys([1, 2, 3, 4], 4, ""), ValueError),
    ("serialize_chunk(<int64 array>, fp)", lambda kc, st: kc.serialize_chunk(np.ones((2, 2, 4, 2, 4), np.int64),
                                                                             FINGERPRINT), ValueError),
    ("serialize_chunk(kv, '')", lambda kc, st: kc.serialize_chunk(KV8, ""), ValueError),
    ("deserialize_chunk(None, fp)", lambda kc, st: kc.deserialize_chunk(None, FINGERPRINT), None),
    ("deserialize_chunk('KVLC', fp)", lambda kc, st: kc.deserialize_chunk("KVLC", FINGERPRINT), None),
    ("KVConnector(store, fp, 0)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 0), ValueError),
    ("KVConnector(store, fp, 1).lookup([1, 2])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 1).lookup([1, 2]), 0),
    ("KVConnector(store, '', 4)", lambda kc, st: kc.KVConnector(st, "", 4), ValueError),
    ("KVConnector(store, fp, 2.0)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 2.0), ValueError),
    ("store(<8 tokens>, kv of shape [2, 3, 8, 2, 4])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), np.zeros((2, 3, 8, 2, 4))), ValueError),
    ("store(<8 tokens>, kv of exactly 8 positions)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), KV8), 2),
    ("store(<8 tokens>, kv of a 1-layer model [1, 2, 8, 2, 4])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), KV8[:1]), 2),
]


@pytest.mark.task("kv_connector", points=1 / len(EDGES))
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: Any) -> None:
    _, client = new_store(student)
    try:
        result = call(student.kv_connector, client)
    except Exception as error:
        if want is ValueError and isinstance(error, ValueError):
            return
        pytest.fail(f"{what} raised {type(error).__name__}: {error}; expected "
                    f"{'ValueError' if want is ValueError else repr(want)} (see its docstring)", pytrace=False)
    assert want is not ValueError, f"{what} should raise ValueError (see its docstring); it returned {result!r:.100}"
    assert result == want, f"{what} returned {result!r:.100}; expected {want!r} (see its docstring)"


# Random lookup / load / store calls, and chunks evicted, damaged or replaced between them
# (connector_conformance_checks.py): answers, counters, the store's keys and the commands sent after each.
@pytest.mark.task("kv_connector", points=0.5)
def test_generated_calls_keep_the_rules(student: Any) -> None:
    run_machine(connector_machine(student), CONNECTOR_PUBLIC)


# chunk_keys on generated tokens, chunk sizes and fingerprints (keys_property_checks.py): count, form, the
# chain (whole key or digest, any fixed width), values only, the fingerprint, and the stated ValueErrors.
@pytest.mark.task("kv_connector", points=0.25)
def test_chunk_keys_properties(student: Any) -> None:
    problem = every_error_problem(student)
    assert problem is None, problem
    run_given(keys_given(student, examples=6))


@pytest.mark.task("kv_connector", points=0.25)
def test_stated_connector_edges(student: Any) -> None:
    problem = stated_edges_problem(student)
    assert problem is None, problem
