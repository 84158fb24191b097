"""The worker process: starting it, its pipes, measuring its CPU time, stopping it, and the
private folder it works in.

One module on purpose (over 400 lines): one concept, the worker's process with its folder; they are
made, measured and removed together (the folder is where the process runs, and stopping the process
removes what it left there).
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

from . import identity
from .errors import WorkerDied
from .isolation import BASE_ENV, Plan
from .worker import protocol
from .worker.messages import Init, header

# The worker's side, the package `worker` (every module of its folder and nothing else): copied into
# each sandbox's private folder and imported from there.
WORKER_PACKAGE = Path(__file__).with_name("worker")
WORKER_MODULES = tuple(sorted(WORKER_PACKAGE.glob("*.py")))
# Bigger pipes mean fewer system calls for large arrays and output floods (Linux allows 1 MB
# without privileges).
PIPE_BYTES = 1 << 20
# After a reply, at most this much pending student output is read before returning.
DRAIN_BUDGET = 16 << 20
PASSED_THROUGH_ENV = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
# rm -rf of a folder the worker could fill in one call's time: seconds at most.
REMOVE_TIMEOUT = 120.0


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
        self._proc_pid = self.cpu_pid  # whose /proc files _proc_files holds open, by name
        self._proc_files: dict[str, int] = {}

    def cpu_seconds(self) -> float | None:
        """CPU seconds the worker's main thread used so far, exact, read from outside it (two
        readings per round trip); None when unreadable. The worker can start no thread while
        RLIMIT_NPROC is 0 (Limits.max_processes); `process_cpu_seconds` counts every thread.

        One open file read again with pread: a fresh open per reading cost a few microseconds more,
        which adds up over tens of thousands of round trips.
        """
        fd = self._proc_file("schedstat")
        try:
            return int(os.pread(fd, 128, 0).split()[0]) / 1e9
        except (OSError, ValueError, IndexError, TypeError):
            return read_cpu(self.cpu_pid)

    def process_cpu_seconds(self) -> float | None:
        """CPU seconds of all the worker's threads, ended ones included, to a clock tick (stat: four
        times the cost of schedstat, so read by the periodic checks of long calls only)."""
        fd = self._proc_file("stat")
        try:
            fields = os.pread(fd, 4096, 0).rsplit(b")", 1)[1].split()
        except (OSError, IndexError, TypeError):
            return None
        # Fields 14 and 15 of stat (utime, stime), counted from the state field after the name.
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def home_usage(self, home: Path) -> tuple[int, int] | None:
        """(bytes, inodes) used on the worker's tmpfs home, seen through its mount namespace (one
        fstatvfs on a folder opened once); None when unreadable."""
        fd = self._proc_file(f"root{home}", os.O_DIRECTORY)
        try:
            info = os.fstatvfs(fd)
        except (OSError, TypeError):
            return None
        return (info.f_blocks - info.f_bfree) * info.f_frsize, info.f_files - info.f_ffree

    def _proc_file(self, name: str, flags: int = 0) -> int | None:
        """An open descriptor of /proc/<cpu_pid>/<name>, opened on first use; None if it cannot be."""
        if self._proc_pid != self.cpu_pid:
            self._close_proc_files()
            self._proc_pid = self.cpu_pid
        if name not in self._proc_files:
            try:
                self._proc_files[name] = os.open(f"/proc/{self.cpu_pid}/{name}", os.O_RDONLY | flags)
            except OSError:
                return None
        return self._proc_files[name]

    def _close_proc_files(self) -> None:
        for fd in self._proc_files.values():
            os.close(fd)
        self._proc_files.clear()

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
        self._close_proc_files()
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
    """What must be released even if the Sandbox is never closed: the worker, the private folder and
    the worker's identity.

    `root` holds `submitted/` (the student's files, read-only for the worker, which copies them into
    its home when it starts), the worker's scripts, `packages/` (the Sandbox's `packages`: mount
    points with bubblewrap, else a read-only copy), and `home/`: with bubblewrap the mount point of
    each worker's own size-limited tmpfs, which leaves nothing on disk; without it a real folder
    owned by the worker's user, emptied before every new worker.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.submitted = root / "submitted"
        self.worker: WorkerProcess | None = None
        self.home_owner: tuple[int, int] | None = None  # (uid, gid) when not the grader's
        # The uid claimed for this sandbox alone (identity.claim), when the grader is root: only then
        # is what that uid owns outside the folder the worker's, to count and to remove.
        self.identity: identity.Identity | None = None
        self.python = sys.executable  # the worker's interpreter, which that uid can run
        # Whether a worker ran without bubblewrap. Under it a worker writes nothing on this machine's
        # disks (a read-only view; its home, /tmp and /dev/shm are its own tmpfs; System V IPC its
        # own namespace's), so `root` holds only what the grader put there and the uid owns nothing.
        self.unsealed = False

    def scratch(self) -> list[str]:
        """What the worker's own uid owns in the shared scratch folders (nothing for a shared user)."""
        if self.identity is None:
            return []
        # The temporary folder this sandbox's folder lies in too: a TMPDIR other than /tmp that every
        # user may write is as shared as /tmp.
        folders = tuple(dict.fromkeys((*identity.SHARED_SCRATCH, str(self.root.parent))))
        return identity.owned_entries(self.identity.uid, folders)

    def fresh_home(self) -> None:
        """An empty home folder, owned by the worker's user: nothing an earlier worker wrote remains,
        in its folder, in the shared scratch folders or in System V IPC objects."""
        for path in [*([str(self.home)] if self.home.exists() else []), *self.scratch()]:
            problem = remove_tree(Path(path))
            if problem is not None:
                raise OSError(f"could not remove what the student's process wrote, {path}: {problem}")
        if self.identity is not None:
            problem = identity.remove_ipc(self.identity.uid, BASE_ENV)
            if problem is not None:
                raise OSError(f"could not remove the student's process's IPC objects: {problem}")
        self.home.mkdir(mode=0o700)
        if self.home_owner is not None:
            os.chown(self.home, *self.home_owner)

    def release(self) -> None:
        """Stop the worker, remove the private folder and what the worker's uid owns, and give the
        uid back; never raises (a problem goes to stderr, the staff's log: cleaning up must not
        change a grade)."""
        try:
            if self.worker is not None:
                worker, self.worker = self.worker, None
                worker.stop(kill=True, keep_output=lambda chunk: None)
        finally:
            if self.unsealed:
                problems = [(path, remove_tree(Path(path))) for path in [str(self.root), *self.scratch()]]
            else:
                problems = [(str(self.root), remove_tree(self.root, grader_only=True))]
            if self.identity is not None:
                if self.unsealed:
                    problems.append(("IPC objects", identity.remove_ipc(self.identity.uid, BASE_ENV)))
                # Keys have no namespace: bubblewrap's worker shares the machine's keyrings.
                problems.append(("kernel keys", identity.remove_keys(self.identity.uid, self.python, BASE_ENV)))
                if not any(problem for _, problem in problems):
                    self.identity.release()
                # else the uid stays claimed until this process ends, and the next sandbox to claim
                # it removes what is left (fresh_home)
            for path, problem in problems:
                if problem is not None:
                    print(f"sandbox: could not remove {path}: {problem}", file=sys.stderr)


