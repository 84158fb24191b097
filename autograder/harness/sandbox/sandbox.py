"""The trusted side: `Sandbox` starts the worker, talks to it over private pipes, and hands out proxies.

The grading process never imports student code and never unpickles anything: values come back as
validated plain data (see `codec.py`), and every other object stays in the worker's object table and
is represented here by a `Proxy` (`proxy.py`) whose attribute reads, calls, `len`, `in`, indexing,
iteration and `repr` are round trips. The round trip itself, with the calls the worker makes into
the trusted process meanwhile, is `exchange.Exchange`, which a Sandbox holds; what it knows of the
worker's objects, `proxy.WorkerObjects`; the process and its folder, `process.py`.

One module on purpose (over 400 lines): `Sandbox` is the trusted side's one entry point, and with the
round trips (exchange.py), the object bookkeeping (proxy.py) and the process (process.py) already apart,
what stays here is the worker's lifetime: start, requests, restart and stop share the current worker.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import re
import shutil
import site
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from . import identity, isolation, process, staging
from .config import NAME, QUALNAME, SandboxConfig
from .errors import (
    ProtocolError,
    StudentCrash,
    StudentException,
    WorkerDied,
    on_student_objects,
    student_exception_class,
)
from .codec import Decoder, WireTypes, encode
from .exchange import Exchange
from .limits import Limits
from .process import Resources, WorkerProcess
from .proxy import STOP, Proxy, WorkerObjects
from .worker.messages import (
    ABSENT,
    INIT,
    NEXT,
    RESET,
    ExceptionReport,
    Init,
    Reply,
    Request,
    Started,
    Tag,
    header,
    read,
)
from .worker.protocol import TEXT_LIMIT

# The third-party packages the worker imports (the course library is `packages`): numpy and the
# shared libraries its wheel ships beside it.
WORKER_DISTRIBUTIONS = ("numpy", "numpy.libs")

# Starting includes the interpreter and numpy (a fraction of a second); this only catches hangs.
START_TIMEOUT = 60.0
# What the worker's seccomp filter refuses (worker/seccomp.py), as the results say it.
SECCOMP_SAYS = ("seccomp: memory files, System V and POSIX IPC, sockets, permission and metadata changes, "
                "kernel keys, other processes' settings and namespaces refused")

# Names the trusted side used on student objects while recording (see `recording`): each entry
# is (the set collecting them, the type-name prefixes whose objects are not the student's).
_RECORDS: list[tuple[set[tuple[str, str]], tuple[str, ...]]] = []


@contextlib.contextmanager
def recording(library: tuple[str, ...] = ()) -> Iterator[set[tuple[str, str]]]:
    """Collect, from every sandbox of this process, what the trusted side uses on student objects:
    ("attribute", name) for each attribute read or written, ("keyword", name) for each keyword
    argument of a call into the worker, ("exception", class name) for each student exception raised
    here. Objects whose type's "module.qualname" starts with one of `library` (the course library's
    own objects living in the worker) are not the student's and are left out. For the repository's
    check that every such name is stated to students (tests/suites/test_stated_rules.py); never on while
    grading a submission."""
    names: set[tuple[str, str]] = set()
    entry = (names, tuple(library))
    _RECORDS.append(entry)
    try:
        yield names
    finally:
        _RECORDS.remove(entry)


def _record(kind: str, name: object, type_name: str = "") -> None:
    if isinstance(name, str) and not name.startswith("__"):
        for names, library in _RECORDS:
            if not (library and type_name.startswith(library)):
                names.add((kind, name))


class Sandbox:
    """Student modules in an isolated worker process, reached through proxies.

    `modules_dir`: the student's files (copied into a private folder the worker may write to).
    `lib_dirs`: folders put on the worker's sys.path (the course library); not writable by it.
    `packages`: package folders (the course library) the worker imports from a folder of the
    sandbox's own, on its sys.path and not writable by it: bound there read-only under bubblewrap
    (nothing is copied), copied there read-only at the first start without it (a fresh() sibling
    then imports from this sandbox's copy). Their names must differ.
    `hide`: paths the worker must not see (enforced with bubblewrap; otherwise reported as reduced).
    `user`: the unprivileged user for the worker when the grader is root. By default a uid of the
    sandbox's own (`identity.claim`; nobody if none can be claimed), so that without bubblewrap what
    it owns in the shared scratch folders (/tmp, /dev/shm, ...) is the worker's: counted against the
    folder limits and removed with the folder, as are its System V IPC objects.
    `python`: the worker's interpreter. A root grader never runs student code as root: when `user`
    cannot run it, the constructor (a user that does not exist) or the worker's first start raises
    `NoSafeIdentity` (a grader fault, for the staff).
    `bubblewrap`: False skips bubblewrap (to exercise the fallback, or where it misbehaves).
    `landlock`: False keeps the worker from confining itself with Landlock (worker/landlock.py), to
    grade as a kernel without it would; the results then say the isolation is reduced.
    `config`: the course's choices (`config.SandboxConfig`): the types that cross by value and
    their codecs; the library functions (`remote`) that run here whenever code in the worker calls
    them (the worker's copy is replaced, before any student code runs, by a stand-in that sends the
    arguments, plain data by value and other objects as references, and serves requests about
    those objects until the result comes back), so what they compute and record is out of the
    student code's reach; and the library functions `call` runs here (`trusted_calls`).

    Whatever the worker sends is the student's: a reply the trusted side cannot use raises a
    `StudentException` in the test that asked (`BadReply` for a value of the wrong kind, an object of
    a worker stopped earlier in the test, or a trusted call failing on the student's objects), and
    `objects.holding` (`kept.Holding`) bounds what this process keeps of the replies at once.

    `isolation` reports, in words, what isolation is in force and what is reduced (once a worker
    has started: reading it waits for that, see isolation.plan's `optimistic`).
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
        config: SandboxConfig = SandboxConfig(),
        packages: Sequence[Path] = (),
        landlock: bool = True,
    ) -> None:
        self.limits = limits
        self.config = config
        # What fresh() needs to make a sibling: the submitted files as they came, not the home
        # folder this worker may have written to.
        self._settings: dict[str, Any] = {
            "modules_dir": Path(modules_dir), "lib_dirs": list(lib_dirs), "limits": limits, "hide": list(hide),
            "user": user, "python": python, "bubblewrap": bubblewrap, "config": config, "packages": list(packages),
            "landlock": landlock,
        }
        packages = [Path(os.path.realpath(p)) for p in packages]
        if len({p.name for p in packages}) != len(packages):
            raise ValueError(f"packages must have different names: {packages}")
        self._local = 0  # library_local blocks open
        # The real interpreter binary: a venv's bin/ may sit inside a hidden folder.
        self._python = os.path.realpath(shutil.which(python) or python)
        self._lib_dirs = [Path(os.path.realpath(p)) for p in lib_dirs]
        self._wire_types = WireTypes(config)  # before any worker runs (see there)
        self._notes: list[str] = []  # said in the isolation report whatever the plan
        self._site_packages = self._worker_site_packages()
        self._res = Resources(Path(tempfile.mkdtemp(prefix="sandbox-")))
        self._finalizer = weakref.finalize(self, self._res.release)
        try:
            self._prepare_folder(Path(modules_dir), packages, user)
            self._plan_first_worker(user, hide, bubblewrap)
            self._start_bookkeeping()
            # Start the interpreter now: its start-up (numpy's import) overlaps the grader's own
            # work, such as collecting the tests, and is awaited on first use.
            self._launch()
        except BaseException:
            self._finalizer()
            raise

    def _worker_site_packages(self) -> list[Path]:
        """The folders the worker imports this process's numpy from: numpy's folder, wherever it was
        found (a venv's site-packages, or PYTHONPATH beside a system interpreter), and the site
        folders; as root, a staged copy instead when the worker's uid cannot reach numpy (a note
        says so)."""
        numpy_home = Path(np.__file__).resolve().parent.parent
        site_packages = list(dict.fromkeys([
            numpy_home, *(Path(os.path.realpath(p)) for p in site.getsitepackages() if os.path.isdir(p)),
        ]))
        if os.geteuid() == 0 and not staging.reachable(numpy_home / "numpy"):
            # A checkout in a private folder: the worker's uid imports a staged copy (staging.py).
            site_packages = [staging.staged(numpy_home, WORKER_DISTRIBUTIONS)]
            self._notes.append(f"{', '.join(WORKER_DISTRIBUTIONS)} staged readable for the worker in "
                               f"{site_packages[0]} ({numpy_home} is in a folder other users cannot enter)")
        return site_packages

    def _prepare_folder(self, modules_dir: Path, packages: list[Path], user: str | None) -> None:
        """The private folder (`process.Resources`): the worker's package, the submitted files, the
        folders `packages` go in, and this sandbox's uid when the grader claims one."""
        root = self._res.root
        # Where the worker imports `packages` from; copied there (False: bound, or not yet needed).
        self._packages_dir, self._packages_copied = root / "packages", False
        self._packages = [(source, self._packages_dir / source.name) for source in packages]
        if packages:
            self._lib_dirs.append(self._packages_dir)
        self._res.identity = identity.claim() if user is None else None
        self._res.python = self._python
        os.chmod(root, 0o755)  # the unprivileged worker must reach home/ and its package
        for _, target in self._packages:  # bubblewrap's mount points, a copy's folders
            target.mkdir(mode=0o755, parents=True)
        self._home = self._res.home
        self._worker_folder = process.place_worker(root)
        process.copy_student_files(modules_dir, self._res.submitted)
        if self._res.identity is not None:  # the worker's uid and group are this sandbox's alone
            process.readable_by_group_only(self._res.submitted, self._res.identity.gid)

    def _plan_first_worker(self, user: str | None, hide: Sequence[Path], bubblewrap: bool) -> None:
        """The isolation plan the first worker starts under and its report, the worker's home made
        for the plan's uid."""
        # Optimistic: the worker starts without waiting for the probes (an interpreter each,
        # tens of milliseconds of every grading); they run only if it fails to start.
        self._plan_settings: dict[str, Any] = {
            "python": self._python, "user": user, "hide": [Path(os.path.realpath(p)) for p in hide],
            "lib_dirs": self._lib_dirs, "site_packages": self._site_packages, "root_dir": self._res.root,
            "home": self._home, "limits": self.limits, "bubblewrap": bubblewrap,
            "identity": self._res.identity, "optimistic": True, "packages": self._packages,
        }
        self._plan = isolation.plan(**self._plan_settings)
        if self._plan.uid != os.geteuid():
            self._res.home_owner = (self._plan.uid, self._plan.gid)
        self._res.fresh_home()
        self._report = [*self._plan.report, *self._notes]
        # Whether the plan is known to hold: it assumed no probe, a worker started under it, or the
        # probes it assumed passed (see _replanned).
        self._plan_confirmed = not self._plan.assumed
        # Who the student's code runs as: when it is the grader's own uid, the worker can write
        # whatever the grader can (the runner then watches its files; see run.py).
        self.worker_uid: int = self._plan.uid

    def _start_bookkeeping(self) -> None:
        """What the sandbox counts and knows across its workers, and the round trips' own state."""
        self.last_start_seconds: float | None = None
        self.launches = 0  # workers started so far: a change between two cpu_seconds() readings voids them
        self.objects = WorkerObjects(self)
        self._exchange = Exchange(self._res, self.limits, self._plan, self.config.remote, self._wire_types,
                                  self.objects)
        # (module, name) of the functions and classes of the student's modules, per the worker, with
        # their type names: `module.name` is then a proxy that names it, [Tag.NAMED, "module:name"], and
        # the worker looks it up at each use (one round trip per call instead of two). Kept across
        # resets and restarts: a module's functions are the same in every worker. Only an
        # optimisation: a wrong answer costs the student's test (a name where it expected a value).
        self._named: dict[tuple[str, str], str] = {}
        self._home_used = False  # whether a worker wrote the home folder on disk since it was emptied

    # ----- public API -------------------------------------------------------------------------

    def module(self, name: str) -> Proxy:
        """The student's module `name`, imported in the worker on first use."""
        if not re.fullmatch(NAME, name):
            raise ValueError(f"not a module name: {name!r}")
        return Proxy(self, [Tag.MODULE, name], None, name, "module")

    def call(self, qualname: str, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run the library function "package.module:function" on proxies of the student's objects.

        Here, in this process, when the config lists it in `trusted_calls` (that callable) or its
        package in `trusted_packages` (this process's own copy of the function: the worker's copy,
        which student code may replace, is never used), unless it is one of the `worker_calls`;
        otherwise in the worker, beside the student's objects."""
        if not re.fullmatch(QUALNAME, qualname):
            raise ValueError(f'expected "package.module:function", got {qualname!r}')
        module, _, path = qualname.partition(":")
        trusted = self.config.trusted_calls.get(qualname)
        if trusted is None and module.split(".")[0] in self.config.trusted_packages \
                and qualname not in self.config.worker_calls:
            trusted = importlib.import_module(module)
            for name in path.split("."):
                trusted = getattr(trusted, name)
        if trusted is not None:
            try:
                return trusted(*args, **kwargs)
            except StudentException:
                raise
            except Exception as exc:
                # Trusted code failing on the student's objects (what they returned, what they are)
                # is the student's failure; on trusted inputs only, it stays the grader's.
                if any(isinstance(v, Proxy) for v in (*args, *kwargs.values())):
                    raise on_student_objects(exc, qualname) from exc
                raise
        return self._request("call", [Tag.NAMED, qualname], args, kwargs, f"{qualname}(...)", timeout)

    @contextlib.contextmanager
    def library_local(self) -> Iterator[None]:
        """Within the block, the `remote` library functions that code in the worker calls run there,
        as the worker's own copies (which student code may have replaced), not here: nothing they
        compute or record is trusted. For work that a cost guard times from here (`cpu_seconds`) and
        whose results it then checks against trusted values: a decode's forward calls stay in the
        student's process, instead of a callback per call with the cache's keys and values crossing."""
        self._local += 1
        try:
            yield
        finally:
            self._local -= 1

    def fresh(self) -> Sandbox:
        """A new sandbox with the same settings: a new private folder holding only the submitted
        files (nothing this sandbox's worker wrote), a new process, the same limits and isolation.
        The caller closes it.

        Without bubblewrap this sandbox's worker is ended first, and what it wrote removed, as
        between two submissions: the sibling would otherwise share the machine's /tmp, /dev/shm,
        network and process list with it, and a living process can hand its state over many of
        those (a file, an abstract socket's name, its own command line). Its objects are gone
        (using one raises ReferenceError: a test must be done with them before a fresh call); the
        next request starts a new worker."""
        if not self._plan.bubblewrap:
            if self._res.worker is not None:
                self.objects.ended_for_fresh.add(self.objects.generation)
                self._exchange.discard()
            self._empty_home()
        if self._packages_copied and self.worker_uid != os.geteuid():
            # The sibling (closed before this sandbox) imports from this copy, which no worker could
            # change: it belongs to the grader's user. A worker of the grader's own user could, and
            # hand the sibling what it wrote there: that sibling copies the packages anew.
            return Sandbox(**{**self._settings, "lib_dirs": [*self._settings["lib_dirs"], self._packages_dir],
                              "packages": []})
        return Sandbox(**self._settings)

    def reset(self) -> None:
        """Between tests: drop the worker's object table and the captured output.

        Proxies from before become invalid. A worker that died (or dies or hangs while its objects
        are dropped) is replaced on next use.
        """
        worker = self._res.worker
        # A worker still starting has no objects yet; one that has handed out no reference and been
        # sent nothing by number since the last reset has none in its table either (it numbers an
        # object only in what it sends here, where the reply is decoded into a proxy).
        if worker is not None and worker.ready and (self.objects.holds or self.objects.sent.numbered):
            try:
                self._request(RESET, None, (), {}, "reset()")
            except StudentException:
                pass  # the worker is gone; the next request starts a fresh one
        self.objects.new_test()
        self._exchange.clear_output()

    def restart(self) -> None:
        """Replace the worker with a new process (a new hash seed among other things); proxies die."""
        if self._res.worker is not None:
            self._exchange.discard()
        self._launch()

    def captured_output(self) -> str:
        """Student stdout and stderr since the last reset, cut at limits.output_bytes with a note."""
        return self._exchange.captured_output()

    @property
    def isolation(self) -> list[str]:
        """The report of the isolation in force, once the plan is confirmed (a worker is started and
        awaited if need be: a plan that assumed its probes may still be replaced)."""
        if not self._plan_confirmed and self._finalizer.alive:
            with contextlib.suppress(StudentException):  # the plan is confirmed all the same
                self._ready_worker()
        return list(self._report)

    @property
    def folder(self) -> Path:
        """The sandbox's private folder (removed by close(), with everything the worker wrote)."""
        return self._res.root

    @property
    def requests(self) -> int:
        """Requests sent to workers so far (each one round trip, callbacks inside it aside)."""
        return self._exchange.seq

    @property
    def last_call_cpu(self) -> float | None:
        """CPU seconds the worker spent on the last round trip, read from /proc (None when unknown)."""
        return self._exchange.last_call_cpu

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
        if _RECORDS:
            type_name = target._sbx_type if isinstance(target, Proxy) else ""
            if op in ("getattr", "setattr", "assign_into", "callmethod"):
                _record("attribute", args[0], type_name)
            for key in kwargs:
                _record("keyword", key, type_name)
        proxy = target if isinstance(target, Proxy) else None
        if proxy is not None:
            self.objects.check_fresh(proxy)
            target = proxy._sbx_target
            if op == "getattr" and target[0] == Tag.MODULE and (target[1], args[0]) in self._named:
                return Proxy(self, [Tag.NAMED, f"{target[1]}:{args[0]}"], None, label,
                             self._named[target[1], args[0]])
        self._ready_worker()
        blobs: list[Any] = []
        objects = self.objects
        request = Request(
            op=op, target=target, local=True if self._local else ABSENT,
            args=[encode(arg, blobs, objects.reference, self._wire_types, sent=objects.sent) for arg in args],
            kwargs=[[k, encode(v, blobs, objects.reference, self._wire_types, sent=objects.sent)]
                    for k, v in kwargs.items()],
        )
        received, reply_blobs = self._exchange.round_trip(header(request), blobs, label,
                                                          timeout or self.limits.call_timeout)
        reply = read(Reply, received)
        try:
            value = self._interpret(op, reply, received, reply_blobs, label)
        except ProtocolError as exc:
            raise self._exchange.protocol_failure(str(exc), label) from None
        if op == "getattr" and reply.method is True and proxy is not None \
                and proxy._sbx_generation == objects.generation:
            objects.methods.add((proxy._sbx_key(), args[0]))
        if op == "getattr" and reply.named is True and target[0] == Tag.MODULE and isinstance(value, Proxy) \
                and args[0].isidentifier():  # "module:name" must name this attribute and no other
            self._named[target[1], args[0]] = value._sbx_type
        return value

    def _protocol_failure(self, detail: str, label: str) -> ProtocolError:
        """Stop the worker (its stream can no longer be trusted) and describe what it sent (for proxies)."""
        return self._exchange.protocol_failure(detail, label)

    def _interpret(self, op: str, reply: Reply, received: dict[str, Any], blobs: list[memoryview],
                   label: str) -> Any:
        """The result in a reply (`received`, as read), or the student's exception raised."""
        if reply.ok is True:
            if op == NEXT and reply.stop is True:
                return STOP
            if reply.value is ABSENT:
                return None  # a reset
            objects, generation = self.objects, self.objects.generation

            def make_proxy(number: int, type_name: str) -> Proxy:
                return objects.proxy(number, type_name, label, generation)

            decoder = Decoder(blobs, make_proxy, self._wire_types, objects.holding, objects.sent)
            return decoder.decode(reply.value)
        if reply.ok is not False or type(reply.error) is not dict:
            raise ProtocolError(f"the worker sent a malformed reply: {str(received)[:200]}")
        error = read(ExceptionReport, reply.error)
        texts = [error.message, error.traceback, error.where]
        if not all(type(text) is str for text in texts):
            raise ProtocolError("the worker sent a malformed exception report")
        message, student_traceback, where = (text[:TEXT_LIMIT] for text in texts)
        module, qualname, mro = Decoder.exception_names(error.module, error.qualname, error.mro)
        cls = student_exception_class(module, qualname, mro)
        _record("exception", qualname)
        if cls is StudentCrash:
            raised = f"{qualname}({message})" if message else qualname
            place = f" at {where}" if where else ""
            exc = StudentCrash(f"student code raised {raised}{place} during {label}")
        else:
            exc = cls(message)
        exc.student_traceback = student_traceback
        raise exc

    # ----- the worker process -----------------------------------------------------------------

    def _ready_worker(self) -> WorkerProcess:
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
        """Start a worker and send it its init message, without waiting for it (see _await_ready).

        Every worker starts from the submitted files only: under bubblewrap its home is a new
        tmpfs; otherwise the folder an earlier worker used is emptied first. A worker that cannot
        even be spawned is started again under a new plan when its plan's assumptions fail
        (`_replanned`).
        """
        self._empty_home()
        self._home_used = not self._plan.bubblewrap
        self._res.unsealed = self._res.unsealed or not self._plan.bubblewrap
        if not self._plan.bubblewrap and not self._packages_copied:
            for source, target in self._packages:
                process.copy_read_only(source, target)
            self._packages_copied = True
        self.objects.new_worker()
        seq = self._exchange.new_worker()
        self.launches += 1
        limits = {
            "cpu_seconds": self.limits.cpu_seconds, "memory_bytes": self.limits.memory_bytes,
            "max_processes": self.limits.max_processes, "file_bytes": self.limits.file_bytes,
        }
        init = Init(
            seq=seq, op=INIT, home=str(self._home), seed=str(self._res.submitted),
            lib_dirs=[str(p) for p in self._lib_dirs],
            site_packages=[str(p) for p in self._site_packages], limits=limits,
            landlock=self._settings["landlock"], **self.config.for_worker(),
        )
        try:
            self._res.worker = process.launch(self._plan, self._python, self._worker_folder, self._home, init)
            return
        except WorkerDied as exc:
            failed = exc
        if not self._replanned():
            raise failed
        self._launch()

    def _replanned(self) -> bool:
        """After a worker failed to start: whether its plan assumed a probe that fails, and was
        replaced by a plan made with that answer (the report too; the failed start's output is
        dropped). The plan may raise NoSafeIdentity."""
        if not isolation.refuted(self._plan):
            self._plan_confirmed = True
            return False
        self._plan = isolation.plan(**self._plan_settings)
        self._plan_confirmed = not self._plan.assumed
        self._exchange.plan = self._plan
        self._report = [*self._plan.report, *self._notes]
        self._exchange.clear_output()
        return True

    def _empty_home(self) -> None:
        """Remove what a worker wrote on disk (its folder, its uid's scratch and IPC objects), if one did."""
        if self._home_used:
            self._res.fresh_home()
            self._home_used = False

    def _await_ready(self, worker: WorkerProcess) -> None:
        """Wait until a launched worker has applied its limits and imported numpy; if it fails to
        start under a plan whose assumptions fail, start another under the new plan."""
        limit = max(START_TIMEOUT, self.limits.call_timeout)
        while True:
            try:
                received, _ = self._exchange.round_trip({"seq": worker.init_seq}, [], "start-up", limit,
                                                        send=False, wall=limit)
                break
            except StudentException as exc:
                failed = exc
            if not self._replanned():
                tail = self._exchange.output[-2000:].decode(errors="replace").strip()
                raise WorkerDied(f"{failed}; its output: {tail or '(none)'}")
            self._launch()
            assert self._res.worker is not None
            worker = self._res.worker
        reply = read(Started, received)
        pid = reply.pid
        if reply.ok is not True or type(pid) is not int:
            raise self._exchange.protocol_failure("malformed start-up reply", "start-up")
        if self._plan.bubblewrap:
            found = process.find_sandboxed_pid(worker.proc.pid, pid)
            if found is None:
                raise self._exchange.protocol_failure(f"no sandboxed process with pid {pid}", "start-up")
            worker.cpu_pid = found
        elif pid != worker.proc.pid:
            raise self._exchange.protocol_failure(f"the worker claims pid {pid}", "start-up")
        # Said before any student code ran: the worker's own words about the layers it took.
        unfiltered, confined = reply.unfiltered, reply.landlock
        notes = [f"reduced: memory files, System V memory, kernel keys and metadata changes not refused "
                 f"({str(unfiltered)[:200]})" if unfiltered is not None else SECCOMP_SAYS]
        # The plan's words for a worker confined by permissions only, as these layers change them.
        rewritten: list[tuple[str, str]] = []
        if unfiltered is None:
            rewritten.append(("reduced: network not disabled", "network: every socket refused (seccomp)"))
        if isinstance(confined, list) and len(confined) == 2 and isinstance(confined[1], list):
            notes += [f"Landlock (ABI {int(confined[0])}): {str(line)[:200]}" for line in confined[1][:4]]
            rewritten += [("filesystem: protected by permissions only", "filesystem: protected by permissions and Landlock"),
                          ("reduced: filesystem: the worker can read and write whatever that user can", ""),
                          ("reduced: not hidden (readable if permissions allow)", "hidden by Landlock"),
                          ("reduced: not hidden", "hidden by Landlock")]
        else:
            notes.append(f"reduced: no Landlock ({str(confined)[:200]})")
        for old, new in rewritten:
            self._report = [new + line[len(old):] if line.startswith(old) else line
                            for line in self._report if new or not line.startswith(old)]
        for note in notes:
            if note not in self._report:
                self._report.append(note)
                if note.startswith("reduced"):
                    print(f"sandbox: {note}", file=sys.stderr)
        worker.ready = True
        self._plan_confirmed = True
        self.last_start_seconds = time.perf_counter() - worker.launched
