"""Hidden tests of kv_connector.py (task kv_connector): chunk keys (full chunks only, chained, digest 0 on
tokens only, any integer type, the fingerprint, the same in every process), exact round trips, damaged and
foreign chunks read as misses, and the connector's lookup (no values read), load (the chunks it needs, each at most once), store and
counters (bytes_loaded of failed loads included) on a kvlab.kvstore.MemoryStore.

The checks they share with the public tests are in the public folder's connector_checks.py, the
hidden tests' own helpers in _kv_connector_checks.py.
"""
from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

from _kv_connector_checks import (
    CONNECTOR_RULES, FINGERPRINT, OTHER_FINGERPRINT, called, checked_keys, checksummed_foreign_variants, counters,
    damaged_variants, elsewhere_problem, first_difference, new_connector, serialized, written_elsewhere,
)
from connector_checks import (
    FOREIGN_CAUSE, HEAD_DIM, LAYERS, array_mismatch, bad_load_problem, counters_problem, describe_error, edge_problem,
    failed_load_problem, keys_problem, kv_array, lookup_problem, miss_problem, outcome, resend_problem,
    stored_elsewhere_problem, tokens_of,
)
from connector_conformance_checks import CONNECTOR_HIDDEN, connector_machine, stated_edges_problem
from kvlab.testing.conformance import run_given, run_machine
from keys_property_checks import every_error_problem, keys_given


@pytest.mark.task("kv_connector", points=0.125)
@pytest.mark.parametrize("chunk_size", [3, 16])
def test_one_key_per_full_chunk(student: Any, chunk_size: int) -> None:
    tokens = tokens_of(4 * chunk_size + 2, chunk_size)
    for n in (0, 1, chunk_size - 1, chunk_size, 2 * chunk_size + 1, 4 * chunk_size + 2):
        checked_keys(student, tokens[:n], chunk_size)


@pytest.mark.task("kv_connector", points=0.5)
def test_keys_are_chained(student: Any) -> None:
    chunk, n_chunks = 5, 4
    tokens = tokens_of(chunk * n_chunks, 21)
    original = checked_keys(student, tokens, chunk)
    for j, offset in ((j, offset) for j in range(n_chunks) for offset in (0, 2, chunk - 1)):
        changed = list(tokens)
        changed[j * chunk + offset] += 1
        keys = checked_keys(student, changed, chunk)
        same = [i for i in range(n_chunks) if keys[i] == original[i]]
        assert same == list(range(j)), (
            f"changing token {offset} of chunk {j} (of {n_chunks}, {chunk} tokens each) left keys {same} unchanged; "
            f"expected exactly {list(range(j))} unchanged. Likely cause: "
            + ("key i must cover every token of chunk i, its first and last included" if j in same else
               "the keys are not chained: key i must cover key i-1 and chunk i, so a change in chunk j changes "
               "keys j, j+1, ..." if any(i > j for i in same) else
               "key i must cover chunks 0 .. i only: a later chunk must not change an earlier key")
        )
    repeated = checked_keys(student, tokens[:chunk] * 3, chunk)
    assert len(set(repeated)) == 3, (
        "three identical chunks in a row gave equal keys; expected three different keys. Likely cause: the keys "
        "are not chained: a key names the whole prefix up to its chunk, not the chunk alone"
    )
    longer = checked_keys(student, tokens + tokens_of(7, 22), chunk)
    assert longer[:n_chunks] == original, (
        f"appending tokens changed key {first_difference(longer[:n_chunks], original)}; expected the keys of "
        "the first chunks to stay: key i depends on tokens 0 .. (i+1)*chunk_size-1 only"
    )


@pytest.mark.task("kv_connector", points=0.5)
def test_keys_depend_on_values_only(student: Any) -> None:
    tokens = [int(t) for t in np.random.default_rng(23).integers(0, 120, size=26)]
    reference = checked_keys(student, tokens, 8)
    forms = {"a tuple": tuple(tokens)}
    forms.update({f"an {np.dtype(d).name} array": np.array(tokens, dtype=d) for d in (np.int8, np.int32, np.uint16)})
    for form, value in forms.items():
        got = checked_keys(student, value, 8)
        assert got == reference, (
            f"chunk_keys of the same token values as {form} differs from the keys of a list (first at key "
            f"{first_difference(got, reference)}). Likely cause: the bytes hashed depend on the integer dtype; "
            "write every token id in one fixed width and byte order (e.g. np.asarray(tokens).astype('<i8'))"
        )


