"""The trusted grading runner: grade one submission and write Gradescope's results.json.

    python -m autograder.harness.run --assignment lecture02 --submission DIR --results FILE
                                     [--mode sandbox|inprocess] [--tests-root ROOT] [--time-budget S]
                                     [--seed N]

It runs pytest in this process on the assignment's public tests (`assignments/<id>/tests`) and
hidden tests (`autograder/hidden/<id>`) under ROOT (default: the folder holding `autograder/`), with
`autograder.harness.plugin` as the `student` fixture, an empty ini and a rootdir in a private
temporary folder, so nothing in a student's folder is ever collected or configures pytest.

`--mode sandbox` (the default, and Gradescope's) never imports student code here: the submitted
files listed in assignment.json are copied to a staging folder and run in a sandboxed worker
(`autograder.harness.sandbox`) that sees `kvlab` read-only (bound, or copied without bubblewrap) and
none of the grader's files.
`--mode inprocess` imports them into this process (kvlab.testing.Submission): only for trusted code,
the repository's own fast tests of the reference and of the mutants.

The hidden tests' draws (kvlab.testing.draws) are seeded from the staged files and the course's
grading key (seeds.py), in this process, before the student's code runs, so the same files get
the same draws and score in every mode; the seed is printed and kept in results.json's extra_data
for the staff. `--seed N` replays a grading with the seed its results.json recorded (after the key
was rotated, say); Gradescope's run_autograder never passes it.

Five environment variables, which Gradescope never sets, lower the limits or the isolation, or
leave out the tests that cannot change a bug's first catch, for the repository's tests of the
grader: settings.py reads them, once a run, into the `Settings` the grading uses, and results.json
names those that were set (`extra_data.switches`).

Whenever the student's process shares the grader's identity (no unprivileged user: a grader that
is not root), it could write the grader's own files. The runner then cannot prevent that, but it
detects it: the course library (the trusted copy and the worker's), the harness, the grading key,
the assignment registry, the assignment's tests and, in that case, the interpreter's libraries are
fingerprinted before the first test and after the worker is gone, and any change is a grader fault
(never a score).

The results file is written exactly once, atomically, at the end, and always: when anything goes
wrong on the grader's side (a hidden test that does not import, points that do not add up, a bug
here) the file says the grader failed and asks the student to contact the staff; the details go to
stderr, which Gradescope shows the staff only. The exit status is 0 when the submission was graded
(whatever its score) and 1 when the result records a grader fault.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import shutil
import stat
import sys
import sysconfig
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

# Before anything loads numpy: one BLAS thread for the trusted forward and in-process gradings, as the
# worker gets from its environment (kvlab.blas says why).
import kvlab.blas  # noqa: F401, I001
import autograder.harness.sandbox as sandbox_package
import kvlab
from autograder.assignment import REGISTRY_FILES, REPO_ROOT, Assignment, load_assignment
from autograder.harness.backends import Backend, GraderFault, InProcessBackend, SandboxBackend
from autograder.harness.course import COURSE
from autograder.harness.plugin import Grading
from autograder.harness.results import fault_results, graded_results, write_results
from autograder.harness.sandbox import Limits, Sandbox
from autograder.harness.seeds import KEY_PATH, SEED_BITS, read_key, submission_seed
from autograder.harness.settings import Settings

# Gradescope stops a run after 10 minutes by default and then shows no results at all; tests
# starting after this many seconds fail at once instead, so a slow submission still gets a report.
TIME_BUDGET_SECONDS = 480.0
# One test's wall-clock limit. The reference needs well under a second per test; each call into
# student code separately has assignment.json's call_timeout_seconds.
TEST_SECONDS = 60.0
# pytest reads these from the environment; a grading run takes its options from this file only.
PYTEST_ENV = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m autograder.harness.run", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--submission", required=True, type=Path, help="folder holding the submitted files")
    parser.add_argument("--results", required=True, type=Path, help="where to write results.json")
    parser.add_argument("--mode", choices=("sandbox", "inprocess"), default="sandbox",
                        help="sandbox (default): student code in an isolated worker; inprocess: "
                             "imported into this process, for trusted code only")
    parser.add_argument("--tests-root", type=Path, default=REPO_ROOT,
                        help="folder holding assignments/<id>/ and autograder/hidden/<id>/ (default: %(default)s)")
    parser.add_argument("--time-budget", type=float, default=TIME_BUDGET_SECONDS,
                        help="seconds after which remaining tests fail without running (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the draws' seed, to replay a grading whose results.json recorded it "
                             "(default: computed from the submitted files and the grading key)")
    args = parser.parse_args(argv)
    if args.seed is not None and not 0 <= args.seed < 2**SEED_BITS:
        parser.error(f"--seed must be an integer from 0 to 2**{SEED_BITS} - 1 (as results.json records it)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results = run(args.assignment, args.submission, args.results, mode=args.mode,
                  tests_root=args.tests_root, time_budget=args.time_budget, seed=args.seed)
    return 0 if results["extra_data"]["status"] == "graded" else 1


def run(assignment_id: str, submission: Path, results_path: Path, *, mode: str = "sandbox",
        tests_root: Path = REPO_ROOT, time_budget: float = TIME_BUDGET_SECONDS,
        seed: int | None = None) -> dict[str, Any]:
    """Grade `submission`, write results_path once, and return what was written. `seed` replays a
    grading's draws; by default they are seeded from the submitted files (see the module docstring)."""
    started = time.monotonic()
    max_score = 0.0
    try:
        assignment = load_assignment(assignment_id, Path(tests_root))
        max_score = assignment.max_score
        settings = Settings.read(seed=seed)
        call_timeout, time_budget = settings.lowered(assignment.call_timeout_seconds, time_budget)
        assignment = dataclasses.replace(assignment, call_timeout_seconds=call_timeout)
        results = grade(assignment, Path(submission), Path(results_path).resolve(), mode,
                        deadline=started + time_budget, settings=settings, time_budget=time_budget)
        # Validate here, so a result this code built wrongly becomes a fault result below.
        write_results(results_path, results)
        return results
    except BaseException:  # noqa: BLE001 - whatever failed, the student gets a valid file
        print("The grader failed; the student is shown the contact-the-staff result.", file=sys.stderr)
        traceback.print_exc()
    results = fault_results(assignment_id, max_score, time.monotonic() - started)
    write_results(results_path, results)
    return results


