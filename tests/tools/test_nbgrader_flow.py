"""The course on nbgrader, end to end with nbgrader's own CLI and gradebook, in a temporary course
folder and exchange: `make nbgrader`'s layout, generate_assignment (solutions cleared from the .py
files by the course's hook), release_assignment, fetch_assignment and submit as two students (the
reference solution and a one-bug mutant of the catalog), collect, `make nbgrader-grade` (the hidden
tests through the sandbox), export, release_feedback and fetch_feedback, and the class report.

A third submission, missing its file and with malformed timestamp.txt and no submission secret, is
put in submitted/ as collect would have put it: it must get its result and a message, and the batch
must go on. Lecture 2 is graded: it is the fastest. The nbgrader commands run in this process, as
nbgrader's own tests run its CLI (NbGraderApp with the command's arguments): a separate `nbgrader`
process spends seconds importing, and ten of them tripled the flow's time on a loaded machine.
"""
from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import logging
import os
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import NamedTuple

import pytest
from jupyter_core.application import NoStart

from autograder import class_report, nbgrader_grade
from autograder.mutants import apply, load
from tools import nbgrader_course, release

with warnings.catch_warnings():
    # nbgrader 0.9.5's gradebook models raise SQLAlchemy 2 deprecation warnings on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from nbgrader.api import Gradebook
    from nbgrader.apps.nbgraderapp import NbGraderApp
    from nbgrader.utils import parse_utc

ROOT = Path(__file__).resolve().parents[2]
ID = "lecture02"
COURSE_ID = "kvlab"
BIN = Path(sys.executable).parent
MUTANT = "update_returns_only_new"


class Flow(NamedTuple):
    course: Path
    exchange: Path
    homes: dict[str, Path]
    grade_output: str
    export: dict[str, dict[str, str]]
    batch: Path


class Ran(NamedTuple):
    code: int | str | None
    log: str