def remove_tree(path: Path, grader_only: bool = False) -> str | None:
    """Remove `path` and everything under it, whatever its depth or size; None, or what went wrong.

    rm -rf (GNU rm works on directory descriptors, so a 3,000-deep chain, whose paths are longer
    than the kernel accepts, goes as well as a flat folder of 100,000 files; shutil.rmtree recurses
    in Python and fails on such a chain). A folder the student's user made unreadable (a grader that
    is not root shares that user) is made accessible first, and removal tried again.
    `grader_only`: no student code wrote under `path` (a few files the grader made): shutil.rmtree
    first, which saves starting rm (a few milliseconds of every sandbox), rm -rf if it fails.
    """
    if grader_only:
        try:
            shutil.rmtree(path)
        except (OSError, RecursionError):
            pass
    attempts = (["rm", "-rf", "--one-file-system", "--", str(path)],
                ["chmod", "-R", "u+rwx", "--", str(path)],
                ["rm", "-rf", "--one-file-system", "--", str(path)])
    problem = ""
    for argv in attempts:
        if not os.path.lexists(path):
            return None
        try:
            done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, env=BASE_ENV,
                                  timeout=REMOVE_TIMEOUT, check=False)
            problem = done.stderr.decode(errors="replace").strip()[-500:]
        except (OSError, subprocess.SubprocessError) as exc:
            problem = str(exc)
    return None if not os.path.lexists(path) else problem or "still there"


