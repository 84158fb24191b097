"""The trusted side: starts the worker, talks to it over private pipes, and hands out proxies.

The grading process never imports student code and never unpickles anything: values come back as
validated plain data (see `wire.py`), and every other object stays in the worker's object table and
is represented here by a `Proxy` whose attribute reads, calls, `len`, `in`, indexing, iteration and
`repr` are round trips.
"""
from __future__ import annotations

import builtins
import fcntl
import os
import re
import select
import shutil
import signal
import site
import subprocess
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, NamedTuple, Sequence

import numpy as np

from . import isolation, wire
from .errors import (
    ProtocolError,
    StudentCrash,
    StudentException,
    WorkerDied,
    WorkerTimeout,
    explain_exit,
    student_exception_class,
)
from .worker import MAX_CALLBACK_DEPTH, TEXT_LIMIT

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
# Starting includes the interpreter and numpy (a fraction of a second); this only catches hangs.
START_TIMEOUT = 60.0
# Bigger pipes mean fewer system calls for large arrays and output floods (Linux allows 1 MB
# without privileges).
PIPE_BYTES = 1 << 20
# After a reply, at most this much pending student output is read before returning.
DRAIN_BUDGET = 16 << 20
PASSED_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
# Dunder attributes worth a round trip; other dunder probes (numpy's __array_interface__,
# inspect's __wrapped__, ...) fail locally, as they would on an object without them.
REMOTE_DUNDERS = {"__name__", "__qualname__", "__module__", "__doc__", "__dict__"}
_STOP = object()  # what a "next" request returns when the iterator is exhausted


@dataclass(frozen=True)
class Limits:
    """Resource limits for the worker; the defaults fit Gradescope's 768 MB box beside pytest."""

    cpu_seconds: int = 60
    # Address space, not resident memory: Python with numpy maps about 100 MB before any work.
    memory_bytes: int = 512 << 20
    max_processes: int = 0
    file_bytes: int = 16 << 20
    call_timeout: float = 10.0
    output_bytes: int = 64 << 10


