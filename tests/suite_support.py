"""What the repository's tests of an assignment's test suites share.

`Suite` is one assignment as the tests of the tests see it: its `Assignment` (autograder.harness.
assignment), its bug catalog and `Checks` (autograder/mutants/<id>.py), and the contract the catalog
must break, derived from the starter's stubs. `Graders` grades submissions (the reference, the
starter, the catalog's mutants) through `autograder.harness.run.run`, the code path of Gradescope's
run_autograder, once sandboxed and once in-process, in subprocesses of tests/grade_batch.py; the
`check_*` functions are the assertions test_suites.py makes on the results.json they write.

The junit half (`read_junit`, `Verdict.data_skip`, `assert_all_not_implemented`) reads the runs of
the students' own path (`pytest -p kvlab.testing`, `make test` in a bundle) for test_starter.py and
test_release.py. Every assert carries a message, since a failure here must say what went wrong
without the reader opening this file.

Imported as `from suite_support import ...`: tests/ has no __init__.py, so pytest's default
("prepend") import mode puts tests/ on sys.path.
"""
from __future__ import annotations

import ast
import json
import os
import re
import queue
import select
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import IO, Any

from autograder import mutants
from autograder.assignment import Assignment, discover, load_assignment
from autograder.harness.sandbox import identity
from kvlab.trace import BLOCK, make_trace, mooncake_dir
from tools import venv_python

REPO = Path(__file__).resolve().parents[1]

# Every assignment of the repository (the missing-parts test checks each is complete).
ASSIGNMENT_IDS = discover(REPO)

# The one skip a students'-path run may report: autograder/hidden/lecture07/test_hidden_hit_ratio.py's
# test on Mooncake's conversation trace, which the repository does not ship (kvlab.trace.mooncake_dir).
# Matched by its whole reason, so any other skip (or this one reworded) still fails the checks.
DATA_FILE = "conversation_trace.jsonl"
DATA_SKIP_REASON = f"Mooncake's {DATA_FILE} is not installed (see kvlab.trace.mooncake_dir)"

# Grading subprocesses at a time: each keeps about one core busy (2 cores here).
PARALLEL_RUNS = 2
# Hidden tests draw part of their input anew per grading (never a harvestable fixed input); with this
# set in the grader's environment the draws are seeded, so both modes of one submission see the same.
GRADING_SEED = "KVLAB_GRADING_SEED"
# The grader's modes, in the order a batch runs them.
MODES = ("sandbox", "inprocess")
# In the tests root of these checks, hidden tests' results carry this visibility and public tests'
# "visible", so results.json says which tests are public; nothing else in grading reads it.
HIDDEN_MARK = "hidden"

# Characters of a message shown per test in a listing: enough for the first lines of a failure.
LISTED_CHARS = 300


@dataclass(frozen=True)
class Verdict:
    """One test's result, from a junit report or from results.json."""

    test: str  # junit: "<classname>.<name>"; results.json: "<number> <name>", e.g. "1.3 test_update"
    task: str  # the task marker's; "ungraded" for a test without one
    points: float
    status: str  # "passed", "failed", "error" or "skipped"
    message: str  # the failure and error messages joined by " | ", or the skip reason
    public: bool

    @property
    def passed(self) -> bool:
        """True only for a pass: a skip earns nothing either."""
        return self.status == "passed"

    @property
    def data_skip(self) -> bool:
        """The tolerated skip, and only while its cause holds: the Mooncake trace really is absent.

        The test runs inherit this process's environment, so both resolve mooncake_dir() alike.
        """
        return (self.status == "skipped" and self.message == DATA_SKIP_REASON
                and not (mooncake_dir() / DATA_FILE).is_file())


def readable_python() -> str | None:
    """A system interpreter of this version that the worker's unprivileged uid can run (as setup.sh's
    venv is on Gradescope; pyenv's under /root may not be), or None; None when not root, as only a
    root grader runs the worker as another user."""
    candidate = f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}"
    if os.geteuid() != 0 or not os.path.exists(candidate):
        return None
    return candidate if venv_python.runs([candidate, "-c", "pass"], identity.PROBE_UID) else None


