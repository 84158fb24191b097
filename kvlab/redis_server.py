"""A Redis server for module 6, part 3, for the duration of a `with`: `redis_server(...)` yields its
URL, the system `redis-server` where it is installed, else `EmbeddedRedisServer`, a small server in
this process speaking the same wire protocol (RESP) over a `kvlab.kvstore.MemoryStore`.

`python -m kvlab.redis_server [--maxmemory-mb 64] [--backend auto|system|embedded]` runs `redis_server`
until Ctrl-C and prints its URL, for servers started by hand with `--kv-store URL`.

Byte accounting of the embedded server is MemoryStore's: a key costs len(key) + len(value) bytes.
Real Redis adds its own per-key overhead (tens of bytes) and rounds allocations, so with the same
bound it keeps slightly fewer entries.
"""
from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kvlab.kvstore import MemoryStore


# The embedded server: RESP2 and RESP3 (redis-py 8 opens every connection with HELLO 3), the commands
# a KV connector and the tests send. Not a general Redis: no expiry, no other data types.

class _Protocol:
    """RESP encoding of replies for one connection, RESP2 until the client's HELLO 3."""

    def __init__(self) -> None:
        self.version = 2

    def null(self) -> bytes:
        return b"_\r\n" if self.version == 3 else b"$-1\r\n"

    def reply(self, value: Any) -> bytes:
        if value is None:
            return self.null()
        if isinstance(value, bool):
            return b":1\r\n" if value else b":0\r\n"
        if isinstance(value, int):
            return b":%d\r\n" % value
        if isinstance(value, bytes):
            return b"$%d\r\n%s\r\n" % (len(value), value)
        if isinstance(value, list):
            return b"*%d\r\n" % len(value) + b"".join(self.reply(item) for item in value)
        if isinstance(value, dict):
            if self.version == 3:
                head = b"%%%d\r\n" % len(value)
            else:
                head = b"*%d\r\n" % (2 * len(value))
            return head + b"".join(self.reply(k) + self.reply(v) for k, v in value.items())
        raise TypeError(f"no RESP encoding for {type(value).__name__}")

    def pieces(self, value: Any) -> list[bytes]:
        """reply(value) as pieces to send in order: each bulk string of LARGE_VALUE bytes or more alone,
        as it is (not copied into one buffer: a chunk is megabytes), the rest joined."""
        pieces: list[bytes] = []
        small: list[bytes] = []

        def walk(item: Any) -> None:
            if isinstance(item, bytes) and len(item) >= LARGE_VALUE:
                small.append(b"$%d\r\n" % len(item))
                pieces.extend((b"".join(small), item))
                small[:] = [b"\r\n"]
            elif isinstance(item, list):
                small.append(b"*%d\r\n" % len(item))
                for element in item:
                    walk(element)
            else:
                small.append(self.reply(item))

        walk(value)
        pieces.append(b"".join(small))
        return pieces


# A bulk string at least this long is sent as it is, not copied into a reply buffer.
LARGE_VALUE = 1 << 16


def _simple(text: str) -> bytes:
    return f"+{text}\r\n".encode()


def _error(text: str) -> bytes:
    return f"-{text}\r\n".encode()


class _Handler(socketserver.StreamRequestHandler):
    """One client connection: read commands (RESP arrays of bulk strings), answer each in turn.

    A pipeline (redis-py sends its commands back to back, then reads the replies) is served as any
    sequence of commands. Nagle's algorithm is off: with it, the second of two small replies in a row
    waits for the client's delayed ACK (about 40 ms).
    """

    server: EmbeddedRedisServer
    disable_nagle_algorithm = True

    def handle(self) -> None:
        protocol = _Protocol()
        while True:
            try:
                command = self._read_command()
            except (ConnectionError, ValueError):
                return
            if command is None:
                return
            # Large values go out as they are (no copy into one reply buffer): pieces of a reply.
            for piece in self.server.execute_pieces(command, protocol):
                self.wfile.write(piece)
            self.wfile.flush()

    def _read_command(self) -> list[bytes] | None:
        line = self.rfile.readline()
        if not line:
            return None
        if not line.startswith(b"*"):
            return line.split()  # an inline command, as redis-cli and telnet send
        count = int(line[1:])
        parts = []
        for _ in range(count):
            header = self.rfile.readline()
            if not header.startswith(b"$"):
                raise ValueError("expected a bulk string")
            size = int(header[1:])
            data = self.rfile.read(size + 2)
            if len(data) != size + 2:
                raise ConnectionError("the client closed the connection mid-command")
            parts.append(data[:size])
        return parts


