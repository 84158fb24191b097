"""One round trip with the worker, and the calls into the trusted process it makes meanwhile.

`Exchange`, which a `sandbox.Sandbox` holds, moves bytes: it sends a request, drains the student's
output, runs the `remote` functions the worker calls back for (their own requests about the
worker's objects nest inside), enforces the call's time limit and turns every way the worker can
stop or misbehave into WorkerTimeout, WorkerDied or ProtocolError. Its own module because the
Sandbox's public API, the worker's start and the object bookkeeping (`proxy.WorkerObjects`) are
different concerns.
"""
from __future__ import annotations

import builtins
import os
import select
import time
from collections.abc import Callable, Mapping
from typing import Any, NoReturn

from .codec import Decoder, Reader, WireTypes, encode
from .errors import ProtocolError, TooBig, WorkerDied, WorkerTimeout, explain_exit
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
from .proxy import Proxy, WorkerObjects
from .worker import messages
from .worker.messages import RETURN, Callback, Failure, Return, read
from .worker.protocol import MAX_CALLBACK_DEPTH, TEXT_LIMIT, WRITEV_PARTS, frame, written

# How often a long request checks the worker's CPU time (and, at most every DISK_CHECK_SECONDS, its
# folder): the granularity of the CPU limit.
CHECK_SECONDS = 0.05
DISK_CHECK_SECONDS = 0.25
DISK_CHECK_CPU = 0.005