@contextlib.contextmanager
def folder_others_may_enter(prefix: str) -> Iterator[Path]:
    """A new folder of mode 755 in the temporary folder (pytest's tmp_path is root's, mode 700, out of
    an unprivileged uid's reach), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


def bubblewrapped(isolation: list[str]) -> bool:
    """Whether a sandbox's isolation report (`Sandbox.isolation`) says its worker runs in bubblewrap's
    view (not where bubblewrap is missing or refused, as in Gradescope's Docker)."""
    return any(line.startswith("private filesystem view (bubblewrap)") for line in isolation)


def failure_message(node: ET.Element) -> str:
    """The whole exception message of a failure or error element.

    pytest may shorten the `message` attribute; the element text holds the report, whose "E" lines
    are the exception (never the test's source). A `pytest.fail(..., pytrace=False)` report has no
    "E" lines: its text is the message itself.
    """
    text = node.text or ""
    lines = [re.sub(r"^E\s{1,7}", "", line) for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines) or text.strip() or node.get("message", "")


def read_junit(report: Path) -> list[Verdict]:
    """One Verdict per test case of a pytest --junitxml report, in report order."""
    assert report.is_file(), f"pytest wrote no junit report at {report}"
    outcomes = []
    for case in ET.parse(report).iter("testcase"):
        task = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "task"), "")
        name, points = ast.literal_eval(task) if task else ("ungraded", 0.0)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        problems = [node for node in (failure, error) if node is not None]
        if problems:
            # A failing test that also errors in teardown is a failure: the test itself went wrong.
            status = "failed" if failure is not None else "error"
            message = " | ".join(failure_message(node) for node in problems)
        elif skipped is not None:
            status, message = "skipped", skipped.get("message", "")
        else:
            status, message = "passed", ""
        classname = case.get("classname", "")
        outcomes.append(Verdict(f"{classname}.{case.get('name')}", name, float(points), status, message,
                                public=classname.startswith("assignments.")))
    return outcomes


def listing(outcomes: Sequence[Verdict]) -> str:
    """One line per outcome for a failure message: task, test, status and the start of its message."""
    return "\n".join(f"  [{o.task}] {o.test}: {o.status}: {o.message[:LISTED_CHARS]}" for o in outcomes)


def not_passed(outcomes: Sequence[Verdict]) -> list[Verdict]:
    """The outcomes that did not pass, the tolerated data skip aside."""
    return [o for o in outcomes if not o.passed and not o.data_skip]


def assert_all_not_implemented(outcomes: Sequence[Verdict], output: str) -> None:
    """Every test failed with a NotImplementedError (the data skip aside); none passed or errored.

    `output` is the run's console output, shown when the report holds no test at all.
    """
    assert outcomes, f"no test ran; the run's output:\n{output[-3000:]}"
    wrong = [o for o in outcomes
             if not (o.status == "failed" and "NotImplementedError" in o.message) and not o.data_skip]
    assert not wrong, (f"{len(wrong)} of {len(outcomes)} tests did not fail with NotImplementedError on the "
                       f"starter (a test that passes on a stub gives points for nothing):\n{listing(wrong)}")


def enclosing_function(tree: ast.Module, line: int) -> str:
    """Qualified name (Class.method or function) of the innermost def spanning `line`."""
    found = "<module>"
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if isinstance(member, ast.FunctionDef) and member.lineno <= line <= (member.end_lineno or 0):
                found = f"{node.name}.{member.name}" if member is not node else member.name
    return found


def stubbed_functions(source: str) -> frozenset[str]:
    """Qualified names (function, Class.method) of the defs whose own body raises NotImplementedError."""
    tree = ast.parse(source)
    found = set()
    for node in tree.body:
        members = node.body if isinstance(node, ast.ClassDef) else [node]
        for member in members:
            if not isinstance(member, ast.FunctionDef):
                continue
            raises = [n for n in ast.walk(member) if isinstance(n, ast.Raise) and n.exc is not None
                      and getattr(getattr(n.exc, "func", n.exc), "id", None) == "NotImplementedError"]
            if raises:
                found.add(f"{node.name}.{member.name}" if member is not node else member.name)
    return frozenset(found)


def task_markers(path: Path) -> set[str]:
    """The task names of the `task` markers in a test file (`pytest.mark.task("<name>", ...)`)."""
    return {node.args[0].value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "task"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)}


