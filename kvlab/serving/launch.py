"""Engine servers (`kvlab.serving.server`) started as processes, for the module-6 demo and the tests.

Each server binds port 0 itself and writes the port the kernel gave it to a file (`--port-file`),
read here. Finding a free port first (bind 0, close, pass the number on) leaves a gap in which
another process may take that port: the next server of the same demo, a test on another core.
The server then fails to start, or worse, /health is answered by the other process and the
requests meant for the new server go there (seen once in CI: the demo's second engine answered
from the first engine's prefix cache).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"


class ServerFailed(RuntimeError):
    """A server that exited, or did not answer /health in time."""


@dataclass
class Launched:
    """A server process; its port once it has written it."""

    process: subprocess.Popen
    port_folder: Path
    port: int | None = field(default=None)

    @property
    def url(self) -> str:
        """http://127.0.0.1:PORT (the server's root; the OpenAI API is under /v1)."""
        if self.port is None:
            raise ServerFailed("the server has not said its port yet (wait_ready first)")
        return f"http://{HOST}:{self.port}"


def launch(flags: Sequence[str], env: Mapping[str, str] | None = None, **popen_kwargs: Any) -> Launched:
    """Start `python -m kvlab.serving.server` on a loopback port of its own choosing, with `flags`
    (its other options), without waiting for it (see wait_ready)."""
    folder = Path(tempfile.mkdtemp(prefix="kvlab-server-"))
    command = [sys.executable, "-m", "kvlab.serving.server", "--host", HOST, "--port", "0",
               "--port-file", str(folder / "port"), *flags]
    try:
        process = subprocess.Popen(command, env=dict(env) if env is not None else None, **popen_kwargs)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Launched(process, folder)


def wait_ready(server: Launched, deadline: float) -> None:
    """Wait until the server has said its port and answers /health there; ServerFailed if it exits
    first or `deadline` (time.monotonic) passes."""
    import httpx

    while True:
        if server.process.poll() is not None:
            raise ServerFailed(f"the server exited with {server.process.returncode}")
        if server.port is None:
            server.port = read_port(server.port_folder / "port")
            if server.port is not None:
                shutil.rmtree(server.port_folder, ignore_errors=True)
        if server.port is not None:
            try:
                if httpx.get(server.url + "/health", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
        if time.monotonic() > deadline:
            raise ServerFailed("the server did not answer /health in time")
        time.sleep(0.1)


def stop(server: Launched, timeout: float = 15.0) -> None:
    """Stop the server's process group (SIGTERM, then SIGKILL after `timeout` seconds) and remove its
    port file. The server must have been launched with start_new_session=True."""
    try:
        if server.process.poll() is None:
            os.killpg(server.process.pid, signal.SIGTERM)
            try:
                server.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(server.process.pid, signal.SIGKILL)
                server.process.wait(timeout=timeout)
    finally:
        shutil.rmtree(server.port_folder, ignore_errors=True)


def read_port(path: Path) -> int | None:
    """The port in `path`, or None while the server has not written it (it writes it whole, by rename)."""
    try:
        return int(path.read_text())
    except (FileNotFoundError, ValueError):
        return None


def write_port(path: Path, port: int) -> None:
    """Write `port` to `path` whole: a reader sees no file or the whole number."""
    partial = path.with_name(path.name + ".partial")
    partial.write_text(str(port))
    os.replace(partial, path)