def nbgrader(args: list[str], cwd: Path, home: Path | None = None, expect: int | None = 0) -> Ran:
    """`nbgrader ARGS` in `cwd`, run as nbgrader's own tests run its CLI: in this process (each
    `nbgrader` process spends seconds importing), the same application, arguments and config files.

    `home`: the student's HOME (their nbgrader cache). Asserts the exit status is `expect` (unless None).
    """
    log = io.StringIO()
    app = NbGraderApp.instance()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)
        # nbgrader runs `alembic` (its database migrations) by name: the venv's bin must be on PATH.
        patch.setenv("PATH", f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
        if home is not None:
            patch.setenv("HOME", str(home))
        try:
            app.initialize(args)
            app.init_logging(logging.StreamHandler, [log], color=False, subapps=True)
            app.start()
            code: int | str | None = 0
        except NoStart:
            code = 0
        except SystemExit as stop:
            code = stop.code
        finally:
            app.reset()
    ran = Ran(code, log.getvalue())
    if expect is not None:
        assert code == expect, f"`nbgrader {' '.join(args)}` in {cwd} exited with {code!r}:\n{ran.log[-3000:]}"
    return ran


def as_student(student: str, home: Path, exchange: Path, *args: str) -> Ran:
    """An nbgrader student command: their own HOME (nbgrader's cache) and --student (their id)."""
    return nbgrader([*args, f"--course={COURSE_ID}", f"--Exchange.root={exchange}", f"--student={student}"], home, home)


@pytest.fixture(scope="module")
def flow(tmp_path_factory: pytest.TempPathFactory) -> Flow:
    top = tmp_path_factory.mktemp("nbgrader")
    course, exchange = top / "course", top / "exchange"
    exchange.mkdir()
    homes = {student: top / student for student in ("alice", "bob")}
    for home in homes.values():
        home.mkdir()
    with contextlib.redirect_stdout(io.StringIO()):
        assert nbgrader_course.main([ID, "--out", str(course), "--exchange", str(exchange)]) == 0
    nbgrader(["generate_assignment", ID], course)
    nbgrader(["release_assignment", ID], course)
    for student, home in homes.items():
        as_student(student, home, exchange, "fetch_assignment", ID)
    work = {student: home / ID for student, home in homes.items()}
    shutil.copyfile(ROOT / "solutions" / ID / "kv_decode.py", work["alice"] / "kv_decode.py")
    (mutant,) = [m for m in load(ID) if m.name == MUTANT]
    buggy = apply(mutant, ROOT / "solutions" / ID, top / "buggy")
    shutil.copyfile(buggy / mutant.file, work["bob"] / mutant.file)
    for student, home in homes.items():
        as_student(student, home, exchange, "submit", ID)
    # Every submission is owned by this test's user, not by a user named after the student.
    nbgrader(["collect", ID, "--CollectApp.check_owner=False"], course)
    # carol: as collect would have left it, but without her file, with a malformed timestamp and no secret.
    carol = course / "submitted" / "carol" / ID
    shutil.copytree(course / "submitted" / "alice" / ID, carol)
    (carol / "kv_decode.py").unlink()
    (carol / "submission_secret.txt").unlink()
    (carol / "timestamp.txt").write_text("the day before the deadline", encoding="utf-8")
    # The due date falls between alice's submission and bob's (they submitted in that order): bob is
    # late by under an hour, which the course's PenaltyPerHour makes one point.
    submitted = {student: parse_utc((course / "submitted" / student / ID / "timestamp.txt").read_text().strip())
                 for student in homes}
    due = submitted["alice"] + (submitted["bob"] - submitted["alice"]) / 2
    assert submitted["alice"] < due < submitted["bob"], f"alice and bob submitted at {submitted}: no due date between"
    nbgrader(["db", "assignment", "add", ID, f"--duedate={due.isoformat()} UTC"], course)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = nbgrader_grade.main(["--assignment", ID, "--course", str(course), "--jobs", "2"])
    assert status == 0, f"make nbgrader-grade exited with {status}:\n{printed.getvalue()}"
    export = top / "grades.csv"
    nbgrader(["export", f"--to={export}"], course)
    # Formgrader's "Generate Feedback": nbgrader's render of autograded/, into a copy of the course
    # (release_feedback below sends this course's own pages).
    rendered = top / "rendered"
    shutil.copytree(course, rendered, ignore=shutil.ignore_patterns("feedback"))
    nbgrader(["generate_feedback", ID, "--force"], rendered)
    nbgrader(["release_feedback", ID], course)
    for student, home in homes.items():
        as_student(student, home, exchange, "fetch_feedback", ID)
    with export.open(encoding="utf-8", newline="") as rows:
        exported = {row["student_id"]: row for row in csv.DictReader(rows) if row["assignment"] == ID}
    return Flow(course, exchange, homes, printed.getvalue(), exported, course / "batch" / ID)


def _scores_csv(batch: Path) -> dict[str, dict[str, str]]:
    with (batch / "scores.csv").open(encoding="utf-8", newline="") as rows:
        return {row["submission"]: row for row in csv.DictReader(rows)}


def _results(flow: Flow, student: str) -> dict:
    return json.loads((flow.batch / student / "results.json").read_text(encoding="utf-8"))


def test_released_assignment_holds_no_solution(flow: Flow) -> None:
    starter = (ROOT / "starter" / ID / "kv_decode.py").read_text(encoding="utf-8")
    lines = release.solution_lines(ID, ROOT)
    assert lines, "no solution line to look for: the leak check would check nothing"
    for folder in (flow.course / "release" / ID, flow.exchange / COURSE_ID / "outbound" / ID):
        released = (folder / "kv_decode.py").read_text(encoding="utf-8")
        assert released == starter, f"{folder}/kv_decode.py differs from starter/{ID}/kv_decode.py (`make starter`)"
        assert nbgrader_course.leaks(folder, lines) == [], f"solution text in the released assignment {folder}"
        for name in ("handout.ipynb", "demo.ipynb", "README.md", "Makefile", "pytest.ini", "tests/test_kv_cache.py"):
            assert (folder / name).is_file(), f"the released assignment {folder} has no {name}"


def test_handout_has_a_grade_cell_per_task(flow: Flow) -> None:
    notebook = json.loads((flow.course / "release" / ID / "handout.ipynb").read_text(encoding="utf-8"))
    cells = {cell["metadata"]["nbgrader"]["grade_id"]: cell["metadata"]["nbgrader"].get("points")
             for cell in notebook["cells"] if cell["metadata"].get("nbgrader", {}).get("grade")}
    tasks = json.loads((ROOT / "assignments" / ID / "assignment.json").read_text(encoding="utf-8"))["tasks"]
    assert cells == {task["name"]: task["points"] for task in tasks}, \
        f"handout.ipynb's grade cells (grade_id: points) {cells} are not the tasks of assignment.json"


def test_export_gives_reference_full_marks_and_the_bug_less(flow: Flow) -> None:
    alice, bob = flow.export["alice"], flow.export["bob"]
    assert alice["status"] == "graded" and float(alice["score"]) == float(alice["max_score"]) == 100, \
        f"the reference solution's exported row is {alice}, not 100 of 100 points"
    assert bob["status"] == "graded" and float(bob["score"]) < 100, \
        f"the mutant {MUTANT}'s exported row is {bob}: the bug cost no points"
    assert float(bob["task:kv_cache"]) < 40, f"the KVCache bug {MUTANT} left task kv_cache at {bob['task:kv_cache']}"


def test_export_matches_the_batch_scores(flow: Flow) -> None:
    batch = _scores_csv(flow.batch)
    assert set(batch) == set(flow.export) == {"alice", "bob", "carol"}, \
        f"students in scores.csv {sorted(batch)} and in the export {sorted(flow.export)}"
    for student, row in batch.items():
        exported = flow.export[student]
        for column in ["score", "max_score"] + [key for key in row if key.startswith("task:")]:
            # The export's score is after the late penalty; raw_score is the tasks' sum.
            ours = "raw_score" if column == "score" else column
            assert float(exported[ours]) == float(row[column]), \
                f"{student}'s {column}: {exported[ours]} in `nbgrader export`, {row[column]} in scores.csv"


def test_late_work_loses_the_configured_points(flow: Flow) -> None:
    alice, bob = flow.export["alice"], flow.export["bob"]
    assert float(alice["seconds_late"]) == 0 and float(alice["late_penalty"]) == 0, \
        f"alice submitted before the due date; her exported row is {alice}"
    assert 0 < float(bob["seconds_late"]) < 3600 and float(bob["late_penalty"]) == 1, \
        f"bob submitted under an hour late (PenaltyPerHour, 1 point per started hour); his exported row is {bob}"
    assert float(bob["score"]) == float(bob["raw_score"]) - 1, f"bob's score is not his raw score less the penalty: {bob}"
    with Gradebook(f"sqlite:///{flow.course / 'gradebook.db'}") as gradebook:
        penalty = gradebook.find_submission(ID, "bob").late_submission_penalty
    assert penalty == 1, f"the gradebook (formgrader's view) records bob's late penalty as {penalty}, not 1"


def test_generate_feedback_keeps_the_test_messages(flow: Flow) -> None:
    page = (flow.course.parent / "rendered" / "feedback" / "bob" / ID / "handout.html").read_text(encoding="utf-8")
    failed = [test for test in _results(flow, "bob")["tests"] if test["score"] < test["max_score"]]
    for test in failed:
        first = test["output"].strip().splitlines()[0][:60]
        assert html.escape(first, quote=False) in page or first in page, \
            f"nbgrader's generate_feedback page of bob lacks {test['name']}'s message {first!r}"


def test_missing_file_gets_a_result_and_a_message(flow: Flow) -> None:
    row = _scores_csv(flow.batch)["carol"]
    assert row["status"] == "graded" and float(row["score"]) == 0, f"carol's submission without kv_decode.py: {row}"
    messages = [test["output"] for test in _results(flow, "carol")["tests"]]
    assert messages and all("kv_decode.py" in message for message in messages), \
        f"carol's tests should each say kv_decode.py is missing; messages: {messages[:3]}"
    (line,) = [line for line in flow.grade_output.splitlines() if line.startswith("carol:")]
    assert "timestamp.txt" in line and "submission_secret.txt" in line, \
        f"the grader's line for carol should name her malformed timestamp and missing secret: {line!r}"


def test_feedback_is_fetched_and_names_the_failing_tests(flow: Flow) -> None:
    pages = {}
    for student, home in flow.homes.items():
        found = sorted((home / ID / "feedback").glob("*/handout.html"))
        assert len(found) == 1, f"{student}: fetch_feedback gave {found}, not one handout.html"
        pages[student] = found[0].read_text(encoding="utf-8")
    failed = [test["name"] for test in _results(flow, "bob")["tests"] if test["score"] < test["max_score"]]
    assert failed, f"no test of the mutant {MUTANT} lost points"
    for name in failed:
        assert name in pages["bob"], f"bob's feedback does not name his failing test {name}"
    assert "Every test passed" in pages["alice"], "the reference solution's feedback does not say every test passed"
    bob = flow.export["bob"]
    late = f"late policy takes 1 point(s), so {float(bob['score']):g} / {float(bob['max_score']):g} count"
    assert late in pages["bob"] and "late policy" not in pages["alice"], (
        f"bob's feedback should give his late penalty and the score formgrader shows ({late!r}); alice was on time")


def test_class_report_reads_the_batch(flow: Flow, tmp_path: Path) -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        status = class_report.main(["--assignment", ID, "--batch", str(flow.batch),
                                    "--submissions", f"{flow.batch}-submissions", "--out", str(tmp_path)])
    assert status == 0, f"autograder.class_report on the nbgrader batch exited with {status}:\n{printed.getvalue()[-2000:]}"
    report = (tmp_path / "report.csv").read_text(encoding="utf-8")
    for student in ("alice", "bob", "carol"):
        assert (Path(f"{flow.batch}-submissions") / student).is_dir(), f"no graded files of {student} beside the batch"
    assert (tmp_path / "report.html").is_file() and report.count("\n") > 1, \
        f"the class report of the nbgrader batch is empty: {report[:300]}"
    rows = {(row["subject"], row["key"]): row["value"] for row in csv.DictReader(io.StringIO(report))
            if row["section"] == "student"}
    assert "late" in rows.get(("bob", "late"), "") and ("alice", "late") not in rows and ("alice", "submitted") in rows, \
        f"the report's student rows should give alice's submission time and bob's lateness: {rows}"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\D*", rows[("alice", "submitted")]) and \
        "0:00:00 late" not in rows[("bob", "late")], (
            f"times read to the second and a late submission at least a second late: {rows}")