class EmbeddedRedisServer(socketserver.ThreadingTCPServer):
    """A Redis stand-in on a loopback TCP port, serving a MemoryStore (LRU-bounded like allkeys-lru).

    Commands: PING, ECHO, HELLO, CLIENT (accepted), SELECT 0, GET, SET key value, MGET, EXISTS, DEL,
    DBSIZE, FLUSHDB, FLUSHALL, INFO (used_memory, maxmemory, evicted_keys), QUIT; pipelined (commands
    sent back to back, as redis-py's pipeline does) or not. `serve_forever` in a thread; `shutdown()`
    then `server_close()` to stop.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, maxmemory_bytes: int | None = None, host: str = "127.0.0.1", port: int = 0) -> None:
        super().__init__((host, port), _Handler)
        self.store = MemoryStore(maxmemory_bytes)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"redis://{host}:{port}"

    def execute_pieces(self, command: list[bytes], protocol: _Protocol) -> list[bytes]:
        """The RESP reply to one command as pieces to send in order (_Protocol.pieces for GET and MGET,
        whose values may be large; one piece otherwise)."""
        name = command[0].upper() if command else b""
        if name == b"GET" and len(command) == 2:
            return protocol.pieces(self.store.get(command[1]))
        if name == b"MGET" and len(command) > 1:
            return protocol.pieces(self.store.mget(command[1:]))
        return [self.execute(command, protocol)]

    def execute(self, command: list[bytes], protocol: _Protocol) -> bytes:
        """The RESP reply to one command."""
        if not command:
            return _error("ERR empty command")
        name, args = command[0].upper().decode(errors="replace"), command[1:]
        store = self.store
        if name == "PING":
            return protocol.reply(args[0]) if args else _simple("PONG")
        if name == "ECHO" and len(args) == 1:
            return protocol.reply(args[0])
        if name == "HELLO":
            if args and args[0] not in (b"2", b"3"):
                return _error("NOPROTO unsupported protocol version")
            if args:
                protocol.version = int(args[0])
            return protocol.reply({b"server": b"redis", b"version": b"7.0.0", b"proto": protocol.version,
                                   b"mode": b"standalone", b"role": b"master", b"modules": []})
        if name in ("CLIENT", "QUIT") or (name == "SELECT" and args == [b"0"]):
            return _simple("OK")
        if name == "GET" and len(args) == 1:
            return protocol.reply(store.get(args[0]))
        if name == "SET" and len(args) == 2:
            store.set(args[0], args[1])
            return _simple("OK")
        if name == "MGET" and args:
            return protocol.reply(store.mget(args))
        if name == "EXISTS" and args:
            return protocol.reply(store.exists(*args))
        if name == "DEL" and args:
            return protocol.reply(store.delete(*args))
        if name == "DBSIZE" and not args:
            return protocol.reply(store.dbsize())
        if name in ("FLUSHDB", "FLUSHALL"):
            store.flushdb()
            return _simple("OK")
        if name == "INFO":
            text = (f"# Memory\r\nused_memory:{store.used_memory}\r\nmaxmemory:{store.maxmemory_bytes or 0}\r\n"
                    f"maxmemory_policy:allkeys-lru\r\n# Stats\r\nevicted_keys:{store.evicted_keys}\r\n")
            return protocol.reply(text.encode())
        return _error(f"ERR unknown command or wrong number of arguments for '{name.lower()}' (kvlab's embedded server)")


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
def _system_redis(maxmemory_bytes: int, unix_socket: bool, start_timeout: float) -> Iterator[str]:
    """The system redis-server in a temporary directory, on loopback or a Unix socket; removed after.

    A TCP port is found free (bind 0, then close) before redis-server binds it, so another process
    can take it in between: the server then exits, or another Redis answers there. Ready means the
    Redis at the address reports this process's id; a port taken meanwhile is replaced by another.
    """
    executable = shutil.which("redis-server")
    if executable is None:
        raise FileNotFoundError("redis-server is not installed (Debian/Ubuntu: apt-get install redis-server)")
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
                        raise RuntimeError(f"redis-server did not answer at {url} (exit code {process.poll()}):\n"
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


@contextlib.contextmanager
def _embedded_redis(maxmemory_bytes: int) -> Iterator[str]:
    server = EmbeddedRedisServer(maxmemory_bytes)
    thread = threading.Thread(target=server.serve_forever, name="kvlab-embedded-redis", daemon=True)
    thread.start()
    try:
        yield server.url
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@contextlib.contextmanager
def redis_server(maxmemory_bytes: int = 64 << 20, backend: str = "auto", unix_socket: bool = False,
                 start_timeout: float = 10.0) -> Iterator[str]:
    """Run a Redis server for the `with` block and yield its URL; stop it and remove its files after.

    backend: "system" (the installed `redis-server`: FileNotFoundError when absent), "embedded"
    (`EmbeddedRedisServer` in this process) or "auto" (system when installed, else embedded).
    The system server listens on 127.0.0.1 at a free port (URL "redis://127.0.0.1:PORT") or, with
    `unix_socket`, on a Unix socket in a temporary directory ("unix:///tmp/.../redis.sock"); it keeps
    nothing on disk (--save "" --appendonly no) and is bounded by --maxmemory `maxmemory_bytes` with
    --maxmemory-policy allkeys-lru. The embedded server always uses TCP on loopback.
    """
    if backend not in ("auto", "system", "embedded"):
        raise ValueError(f"backend must be 'auto', 'system' or 'embedded'; got {backend!r}")
    if backend == "system" or (backend == "auto" and shutil.which("redis-server")):
        with _system_redis(maxmemory_bytes, unix_socket, start_timeout) as url:
            yield url
    else:
        with _embedded_redis(maxmemory_bytes) as url:
            yield url


def main(argv: list[str] | None = None) -> None:
    """Run a store until interrupted (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m kvlab.redis_server", description="a Redis for --kv-store, until Ctrl-C")
    parser.add_argument("--maxmemory-mb", type=float, default=64, help="maxmemory in MiB, LRU beyond (default 64)")
    parser.add_argument("--backend", choices=["auto", "system", "embedded"], default="auto",
                        help="the system redis-server, kvlab's embedded server, or auto (the first where installed)")
    args = parser.parse_args(argv)
    with redis_server(int(args.maxmemory_mb * 2**20), backend=args.backend) as url:
        print(f"KV store at {url} (maxmemory {args.maxmemory_mb:g} MiB, allkeys-lru); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