@pytest.mark.task("kv_connector", points=1)
def test_fingerprint_names_every_key(student: Any) -> None:
    tokens = tokens_of(24, 24)
    ours = checked_keys(student, tokens, 8)
    theirs = checked_keys(student, tokens, 8, OTHER_FINGERPRINT)
    clashes = [i for i, (a, b) in enumerate(zip(ours, theirs)) if a == b]
    assert not clashes, (
        f"two fingerprints gave equal keys {clashes}; expected every key to differ: the fingerprint must be in "
        "every key, so KV of one model, dtype or weights is never loaded into another"
    )
    # Digest 0 covers tokens only (the chain may carry key i-1's whole text or its digest: either chains).
    ours, theirs = [key[len(FINGERPRINT) + 1:] for key in ours], [key[len(OTHER_FINGERPRINT) + 1:] for key in theirs]
    assert ours[0] == theirs[0], (
        "with two fingerprints, digest 0 (key 0 after the fingerprint and ':') differs; expected it equal. Likely "
        "cause: digest 0 covers chunk 0's token ids only (nothing comes before chunk 0): hash no fingerprint into it"
    )


@pytest.mark.task("kv_connector", points=1)
def test_same_keys_in_a_fresh_process(student: Any) -> None:
    tokens = tokens_of(45, 25)
    here = checked_keys(student, tokens, 8)
    # A fresh process has its own hash seed: a key salted per process differs there from here.
    fresh = student.fresh_call("kv_connector", "chunk_keys", tokens, 8, FINGERPRINT)
    assert list(fresh) == list(here), (
        "chunk_keys gives different keys in different processes. Likely cause: Python's hash() is salted per "
        "process (PYTHONHASHSEED, as in LMCache's default hash): two engines could never share a chunk. Hash "
        "bytes with hashlib.sha256 only"
    )


@pytest.mark.task("kv_connector", points=0.25)
@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_round_trip_is_exact(student: Any, dtype: str) -> None:
    whole = kv_array(12, dtype, seed=31)
    fortran = np.asfortranarray(whole[:, :, 5:9])
    for label, kv in (("a chunk", whole[:, :, :4]), ("a strided view", whole[:, :, 2:11:3]),
                      ("a Fortran-ordered chunk (np.asfortranarray)", fortran),
                      ("a chunk holding nan and -0.0", np.where(whole[:, :, 4:8] > 1.0, np.nan, -0.0).astype(dtype))):
        data = serialized(student, kv)
        got, error = outcome(lambda data=data: student.kv_connector.deserialize_chunk(data, FINGERPRINT))
        assert error is None, f"deserialize_chunk of {label} just serialized raised {type(error).__name__}: {error}"
        if np.isnan(kv).any() and isinstance(got, np.ndarray) and got.shape == kv.shape:
            assert np.array_equal(np.isnan(got), np.isnan(kv)) and np.array_equal(np.signbit(got), np.signbit(kv)), (
                f"the round trip of {label} changed which values are nan or negative zero; expected every bit kept"
            )
            continue
        problem = array_mismatch(f"deserialize_chunk(serialize_chunk({label} {dtype}))", got, kv)
        if problem and kv is fortran and isinstance(got, np.ndarray) and got.shape == kv.shape:
            problem += (" (here a Fortran-ordered array: write the payload in C-order whatever the memory layout, "
                        "np.ascontiguousarray(kv).tobytes())")
        assert problem is None, problem
    data = serialized(student, whole[:, :, :4])
    for kind in (bytearray, memoryview):
        # Made beside the student's code: the sandbox passes bytes, not a bytearray or memoryview, across.
        got, error = outcome(lambda kind=kind: student.kv_connector.deserialize_chunk(
            student.call(f"builtins:{kind.__name__}", data), FINGERPRINT))
        problem = (f"deserialize_chunk of a {kind.__name__} of a chunk raised {describe_error(error)}"
                   if error is not None else array_mismatch(f"deserialize_chunk({kind.__name__}(a {dtype} chunk))",
                                                            got, whole[:, :, :4]))
        assert problem is None, f"{problem}: data may be bytes, a bytearray or a memoryview"
    problem = elsewhere_problem(student)
    assert problem is None, problem


