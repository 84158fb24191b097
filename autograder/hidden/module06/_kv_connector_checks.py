"""What the hidden tests of kv_connector.py keep to themselves: their fingerprints, the chunk another
process writes, damaged and foreign variants of it, the connectors they build, and the connector's
rules about what it sends and counts. The checks they share with the public tests (keys, round
trips, misses, lookups, counters, edge cases) are in the public folder's connector_checks.py.

Expected arrays are made here (fixed seeds) and compared in this process. The store is a
`kvlab.kvstore.MemoryStore` in this process (the grader's `remote` `serve` runs every request of the
connector's client on it): what the worker does to its own objects cannot change what the store
holds or counts; a connector that answers from a memory of its own instead of asking the store is
caught by the store changing between its calls.
"""
from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest

from connector_checks import (
    describe_error, docstring_layout, elsewhere_read_problem, failed_load_bytes_problem, keys_problem, kv_array,
    lent_store, load_reads_problem, lookup_reads_problem, outcome, sent_since, store_counts, tokens_of,
)
from kvlab.kvstore import MemoryStore

# Chunks of 4 tokens unless a test says otherwise.
FINGERPRINT = "hidden-model-0a1b2c3d4e5f/s0/float64/L3x2xTx2x4"
OTHER_FINGERPRINT = "hidden-model-0a1b2c3d4e5f/s1/float64/L3x2xTx2x4"


def checked_keys(student: Any, tokens: Any, chunk_size: int, fingerprint: str = FINGERPRINT) -> list[str]:
    """The student's chunk_keys(tokens, chunk_size, fingerprint); fail the test unless well-formed."""
    call = f"chunk_keys(<{len(tokens)} tokens>, {chunk_size}, {fingerprint!r})"
    keys, error = outcome(lambda: student.kv_connector.chunk_keys(tokens, chunk_size, fingerprint))
    if error is not None:
        partial = len(tokens) % chunk_size if isinstance(chunk_size, int) and chunk_size > 0 else 0
        pytest.fail(f"{call} raised {describe_error(error)}" + (
            f". These tokens end in a partial chunk of {partial}: it gets no key (one key per FULL chunk, "
            "len(tokens) // chunk_size keys)" if partial else ""), pytrace=False)
    problem = keys_problem(call, keys, len(tokens), chunk_size, fingerprint)
    if problem:
        pytest.fail(problem, pytrace=False)
    return keys


def first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """Index of the first position where a and b differ (a length difference counts), or None."""
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


def serialized(student: Any, kv: np.ndarray, fingerprint: str = FINGERPRINT) -> bytes:
    """The student's serialize_chunk(kv, fingerprint); fail the test unless it is bytes."""
    data, error = outcome(lambda: student.kv_connector.serialize_chunk(kv, fingerprint))
    if error is not None:
        pytest.fail(f"serialize_chunk(<{kv.dtype} {kv.shape}>, ...) raised {describe_error(error)}", pytrace=False)
    if not isinstance(data, bytes):
        pytest.fail(f"serialize_chunk returned {type(data).__name__}; expected bytes", pytrace=False)
    return data


# The chunk another process writes: serialize_chunk(ELSEWHERE_KV, FINGERPRINT) in a fresh process, once
# per grading. This process's serialize_chunk never wrote it, so reading it here (exactly, or as a miss
# once damaged) takes what its bytes carry: a chunk kept in memory, the bytes only naming it, reads as
# nothing here, as it would in another engine.
ELSEWHERE_KV = kv_array(4, np.float32, seed=30)
_ELSEWHERE: weakref.WeakKeyDictionary[Any, bytes] = weakref.WeakKeyDictionary()


def written_elsewhere(student: Any) -> bytes:
    """serialize_chunk(ELSEWHERE_KV, FINGERPRINT) as a fresh process wrote it; fail the test unless bytes."""
    if student not in _ELSEWHERE:
        data, error = outcome(lambda: student.fresh_call("kv_connector", "serialize_chunk", ELSEWHERE_KV, FINGERPRINT))
        if error is not None:
            pytest.fail(f"serialize_chunk(<float32 {ELSEWHERE_KV.shape}>, ...) in a fresh process raised "
                        f"{describe_error(error)}", pytrace=False)
        if not isinstance(data, bytes):
            pytest.fail(f"serialize_chunk in a fresh process returned {type(data).__name__}; expected bytes", pytrace=False)
        _ELSEWHERE[student] = data
    return _ELSEWHERE[student]