def test_nbgrader_autograde_is_refused(flow: Flow) -> None:
    # --force: without it autograde skips every submission already in autograded/, touching no score.
    ran = nbgrader(["autograde", ID, "--force"], flow.course, expect=None)
    assert ran.code not in (0, None) and "make nbgrader-grade" in str(ran.code), \
        f"`nbgrader autograde` exited with {ran.code!r}, not pointing at make nbgrader-grade:\n{ran.log[-2000:]}"


def test_a_release_that_cannot_be_cleared_is_deleted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    released = tmp_path / "release" / ID
    released.mkdir(parents=True)
    solution = (ROOT / "solutions" / ID / "kv_decode.py").read_text(encoding="utf-8")
    # An END marker removed: the region never closes, so the file cannot be cleared.
    (released / "kv_decode.py").write_text(solution.replace("# END SOLUTION", "", 1), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="could not be cleared"):
        nbgrader_course.clear_released_solutions(assignment=ID, student=".", notebooks=[])
    assert not released.exists(), "release/<id>/ holding an uncleared solution was not deleted"


@pytest.mark.parametrize("inside", [True, False], ids=["course-in-the-clone", "course-elsewhere"])
def test_generated_config_names_no_absolute_path_of_the_clone(tmp_path: Path, inside: bool) -> None:
    out = ROOT / "dist" / "nbgrader" if inside else tmp_path / "course"
    text = nbgrader_course.config_text(COURSE_ID, None, ROOT, out)
    assert str(ROOT) not in text and str(ROOT.resolve()).lstrip("/") not in text, \
        f"the course config written for {out} names the clone {ROOT}:\n{text}"
    namespace = {"get_config": lambda: __import__("traitlets.config").config.Config(), "__file__": str(out / "nbgrader_config.py")}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("KVLAB_REPOSITORY", raising=False)
        patch.setattr(sys, "path", list(sys.path))
        exec(compile(text, "nbgrader_config.py", "exec"), namespace)  # noqa: S102 - the file we generate
    expected = str(ROOT.resolve()) if inside else None
    assert namespace["REPOSITORY"] == expected, \
        f"the config for {out} finds the repository at {namespace['REPOSITORY']!r}, not {expected!r}"
