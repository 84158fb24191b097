"""Load and store throughput of the reference KV connector against Redis on loopback, beside a floor.

    python -m tools.bench_kvstore [--backend system|embedded] [--chunks 32] [--chunk-tokens 256]
                                  [--layers 24] [--kv-heads 2] [--head-dim 64] [--dtype float16]

The default chunk is LMCache's 256 tokens of a Qwen2.5-0.5B-shaped KV cache (24 layers, 2 KV heads of
64, float16): 3 MiB. It starts its own server (kvlab.kvstore.redis_server, TCP on 127.0.0.1), then
prints, each as the median of --repeats runs:

- the floor, measured in the same run: a bare socket round trip on loopback (a one-byte echo, and an
  echo of one chunk's bytes through a minimal Python echo server: no Redis, no serialization), and
  Redis' own PING round trip;
- raw SET, GET and MGET of the serialized chunks through redis-py (Redis and the client, no connector;
  redis-py's pure-Python reply parser, not the socket, bounds these: see the 3 MiB echo floor);
- the connector: `store` (exists + serialize + set per chunk) and `lookup` + `load` (exists per chunk,
  one mget, deserialize with checksum, concatenate).
"""
from __future__ import annotations

import argparse
import importlib.util
import shutil
import socket
import socketserver
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import numpy as np

from kvlab.kvstore import open_store, redis_server
from kvlab.tables import format_table

ROOT = Path(__file__).resolve().parent.parent


def reference_connector() -> ModuleType:
    spec = importlib.util.spec_from_file_location("kv_connector_reference", ROOT / "solutions/module06/kv_connector.py")
    assert spec is not None and spec.loader is not None, "solutions/module06/kv_connector.py cannot be loaded"
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


def median_seconds(run: Callable[[], None], repeats: int) -> float:
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
    host, port = url.removeprefix("redis://").split(":")
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def run() -> None:
            for _ in range(round_trips):
                sock.sendall(b"*1\r\n$4\r\nPING\r\n")
                sock.recv(64)
        return median_seconds(run, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backend", choices=("system", "embedded"),
                        default="system" if shutil.which("redis-server") else "embedded")
    parser.add_argument("--chunks", type=int, default=32)
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--kv-heads", type=int, default=2)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--dtype", default="float16")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    kv_connector = reference_connector()
    c, n = args.chunk_tokens, args.chunks
    rng = np.random.default_rng(0)
    kv = rng.standard_normal((args.layers, 2, n * c, args.kv_heads, args.head_dim)).astype(args.dtype)
    tokens = [int(t) for t in rng.integers(0, 150_000, size=n * c)]
    fingerprint = f"bench/L{args.layers}x2xTx{args.kv_heads}x{args.head_dim}/{args.dtype}"
    blobs = [kv_connector.serialize_chunk(kv[:, :, i * c:(i + 1) * c], fingerprint) for i in range(n)]
    chunk_bytes = len(blobs[0])
    maxmemory = 4 * n * chunk_bytes + (64 << 20)
    rows: list[list[str]] = []

    def row(what: str, seconds: float, ops: int, payload: int | None) -> None:
        rate = "-" if payload is None else f"{payload / seconds / 1e6:,.0f}"
        rows.append([what, f"{seconds / ops * 1e6:,.0f}", f"{ops / seconds:,.0f}", rate])

    with redis_server(maxmemory, backend=args.backend) as url:
        client = open_store(url)
        try:
            pings = 2000
            rtt = echo_floor(b"x", pings, args.repeats)
            row("bare socket echo, 1 byte (floor)", rtt, pings, None)
            row(f"bare socket echo, {chunk_bytes:,} bytes (floor)", echo_floor(blobs[0], n, args.repeats), n, n * chunk_bytes)
            row("Redis PING round trip", ping_floor(url, pings, args.repeats), pings, None)

            keys = kv_connector.chunk_keys(tokens, c, fingerprint)

            def raw_set() -> None:
                client.flushdb()
                for key, blob in zip(keys, blobs):
                    client.set(key, blob)
            row("raw SET of serialized chunks", median_seconds(raw_set, args.repeats), n, n * chunk_bytes)
            row("raw GET of each chunk", median_seconds(lambda: [client.get(key) for key in keys], args.repeats), n,
                n * chunk_bytes)
            row("raw MGET of the same chunks (one reply)", median_seconds(lambda: client.mget(keys), args.repeats), n, n * chunk_bytes)

            def connector_store() -> None:
                client.flushdb()
                kv_connector.KVConnector(client, fingerprint, c).store(tokens, kv)
            row("connector.store (exists + serialize + set)", median_seconds(connector_store, args.repeats), n, n * chunk_bytes)

            def connector_load() -> None:
                connector = kv_connector.KVConnector(client, fingerprint, c)
                loaded = connector.load(tokens, connector.lookup(tokens))
                assert loaded is not None and loaded.shape == kv.shape, "the benchmark's load missed"
            row("connector.lookup + load (exists + mget + checks)", median_seconds(connector_load, args.repeats), n,
                n * chunk_bytes)
        finally:
            client.close()

    title = (f"{args.backend} Redis on loopback ({url}); {n} chunks of {c} tokens, KV [L={args.layers}, 2, {c}, "
             f"Hkv={args.kv_heads}, d={args.head_dim}] {args.dtype} = {chunk_bytes:,} bytes serialized; "
             f"median of {args.repeats} runs")
    print(format_table(title, ["operation", "us per op", "ops/s (chunks/s)", "MB/s"], rows))


if __name__ == "__main__":
    main()
