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
from typing import Any

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
from .process import DRAIN_BUDGET, PIPE_BYTES, Ending, Resources, WorkerProcess, readable
from .proxy import Proxy
from .wire import Decoder, Holding, Reader, WireTypes, encode
from .wireformat import MAX_CALLBACK_DEPTH, TEXT_LIMIT, frame


class Exchange:
    """Round trips with the current worker (a base of `Sandbox`, which sets these attributes)."""

    limits: Limits
    config: SandboxConfig
    _res: Resources
    _plan: Plan
    _wire_types: WireTypes
    _seq: int
    holding: Holding
    _generation: int
    # Why each worker stopped for cause (a timeout, a crash, invalid data), by the generation of its
    # objects: a proxy of that generation used later in the test is the student's failure.
    _stopped: dict[int, str]
    _callback_depth: int
    _output: bytearray
    _dropped: int

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
            raise ReferenceError(
                f"{proxy._sbx_label} refers to a student object from before the sandbox was reset "
                "or its worker restarted"
            )

    def _exchange(
        self, header: dict[str, Any], blobs: list[Any], label: str, timeout: float, send: bool = True,
    ) -> tuple[dict[str, Any], list[memoryview]]:
        """Send one request (unless `send` is False: it went already) and read its reply, draining
        student output meanwhile.

        Raises WorkerTimeout, WorkerDied or ProtocolError (the worker is then gone).
        """
        worker = self._res.worker
        assert worker is not None
        if send and readable(worker.resp_r, 0):  # the worker died idle, or sent bytes nobody asked for
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
            pending = [memoryview(part).cast("B") for part in frame(header, blobs)]
        reader = Reader()
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
            reader = Reader()
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
            return Proxy(self, ["R", number], generation, f"your {type_name}", type_name)

        try:
            decoder = Decoder(blobs, make_proxy, self._wire_types, self.holding)
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
            header = {"op": "return", "ok": True, "value": encode(value, out, self._reference, self._wire_types)}
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
        assert worker is not None
        return worker.stop(kill, self._keep_output)

    def _timed_out(self, label: str, timeout: float, cpu_before: float | None) -> None:
        worker = self._res.worker
        assert worker is not None
        cpu_after = worker.cpu_seconds()
        self.last_call_cpu = None if None in (cpu_before, cpu_after) else cpu_after - cpu_before
        self._stopped[self._generation] = f"{label} ran out of time"
        self._discard()
        raise WorkerTimeout(
            f"{label} did not finish within the time limit of {timeout:g} s (wall clock); "
            "the student's process was stopped and will be restarted"
        )

    def _died(self, label: str, cpu_before: float | None) -> None:
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