@dataclass(frozen=True)
class Suite:
    """One assignment's public and hidden tests and bug catalog, as the tests of the tests see them."""

    assignment: Assignment

    @property
    def id(self) -> str:
        return self.assignment.id

    @cached_property
    def catalog(self) -> list[mutants.Mutant]:
        """The bug catalog, autograder/mutants/<id>.py."""
        return mutants.load(self.id)

    @cached_property
    def checks(self) -> mutants.Checks:
        """The catalog's settings of these checks (its CHECKS, or the defaults)."""
        return mutants.checks(self.id)

    @cached_property
    def contract(self) -> dict[str, frozenset[str]]:
        """Submitted file -> the functions and methods the catalog must break: those the starter stubs."""
        return {name: stubbed_functions((self.assignment.starter / name).read_text(encoding="utf-8"))
                for name in self.assignment.files}

    @property
    def tasks(self) -> dict[str, float]:
        """Task name -> points, from assignment.json."""
        return {task.name: task.points for task in self.assignment.tasks}

    @property
    def test_files(self) -> list[Path]:
        """Every .py file of the public and hidden tests, helpers included."""
        return sorted([*self.assignment.public_tests.glob("*.py"), *self.assignment.hidden_tests.glob("*.py")])

    def task_files(self, tasks: Sequence[str]) -> list[Path]:
        """The public and hidden test files of `tasks`: test_<task>.py and test_hidden_<task>.py."""
        return [path for task in tasks for path in (self.assignment.public_tests / f"test_{task}.py",
                                                    self.assignment.hidden_tests / f"test_hidden_{task}.py")]

    def tests_root(self, destination: Path, tasks: Sequence[str] = ()) -> Path:
        """A tests root for autograder.harness.run (`--tests-root`) grading `tasks` (default: all).

        It holds assignment.json with only those tasks and with HIDDEN_MARK as the hidden tests'
        visibility, their test files, and every helper (a file not named test_*.py).
        """
        chosen = set(tasks or self.tasks)
        source = self.assignment
        data = json.loads((source.directory / "assignment.json").read_text(encoding="utf-8"))
        data["tasks"] = [task for task in data["tasks"] if task["name"] in chosen]
        data["visibility"] = {"public": "visible", "hidden": HIDDEN_MARK}
        target = replace(source, root=destination)
        selected = set(self.task_files(sorted(chosen)))
        for folder, copy in ((source.public_tests, target.public_tests), (source.hidden_tests, target.hidden_tests)):
            copy.mkdir(parents=True)
            for path in folder.glob("*.py"):
                if path in selected or not path.name.startswith("test_"):
                    shutil.copyfile(path, copy / path.name)
        (target.directory / "assignment.json").write_text(json.dumps(data), encoding="utf-8")
        return destination


def suites() -> dict[str, Suite]:
    """Every assignment's Suite, by id."""
    return {name: Suite(load_assignment(name, REPO)) for name in ASSIGNMENT_IDS}


def stand_in_traces(names: Sequence[str], folder: Path, *, real_if_present: bool = True) -> dict[str, str]:
    """Environment that gives the grading processes every Mooncake trace in `names`.

    Nothing when mooncake_dir() holds them all (and `real_if_present`). Otherwise `folder` gets a
    stand-in for each: a synthetic trace (kvlab.trace.make_trace, 3,000 requests) in Mooncake's
    JSON-lines format, so the hidden tests that replay a real trace still run, against the trusted
    replay of the stand-in, instead of skipping (which the grader rightly counts as its own fault).
    """
    if real_if_present and all((mooncake_dir() / name).is_file() for name in names):
        return {}
    folder.mkdir(parents=True, exist_ok=True)
    for seed, name in enumerate(names, start=1):
        lines = [json.dumps({"timestamp": round(r.arrival * 1000), "input_length": r.input_len,
                             "output_length": r.output_len, "hash_ids": list(r.blocks)})
                 for r in make_trace(seed, n_requests=3000, duration=600.0)
                 if len(r.blocks) == -(-r.input_len // BLOCK)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {"KVLAB_MOONCAKE_DIR": str(folder)}


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
    modes: tuple[str, ...] = MODES  # the modes it is graded in


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
    """PARALLEL_RUNS grading processes (tests/grade_batch.py) taking `jobs` from one queue, in order.

    A process grades job after job, so the gradings share its start-up; each job's Future (in
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
        self._threads = [threading.Thread(target=self._serve, daemon=True) for _ in range(PARALLEL_RUNS)]
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
            [sys.executable, str(REPO / "tests" / "grade_batch.py")], cwd=REPO,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errors,
            env={**os.environ, "PYTHONPATH": str(REPO), GRADING_SEED: "1",
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


def check_modes_agree(graded: JobResults) -> None:
    """The in-process grade has the sandboxed grade's tests with the same outcome each."""
    sandbox = {o.test: o for o in graded.outcomes("sandbox")}
    inprocess = {o.test: o for o in graded.outcomes("inprocess")}
    assert sandbox.keys() == inprocess.keys(), (
        f"{graded.job.label}: the modes graded different tests: only sandboxed {sorted(sandbox.keys() - inprocess.keys())}, "
        f"only in-process {sorted(inprocess.keys() - sandbox.keys())}")
    differ = [name for name in sandbox if sandbox[name].status != inprocess[name].status]
    assert not differ, (f"{graded.job.label}: sandboxed and in-process outcomes differ:\n"
                        + "\n".join(f"  sandbox {listing([sandbox[n]])}\n  in-process {listing([inprocess[n]])}"
                                    for n in differ))


def check_solution_passes(outcomes: Sequence[Verdict]) -> None:
    """The reference solution passes every test."""
    failed = not_passed(outcomes)
    assert not failed, f"the reference solution does not pass {len(failed)} tests:\n{listing(failed)}"


def check_points_add_up(suite: Suite, outcomes: Sequence[Verdict]) -> None:
    """The tests' points per task equal assignment.json's, and every task has public tests."""
    totals: dict[str, float] = defaultdict(float)
    for outcome in outcomes:
        totals[outcome.task] += outcome.points
    # Summed floats (25 cases of 0.04) drift in the last bits; results.json's six decimals do not.
    assert {task: round(total, 6) for task, total in totals.items()} == {task: float(points) for task, points in suite.tasks.items()}, (
        f"points per task in the tests {dict(totals)} differ from assignment.json {suite.tasks}"
    )
    public_tasks = {o.task for o in outcomes if o.public}
    assert public_tasks == set(suite.tasks), f"every task needs public tests; found public tests for {sorted(public_tasks)}"


def check_asserts_have_messages(path: Path) -> None:
    """Hidden tests run with --assert=plain: a bare assert would tell the student nothing."""
    bare = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Assert) and node.msg is None]
    assert not bare, f"{path.relative_to(REPO)}: assert without a message at lines {bare}"