def folder_usage(path: str, max_entries: int, max_depth: int) -> tuple[int, int, str | None]:
    """(bytes allocated, entries) of `path` (a folder: everything under it), counted until either
    passes a bound; and why it is over its bounds (None if it is not). Iterative, so no depth breaks
    it; a folder that cannot be listed counts as over."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return 0, 0, None
    if not stat.S_ISDIR(info.st_mode):
        return info.st_blocks * 512, 1, None
    total, entries = 0, 0
    stack = [(path, 0)]
    while stack:
        folder, depth = stack.pop()
        if depth > max_depth:
            return total, entries, f"folders nested more than {max_depth} deep"
        try:
            with os.scandir(folder) as listing:
                for entry in listing:
                    entries += 1
                    if entries > max_entries:
                        return total, entries, f"more than {max_entries} files and folders"
                    info = entry.stat(follow_symlinks=False)
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False):
                        stack.append((entry.path, depth + 1))
        except FileNotFoundError:
            continue  # removed meanwhile by the worker
        except OSError as exc:
            return total, entries, f"a folder the grader cannot list ({exc.strerror})"
    return total, entries, None


def readable(fd: int, timeout: float) -> bool:
    """Whether fd has data or end of file within timeout seconds (poll: no FD_SETSIZE limit)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def read_cpu(pid: int) -> float | None:
    """CPU seconds used so far by process pid, measured from outside it."""
    try:  # nanoseconds on the CPU
        with open(f"/proc/{pid}/schedstat", "rb") as f:
            return int(f.read().split()[0]) / 1e9
    except (OSError, ValueError, IndexError):
        pass
    try:  # clock ticks of user + system time
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
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
    """Copy regular files and folders (iteratively: an upload of any depth); symlinks are skipped
    (root would follow them anywhere). Readable by all, writable by the grader only."""
    stack = [(source, target)]
    while stack:
        folder, into = stack.pop()
        into.mkdir(mode=0o755, exist_ok=True)
        for entry in os.scandir(folder):
            if entry.is_symlink() or entry.name == "__pycache__":
                continue
            if entry.is_dir():
                stack.append((Path(entry.path), into / entry.name))
            elif entry.is_file():
                shutil.copyfile(entry.path, into / entry.name)
                os.chmod(into / entry.name, 0o644)


def readable_by_group_only(folder: Path, gid: int) -> None:
    """Make `folder` (the submitted files) readable by group `gid` and the grader only: without
    bubblewrap, workers of other sandboxes on this machine (other submissions of a batch) run as
    other uids and must not read this submission's files; the worker itself must not write them."""
    for path, dirs, files in os.walk(folder):
        os.chown(path, -1, gid)
        os.chmod(path, 0o750)
        for name in files:
            os.chown(os.path.join(path, name), -1, gid)
            os.chmod(os.path.join(path, name), 0o640)


def copy_read_only(source: Path, target: Path) -> None:
    """Copy the package folder `source` into `target` (which may exist, empty), with its bytecode,
    readable by all and writable by nobody (Sandbox's `packages` without bubblewrap). copytree's
    copy2 keeps the modification times the interpreter checks the bytecode against."""
    shutil.copytree(source, target, dirs_exist_ok=True)
    for folder, _, files in os.walk(target, topdown=False):
        for name in files:
            os.chmod(os.path.join(folder, name), 0o444)
        os.chmod(folder, 0o555)


def place_worker(root: Path) -> Path:
    """Copy the worker's package into `root`, as `root/worker/`, each module with its bytecode where
    the grader's copy has it (`make bytecode` and setup.sh compile it; a grading never writes
    bytecode); the folder to import it from (`root`).

    Bytecode saves each worker's start compiling them (about 10 ms of its CPU time on one core).
    copy2 keeps each source's modification time, which the interpreter checks the bytecode
    against: bytecode older than its source is ignored and the source compiled in memory."""
    package = root / WORKER_PACKAGE.name
    cache = package / "__pycache__"
    package.mkdir(mode=0o755)
    cache.mkdir(mode=0o755)
    for source in WORKER_MODULES:
        compiled = Path(importlib.util.cache_from_source(str(source)))
        for original, copy in ((source, package / source.name), (compiled, cache / compiled.name)):
            if original.is_file():
                shutil.copy2(original, copy)
                os.chmod(copy, 0o644)  # readable by the worker's unprivileged identity
    return root


def launch(plan: Plan, python: str, folder: Path, home: Path, init: Init) -> WorkerProcess:
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
    # bytecode into folders it shares with the grader. The worker is imported rather than run as a
    # script, because a script's bytecode is never cached; -I keeps `folder` off sys.path but for
    # that import.
    boot = (f"import sys; sys.path.insert(0, {str(folder)!r}); import worker.main; del sys.path[0]; "
            "worker.main.main()")
    argv = [*plan.prefix, python, "-I", "-S", "-B", "-c", boot, str(req_r), str(resp_w)]
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
    try:
        os.write(req_w, protocol.frame(header(init), [])[0])
    except BrokenPipeError:
        pass  # it ended at once (bubblewrap refused to start, say): waiting for it reports that
    return WorkerProcess(proc, req_w, resp_r, out_r, launched, init.seq)
