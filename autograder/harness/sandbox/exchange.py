"""One round trip with the worker, and the calls into the trusted process it makes meanwhile.

`Exchange` is the part of `sandbox.Sandbox` that moves bytes: it sends a request, drains the
student's output, runs the `remote` functions the worker calls back for (their own requests about
the worker's objects nest inside), enforces the call's time limit and turns every way the worker
can stop or misbehave into WorkerTimeout, WorkerDied or ProtocolError. Its own module because the
Sandbox's public API and object bookkeeping are a different concern.
"""
from __future__ import annotations

import builtins
import os
import select
import time
from typing import Any, NoReturn

from .config import SandboxConfig
from .errors import (
    BadValue,
    ProtocolError,
    StaleObject,
    StudentException,
    TooBig,
    WorkerDied,
    WorkerTimeout,
    explain_exit,
)
from .isolation import Plan
from .limits import Limits
from .process import (
    DRAIN_BUDGET,
    PIPE_BYTES,
    Ending,
    Resources,
    WorkerProcess,
    folder_usage,
)
from .proxy import Proxy
from .kept import Holding, Sent
from .wire import Decoder, Reader, WireTypes, encode
from .wireformat import MAX_CALLBACK_DEPTH, TEXT_LIMIT, WRITEV_PARTS, frame, written

# How often a long request checks the worker's CPU time (and, at most every DISK_CHECK_SECONDS, its
# folder): the granularity of the CPU limit.
CHECK_SECONDS = 0.05
DISK_CHECK_SECONDS = 0.25
DISK_CHECK_CPU = 0.005