@pytest.mark.task("kv_connector", points=1.25)
def test_damaged_chunks_are_misses(student: Any) -> None:
    # A checksum over the header too changes when one header byte does: two fingerprints one character apart
    # must give chunks differing in more than that character.
    kv = kv_array(4, np.float32, seed=33)
    one, other = serialized(student, kv, FINGERPRINT + "-x"), serialized(student, kv, FINGERPRINT + "-y")
    differing = sum(a != b for a, b in zip(one, other)) + abs(len(one) - len(other))
    assert differing > 1, (
        f"serialize_chunk of the same KV under fingerprints {FINGERPRINT + '-x'!r} and {FINGERPRINT + '-y'!r} gives "
        f"bytes differing in {differing} byte(s) only: the checksum does not cover the header. It must be a checksum "
        "over all of it (the reference: the CRC-32 of everything before it), so a flipped header byte is detected")
    # Damaged copies of a chunk another process wrote: a chunk this process wrote could be told apart
    # from a damaged one by what it remembers, not by checking the bytes.
    data = written_elsewhere(student)
    positions = sorted({*range(min(64, len(data))), len(data) // 2, len(data) - 5, len(data) - 1})
    for label, damaged in damaged_variants(data, positions).items():
        problem = miss_problem(student, label, damaged, FINGERPRINT,
                               "Likely cause: no checksum over the whole chunk (header and payload), or the lengths "
                               "in the header are not checked against the data")
        assert problem is None, problem


@pytest.mark.task("kv_connector", points=1)
def test_foreign_chunks_are_misses(student: Any) -> None:
    data = written_elsewhere(student)
    for fingerprint, cause in (
        (OTHER_FINGERPRINT, "the fingerprint in the header must be compared with the reader's"),
        (FINGERPRINT + "x", "compare the fingerprints whole: one may be a prefix of the other"),
        (FINGERPRINT[:-1], "compare the fingerprints whole: one may be a prefix of the other"),
    ):
        problem = miss_problem(student, f"written for {FINGERPRINT!r} and read for {fingerprint!r}", data,
                               fingerprint, f"Likely cause: {cause}")
        assert problem is None, problem
    pickled = pickle.dumps(kv_array(4, seed=34))
    problem = miss_problem(student, "that is a pickled ndarray", pickled, FINGERPRINT,
                           "Likely cause: the data was unpickled: pickle runs code named by the data, and a shared "
                           "store is written by other processes. Read only your own header and raw bytes")
    assert problem is None, problem
    looks_pickled = data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05")
    assert b"numpy" not in data and not looks_pickled, (
        "serialize_chunk's bytes look like a pickle (they name numpy's classes); expected a header and raw "
        "array bytes (ndarray.tobytes()), which cannot run code when read"
    )
    for label, foreign in checksummed_foreign_variants(kv_array(4, seed=35), FINGERPRINT).items():
        problem = miss_problem(student, f"in the docstring's layout with {label}, under a valid CRC-32", foreign,
                               FINGERPRINT, FOREIGN_CAUSE)
        assert problem is None, problem


@pytest.mark.task("kv_connector", points=0.5)
def test_lookup_finds_the_longest_run_from_the_start(student: Any) -> None:
    chunk = 4
    tokens = tokens_of(6 * chunk + 3, 41)
    store, writer = new_connector(student, chunk)
    called("store(<27 tokens>, kv)", lambda: writer.store(tokens, kv_array(len(tokens), seed=41)))
    _, reader = new_connector(student, chunk, store=store)
    keys = checked_keys(student, tokens, chunk)
    cases = [("every full chunk stored", tokens, 6 * chunk),
             ("a prompt that goes on past the stored chunks", tokens + tokens_of(9, 42), 6 * chunk),
             ("a prompt shorter than one chunk", tokens[:chunk - 1], 0),
             ("a prompt that differs in chunk 3", tokens[:3 * chunk + 1] + [tokens[3 * chunk + 1] + 1] + tokens[3 * chunk + 2:],
              3 * chunk)]
    for label, prompt, want in cases:
        got = called(f"lookup ({label})", lambda prompt=prompt: reader.lookup(prompt))
        problem = lookup_problem(label, got, want, chunk, len(prompt))
        assert problem is None, problem
    called("deleting chunk 2 from the store", lambda: store.delete(keys[2]))
    got = called("lookup after chunk 2 was evicted", lambda: reader.lookup(tokens))
    assert got == 2 * chunk, (
        f"lookup after chunk 2 of 6 was evicted returned {got!r}; expected {2 * chunk} tokens. Likely cause: a "
        "missing middle chunk must end the run (the KV after it depends on it), however many chunks follow"
    )


@pytest.mark.task("kv_connector", points=1)
def test_a_second_engine_loads_what_the_first_stored(student: Any) -> None:
    chunk = 4
    system = tokens_of(5 * chunk, 43)
    first_prompt, second_prompt = system + tokens_of(3, 44), system + tokens_of(2, 45)
    kv = kv_array(len(first_prompt), seed=43)
    store, first = new_connector(student, chunk)
    stored = called("store(first prompt, kv)", lambda: first.store(first_prompt, kv))
    keys = checked_keys(student, first_prompt, chunk)
    sizes = [len(called("store.get", lambda key=key: store.get(key)) or b"") for key in keys]
    assert stored == 5 and all(sizes), (
        f"store of a 23-token prompt in chunks of 4 into an empty store returned {stored!r} and left "
        f"{sum(map(bool, sizes))} of its 5 full chunks in the store; expected 5 and 5"
    )
    problem = counters_problem("after the first store", counters(first),
                               {"chunks_stored": 5, "bytes_stored": sum(sizes), "hits": 0, "bytes_loaded": 0})
    assert problem is None, problem
    sent = called("store.get", lambda: store.get(keys[4]))  # read in a fresh process at the end
    _, second = new_connector(student, chunk, store=store)
    n = called("lookup(second prompt)", lambda: second.lookup(second_prompt))
    assert n == 5 * chunk, f"a new connector on the same store found {n!r} tokens of the shared system prompt; expected {5 * chunk}"
    loaded = called(f"load(second prompt, {n})", lambda: second.load(second_prompt, n))
    problem = array_mismatch(f"load(second prompt, {n})", loaded, kv[:, :, :n])
    assert problem is None, problem
    problem = counters_problem("after lookup and load of 5 stored chunks", counters(second),
                               {"hits": 5, "misses": 0, "bytes_loaded": sum(sizes), "chunks_stored": 0})
    assert problem is None, problem
    # An engine whose whole prompt is stored still computes the last token, so it asks for n - 1.
    partial, error = outcome(lambda: second.load(system, n - 1))
    assert error is None, (
        f"load(<{n} tokens>, {n - 1}) raised {describe_error(error)}. Likely cause: n need not be a multiple of "
        "chunk_size: load the chunks that cover the first n tokens and return those n positions"
    )
    assert not isinstance(partial, np.ndarray) or partial.shape[2:3] == (n - 1,), (
        f"load(<{n} tokens>, {n - 1}) returned {partial.shape[2]} positions; expected {n - 1}. Likely cause: load "
        "must read the ceil(n / chunk_size) chunks that cover n tokens and return the first n positions"
    )
    problem = array_mismatch(f"load(<{n} tokens>, {n - 1})", partial, kv[:, :, :n - 1])
    assert problem is None, problem
    problem = counters_problem(f"after load(<{n} tokens>, {n - 1})", counters(second), {"hits": 10})
    assert problem is None, problem
    before = counters(second)
    first_token = called("load(second prompt, 1)", lambda: second.load(second_prompt, 1))
    problem = array_mismatch("load(second prompt, 1)", first_token, kv[:, :, :1])
    assert problem is None, problem
    after = counters(second)
    read = (after["hits"] - before["hits"], after["bytes_loaded"] - before["bytes_loaded"])
    assert read == (1, sizes[0]), (
        f"load(second prompt, 1) added {read[0]} to hits and {read[1]:,} to bytes_loaded; expected only chunk 0 "
        "read. Likely cause: load reads only the ceil(n / chunk_size) chunks that cover tokens 0 .. n-1")
    # Chunk 4 evicted first: whether a chunk is in the store is the store's answer, not a memory of what was sent.
    store.delete(keys[4])
    sets_before = store.commands.get("set", 0)
    longer = second_prompt + tokens_of(2 * chunk, 46)
    longer_kv = kv_array(len(longer), seed=47)
    stored = called("store(longer prompt, kv)", lambda: second.store(longer, longer_kv))
    sets = store.commands.get("set", 0) - sets_before
    problem = resend_problem("a prompt of 7 full chunks whose first 4 are in the store (chunk 4 was stored, then "
                             "evicted)", stored, sets, 3)
    assert problem is None, problem
    problem = counters_problem("after storing a prompt whose first 4 of 7 full chunks were in the store",
                               counters(second), {"chunks_stored": 3})
    assert problem is None, problem
    again = called("load(second prompt, 20) after the second store", lambda: second.load(second_prompt, n))
    problem = array_mismatch("load after another prompt with the same prefix was stored (chunk 4 stored anew)", again,
                             np.concatenate([kv[:, :, :4 * chunk], longer_kv[:, :, 4 * chunk:n]], axis=2))
    assert problem is None, (f"{problem}; or chunk 4, evicted and stored again from the longer prompt's KV, was not read "
                             "from the store: load returns the chunks the store holds when it is called")
    # Last: without bubblewrap the grader ends this worker (the store and connectors in it) for the fresh one.
    problem = stored_elsewhere_problem(student, "chunk 4 of the first prompt", sent, FINGERPRINT,
                                       kv[:, :, 4 * chunk:5 * chunk])
    assert problem is None, problem


@pytest.mark.task("kv_connector", points=1)
def test_load_of_a_chunk_gone_or_damaged_is_a_miss(student: Any) -> None:
    chunk = 4
    tokens = tokens_of(4 * chunk, 51)
    kv = kv_array(len(tokens), np.float32, seed=51)
    store, connector = new_connector(student, chunk)
    called("store", lambda: connector.store(tokens, kv))
    keys = checked_keys(student, tokens, chunk)
    n = called("lookup", lambda: connector.lookup(tokens))
    assert n == 4 * chunk, f"lookup after storing 4 chunks returned {n!r}; expected {4 * chunk}"
    original = called("store.get", lambda: store.get(keys[1]))
    short = serialized(student, kv[:, :, :chunk // 2])
    wider = np.random.default_rng(52).standard_normal((LAYERS, 2, chunk, 3, HEAD_DIM)).astype(np.float32)
    for label, value in (("was evicted", None), ("was damaged", original[:-3] + b"\x00\x00\x00"),
                         ("holds half a chunk", short),
                         ("holds float64 KV (chunk 0 is float32)", serialized(student, kv[:, :, chunk:2 * chunk].astype(np.float64))),
                         ("holds KV of 3 heads (chunk 0 has 2)", serialized(student, wider))):
        before = counters(connector)
        if value is None:
            called("store.delete", lambda: store.delete(keys[1]))
        else:
            called("store.set", lambda value=value: store.set(keys[1], value))
        problem = failed_load_problem(
            f"load of 4 chunks when chunk 1 {label} after lookup", lambda: connector.load(tokens, n),
            "a missing chunk must not be skipped or raise" if label == "was evicted" else
            "every chunk must be checked (deserialize_chunk) before any is used" if label == "was damaged" else
            "a chunk of the wrong shape must be refused: each must be [L, 2, chunk_size, Hkv, d]" if "half" in label else
            "every chunk must have the first chunk's dtype, L, Hkv and d")
        assert problem is None, problem
        assert counters(connector)["hits"] == before["hits"], (
            f"a failed load (chunk 1 {label}) changed hits; expected hits to count chunks of successful loads only"
        )
    called("store.set", lambda: store.set(keys[1], original))
    problem = array_mismatch("load once chunk 1 is back", called("load", lambda: connector.load(tokens, n)), kv)
    assert problem is None, problem


@pytest.mark.task("kv_connector", points=0.5)
def test_misses_and_bad_arguments(student: Any) -> None:
    chunk = 4
    tokens = tokens_of(5 * chunk + 1, 61)
    store, connector = new_connector(student, chunk)
    called("store", lambda: connector.store(tokens[:2 * chunk], kv_array(2 * chunk, seed=61)))
    got = called("lookup", lambda: connector.lookup(tokens))
    problem = counters_problem("after a lookup finding 2 of 5 full chunks", counters(connector),
                               {"misses": 3, "hits": 0})
    assert got == 2 * chunk and problem is None, problem or f"lookup returned {got!r}; expected {2 * chunk}"
    for n in (0, -chunk, 5 * chunk + 1):
        problem = bad_load_problem(connector, store, tokens, n, chunk)
        assert problem is None, problem
    result, error = outcome(lambda: connector.store(tokens, kv_array(3 * chunk, seed=62)))
    assert isinstance(error, ValueError), (
        "store of 5 full chunks with KV of only 12 tokens should raise ValueError; it "
        + (f"raised {type(error).__name__}: {error}" if error else f"returned {result!r}")
    )


@pytest.mark.task("kv_connector", points=0.5)
@pytest.mark.parametrize(("rule", "problem_of"), CONNECTOR_RULES, ids=[rule for rule, _ in CONNECTOR_RULES])
def test_connector_rule(student: Any, rule: str, problem_of: Any) -> None:
    problem = problem_of(student)
    assert problem is None, f"{rule}: {problem}"


def keys_of(n: int, chunk_size: int) -> Any:
    return lambda keys: keys_problem(f"chunk_keys(<{n} tokens>, {chunk_size}, ...)", keys, n, chunk_size, FINGERPRINT)


KV = kv_array(8, np.float32, seed=71)
TOKENS = tokens_of(10, 71)
# (what is called, call(kv_connector module, a MemoryStore), ValueError or a check of the result: None when right).
EDGES = [
    ("chunk_keys of float tokens", lambda kc, st: kc.chunk_keys([1.5, 2.5, 3.5], 1, FINGERPRINT), ValueError),
    ("chunk_keys of a 2-D integer array", lambda kc, st: kc.chunk_keys(np.arange(6).reshape(2, 3), 3, FINGERPRINT),
     ValueError),
    ("chunk_keys with chunk_size -2", lambda kc, st: kc.chunk_keys(TOKENS, -2, FINGERPRINT), ValueError),
    ("chunk_keys with chunk_size 1, the smallest", lambda kc, st: kc.chunk_keys(TOKENS, 1, FINGERPRINT), keys_of(10, 1)),
    ("chunk_keys with fingerprint ''", lambda kc, st: kc.chunk_keys(TOKENS, 4, ""), ValueError),
    ("chunk_keys with fingerprint None", lambda kc, st: kc.chunk_keys(TOKENS, 4, None), ValueError),
    ("serialize_chunk of an int32 array", lambda kc, st: kc.serialize_chunk(np.zeros((2, 2, 4, 2, 4), np.int32),
                                                                            FINGERPRINT), ValueError),
    ("serialize_chunk with fingerprint ''", lambda kc, st: kc.serialize_chunk(KV, ""), ValueError),
    ("deserialize_chunk(None), a store's miss", lambda kc, st: kc.deserialize_chunk(None, FINGERPRINT),
     lambda got: None if got is None else f"it returned {type(got).__name__}; expected None (a miss)"),
    ("deserialize_chunk of a str", lambda kc, st: kc.deserialize_chunk("KVLC" * 30, FINGERPRINT),
     lambda got: None if got is None else f"it returned {type(got).__name__}; expected None (a miss)"),
    ("KVConnector with chunk_size 0", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 0), ValueError),
    ("KVConnector with chunk_size 1, the smallest, then lookup on an empty store",
     lambda kc, st: kc.KVConnector(st, FINGERPRINT, 1).lookup(TOKENS),
     lambda got: None if got == 0 else f"lookup returned {got!r}; nothing is stored"),
    ("KVConnector with fingerprint ''", lambda kc, st: kc.KVConnector(st, "", 4), ValueError),
    ("KVConnector with chunk_size 4.0", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4.0), ValueError),
    ("store of KV whose axis 1 is 3", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        TOKENS, np.zeros((2, 3, 10, 2, 4))), ValueError),
    ("store of 2 full chunks of a 3-layer model", lambda kc, st: kc.KVConnector(st, FINGERPRINT, 4).store(
        TOKENS, np.zeros((3, 2, 10, 2, 4))),
     lambda got: None if got == 2 else f"it returned {got!r}; the store was empty (L, the number of layers, is any)"),
]


@pytest.mark.task("kv_connector", points=0.25 / len(EDGES))
@pytest.mark.parametrize(("what", "call", "want"), EDGES, ids=[e[0] for e in EDGES])
def test_edge_cases(student: Any, what: str, call: Any, want: Any) -> None:
    problem = edge_problem(student, what, call, want)
    assert problem is None, problem


# Random lookup / load / store calls, and chunks evicted, damaged or replaced between them
# (connector_conformance_checks.py), against what the store must hold: every answer, the counters,
# the store's keys and the commands sent after each call.
@pytest.mark.task("kv_connector", points=1.25)
def test_generated_calls_match_the_reference(student: Any) -> None:
    run_machine(connector_machine(student), CONNECTOR_HIDDEN)


# chunk_keys on generated tokens, chunk sizes and fingerprints (keys_property_checks.py): the contract
# leaves only the chain's parent text and the integer width free, so these properties are all of it.
@pytest.mark.task("kv_connector", points=1)
def test_chunk_keys_properties(student: Any) -> None:
    problem = every_error_problem(student)
    assert problem is None, problem
    run_given(keys_given(student, examples=10))


@pytest.mark.task("kv_connector", points=0.25)
def test_stated_connector_edges(student: Any) -> None:
    problem = stated_edges_problem(student)
    assert problem is None, problem