def grade(assignment: Assignment, submission: Path, results_path: Path, mode: str,
          deadline: float, settings: Settings, time_budget: float = TIME_BUDGET_SECONDS) -> dict[str, Any]:
    """Run the tests on `submission` under `settings` (the limits already lowered by them); the
    graded results, or GraderFault."""
    if not submission.is_dir():
        raise GraderFault(f"the submission folder {submission} does not exist")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kvlab-grade-") as private_name:
        private = Path(private_name)
        modules_dir = stage_submission(assignment, submission, private / "submission")
        # From the staged copy, exactly what the student's code gets, before any of it runs.
        seed = settings.seed
        if seed is None:
            seed = submission_seed(assignment, modules_dir, read_key())
        print(f"the draws' seed: {seed}", file=sys.stderr)
        backend: Backend | None = None
        watch: Watch | None = None
        changed: list[str] = []
        try:
            backend = make_backend(mode, assignment, modules_dir, private, results_path, settings)
            if not backend.in_process:
                watch = Watch(watched_paths(assignment, backend))
            # A test never runs longer than the whole budget (which tests of the grader lower).
            grading = Grading(assignment=assignment, backend=backend, submitted=submission.resolve(),
                              modules_dir=modules_dir, deadline=deadline, seed=seed,
                              test_seconds=max(min(TEST_SECONDS, time_budget), 1.0),
                              until_first_catch=settings.until_first_catch,
                              skip_settled_guards=settings.skip_settled_guards)
            exit_code = run_pytest(assignment, grading, private)
            isolation = backend.isolation
        finally:
            if backend is not None:
                backend.close()
            if watch is not None:
                changed = watch.changed()
    if changed:
        shown = ", ".join(changed[:10]) + (f" and {len(changed) - 10} more" if len(changed) > 10 else "")
        grading.fault(f"the grader's files changed while the student's code ran: {shown}")
    if exit_code not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        grading.fault(f"pytest ended with {pytest.ExitCode(exit_code).name}")
    if len(grading.records) + len(grading.left_out) != len(grading.catalog):
        grading.fault(f"{len(grading.records)} of {len(grading.catalog)} collected tests reported a result")
    if grading.faults:
        raise GraderFault("; ".join(grading.faults))
    return graded_results(assignment, grading.records, time.monotonic() - started, isolation, seed=seed,
                          switches=settings.switches())