class Exchange:
    """Round trips with the current worker (a base of `Sandbox`, which sets these attributes)."""

    limits: Limits
    config: SandboxConfig
    _res: Resources
    _plan: Plan
    _wire_types: WireTypes
    _seq: int
    holding: Holding
    sent: Sent
    _generation: int
    methods: set[tuple[Any, str]]
    _worker_holds: bool
    # Why each worker stopped for cause (a timeout, a crash, invalid data), by the generation of its
    # objects: a proxy of that generation used later in the test is the student's failure.
    _stopped: dict[int, str]
    _ended_for_fresh: set[int]
    _callback_depth: int
    _output: bytearray
    _dropped: int
    _disk_checked: float
    _disk_checked_cpu: float
    last_call_cpu: float | None

    def _reference(self, value: Any) -> list[Any] | None:
        """The wire form of a proxy argument (the worker object it names), None for other values."""
        if isinstance(value, Proxy):
            if value._sbx_box is not self:
                raise TypeError(f"{value._sbx_label} belongs to another sandbox")
            self._check_fresh(value)
            return value._sbx_target
        if isinstance(value, type) and issubclass(value, StudentException):
            # Only the student's process hands out these classes (a test cannot name one otherwise).
            raise BadValue(f"your code gave the exception class {value.__qualname__} where a value was "
                           "expected; it cannot be passed back to your code")
        return None

    def _check_fresh(self, proxy: Proxy) -> None:
        if proxy._sbx_generation is not None and proxy._sbx_generation != self._generation:
            why = self._stopped.get(proxy._sbx_generation)
            if why is not None:
                raise StaleObject(
                    f"{proxy._sbx_label} no longer exists: the student's process it lived in was stopped "
                    f"earlier in this test ({why})"
                )
            if proxy._sbx_generation in self._ended_for_fresh:
                raise ReferenceError(
                    f"{proxy._sbx_label} refers to a student object of a worker ended for a fresh call "
                    "(without bubblewrap the main worker does not outlive one): use it before the fresh call"
                )
            raise ReferenceError(
                f"{proxy._sbx_label} refers to a student object from before the sandbox was reset "
                "or its worker restarted"
            )

    def _exchange(
        self, header: dict[str, Any], blobs: list[Any], label: str, timeout: float, send: bool = True,
        wall: float | None = None,
    ) -> tuple[dict[str, Any], list[memoryview]]:
        """Send one request (unless `send` is False: it went already) and read its reply, draining
        student output meanwhile.

        `timeout`: the worker's CPU seconds for this request (what it spends in the trusted process,
        in callbacks, is not counted). `wall`: the wall-clock backstop, by default
        `limits.wall_seconds(timeout)`; without a CPU reading the wall clock decides at `timeout`.
        Raises WorkerTimeout, WorkerDied or ProtocolError (the worker is then gone).
        """
        worker = self._res.worker
        assert worker is not None
        if send:  # the worker died idle, or sent bytes nobody asked for (the pipe does not block)
            try:
                unsolicited = os.read(worker.resp_r, 1)
            except BlockingIOError:
                unsolicited = None
            if unsolicited is not None:
                if not unsolicited:
                    self._died(f"the time between calls (before {label})", None)
                raise self._protocol_failure("unsolicited data before the request", label)
        cpu_before = worker.cpu_seconds()
        started = time.monotonic()
        pending: list[memoryview] = []
        if send:
            self._seq += 1
            header["seq"] = self._seq
            pending = self._write(worker, [memoryview(part).cast("B") for part in frame(header, blobs)],
                                  label, cpu_before)
        reader = Reader()
        poller = select.poll()
        if pending:
            poller.register(worker.req_w, select.POLLOUT)
        poller.register(worker.resp_r, select.POLLIN)
        if worker.out_open:
            poller.register(worker.out_r, select.POLLIN)
        if cpu_before is None:
            wall = timeout
        elif wall is None:
            wall = self.limits.wall_seconds(timeout)
        deadline, next_check = started + wall, started + CHECK_SECONDS
        all_threads_before: float | None = None  # taken at the first periodic check (see there)
        # Whether output may be left in its pipe from before the reply (see the drain below).
        output_seen = True
        while True:
            try:
                while reader.wanted():
                    now = time.monotonic()
                    if now >= next_check:
                        all_threads_before = self._check_limits(worker, label, timeout, cpu_before,
                                                                all_threads_before)
                        next_check = now + CHECK_SECONDS
                    if now >= deadline:
                        self._timed_out(label, timeout, cpu_before, wall)
                    events = poller.poll((min(deadline, next_check) - now) * 1000 + 1)
                    output_seen = False
                    for fd, _ in events:
                        if fd == worker.out_r:
                            output_seen = True
                            self._keep_output(worker.drain_once())
                            if not worker.out_open:
                                poller.unregister(fd)
                        elif fd == worker.req_w:
                            pending = self._write(worker, pending, label, cpu_before)
                            if not pending:
                                poller.unregister(fd)
                        elif fd == worker.resp_r:
                            # The fixed header, then at once what of the rest is there: a small
                            # reply arrives in one write, and needs no second poll.
                            while reader.wanted():
                                try:
                                    chunk = os.read(fd, min(reader.wanted(), PIPE_BYTES))
                                except BlockingIOError:
                                    break
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
            pending = self._write(worker, [memoryview(part).cast("B") for part in
                                           self._callback(worker, header["seq"], reply, reply_blobs, label)],
                                  label, cpu_before)
            if pending:
                poller.register(worker.req_w, select.POLLOUT)
            reader = Reader()
        # The worker flushed its output before replying, so all of it was in the pipe by the poll that
        # found the reply's last bytes: when that poll did not report the output pipe, it was empty.
        budget = DRAIN_BUDGET
        while output_seen and budget > 0 and worker.out_open:
            chunk = worker.drain_once()
            if not chunk:
                break
            self._keep_output(chunk)
            budget -= len(chunk)
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        self._check_disk(worker, label, cpu_after)
        if reply.get("seq") != header["seq"]:
            raise self._protocol_failure("a reply to another request", label)
        return reply, reply_blobs

    def _write(self, worker: WorkerProcess, pending: list[memoryview], label: str,
               cpu_before: float | None) -> list[memoryview]:
        """Write what the request pipe takes now of `pending` (all its parts in one system call, see
        `wireformat.written`); what is left. Tried before any poll: a request usually fits at once."""
        try:
            return written(pending, os.writev(worker.req_w, pending[:WRITEV_PARTS]))
        except BlockingIOError:
            return pending
        except BrokenPipeError:
            self._died(label, cpu_before)

    def _callback(
        self, worker: WorkerProcess, seq: int, message: dict[str, Any], blobs: list[memoryview], label: str,
    ) -> list[Any]:
        """Run the `remote` function the worker asked for; the frames of the "return" message.

        Its arguments' worker objects are proxies here, so the function's own requests about them
        are nested round trips. An exception it raises (a student's, from such a request, too) goes
        back to be raised in the worker as the nearest builtin exception; if the worker stops during
        a nested request, that error propagates instead.
        """
        name, args, kwargs = message.get("callback"), message.get("args"), message.get("kwargs")
        function = self.config.remote.get(name) if type(name) is str else None
        if function is None or message.get("seq") != seq or type(args) is not list or type(kwargs) is not list:
            raise self._protocol_failure(f"an unknown or malformed callback {str(name)[:80]!r}", label)
        generation = self._generation

        def make_proxy(number: int, type_name: str) -> Proxy:
            self._worker_holds = True
            return Proxy(self, ["R", number], generation, f"your {type_name}", type_name)

        try:
            decoder = Decoder(blobs, make_proxy, self._wire_types, self.holding, self.sent, shared=True)
            decoded_args = [decoder.decode(arg) for arg in args]
            decoded_kwargs = dict(decoder.pair(item, 0) for item in kwargs)
        except ProtocolError as exc:
            raise self._protocol_failure(str(exc), label) from None
        except TooBig as exc:  # raised in the student's code, which asked with these arguments
            return frame({"op": "return", "ok": False, "error": {"type": "ValueError", "message": str(exc)}}, [])
        out: list[Any] = []
        if self._callback_depth >= MAX_CALLBACK_DEPTH:
            header: dict[str, Any] = {"op": "return", "ok": False, "error": {
                "type": "RecursionError", "message": f"{name} nested more than {MAX_CALLBACK_DEPTH} deep"}}
            return frame(header, out)
        self._callback_depth += 1
        try:
            value = function(*decoded_args, **decoded_kwargs)
            header = {"op": "return", "ok": True,
                      "value": encode(value, out, self._reference, self._wire_types, sent=self.sent)}
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
        return frame(header, out)

    def _keep_output(self, chunk: bytes) -> None:
        room = max(0, self.limits.output_bytes - len(self._output))
        self._output += chunk[:room]
        self._dropped += len(chunk) - min(room, len(chunk))

    def _discard(self, kill: bool = True) -> Ending:
        """Stop the current worker; its object table (and every proxy into it) is gone."""
        worker, self._res.worker = self._res.worker, None
        self._generation += 1
        self.methods.clear()
        assert worker is not None
        return worker.stop(kill, self._keep_output)

    def _check_limits(
        self, worker: WorkerProcess, label: str, timeout: float, cpu_before: float | None,
        all_threads_before: float | None,
    ) -> float | None:
        """During a request: stop the worker when it has used up the request's CPU time or its folder
        is over its bounds. The CPU time is the main thread's since the request began or, if more,
        all threads' since the first check (`all_threads_before`, returned for the next check: one
        reading fewer per round trip, and a check comes CHECK_SECONDS into a request)."""
        cpu, all_threads = worker.cpu_seconds(), worker.process_cpu_seconds()
        if all_threads_before is None:
            all_threads_before = all_threads
        main_used = cpu - cpu_before if cpu is not None and cpu_before is not None else 0.0
        known = all_threads is not None and all_threads_before is not None
        all_used = all_threads - all_threads_before if known else 0.0  # type: ignore[operator]
        if max(main_used, all_used) > timeout:
            self._timed_out(label, timeout, cpu_before, None)
        self._check_disk(worker, label, cpu)
        return all_threads_before

    def _check_disk(self, worker: WorkerProcess, label: str, cpu: float | None) -> None:
        """Measure the worker's folder and stop a worker whose folder holds too much.

        Under bubblewrap the kernel bounds the bytes (its tmpfs) and one statvfs counts the files
        and folders, after every round trip. Otherwise the folder (and what the worker's user owns
        in the shared scratch folders) is walked once the worker has used DISK_CHECK_CPU seconds of
        CPU time (writing costs CPU time) or DISK_CHECK_SECONDS have passed since the last walk: the
        overshoot is what the worker can write in that much CPU time.
        """
        if not worker.ready:
            return
        now, cpu = time.monotonic(), cpu or 0.0
        if not self._plan.bubblewrap:
            if now - self._disk_checked < DISK_CHECK_SECONDS and cpu - self._disk_checked_cpu < DISK_CHECK_CPU:
                return
            self._disk_checked, self._disk_checked_cpu = now, cpu
        limits, home = self.limits, self._res.home
        if self._plan.bubblewrap:
            usage = worker.home_usage(home)
            # The tmpfs's own root folder is one of its inodes.
            too_many = usage is not None and usage[1] > limits.disk_files + 1
            problem = f"more than {limits.disk_files} files and folders" if too_many else None
        else:
            used, entries, problem = 0, 0, None
            for path in [str(home), *self._res.scratch()]:
                if problem is None:
                    more, counted, problem = folder_usage(path, limits.disk_files - entries, limits.disk_depth)
                    used, entries = used + more, entries + counted
            if problem is None and used > limits.disk_bytes:
                problem = f"more than {limits.disk_bytes >> 20} MB"
        if problem is not None:
            self._discard()
            raise WorkerDied(
                f"the student's process was stopped during {label}: its folder held {problem} (it may hold "
                f"at most {limits.disk_bytes >> 20} MB in {limits.disk_files} files and folders, nested at "
                f"most {limits.disk_depth} deep); it will be restarted with only the submitted files"
            )

    def _timed_out(self, label: str, timeout: float, cpu_before: float | None, wall: float | None) -> None:
        """Stop the worker: it used more than `timeout` CPU seconds (`wall` None) or ran past the
        wall-clock backstop `wall`."""
        worker = self._res.worker
        assert worker is not None
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        self._stopped[self._generation] = f"{label} ran out of time"
        self._discard()
        if wall is None:
            why = f"did not finish within the time limit of {timeout:g} s of CPU time"
        elif cpu_before is None:
            why = f"did not finish within the time limit of {timeout:g} s (wall clock)"
        else:
            why = (f"did not finish within {wall:g} s of wall-clock time (the time limit is {timeout:g} s "
                   "of CPU time; a call that mostly waits, sleeps or blocks is stopped at the wall-clock limit)")
        raise WorkerTimeout(f"{label} {why}; the student's process was stopped and will be restarted")

    def _died(self, label: str, cpu_before: float | None) -> NoReturn:
        self._stopped[self._generation] = f"it ended during {label}"
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
            self._stopped[self._generation] = f"it sent invalid data during {label}"
            self._discard()
        return ProtocolError(
            f"invalid data from the student's process during {label}: {detail}; it was stopped"
        )
