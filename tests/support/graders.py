"""Grading submissions for the tests of the tests: `Graders` grades `Job`s (the reference, the
starter, the catalog's mutants, the corpus's entries) through `autograder.harness.run.run`, the code
path of Gradescope's run_autograder, once sandboxed and once in-process, in long-lived subprocesses
of tests/support/grade_batch.py (run by path); `JobResults` reads the results.json they write.
"""
from __future__ import annotations

import json
import os
import queue
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from support import slots
from support.repo import REPO
from support.suite import HIDDEN_MARK
from support.verdicts import Verdict

# The grader's backends (autograder.harness.run's `mode`), in the order a batch runs them; the
# four ways a course grades are support.grading_modes.MODES.
BACKENDS = ("sandbox", "inprocess")


@dataclass(frozen=True)
class Job:
    """One submission to grade in both modes: `out`/sandbox.json and `out`/inprocess.json."""

    assignment: str
    label: str  # "reference", "starter" or a mutant's name
    submission: Path
    tests_root: Path
    out: Path
    seconds: float  # how long its two runs may take
    env: dict[str, str]  # environment variables of its gradings (the stand-in traces)
    modes: tuple[str, ...] = BACKENDS  # the modes it is graded in


@dataclass(frozen=True)
class JobResults:
    """What the grader wrote for one submission, per mode: the results and their outcomes."""

    job: Job
    results: dict[str, dict[str, Any]]

    def log(self, mode: str) -> str:
        """What the grader printed grading in `mode` (a fault's traceback goes there)."""
        path = self.job.out / f"{mode}.log"
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else "(no log written)"

    def outcomes(self, mode: str) -> list[Verdict]:
        """The per-test outcomes of `mode`'s results.json; an AssertionError if the grader failed."""
        results = self.results[mode]
        assert results["extra_data"]["status"] == "graded", (
            f"{self.job.assignment} {self.job.label} ({mode}): the grader failed instead of grading; see the "
            f"grader's log ({self.job.out / f'{mode}.log'}):\n{self.log(mode)[-4000:]}")
        return [Verdict(f"{t['number']} {t['name']}", t["tags"][0], float(t["max_score"]), t["status"], t["output"],
                        public=t["visibility"] != HIDDEN_MARK) for t in results["tests"]]


class Graders:
    """Grading processes (tests/support/grade_batch.py), one per grading slot (support.slots), taking
    `jobs` from one queue, in order.

    A process grades job after job while it holds a slot, so the gradings share its start-up; each job's Future (in
    `futures`, by (assignment, label)) is done as soon as its two results.json are. A job that
    takes longer than its `seconds`, or a process that dies, fails that job's Future and the next
    job starts in a new process. Give the jobs longest first: the last ones then end together.
    """

    def __init__(self, jobs: Sequence[Job]) -> None:
        self.futures: dict[tuple[str, str], Future[JobResults]] = {(j.assignment, j.label): Future() for j in jobs}
        self._queue: queue.SimpleQueue[Job] = queue.SimpleQueue()
        for job in jobs:
            self._queue.put(job)
        self._stopped = threading.Event()
        self._processes: dict[subprocess.Popen[bytes], IO[bytes]] = {}  # with its stderr file
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(slots.count())]
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Cancel the jobs not started, end the processes (an interrupted session reads no more)."""
        self._stopped.set()
        for future in self.futures.values():
            future.cancel()
        with self._lock:
            for process in self._processes:
                process.kill()
        for thread in self._threads:
            thread.join()

    def _start(self) -> subprocess.Popen[bytes]:
        # stderr to a file: nobody reads it while the process runs, and a full pipe would block it.
        errors = tempfile.TemporaryFile()
        process = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("grade_batch.py"))], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            env={**os.environ, "PYTHONPATH": str(REPO),
                 # No bytecode written into the checkout: a sandboxed grading running beside this
                 # one fingerprints kvlab/ and the harness (its Watch), and a .pyc appearing there
                 # is a change of the grader's files to it.
                 "PYTHONDONTWRITEBYTECODE": "1"})
        with self._lock:
            self._processes[process] = errors
        return process

    def _end(self, process: subprocess.Popen[bytes]) -> str:
        """Stop `process`; the end of what it wrote to stderr (a traceback, when it died)."""
        process.kill()
        process.wait()
        with self._lock:
            errors = self._processes.pop(process)
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()
        with errors:
            errors.seek(0)
            return errors.read().decode(errors="replace")[-3000:]

    def _serve(self) -> None:
        process: subprocess.Popen[bytes] | None = None
        while not self._stopped.is_set():
            try:
                job = self._queue.get_nowait()
            except queue.Empty:
                break
            future = self.futures[job.assignment, job.label]
            if not future.set_running_or_notify_cancel():
                continue
            process = process or self._start()
            try:
                with slots.grading_slot():
                    self._grade(process, job)
                future.set_result(JobResults(job, {mode: json.loads((job.out / f"{mode}.json").read_text(encoding="utf-8"))
                                               for mode in job.modes}))
            except Exception as error:  # noqa: BLE001 - whatever broke, the job's tests say so
                future.set_exception(AssertionError(
                    f"grading {job.assignment} {job.label}: {error}; the grading process's stderr:\n"
                    f"{self._end(process)}\nthe gradings' logs: {job.out}/sandbox.log, {job.out}/inprocess.log"))
                process = None
        if process is not None:
            self._end(process)

    @staticmethod
    def _grade(process: subprocess.Popen[bytes], job: Job) -> None:
        """Send `job` to `process` and wait until it reports the job done; RuntimeError if the
        process ends first or the job takes longer than its seconds."""
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(json.dumps({"assignment": job.assignment, "submission": str(job.submission),
                                        "root": str(job.tests_root), "modes": list(job.modes),
                                        "out": str(job.out),
                                        "env": job.env}).encode() + b"\n")
        process.stdin.flush()
        deadline = time.monotonic() + job.seconds
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([process.stdout], [], [], remaining)[0]:
                raise RuntimeError(f"it took longer than {job.seconds:g} s")
            byte = os.read(process.stdout.fileno(), 1)
            if not byte:
                raise RuntimeError(f"the grading process exited with status {process.wait()}")
            line += byte
        if line.decode(errors="replace").strip() != str(job.out):
            raise RuntimeError(f"the grading process reported {line!r}, not {str(job.out)!r}")