class Exchange:
    """Round trips with a sandbox's current worker (`resources.worker`).

    `plan`: the sandbox's isolation plan (the Sandbox replaces it when it replans). `remote`: the
    library functions the worker may call back for, by "module:name". `objects`: the sandbox's
    bookkeeping of the worker's objects, whose generation ends whenever a worker is stopped here.
    `output` holds the student's output since it was last cleared, cut at `limits.output_bytes`
    (`captured_output` says how much more there was); `seq` numbers the requests; `last_call_cpu`
    is the worker's CPU seconds in the last round trip, read from /proc (None when unknown).
    """

    def __init__(
        self, resources: Resources, limits: Limits, plan: Plan, remote: Mapping[str, Callable[..., Any]],
        wire_types: WireTypes, objects: WorkerObjects,
    ) -> None:
        self.resources, self.limits, self.plan = resources, limits, plan
        self.remote, self.wire_types, self.objects = remote, wire_types, objects
        self.seq = 0
        self._callback_depth = 0
        self.output = bytearray()
        self._dropped = 0
        # When the worker's folder was last measured (time.monotonic, and the worker's CPU seconds).
        self._disk_checked, self._disk_checked_cpu = 0.0, 0.0
        self.last_call_cpu: float | None = None

    def next_seq(self) -> int:
        """The number of a new request (or a new worker's init message)."""
        self.seq += 1
        return self.seq

    def new_worker(self) -> int:
        """Before a worker starts: its folder is measured from its start; the seq of its init message."""
        self._disk_checked, self._disk_checked_cpu = 0.0, 0.0
        return self.next_seq()

    def clear_output(self) -> None:
        """Forget the output kept so far (a new test, or a failed start's complaint)."""
        self.output.clear()
        self._dropped = 0

    def captured_output(self) -> str:
        """The student's output since it was last cleared, with a note of what was not kept."""
        text = self.output.decode("utf-8", errors="replace")
        if self._dropped:
            text += (
                f"\n[... {self._dropped} more bytes of output not kept: "
                f"the limit is {self.limits.output_bytes} bytes]\n"
            )
        return text

    def round_trip(
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
        worker = self.resources.worker
        assert worker is not None
        if send:  # the worker died idle, or sent bytes nobody asked for (the pipe does not block)
            try:
                unsolicited = os.read(worker.resp_r, 1)
            except BlockingIOError:
                unsolicited = None
            if unsolicited is not None:
                if not unsolicited:
                    self._died(f"the time between calls (before {label})", None)
                raise self.protocol_failure("unsolicited data before the request", label)
        cpu_before = worker.cpu_seconds()
        started = time.monotonic()
        pending: list[memoryview] = []
        if send:
            header["seq"] = self.next_seq()
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
                raise self.protocol_failure(str(exc), label) from None
            if not (send and "callback" in reply):
                break
            # Student code called a `remote` library function: run it here, send back its result,
            # and go on waiting for the reply to our request, within the same deadline.
            if pending:  # the worker cannot have read our whole request yet
                raise self.protocol_failure("a callback before the whole request was read", label)
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
            raise self.protocol_failure("a reply to another request", label)
        return reply, reply_blobs

    def _write(self, worker: WorkerProcess, pending: list[memoryview], label: str,
               cpu_before: float | None) -> list[memoryview]:
        """Write what the request pipe takes now of `pending` (all its parts in one system call, see
        `protocol.written`); what is left. Tried before any poll: a request usually fits at once."""
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
        callback = read(Callback, message)
        name, args, kwargs = callback.callback, callback.args, callback.kwargs
        function = self.remote.get(name) if type(name) is str else None
        if function is None or callback.seq != seq or type(args) is not list or type(kwargs) is not list:
            raise self.protocol_failure(f"an unknown or malformed callback {str(name)[:80]!r}", label)
        objects, generation = self.objects, self.objects.generation

        def make_proxy(number: int, type_name: str) -> Proxy:
            return objects.proxy(number, type_name, f"your {type_name}", generation)

        try:
            decoder = Decoder(blobs, make_proxy, self.wire_types, self.objects.holding, self.objects.sent,
                              shared=True)
            decoded_args = [decoder.decode(arg) for arg in args]
            decoded_kwargs = dict(decoder.pair(item, 0) for item in kwargs)
        except ProtocolError as exc:
            raise self.protocol_failure(str(exc), label) from None
        except TooBig as exc:  # raised in the student's code, which asked with these arguments
            return frame(messages.header(_failed(Failure(type="ValueError", message=str(exc)))), [])
        out: list[Any] = []
        if self._callback_depth >= MAX_CALLBACK_DEPTH:
            failure = Failure(type="RecursionError", message=f"{name} nested more than {MAX_CALLBACK_DEPTH} deep")
            return frame(messages.header(_failed(failure)), out)
        self._callback_depth += 1
        try:
            value = function(*decoded_args, **decoded_kwargs)
            encoded = encode(value, out, self.objects.reference, self.wire_types, sent=self.objects.sent)
            returned = Return(op=RETURN, ok=True, value=encoded)
        except Exception as exc:
            if self.resources.worker is not worker:  # a nested request stopped the worker
                raise
            builtin = next((c for c in type(exc).__mro__ if getattr(builtins, c.__name__, None) is c), Exception)
            returned = _failed(Failure(type=builtin.__name__, message=str(exc)[:TEXT_LIMIT]))
            out = []
        except BaseException:
            # A whole-test timeout (or an interrupt) while the worker waits mid-call: stop it, so
            # no half-finished call lingers into the next request.
            if self.resources.worker is worker:
                self.discard()
            raise
        finally:
            self._callback_depth -= 1
        if self.resources.worker is not worker:
            raise WorkerDied(f"the student's process stopped during {name} (called from {label})")
        return frame(messages.header(returned), out)

    def _keep_output(self, chunk: bytes) -> None:
        room = max(0, self.limits.output_bytes - len(self.output))
        self.output += chunk[:room]
        self._dropped += len(chunk) - min(room, len(chunk))

    def discard(self, kill: bool = True) -> Ending:
        """Stop the current worker; its object table (and every proxy into it) is gone."""
        worker, self.resources.worker = self.resources.worker, None
        self.objects.dropped()
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
        if not self.plan.bubblewrap:
            if now - self._disk_checked < DISK_CHECK_SECONDS and cpu - self._disk_checked_cpu < DISK_CHECK_CPU:
                return
            self._disk_checked, self._disk_checked_cpu = now, cpu
        limits, home = self.limits, self.resources.home
        if self.plan.bubblewrap:
            usage = worker.home_usage(home)
            # The tmpfs's own root folder is one of its inodes.
            too_many = usage is not None and usage[1] > limits.disk_files + 1
            problem = f"more than {limits.disk_files} files and folders" if too_many else None
        else:
            used, entries, problem = 0, 0, None
            for path in [str(home), *self.resources.scratch()]:
                if problem is None:
                    more, counted, problem = folder_usage(path, limits.disk_files - entries, limits.disk_depth)
                    used, entries = used + more, entries + counted
            if problem is None and used > limits.disk_bytes:
                problem = f"more than {limits.disk_bytes >> 20} MB"
        if problem is not None:
            self.discard()
            raise WorkerDied(
                f"the student's process was stopped during {label}: its folder held {problem} (it may hold "
                f"at most {limits.disk_bytes >> 20} MB in {limits.disk_files} files and folders, nested at "
                f"most {limits.disk_depth} deep); it will be restarted with only the submitted files"
            )

    def _timed_out(self, label: str, timeout: float, cpu_before: float | None, wall: float | None) -> None:
        """Stop the worker: it used more than `timeout` CPU seconds (`wall` None) or ran past the
        wall-clock backstop `wall`."""
        worker = self.resources.worker
        assert worker is not None
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        self.objects.stopped[self.objects.generation] = f"{label} ran out of time"
        self.discard()
        if wall is None:
            why = f"did not finish within the time limit of {timeout:g} s of CPU time"
        elif cpu_before is None:
            why = f"did not finish within the time limit of {timeout:g} s (wall clock)"
        else:
            why = (f"did not finish within {wall:g} s of wall-clock time (the time limit is {timeout:g} s "
                   "of CPU time; a call that mostly waits, sleeps or blocks is stopped at the wall-clock limit)")
        raise WorkerTimeout(f"{label} {why}; the student's process was stopped and will be restarted")

    def _died(self, label: str, cpu_before: float | None) -> NoReturn:
        self.objects.stopped[self.objects.generation] = f"it ended during {label}"
        ending = self.discard(kill=False)
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
                signal_offset=self.plan.bubblewrap,
            )
        raise WorkerDied(
            f"the student's process {why} during {label}; it will be restarted for the next call"
        )

    def protocol_failure(self, detail: str, label: str) -> ProtocolError:
        """Kill the worker (its stream can no longer be trusted) and describe what it sent."""
        if self.resources.worker is not None:
            self.objects.stopped[self.objects.generation] = f"it sent invalid data during {label}"
            self.discard()
        return ProtocolError(
            f"invalid data from the student's process during {label}: {detail}; it was stopped"
        )


def _failed(failure: Failure) -> Return:
    """The Return of a callback that raised `failure` (raised in the worker as that builtin)."""
    return Return(op=RETURN, ok=False, error=messages.header(failure))