class Watch:
    """Fingerprints of files the student's process must not change, taken now; `changed()` compares.

    `content` folders are hashed file by file (small: the course library, the harness, the tests);
    `metadata` folders (the interpreter's libraries, thousands of files) are compared by size,
    modification time and mode, which any write changes.
    """

    def __init__(self, paths: tuple[list[Path], list[Path]]) -> None:
        self.content, self.metadata = paths
        self.before = self.take()

    def take(self) -> dict[str, tuple[Any, ...]]:
        prints: dict[str, tuple[Any, ...]] = {}
        for root in self.content:
            for path in walk(root):
                try:
                    info = os.lstat(path)
                    digest = ""
                    if stat.S_ISREG(info.st_mode):
                        with open(path, "rb") as f:
                            digest = hashlib.sha256(f.read()).hexdigest()
                    prints[path] = (info.st_mode, digest)
                except OSError as error:  # gone or unreadable since the listing: a difference too
                    prints[path] = ("unreadable", error.errno)
        for root in self.metadata:
            for path in walk(root):
                try:
                    info = os.lstat(path)
                    prints.setdefault(path, (info.st_mode, info.st_size, info.st_mtime_ns))
                except OSError as error:
                    prints.setdefault(path, ("unreadable", error.errno))
        return prints

    def changed(self) -> list[str]:
        """Paths added, removed or changed since the fingerprints were taken."""
        after = self.take()
        return sorted(p for p in self.before.keys() | after.keys() if self.before.get(p) != after.get(p))


def walk(root: Path) -> Iterable[str]:
    """root and every folder and file below it (symlinks are listed, not followed)."""
    if not os.path.lexists(root):
        return
    yield str(root)
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            yield os.path.join(folder, name)


def watched_paths(assignment: Assignment, backend: Backend) -> tuple[list[Path], list[Path]]:
    """(hashed, compared by metadata): what a student's process that shares the grader's identity
    could change to influence this grading or the next one. (The sandbox's own copy of the course
    library, where it makes one, can only change what that process itself imports.)"""
    content = [Path(kvlab.__file__).resolve().parent, Path(sandbox_package.__file__).resolve().parent.parent,
               assignment.directory, assignment.hidden_tests]
    content += [REPO_ROOT / name for name in REGISTRY_FILES] + [KEY_PATH]
    content += [assignment.root / name for name in ("run_autograder", "setup.sh")]
    metadata: list[Path] = []
    sandbox = getattr(backend, "sandbox", None)
    if sandbox is None or sandbox.worker_uid == os.geteuid():
        paths = sysconfig.get_paths()
        metadata = [Path(paths[key]) for key in ("stdlib", "platstdlib", "purelib", "platlib")]
        metadata += [assignment.root / "data"]
    unique = list(dict.fromkeys(p.resolve() for p in content if os.path.lexists(p)))
    return unique, list(dict.fromkeys(p.resolve() for p in metadata if p.exists()))


def stage_submission(assignment: Assignment, submission: Path, target: Path) -> Path:
    """Copy the files assignment.json lists (regular files only, never a symlink's target) to target.

    Only these reach the student's process: a stray conftest.py, an extra module or a folder in
    the submission is never imported, in either mode.
    """
    target.mkdir(mode=0o755)
    for name in assignment.files:
        source = submission / name
        if source.is_file() and not source.is_symlink():
            shutil.copyfile(source, target / name)
            os.chmod(target / name, 0o644)
    return target


def hidden_from_student(assignment: Assignment, private: Path, results_path: Path) -> list[Path]:
    """What the student's process must not see: every grader folder, the results, the hidden tests."""
    roots = {REPO_ROOT, assignment.root}
    candidates = [root / name for root in roots for name in ("autograder", "solutions", "tests", ".git")]
    candidates += [assignment.hidden_tests, results_path.parent, private,
                   Path(sandbox_package.__file__).resolve().parent]
    return sorted({p.resolve() for p in candidates if p.exists()})