class Proxy:
    """A student object (or module) living in the worker; every use is a round trip."""

    __slots__ = ("_sbx_box", "_sbx_target", "_sbx_generation", "_sbx_label", "_sbx_type")

    def __init__(
        self, box: Sandbox, target: list[Any], generation: int | None, label: str, type_name: str,
    ) -> None:
        # object.__setattr__: our own __setattr__ forwards attribute writes to the worker.
        object.__setattr__(self, "_sbx_box", box)
        object.__setattr__(self, "_sbx_target", target)
        object.__setattr__(self, "_sbx_generation", generation)  # None: a module, valid across restarts
        object.__setattr__(self, "_sbx_label", label)  # the expression that produced it, for messages
        object.__setattr__(self, "_sbx_type", type_name)

    def _sbx(self, op: str, *args: Any, label: str, **kwargs: Any) -> Any:
        return self._sbx_box._request(op, self, args, kwargs, label)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__") and name not in REMOTE_DUNDERS:
            raise AttributeError(name)
        return self._sbx("getattr", name, label=f"{self._sbx_label}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        self._sbx("setattr", name, value, label=f"{self._sbx_label}.{name} = ...")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._sbx("call", *args, label=f"{self._sbx_label}(...)", **kwargs)

    def __len__(self) -> int:
        return self._sbx("len", label=f"len({self._sbx_label})")

    def __bool__(self) -> bool:
        return self._sbx("bool", label=f"bool({self._sbx_label})") is True

    def __contains__(self, item: Any) -> bool:
        return self._sbx("contains", item, label=f"... in {self._sbx_label}") is True

    def __getitem__(self, key: Any) -> Any:
        return self._sbx("getitem", key, label=f"{self._sbx_label}[...]")

    def __setitem__(self, key: Any, value: Any) -> None:
        self._sbx("setitem", key, value, label=f"{self._sbx_label}[...] = ...")

    def __iter__(self) -> Iterator[Any]:
        iterator = self._sbx("iter", label=f"iter({self._sbx_label})")
        if not isinstance(iterator, Proxy):
            raise self._sbx_box._protocol_failure("iter() did not return an object reference", "iter()")
        # All the round trips of one iteration share one call's time limit: an endless iterator
        # (numpy converting a student object to an array iterates it) must not hold a test until
        # its whole-test limit.
        limit, spent = self._sbx_box.limits.call_timeout, 0.0
        while True:
            started = time.monotonic()
            item = iterator._sbx("next", label=f"next(iter({self._sbx_label}))")
            spent += time.monotonic() - started
            if item is _STOP:
                return
            if spent > limit:
                raise WorkerTimeout(
                    f"iterating over {self._sbx_label} took more than {limit:g} s in all (the time limit "
                    "of one call) and was stopped: does its iterator ever end?"
                )
            yield item

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        # np.asarray(proxy) converts in the worker, under one call's time limit, and gets the array
        # by value; without this numpy would walk the object's len() and items by round trips (an
        # object whose every item is itself costs exponentially many).
        array = self._sbx("array", label=f"numpy.asarray({self._sbx_label})")
        if not isinstance(array, np.ndarray):
            raise TypeError(f"numpy.asarray({self._sbx_label}) did not give a numeric array")
        return array if dtype is None else array.astype(dtype)

    def __str__(self) -> str:
        text = self._sbx("str", label=f"str({self._sbx_label})")
        return text if isinstance(text, str) else self.__repr__()

    def __repr__(self) -> str:
        # Never raises: pytest and debuggers call repr while reporting other failures.
        if self._sbx_generation is None:
            return f"<student module {self._sbx_target[1]} (sandboxed)>"
        try:
            text = self._sbx("repr", label=f"repr({self._sbx_label})")
        except (StudentException, ReferenceError) as exc:
            return f"<sandboxed {self._sbx_type} from {self._sbx_label}: repr() failed: {exc}>"
        if not isinstance(text, str):
            return f"<sandboxed {self._sbx_type} from {self._sbx_label}>"
        return text[:TEXT_LIMIT]

    # Equality is identity of the worker object: a student __eq__ that always says True must not
    # make a proxy equal to anything on the trusted side.
    def __eq__(self, other: object) -> bool:
        return isinstance(other, Proxy) and self._sbx_key() == other._sbx_key()

    def __hash__(self) -> int:
        return hash(self._sbx_key())

    def _sbx_key(self) -> tuple[int, tuple[Any, ...], int | None]:
        return id(self._sbx_box), tuple(self._sbx_target), self._sbx_generation


class Ending(NamedTuple):
    """How a worker ended: exit status (negative: signal), CPU seconds, peak RSS, and whether the
    sandbox had to kill it (rather than it ending by itself)."""

    returncode: int
    cpu_seconds: float
    max_rss_bytes: int
    killed: bool


class _Worker:
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
            if not _readable(self.out_r, 0.05):
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


class _Resources:
    """What must be released even if the Sandbox is never closed: the worker and the private folder."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.worker: _Worker | None = None

    def release(self) -> None:
        if self.worker is not None:
            worker, self.worker = self.worker, None
            worker.stop(kill=True, keep_output=lambda chunk: None)
        shutil.rmtree(self.root, ignore_errors=True)
        if self.root.exists():  # the student made something unremovable (a non-root grader)
            for folder, _, _ in os.walk(self.root):
                os.chmod(folder, 0o700)
            shutil.rmtree(self.root, ignore_errors=True)


def _readable(fd: int, timeout: float) -> bool:
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


def _find_sandboxed_pid(outer: int, inner: int) -> int | None:
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


def _copy_student_files(source: Path, target: Path) -> None:
    """Copy regular files and folders; symlinks are skipped (root would follow them anywhere)."""
    for entry in os.scandir(source):
        destination = target / entry.name
        if entry.is_symlink() or entry.name == "__pycache__":
            continue
        if entry.is_dir():
            destination.mkdir(mode=0o755)
            _copy_student_files(Path(entry.path), destination)
        elif entry.is_file():
            shutil.copyfile(entry.path, destination)


class Sandbox:
    """Student modules in an isolated worker process, reached through proxies.

    `modules_dir`: the student's files (copied into a private folder the worker may write to).
    `lib_dirs`: folders put on the worker's sys.path (the one holding `kvlab`); not writable by it.
    `hide`: paths the worker must not see (enforced with bubblewrap; otherwise reported as reduced).
    `user`: the unprivileged user for the worker when the grader is root ("nobody" by default).
    `bubblewrap`: False skips bubblewrap (to exercise the fallback, or where it misbehaves).
    `remote`: course-library functions ("module:name" -> the trusted process's own function) that
    run here whenever code in the worker calls them: the worker's copy is replaced by a stand-in
    (before any student code runs) that sends the arguments (plain data by value, other objects as
    references) and waits, serving requests about those objects, for the result. What they compute,
    and what they record (kvlab.counter), is then out of the student code's reach.

    `isolation` reports, in words, what isolation is in force and what is reduced.
    `last_call_cpu`: CPU seconds the worker spent on the last round trip, read from /proc by this
    process (the student's process cannot fake it); None when unknown. `cpu_seconds()` is the
    current worker's running total, for guards spanning several calls. `last_start_seconds`: how
    long the last worker took from launch to ready (numpy imported).
    """

    def __init__(
        self,
        modules_dir: Path,
        lib_dirs: Sequence[Path],
        *,
        limits: Limits = Limits(),
        hide: Sequence[Path] = (),
        user: str | None = None,
        python: str = sys.executable,
        bubblewrap: bool = True,
        remote: Mapping[str, Callable[..., Any]] | None = None,
    ) -> None:
        self.limits = limits
        self.remote: dict[str, Callable[..., Any]] = dict(remote or {})
        for name in self.remote:
            if not re.fullmatch(f"{_NAME}:{_NAME}", name):
                raise ValueError(f'expected "package.module:function", got {name!r}')
        self._callback_depth = 0
        # The real interpreter binary: a venv's bin/ may sit inside a hidden folder.
        self._python = os.path.realpath(shutil.which(python) or python)
        self._lib_dirs = [Path(os.path.realpath(p)) for p in lib_dirs]
        wire.dataclass_types()  # before any worker runs (see there)
        self._site_packages = list(dict.fromkeys(
            Path(os.path.realpath(p)) for p in site.getsitepackages() if os.path.isdir(p)
        ))
        root = Path(tempfile.mkdtemp(prefix="kvlab-sandbox-"))
        self._res = _Resources(root)
        self._finalizer = weakref.finalize(self, self._res.release)
        os.chmod(root, 0o755)  # the unprivileged worker must reach home/ and read worker.py
        self._home = root / "home"
        self._home.mkdir(mode=0o700)
        self._script = root / "worker.py"
        shutil.copyfile(WORKER_SCRIPT, self._script)
        _copy_student_files(Path(modules_dir), self._home)
        self._plan = isolation.plan(
            python=self._python, user=user, hide=[Path(os.path.realpath(p)) for p in hide],
            lib_dirs=self._lib_dirs, site_packages=self._site_packages, root_dir=root,
            home=self._home, limits=limits, bubblewrap=bubblewrap,
        )
        if self._plan.uid != os.geteuid():
            for folder, dirs, files in os.walk(self._home):
                for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                    os.chown(name, self._plan.uid, self._plan.gid)
        self.isolation: list[str] = list(self._plan.report)
        # Who the student's code runs as: when it is the grader's own uid, the worker can write
        # whatever the grader can (the runner then watches its files; see run.py).
        self.worker_uid: int = self._plan.uid
        self.last_call_cpu: float | None = None
        self.last_start_seconds: float | None = None
        self._generation = 0  # bumped whenever the worker's object table is dropped
        self._seq = 0
        self._output = bytearray()
        self._dropped = 0
        # Start the interpreter now: its start-up (numpy's import) overlaps the grader's own work,
        # such as collecting the tests, and is awaited on first use.
        self._launch()

    # ----- public API -------------------------------------------------------------------------

    def module(self, name: str) -> Proxy:
        """The student's module `name`, imported in the worker on first use."""
        if not re.fullmatch(_NAME, name):
            raise ValueError(f"not a module name: {name!r}")
        return Proxy(self, ["M", name], None, name, "module")

    def call(self, qualname: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run the library function "package.module:function" in the worker, beside student objects."""
        if not re.fullmatch(f"{_NAME}:{_NAME}", qualname):
            raise ValueError(f'expected "package.module:function", got {qualname!r}')
        return self._request("call", ["Q", qualname], args, kwargs, f"{qualname}(...)", timeout)

    def reset(self) -> None:
        """Between tests: drop the worker's object table and the captured output.

        Proxies from before become invalid. A worker that died (or dies or hangs while its objects
        are dropped) is replaced on next use.
        """
        worker = self._res.worker
        if worker is not None and worker.ready:  # a worker still starting has no objects yet
            try:
                self._request("reset", None, (), {}, "reset()")
            except StudentException:
                pass  # the worker is gone; the next request starts a fresh one
        self._generation += 1
        self._output.clear()
        self._dropped = 0

    def restart(self) -> None:
        """Replace the worker with a new process (a new hash seed among other things); proxies die."""
        if self._res.worker is not None:
            self._discard()
        self._launch()

    def captured_output(self) -> str:
        """Student stdout and stderr since the last reset, cut at limits.output_bytes with a note."""
        text = self._output.decode("utf-8", errors="replace")
        if self._dropped:
            text += (
                f"\n[... {self._dropped} more bytes of output not kept: "
                f"the limit is {self.limits.output_bytes} bytes]\n"
            )
        return text

    def cpu_seconds(self) -> float | None:
        """CPU time used so far by the current worker, measured from outside (None if unreadable).

        Starts the worker if needed and waits until it is ready, so the start-up is never counted
        between two readings.
        """
        return self._ready_worker().cpu_seconds()

    def close(self) -> None:
        """Kill the worker's process group and remove the private folder."""
        self._finalizer()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ----- requests ---------------------------------------------------------------------------

    def _request(
        self, op: str, target: Proxy | list[Any] | None, args: Sequence[Any], kwargs: dict[str, Any],
        label: str, timeout: float | None = None,
    ) -> Any:
        """One round trip; returns the decoded result or raises what the student's code raised."""
        if isinstance(target, Proxy):
            self._check_fresh(target)
            target = target._sbx_target
        self._ready_worker()
        blobs: list[Any] = []
        header: dict[str, Any] = {"op": op, "target": target}
        header["args"] = [wire.encode(arg, blobs, self._reference) for arg in args]
        header["kwargs"] = [[k, wire.encode(v, blobs, self._reference)] for k, v in kwargs.items()]
        reply, reply_blobs = self._exchange(header, blobs, label, timeout or self.limits.call_timeout)
        try:
            return self._interpret(op, reply, reply_blobs, label)
        except ProtocolError as exc:
            raise self._protocol_failure(str(exc), label) from None

    def _interpret(self, op: str, reply: dict[str, Any], blobs: list[memoryview], label: str) -> Any:
        """The result in a reply, or the student's exception raised."""
        if reply.get("ok") is True:
            if op == "next" and reply.get("stop") is True:
                return _STOP
            if "value" not in reply:
                return None  # a reset
            generation = self._generation

            def make_proxy(number: int, type_name: str) -> Proxy:
                return Proxy(self, ["R", number], generation, label, type_name)

            return wire.Decoder(blobs, make_proxy).decode(reply["value"])
        error = reply.get("error")
        if reply.get("ok") is not False or type(error) is not dict:
            raise ProtocolError(f"the worker sent a malformed reply: {str(reply)[:200]}")
        texts = [error.get(key) for key in ("message", "traceback", "where")]
        if not all(type(text) is str for text in texts):
            raise ProtocolError("the worker sent a malformed exception report")
        message, student_traceback, where = (text[:TEXT_LIMIT] for text in texts)
        module, qualname, mro = wire.Decoder.exception_names(
            error.get("module"), error.get("qualname"), error.get("mro"),
        )
        cls = student_exception_class(module, qualname, mro)
        if cls is StudentCrash:
            raised = f"{qualname}({message})" if message else qualname
            place = f" at {where}" if where else ""
            exc = StudentCrash(f"student code raised {raised}{place} during {label}")
        else:
            exc = cls(message)
        exc.student_traceback = student_traceback
        raise exc

    def _reference(self, value: Any) -> list[Any] | None:
        """The wire form of a proxy argument (the worker object it names), None for other values."""
        if isinstance(value, Proxy):
            if value._sbx_box is not self:
                raise TypeError(f"{value._sbx_label} belongs to another sandbox")
            self._check_fresh(value)
            return value._sbx_target
        if isinstance(value, type) and issubclass(value, StudentException):
            raise TypeError(f"cannot pass the exception class {value.__qualname__} back to student code")
        return None

    def _check_fresh(self, proxy: Proxy) -> None:
        if proxy._sbx_generation is not None and proxy._sbx_generation != self._generation:
            raise ReferenceError(
                f"{proxy._sbx_label} refers to a student object from before the sandbox was reset "
                "or its worker restarted"
            )

    # ----- the worker process -----------------------------------------------------------------

    def _ready_worker(self) -> _Worker:
        """The current worker, started (again) if there is none and awaited if still starting."""
        if not self._finalizer.alive:
            raise RuntimeError("the sandbox is closed")
        if self._res.worker is None:
            self._launch()
        worker = self._res.worker
        assert worker is not None
        if not worker.ready:
            self._await_ready(worker)
        return worker

    def _launch(self) -> None:
        """Start a worker and send it its init message, without waiting for it (see _await_ready)."""
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        for fd in (resp_w, out_w):
            try:
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
            except OSError:
                pass  # a smaller pipe is only slower
        env = {
            **isolation.BASE_ENV, "HOME": str(self._home),
            "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            **{name: os.environ[name] for name in PASSED_THROUGH_ENV if name in os.environ},
        }
        # -S as well as -I: no site module, so neither the interpreter's own site-packages nor any
        # .pth file there joins the worker (and start-up is faster). -B: the worker writes no
        # bytecode into folders it shares with the grader.
        argv = [*self._plan.prefix, self._python, "-I", "-S", "-B", str(self._script), str(req_r), str(resp_w)]
        launched = time.perf_counter()
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out_w, stderr=out_w, pass_fds=(req_r, resp_w),
                cwd=self._home, env=env, start_new_session=True, **self._plan.popen_kwargs,
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
        self._seq += 1
        limits = {
            "cpu_seconds": self.limits.cpu_seconds, "memory_bytes": self.limits.memory_bytes,
            "max_processes": self.limits.max_processes, "file_bytes": self.limits.file_bytes,
        }
        init = {
            "seq": self._seq, "op": "init", "home": str(self._home),
            "lib_dirs": [str(p) for p in self._lib_dirs],
            "site_packages": [str(p) for p in self._site_packages], "limits": limits,
            "remote": sorted(self.remote),
        }
        # A few hundred bytes: the fresh pipe takes them at once, whatever the worker is doing.
        os.write(req_w, wire.frame(init, [])[0])
        self._res.worker = _Worker(proc, req_w, resp_r, out_r, launched, self._seq)

    def _await_ready(self, worker: _Worker) -> None:
        """Wait until a launched worker has applied its limits and imported numpy."""
        try:
            reply, _ = self._exchange({"seq": worker.init_seq}, [], "start-up",
                                      max(START_TIMEOUT, self.limits.call_timeout), send=False)
        except StudentException as exc:
            tail = self._output[-2000:].decode(errors="replace").strip()
            raise WorkerDied(f"{exc}; its output: {tail or '(none)'}") from None
        pid = reply.get("pid")
        if reply.get("ok") is not True or type(pid) is not int:
            raise self._protocol_failure("malformed start-up reply", "start-up")
        if self._plan.bubblewrap:
            found = _find_sandboxed_pid(worker.proc.pid, pid)
            if found is None:
                raise self._protocol_failure(f"no sandboxed process with pid {pid}", "start-up")
            worker.cpu_pid = found
        elif pid != worker.proc.pid:
            raise self._protocol_failure(f"the worker claims pid {pid}", "start-up")
        worker.ready = True
        self.last_start_seconds = time.perf_counter() - worker.launched

    def _exchange(
        self, header: dict[str, Any], blobs: list[Any], label: str, timeout: float, send: bool = True,
    ) -> tuple[dict[str, Any], list[memoryview]]:
        """Send one request (unless `send` is False: it went already) and read its reply, draining
        student output meanwhile.

        Raises WorkerTimeout, WorkerDied or ProtocolError (the worker is then gone).
        """
        worker = self._res.worker
        assert worker is not None
        if send and _readable(worker.resp_r, 0):  # the worker died idle, or sent bytes nobody asked for
            try:
                unsolicited = os.read(worker.resp_r, 1)
            except BlockingIOError:
                unsolicited = b""
            if not unsolicited:
                self._died(f"the time between calls (before {label})", None)
            raise self._protocol_failure("unsolicited data before the request", label)
        pending = []
        if send:
            self._seq += 1
            header["seq"] = self._seq
            pending = [memoryview(part).cast("B") for part in wire.frame(header, blobs)]
        reader = wire.Reader()
        poller = select.poll()
        if pending:
            poller.register(worker.req_w, select.POLLOUT)
        poller.register(worker.resp_r, select.POLLIN)
        if worker.out_open:
            poller.register(worker.out_r, select.POLLIN)
        cpu_before = worker.cpu_seconds()
        deadline = time.monotonic() + timeout
        while True:
            try:
                while reader.wanted():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        self._timed_out(label, timeout, cpu_before)
                    for fd, _ in poller.poll(remaining * 1000 + 1):
                        if fd == worker.out_r:
                            self._keep_output(worker.drain_once())
                            if not worker.out_open:
                                poller.unregister(fd)
                        elif fd == worker.req_w:
                            try:
                                pending[0] = pending[0][os.write(fd, pending[0][:PIPE_BYTES]):]
                            except BlockingIOError:
                                continue
                            except BrokenPipeError:
                                self._died(label, cpu_before)
                            while pending and not pending[0]:
                                pending.pop(0)
                            if not pending:
                                poller.unregister(fd)
                        elif fd == worker.resp_r:
                            try:
                                chunk = os.read(fd, min(reader.wanted(), PIPE_BYTES))
                            except BlockingIOError:
                                continue
                            if not chunk:
                                self._died(label, cpu_before)
                            reader.feed(chunk)
                reply, reply_blobs = reader.message()
            except ProtocolError as exc:
                raise self._protocol_failure(str(exc), label) from None
            if not (send and "callback" in reply):
                break
            # Student code called a `remote` library function: run it here, send back its result,
            # and go on waiting for the reply to our request, within the same deadline.
            if pending:  # the worker cannot have read our whole request yet
                raise self._protocol_failure("a callback before the whole request was read", label)
            pending = [memoryview(part).cast("B") for part in
                       self._callback(worker, header["seq"], reply, reply_blobs, label)]
            poller.register(worker.req_w, select.POLLOUT)
            reader = wire.Reader()
        budget = DRAIN_BUDGET  # the worker flushed before replying: its output is in the pipe now
        while budget > 0 and worker.out_open:
            chunk = worker.drain_once()
            if not chunk:
                break
            self._keep_output(chunk)
            budget -= len(chunk)
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        if reply.get("seq") != header["seq"]:
            raise self._protocol_failure("a reply to another request", label)
        return reply, reply_blobs

    def _callback(
        self, worker: _Worker, seq: int, message: dict[str, Any], blobs: list[memoryview], label: str,
    ) -> list[Any]:
        """Run the `remote` function the worker asked for; the frames of the "return" message.

        Its arguments' worker objects are proxies here, so the function's own requests about them
        are nested round trips. An exception it raises (a student's, from such a request, too) goes
        back to be raised in the worker as the nearest builtin exception; if the worker stops during
        a nested request, that error propagates instead.
        """
        name, args, kwargs = message.get("callback"), message.get("args"), message.get("kwargs")
        function = self.remote.get(name) if type(name) is str else None
        if function is None or message.get("seq") != seq or type(args) is not list or type(kwargs) is not list:
            raise self._protocol_failure(f"an unknown or malformed callback {str(name)[:80]!r}", label)
        generation = self._generation

        def make_proxy(number: int, type_name: str) -> Proxy:
            return Proxy(self, ["R", number], generation, f"your {type_name}", type_name)

        try:
            decoder = wire.Decoder(blobs, make_proxy)
            decoded_args = [decoder.decode(arg) for arg in args]
            decoded_kwargs = dict(decoder.pair(item, 0) for item in kwargs)
        except ProtocolError as exc:
            raise self._protocol_failure(str(exc), label) from None
        out: list[Any] = []
        if self._callback_depth >= MAX_CALLBACK_DEPTH:
            header: dict[str, Any] = {"op": "return", "ok": False, "error": {
                "type": "RecursionError", "message": f"{name} nested more than {MAX_CALLBACK_DEPTH} deep"}}
            return wire.frame(header, out)
        self._callback_depth += 1
        try:
            value = function(*decoded_args, **decoded_kwargs)
            header = {"op": "return", "ok": True, "value": wire.encode(value, out, self._reference)}
        except Exception as exc:
            if self._res.worker is not worker:  # a nested request stopped the worker
                raise
            builtin = next((c for c in type(exc).__mro__ if getattr(builtins, c.__name__, None) is c), Exception)
            header = {"op": "return", "ok": False,
                      "error": {"type": builtin.__name__, "message": str(exc)[:TEXT_LIMIT]}}
            out = []
        except BaseException:
            # A whole-test timeout (or an interrupt) while the worker waits mid-call: stop it, so
            # no half-finished call lingers into the next request.
            if self._res.worker is worker:
                self._discard()
            raise
        finally:
            self._callback_depth -= 1
        if self._res.worker is not worker:
            raise WorkerDied(f"the student's process stopped during {name} (called from {label})")
        return wire.frame(header, out)

    def _keep_output(self, chunk: bytes) -> None:
        room = max(0, self.limits.output_bytes - len(self._output))
        self._output += chunk[:room]
        self._dropped += len(chunk) - min(room, len(chunk))

    def _discard(self, kill: bool = True) -> Ending:
        """Stop the current worker; its object table (and every proxy into it) is gone."""
        worker, self._res.worker = self._res.worker, None
        self._generation += 1
        assert worker is not None
        return worker.stop(kill, self._keep_output)

    def _timed_out(self, label: str, timeout: float, cpu_before: float | None) -> None:
        worker = self._res.worker
        assert worker is not None
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        self._discard()
        raise WorkerTimeout(
            f"{label} did not finish within the time limit of {timeout:g} s (wall clock); "
            "the student's process was stopped and will be restarted"
        )

    def _died(self, label: str, cpu_before: float | None) -> None:
        ending = self._discard(kill=False)
        # The rusage of a reaped child includes its reaped descendants: under bubblewrap the
        # interpreter, which died first here (that is what closed the reply pipe).
        known = cpu_before is not None and ending.cpu_seconds >= cpu_before
        self.last_call_cpu = ending.cpu_seconds - cpu_before if known else None  # type: ignore[operator]
        if ending.killed:
            why = "closed its channel to the grader without exiting, and was stopped"
        else:
            why = explain_exit(
                ending.returncode, cpu_seconds=ending.cpu_seconds, max_rss_bytes=ending.max_rss_bytes,
                cpu_limit=self.limits.cpu_seconds, memory_limit=self.limits.memory_bytes,
                signal_offset=self._plan.bubblewrap,
            )
        raise WorkerDied(
            f"the student's process {why} during {label}; it will be restarted for the next call"
        )

    def _protocol_failure(self, detail: str, label: str) -> ProtocolError:
        """Kill the worker (its stream can no longer be trusted) and describe what it sent."""
        if self._res.worker is not None:
            self._discard()
        return ProtocolError(
            f"invalid data from the student's process during {label}: {detail}; it was stopped"
        )
