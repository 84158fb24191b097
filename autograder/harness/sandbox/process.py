"""The worker process: starting it, its pipes, measuring its CPU time, stopping it, and the
private folder it works in."""
from __future__ import annotations

import fcntl
import os
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, NamedTuple

from . import wireformat
from .errors import WorkerDied
from .isolation import BASE_ENV, Plan

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
# Copied beside the worker script, which imports it from there (see worker.py).
WIRE_FORMAT = Path(__file__).with_name("wireformat.py")
# Bigger pipes mean fewer system calls for large arrays and output floods (Linux allows 1 MB
# without privileges).
PIPE_BYTES = 1 << 20
# After a reply, at most this much pending student output is read before returning.
DRAIN_BUDGET = 16 << 20
PASSED_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class Ending(NamedTuple):
    """How a worker ended: exit status (negative: signal), CPU seconds, peak RSS, and whether the
    sandbox had to kill it (rather than it ending by itself)."""

    returncode: int
    cpu_seconds: float
    max_rss_bytes: int
    killed: bool


class WorkerProcess:
    """One running worker: its process and the trusted ends of its three pipes."""

    def __init__(
        self, proc: subprocess.Popen[bytes], req_w: int, resp_r: int, out_r: int,
        launched: float, init_seq: int,
    ) -> None:
        self.proc, self.req_w, self.resp_r, self.out_r = proc, req_w, resp_r, out_r
        self.cpu_pid = proc.pid  # replaced by the interpreter's own pid under bubblewrap
        self.out_open = True
        self.launched, self.init_seq = launched, init_seq  # when, and the seq its ready reply echoes
        self.ready = False
        self._schedstat: tuple[int, int] | None = None  # (pid, open fd of its /proc/<pid>/schedstat)

    def cpu_seconds(self) -> float | None:
        """CPU seconds the worker used so far, read from outside it (two readings per round trip).

        One open file read again with pread: a fresh open per reading cost a few microseconds more,
        which adds up over tens of thousands of round trips.
        """
        if self._schedstat is None or self._schedstat[0] != self.cpu_pid:
            self._close_schedstat()
            try:
                self._schedstat = (self.cpu_pid, os.open(f"/proc/{self.cpu_pid}/schedstat", os.O_RDONLY))
            except OSError:
                return _read_cpu(self.cpu_pid)
        try:
            return int(os.pread(self._schedstat[1], 128, 0).split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            return _read_cpu(self.cpu_pid)

    def _close_schedstat(self) -> None:
        if self._schedstat is not None:
            os.close(self._schedstat[1])
            self._schedstat = None

    def stop(self, kill: bool, keep_output: Any) -> Ending:
        """Stop (or, when it is exiting anyway, reap) the worker.

        `keep_output(bytes)` receives the output still in the pipe, such as a fatal-error message.
        """
        pid = self.proc.pid
        if not kill:  # it closed its reply pipe: give it a moment to finish exiting
            deadline = time.monotonic() + 2.0
            while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                if time.monotonic() > deadline:
                    kill = True
                    break
                time.sleep(0.005)
        if kill:
            # The group catches the worker and anything it forked; the pid catches a worker that
            # left the group with setsid(). Under bubblewrap the sandboxed processes die with it.
            for send in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
                try:
                    send()
                except ProcessLookupError:
                    pass
        _, status, usage = os.wait4(pid, 0)
        self._close_schedstat()
        self.proc.returncode = os.waitstatus_to_exitcode(status)
        self.read_rest(keep_output)
        for fd in (self.req_w, self.resp_r, self.out_r):
            os.close(fd)
        return Ending(self.proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, kill)

    def read_rest(self, keep_output: Any) -> None:
        """Output written before the worker died, until the pipe closes (briefly, and bounded)."""
        deadline, budget = time.monotonic() + 0.5, DRAIN_BUDGET
        while self.out_open and budget > 0 and time.monotonic() < deadline:
            if not readable(self.out_r, 0.05):
                continue
            chunk = self.drain_once()
            keep_output(chunk)
            budget -= len(chunk)

    def drain_once(self) -> bytes:
        """One read of the output pipe (b"" when nothing is there or it is closed)."""
        try:
            chunk = os.read(self.out_r, PIPE_BYTES)
        except BlockingIOError:
            return b""
        if not chunk:
            self.out_open = False
        return chunk


class Resources:
    """What must be released even if the Sandbox is never closed: the worker and the private folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.worker: WorkerProcess | None = None

    def release(self) -> None:
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.stop(kill=True, keep_output=lambda chunk: None)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():  # the student made something unremovable (a non-root grader)
            for folder, _, _ in os.walk(self.root):
                os.chmod(folder, 0o700)
            shutil.rmtree(self.root, ignore_errors=True)


def readable(fd: int, timeout: float) -> bool:
    """Whether fd has data or end of file within timeout seconds (poll: no FD_SETSIZE limit)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def _read_cpu(pid: int) -> float | None:
    """CPU seconds used so far by process pid, measured from outside it."""
    try:  # nanoseconds on the CPU
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:  # clock ticks of user + system time
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def find_sandboxed_pid(outer: int, inner: int) -> int | None:
    """The host pid of the process that is `inner` in the PID namespace bubblewrap (pid `outer`) made."""
    parents: dict[int, int] = {}
    candidates = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
            parents[int(entry.name)] = int(status[b"PPid"])
            nspids = status.get(b"NSpid", b"").split()
        except (OSError, ValueError, KeyError):
            continue
        if len(nspids) > 1 and nspids[-1] == str(inner).encode():
            candidates.append(int(entry.name))
    for pid in candidates:
        ancestor = parents.get(pid)
        while ancestor not in (None, 0, 1):
            if ancestor == outer:
                return pid
            ancestor = parents.get(ancestor)
    return None


def copy_student_files(source: Path, target: Path) -> None:
    """Copy regular files and folders; symlinks are skipped (root would follow them anywhere)."""
    for entry in os.scandir(source):
        destination = target / entry.name
        if entry.is_symlink() or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            destination.mkdir(mode=0o755)
            copy_student_files(Path(entry.path), destination)
        elif entry.is_file():
            shutil.copyfile(entry.path, destination)


def place_scripts(root: Path) -> Path:
    """Copy the worker script and the wire format it imports into `root`; the script's path."""
    for source in (WORKER_SCRIPT, WIRE_FORMAT):
        shutil.copyfile(source, root / source.name)
    return root / WORKER_SCRIPT.name


def launch(plan: Plan, python: str, script: Path, home: Path, init: dict[str, Any]) -> WorkerProcess:
    """Start a worker and send it its init message, without waiting for it to be ready."""
    req_r, req_w = os.pipe()
    resp_r, resp_w = os.pipe()
    out_r, out_w = os.pipe()
    for fd in (resp_w, out_w):
        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass  # a smaller pipe is only slower
    env = {
        **BASE_ENV, "HOME": str(home),
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        **{name: os.environ[name] for name in PASSED_THROUGH_ENV if name in os.environ},
    }
    # -S as well as -I: no site module, so neither the interpreter's own site-packages nor any
    # .pth file there joins the worker (and start-up is faster). -B: the worker writes no
    # bytecode into folders it shares with the grader.
    argv = [*plan.prefix, python, "-I", "-S", "-B", str(script), str(req_r), str(resp_w)]
    launched = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, pass_fds=(req_r, resp_w),
            cwd=home, env=env, start_new_session=True, **plan.popen_kwargs,
        )
    except OSError as exc:
        for fd in (req_w, resp_r, out_r):
            os.close(fd)
        raise WorkerDied(f"could not start the student's process: {exc}") from None
    finally:
        for fd in (req_r, resp_w, out_w):
            os.close(fd)
    for fd in (req_w, resp_r, out_r):
        os.set_blocking(fd, False)
    # A few hundred bytes: the fresh pipe takes them at once, whatever the worker is doing.
    os.write(req_w, wireformat.frame(init, [])[0])
    return WorkerProcess(proc, req_w, resp_r, out_r, launched, init["seq"])