def elsewhere_problem(student: Any) -> str | None:
    """None if deserialize_chunk reads back exactly the chunk another process wrote; else what it did."""
    data = written_elsewhere(student)  # before any object of the main worker: the grader may end it for this
    return elsewhere_read_problem(student, data, FINGERPRINT, ELSEWHERE_KV)


def damaged_variants(data: bytes, positions: Sequence[int]) -> dict[str, bytes]:
    """Damaged copies of `data`: a byte flipped at each position, truncations, bytes appended."""
    variants = {f"byte {i} of {len(data)} changed": data[:i] + bytes([data[i] ^ 0x5A]) + data[i + 1:]
                for i in positions}
    for length in sorted({0, 1, 3, 4, 8, 16, len(data) // 2, len(data) - 4, len(data) - 1}):
        variants[f"truncated to {length} of {len(data)} bytes"] = data[:length]
    variants[f"{len(data)} bytes and one byte appended"] = data + b"\x00"
    variants["two chunks back to back"] = data + data
    return variants


def new_connector(student: Any, chunk_size: int = 4, fingerprint: str = FINGERPRINT,
                  store: MemoryStore | None = None) -> tuple[MemoryStore, Any]:
    """(store, connector): a MemoryStore in this process (or `store`) and a KVConnector on a client of it."""
    store, client = lent_store(student, store)
    connector, error = outcome(lambda: student.kv_connector.KVConnector(client, fingerprint, chunk_size))
    if error is not None:
        pytest.fail(f"KVConnector(store, {fingerprint!r}, {chunk_size}) raised {describe_error(error)}", pytrace=False)
    return store, connector


def called(what: str, call: Callable[[], Any]) -> Any:
    """call(); fail the test with the student's exception, named, if it raises."""
    result, error = outcome(call)
    if error is not None:
        pytest.fail(f"{what} raised {describe_error(error)}", pytrace=False)
    return result


def counters(connector: Any) -> dict[str, int]:
    """The connector's five counters, read now."""
    names = ("hits", "misses", "bytes_loaded", "bytes_stored", "chunks_stored")
    return {name: called(f"reading connector.{name}", lambda name=name: getattr(connector, name)) for name in names}


def checksummed_foreign_variants(kv: np.ndarray, fingerprint: str) -> dict[str, bytes]:
    """Foreign bytes under a valid checksum: the docstring's layout with one field wrong."""
    bigger = (kv.shape[0], kv.shape[1], kv.shape[2] + 1, *kv.shape[3:])
    return {
        "an unknown marker (b'KVLX')": docstring_layout(kv, fingerprint, magic=b"KVLX"),
        "format version 2": docstring_layout(kv, fingerprint, version=2),
        "an unknown dtype code (9)": docstring_layout(kv, fingerprint, code=9),
        "8 bytes between the payload and the checksum, the header's lengths unchanged":
            docstring_layout(kv, fingerprint, extra=bytes(8)),
        f"a shape {bigger} larger than its payload": docstring_layout(kv, fingerprint, shape=bigger),
        "only the first 12 bytes of a header": docstring_layout(kv, fingerprint, cut=12),
    }


def stored_prompt(student: Any, n_chunks: int, seed: int, chunk_size: int = 4) -> tuple[Any, list[int], list[str], list[int]]:
    """(store, tokens, keys, value sizes): a MemoryStore holding the n_chunks full chunks of a prompt of
    n_chunks * chunk_size + 1 tokens, stored by a connector of its own."""
    tokens = tokens_of(n_chunks * chunk_size + 1, seed)
    store, writer = new_connector(student, chunk_size)
    stored = called("store", lambda: writer.store(tokens, kv_array(len(tokens), np.float32, seed=seed)))
    if stored != n_chunks:
        pytest.fail(f"store of {n_chunks} full chunks into an empty store returned {stored!r}; expected {n_chunks}",
                    pytrace=False)
    keys = checked_keys(student, tokens, chunk_size)
    sizes = [len(called("store.get", lambda key=key: store.get(key)) or b"") for key in keys]
    return store, tokens, keys, sizes


def reads_needed_chunks_once_problem(student: Any) -> str | None:
    """None if every load reads only the chunks covering tokens 0 .. n-1, each at most once, and returns
    what the store holds at that moment; else what it sent or returned."""
    store, tokens, keys, _ = stored_prompt(student, 5, 81)
    _, connector = new_connector(student, 4, store=store)
    kv = kv_array(len(tokens), np.float32, seed=81)
    chunks = [kv[:, :, 4 * i:4 * i + 4] for i in range(5)]
    values = [store.get(key) for key in keys]
    for shift, n in ((1, 20), (2, 7), (3, 1)):
        # The store's chunks rotated among the keys before each load: what load returns must come from
        # the store now, not from a memory of what was stored or read before (which would also hide reads).
        for i, key in enumerate(keys):
            store.set(key, values[(i + shift) % 5])
        expected = np.concatenate([chunks[(i + shift) % 5] for i in range(5)], axis=2)[:, :, :n]
        before = store_counts(store)
        loaded = called(f"load(<21 tokens>, {n})", lambda n=n: connector.load(tokens, n))
        if not isinstance(loaded, np.ndarray):
            return f"load(<21 tokens>, {n}) of stored chunks returned {type(loaded).__name__}; expected the KV"
        if not (loaded.shape == expected.shape and loaded.dtype == expected.dtype and np.array_equal(loaded, expected)):
            return (f"load(<21 tokens>, {n}), after the store's values for these keys were replaced (each key now holds "
                    "another chunk's bytes), returned KV other than the chunks the store holds now. load returns the "
                    "chunks the store holds when it is called: it reads them from the store each time (another engine "
                    "may have replaced them), never from a copy kept earlier")
        problem = load_reads_problem(f"load(<21 tokens>, {n})", n, 4, *sent_since(store, before))
        if problem:
            return problem
    return None


def lookup_reads_no_values_problem(student: Any) -> str | None:
    """None if lookup sends no GET or MGET (plain or pipelined); else what it sent."""
    store, tokens, keys, _ = stored_prompt(student, 4, 82)
    _, connector = new_connector(student, 4, store=store)
    called("deleting chunk 2 from the store", lambda: store.delete(keys[2]))
    for label, prompt, want in (("all 4 chunks stored but chunk 2", tokens, 8), ("nothing stored", tokens_of(9, 83), 0)):
        before = store_counts(store)
        got = called(f"lookup ({label})", lambda prompt=prompt: connector.lookup(prompt))
        if got != want:
            return f"lookup ({label}) returned {got!r}; expected {want}"
        problem = lookup_reads_problem(label, sent_since(store, before)[1])
        if problem:
            return problem
    return None


def bytes_loaded_on_failure_problem(student: Any) -> str | None:
    """None if a failed load adds the bytes it received to bytes_loaded; else what it added."""
    store, tokens, keys, sizes = stored_prompt(student, 3, 84)
    _, connector = new_connector(student, 4, store=store)
    last = called("store.get", lambda: store.get(keys[2]))
    # The failing chunk is the last one read, so every value arrives whatever the order of the checks.
    for label, damage, received in (
            ("chunk 2 (the last read) damaged", lambda: store.set(keys[2], last[:-2] + bytes([last[-2] ^ 1]) + last[-1:]),
             sum(sizes)),
            ("chunk 2 (the last read) evicted", lambda: store.delete(keys[2]), sizes[0] + sizes[1])):
        called(f"store ({label})", damage)
        before = counters(connector)
        got = called(f"load(<13 tokens>, 12) with {label}", lambda: connector.load(tokens, 12))
        if got is not None:
            return f"load(<13 tokens>, 12) with {label} returned {type(got).__name__}; expected None (a miss)"
        problem = failed_load_bytes_problem(f"load(<13 tokens>, 12) with {label}",
                                            counters(connector)["bytes_loaded"] - before["bytes_loaded"], received)
        if problem:
            return problem
    return None


# The connector's rules about what it sends and counts: (name, check).
CONNECTOR_RULES = [
    ("load reads the chunks it needs, each at most once", reads_needed_chunks_once_problem),
    ("lookup reads no values", lookup_reads_no_values_problem),
    ("bytes_loaded counts failed loads", bytes_loaded_on_failure_problem),
]