def make_backend(mode: str, assignment: Assignment, modules_dir: Path, private: Path, results_path: Path,
                 settings: Settings) -> Backend:
    """The student's code: a sandboxed worker that sees none of the grader's files (isolated as
    `settings` say), or (inprocess) this process."""
    if mode == "inprocess":
        return InProcessBackend(modules_dir, assignment.call_timeout_seconds)
    limits = Limits(call_timeout=assignment.call_timeout_seconds)
    # As root, the worker runs as a uid of its own (the sandbox claims one), with or without bubblewrap.
    # The course library is the sandbox's to place (bound under bubblewrap, else a read-only copy).
    sandbox = Sandbox(modules_dir, [], packages=[Path(kvlab.__file__).resolve().parent], limits=limits,
                      hide=hidden_from_student(assignment, private, results_path),
                      bubblewrap=settings.bubblewrap, landlock=settings.landlock, config=COURSE)
    return SandboxBackend(sandbox)


def run_pytest(assignment: Assignment, grading: Grading, private: Path) -> int:
    """pytest.main on the public and hidden tests, configured only by the arguments here."""
    ini = private / "pytest.ini"
    ini.write_text("[pytest]\n", encoding="utf-8")
    folders = [p for p in (assignment.public_tests, assignment.hidden_tests) if p.is_dir()]
    if not folders:
        raise GraderFault(f"no tests for {assignment.id}: neither {assignment.public_tests} nor "
                          f"{assignment.hidden_tests} exists")
    args = [
        *map(str, folders),
        # Only the plugins named here: none of what happens to be installed (the instructor venv
        # adds xdist, anyio and hypothesis' reporting, ~0.2 s of imports per grading, and any
        # plugin could change how tests run). pytest-timeout gives the tests' timeout marks.
        "--disable-plugin-autoload", "-p", "pytest_timeout",
        "-p", "autograder.harness.plugin", "--noconftest", "--assert=plain", "-p", "no:cacheprovider",
        # pytest's unraisable-exception plugin turns exceptions in finalizers into warnings, which
        # no grade reads, and collects all garbage twice at the session's end to find them: 10-40
        # ms per grading, and more in a process that grades many (the tests of the tests).
        "-p", "no:unraisableexception",
        "-c", str(ini), "--rootdir", str(private),
        # The terminal output (the staff's log on Gradescope) carries no test source and no student
        # text: no tracebacks, no summary. Each test's outcome and message are in results.json.
        "-q", "--tb=no", "-rN", "--no-header",
    ]
    with hypothesis_home(private / ".hypothesis"), process_state_restored(folders):
        # The working folder is private too, so anything a test writes relative to it lands in the
        # temporary folder.
        os.chdir(private)
        # No bytecode written while grading: the watched folders (see Watch) change only if the
        # student's process changes them.
        sys.dont_write_bytecode = True
        return int(pytest.main(args, plugins=[grading]))


@contextmanager
def process_state_restored(folders: list[Path]) -> Iterator[None]:
    """Restore the working folder, environment, sys.path and the test modules after a pytest run,
    so the next run in this process (the repository's in-process tests) starts clean."""
    cwd, path = os.getcwd(), list(sys.path)
    before = set(sys.modules)
    saved_env = {name: os.environ.pop(name) for name in PYTEST_ENV if name in os.environ}
    bytecode = sys.dont_write_bytecode
    try:
        yield
    finally:
        sys.dont_write_bytecode = bytecode
        os.chdir(cwd)
        sys.path[:] = path
        os.environ.update(saved_env)
        roots = tuple(os.path.join(str(folder.resolve()), "") for folder in folders)
        for name in set(sys.modules) - before:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(roots):
                del sys.modules[name]


@contextmanager
def hypothesis_home(folder: Path) -> Iterator[None]:
    """Hypothesis' files (its example database, the constants it caches) in `folder` for one run.

    Hypothesis fixes its folder once per process, from the working folder when it is first imported:
    in a process that grades many submissions (the repository's tests) every later grading would
    write into the first one's temporary folder after it was removed, and create it again."""
    from hypothesis import configuration

    configuration.set_hypothesis_home_dir(folder)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(Path.cwd() / ".hypothesis")


if __name__ == "__main__":
    sys.exit(main())
