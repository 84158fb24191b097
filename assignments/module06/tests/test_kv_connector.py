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

import functools
import pickle
from typing import Any

import numpy as np
import pytest

from connector_checks import (
    FOREIGN_CAUSE, bad_load_problem, counters_problem, docstring_layout, edge_problem, elsewhere_read_problem,
    failed_load_bytes_problem, failed_load_problem, keys_problem, kv_array, lent_store, load_reads_problem,
    lookup_problem, lookup_reads_problem, miss_problem, resend_problem, sent_since, store_counts,
    stored_elsewhere_problem,
)
from connector_checks import tokens_of as drawn_tokens
from connector_conformance_checks import CONNECTOR_PUBLIC, connector_machine, stated_edges_problem
from kvlab.testing.conformance import run_given, run_machine
from keys_property_checks import every_error_problem, keys_given

FINGERPRINT = "public-model/s0/float64/L3x2xTx2x4"
tokens_of = functools.partial(drawn_tokens, high=30_000)


def check_counters(when: str, connector: Any, expected: dict[str, int]) -> None:
    problem = counters_problem(when, {name: getattr(connector, name) for name in expected}, expected)
    assert problem is None, problem


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
    problem = keys_problem(f"chunk_keys(<14 tokens>, 4, {FINGERPRINT!r})", keys, 14, 4, FINGERPRINT)
    assert problem is None, problem
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
    problem = elsewhere_read_problem(student, data, FINGERPRINT, elsewhere)
    assert problem is None, problem
    damaged = {f"byte {i} changed": data[:i] + bytes([data[i] ^ 1]) + data[i + 1:] for i in range(len(data))}
    damaged.update({f"truncated to {n} bytes": data[:n] for n in range(0, len(data), 7)})
    damaged["with a byte appended"] = data + b"\x00"
    for label, value in damaged.items():
        problem = miss_problem(student, label, value, FINGERPRINT, "Likely cause: no checksum over the whole chunk "
                               "(header and payload), or the lengths are not checked")
        assert problem is None, problem
    for other in ("another-model", FINGERPRINT + "x", FINGERPRINT[:-1]):
        problem = miss_problem(student, f"written for {FINGERPRINT!r} and read for {other!r}", data, other,
                               "Likely cause: the fingerprint in the header must be compared with the reader's; "
                               "compare the fingerprints whole")
        assert problem is None, problem
    problem = miss_problem(student, "that is a pickled ndarray", pickle.dumps(kv_array(4, np.float32, seed=4)),
                           FINGERPRINT, "Likely cause: never unpickle what a shared store holds")
    assert problem is None, problem
    assert b"numpy" not in data, (
        "serialize_chunk's bytes look like a pickle (they name numpy's classes); expected a header and raw array bytes"
    )
    kv = kv_array(4, np.float32, seed=4)
    for label, fields in (("an unknown marker b'NOPE'", {"magic": b"NOPE"}), ("version 0", {"version": 0}),
                          ("dtype code 0", {"code": 0}), ("4 bytes before the checksum", {"extra": bytes(4)}),
                          ("shape (3, 2, 3, 2, 4) for a payload of (3, 2, 4, 2, 4)", {"shape": (3, 2, 3, 2, 4)}),
                          ("only the first 15 bytes of a header", {"cut": 15})):
        problem = miss_problem(student, f"in the docstring's layout with {label}, under a valid CRC-32",
                               docstring_layout(kv, FINGERPRINT, **fields), FINGERPRINT, FOREIGN_CAUSE)
        assert problem is None, problem


@pytest.mark.task("kv_connector", points=0.5)
def test_lookup_is_the_longest_run_from_the_start(student: Any) -> None:
    store, client = lent_store(student)
    connector = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    tokens = tokens_of(18, 5)
    stored(connector, tokens, kv_array(18, seed=5))
    for label, prompt, want in (("the stored prompt", tokens, 16), ("a longer prompt", tokens + [1, 2, 3, 4, 5], 16),
                                ("a prompt that differs in chunk 2", tokens[:9] + [tokens[9] + 1] + tokens[10:], 8),
                                ("a prompt shorter than one chunk", tokens[:3], 0)):
        problem = lookup_problem(label, connector.lookup(prompt), want, 4, len(prompt))
        assert problem is None, problem
    keys = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    store.delete(keys[1])
    got = connector.lookup(tokens)
    assert got == 4, (
        f"lookup after chunk 1 of 4 was evicted returned {got!r}; expected 4 tokens. Likely cause: a missing middle "
        "chunk must end the run"
    )


@pytest.mark.task("kv_connector", points=1)
def test_store_and_load_across_connectors(student: Any) -> None:
    store, client = lent_store(student)
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
    problem = resend_problem("a prompt of 4 full chunks whose chunks 0 and 2 are in the store (chunk 1 was evicted: "
                             "chunks 1 and 3 to send)", count, sends, 2)
    assert problem is None, problem
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
        problem = failed_load_problem(f"load when chunk 2 {label} after lookup", lambda: second.load(tokens, 12), cause)
        assert problem is None, problem
        check_counters(f"after a failed load (chunk 2 {label})", second, {"hits": 9})
    for n in (0, -4, 13):  # n must be from 1 to the 12 tokens of the full chunks
        problem = bad_load_problem(second, store, tokens, n, 4)
        assert problem is None, problem
    with pytest.raises(ValueError):
        second.store(tokens, kv[:, :, :8])  # KV of 8 tokens for 3 full chunks
    problem = stored_elsewhere_problem(student, "chunk 2", sent, FINGERPRINT, kv[:, :, 8:12])
    assert problem is None, problem