def check_catalog(suite: Suite) -> None:
    """Every mutant applies, stays valid Python, names known tasks, and together they break the contract."""
    assert len(suite.catalog) >= suite.checks.min_mutants, (
        f"the catalog should hold at least {suite.checks.min_mutants} mutants; it holds {len(suite.catalog)}")
    covered: dict[str, set[str]] = defaultdict(set)
    for mutant in suite.catalog:
        assert mutant.file in suite.contract, f"mutant {mutant.name} edits {mutant.file}, not a submitted file"
        text = (suite.assignment.solution / mutant.file).read_text(encoding="utf-8")
        mutated = mutants.mutate(mutant, text)
        assert mutated != text, f"mutant {mutant.name} changes nothing"
        try:
            ast.parse(mutated)
        except SyntaxError as error:
            raise AssertionError(f"mutant {mutant.name} makes {mutant.file} invalid Python: {error}") from error
        assert mutant.tasks and set(mutant.tasks) <= set(suite.tasks), f"mutant {mutant.name} names unknown tasks {mutant.tasks}"
        limit = suite.assignment.call_timeout_seconds
        assert mutant.call_timeout is None or 0 < mutant.call_timeout < limit, (
            f"mutant {mutant.name}'s call_timeout {mutant.call_timeout} must lie between 0 and the assignment's "
            f"{limit} s: the grader only ever lowers its limit")
        tree = ast.parse(text)
        for old, _ in mutant.replacements:
            covered[mutant.file].add(enclosing_function(tree, text[: text.index(old)].count("\n") + 1))
    for file, functions in suite.contract.items():
        assert functions, f"the starter's {file} stubs no function: the contract would be empty"
        assert functions <= covered[file], f"no mutant breaks {sorted(functions - covered[file])} in {file}"


def check_mutant_caught(suite: Suite, mutant: mutants.Mutant, outcomes: Sequence[Verdict]) -> None:
    """Some test of the sandboxed grade (what students get) fails, in the tasks the mutant names,
    and one message contains its `expect` words."""
    failed = not_passed(outcomes)
    about = f"mutant {mutant.name} ({mutant.description})"
    assert failed, f"{about} passes every test"
    lost = {o.task for o in failed}
    if suite.checks.mutants_run_own_tasks:
        assert lost == set(mutant.tasks), (
            f"{about} loses points in {sorted(lost)}; the catalog expects {sorted(mutant.tasks)}:\n{listing(failed)}")
    else:
        assert lost <= set(mutant.tasks), (
            f"{about} loses points in {sorted(lost)}; the catalog expects only {sorted(mutant.tasks)}:\n{listing(failed)}")
    assert any(mutant.expect.casefold() in o.message.casefold() for o in failed), (
        f"no failure message of {about} in results.json contains {mutant.expect!r}:\n{listing(failed)}")


def fails_a_public_test(outcomes: Sequence[Verdict]) -> bool:
    """Whether a public test (one a student runs before submitting) did not pass."""
    return any(o.public for o in not_passed(outcomes))