@pytest.mark.task("kv_connector", points=0.5)
def test_load_and_lookup_talk_to_the_store_as_stated(student: Any) -> None:
    store, client = lent_store(student)
    writer = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    tokens = tokens_of(17, 11)
    assert stored(writer, tokens, kv_array(17, seed=11)) == 4, "storing 17 tokens in chunks of 4 should store 4 chunks"
    keys = student.kv_connector.chunk_keys(tokens, 4, FINGERPRINT)
    sizes = [len(store.get(key)) for key in keys]
    connector = student.kv_connector.KVConnector(client, FINGERPRINT, 4)
    before = store_counts(store)
    assert connector.lookup(tokens) == 16, "lookup of a prompt whose 4 full chunks are stored should return 16"
    problem = lookup_reads_problem("a prompt whose 4 full chunks are stored", sent_since(store, before)[1])
    assert problem is None, problem
    for n in (16, 5):
        before = store_counts(store)
        loaded = connector.load(tokens, n)
        assert isinstance(loaded, np.ndarray), f"load(<17 tokens>, {n}) of stored chunks returned {type(loaded).__name__}"
        problem = load_reads_problem(f"load(<17 tokens>, {n})", n, 4, *sent_since(store, before))
        assert problem is None, problem
    loaded_before = connector.bytes_loaded
    last = store.get(keys[3])
    store.set(keys[3], last[:-1] + bytes([last[-1] ^ 1]))  # the last chunk read, damaged: load fails after all arrive
    assert connector.load(tokens, 16) is None, "load when chunk 3 was damaged should return None (a miss)"
    problem = failed_load_bytes_problem("load(<17 tokens>, 16) with chunk 3 (the last read) damaged",
                                        connector.bytes_loaded - loaded_before, sum(sizes))
    assert problem is None, problem


def returns(value: Any) -> Any:
    """A check of an edge case's result: None when it equals `value`."""
    return lambda got: None if got == value else f"it returned {got!r:.100}; expected {value!r} (see its docstring)"


KV8 = kv_array(8, seed=9)
# (what is called, call(kv_connector module, a StoreClient of a new MemoryStore), ValueError or a check of the result).
EDGES = [
    ("chunk_keys([1.0, 2.0], 1, fp)", lambda kc, st: kc.chunk_keys([1.0, 2.0], 1, FINGERPRINT), ValueError),
    ("chunk_keys([[1, 2]], 1, fp)", lambda kc, st: kc.chunk_keys([[1, 2]], 1, FINGERPRINT), ValueError),
    ("chunk_keys(tokens, -1, fp)", lambda kc, st: kc.chunk_keys([1, 2, 3], -1, FINGERPRINT), ValueError),
    ("len(chunk_keys([5, 6, 7], 1, fp))", lambda kc, st: len(kc.chunk_keys([5, 6, 7], 1, FINGERPRINT)), returns(3)),
    ("chunk_keys(tokens, 4, '')", lambda kc, st: kc.chunk_keys([1, 2, 3, 4], 4, ""), ValueError),
    ("serialize_chunk(<int64 array>, fp)", lambda kc, st: kc.serialize_chunk(np.ones((2, 2, 4, 2, 4), np.int64),
                                                                             FINGERPRINT), ValueError),
    ("serialize_chunk(kv, '')", lambda kc, st: kc.serialize_chunk(KV8, ""), ValueError),
    ("deserialize_chunk(None, fp)", lambda kc, st: kc.deserialize_chunk(None, FINGERPRINT), returns(None)),
    ("deserialize_chunk('KVLC', fp)", lambda kc, st: kc.deserialize_chunk("KVLC", FINGERPRINT), returns(None)),
    ("KVConnector(store, fp, 0)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 0), ValueError),
    ("KVConnector(store, fp, 1).lookup([1, 2])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 1).lookup([1, 2]),
     returns(0)),
    ("KVConnector(store, '', 4)", lambda kc, st: kc.KVConnector(st, "", 4), ValueError),
    ("KVConnector(store, fp, 2.0)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 2.0), ValueError),
    ("store(<8 tokens>, kv of shape [2, 3, 8, 2, 4])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), np.zeros((2, 3, 8, 2, 4))), ValueError),
    ("store(<8 tokens>, kv of exactly 8 positions)", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), KV8), returns(2)),
    ("store(<8 tokens>, kv of a 1-layer model [1, 2, 8, 2, 4])", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        list(range(8)), KV8[:1]), returns(2)),
]


@pytest.mark.task("kv_connector", points=1 / len(EDGES))
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: Any) -> None:
    problem = edge_problem(student, what, call, want)
    assert problem is None, problem


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
