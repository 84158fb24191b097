"""Grade the submissions nbgrader collected, with the hidden tests in the sandbox (`make nbgrader-grade A=<id>`).

    python -m autograder.nbgrader_grade --assignment lecture02 [--course DIR] [--batch DIR] [--jobs 2]

DIR is the course folder of `make nbgrader` (default dist/nbgrader); `nbgrader collect <id>` has put
each student's submission in `submitted/<student>/<id>/`. Each is graded exactly as `make grade`
grades a folder (the Gradescope package built once by autograder.build, then
autograder.grade.grade_submission, N at a time, through autograder.grade_all.grade_one), and then:

- the batch, as `make grade-all` writes it: `<batch>/<student>/results.json` and `<batch>/scores.csv`
  (same columns: submission, score, max_score, task:<name> per task, status, error), and
  `<batch>/nbgrader.csv` (submission, timestamp, duedate, seconds_late, late_penalty, from the
  gradebook, for the class report's table of students); the default
  batch folder is `<course>/batch/<id>/`, and the files graded (only those assignment.json lists,
  as `make submit` packs them) are kept in `<batch>-submissions/<student>/` for
  `python -m autograder.class_report --batch <batch> --submissions <batch>-submissions`;
- the gradebook (nbgrader.api.Gradebook; the course id and database as the course's
  nbgrader_config.py sets them, by default `<course>/gradebook.db`): the student (created if new),
  the submission (its timestamp.txt), and each task's score as the auto score of the grade cell
  named after the task in handout.ipynb, so formgrader shows it and a score an instructor enters
  there by hand still overrides it; a submission the grader could not score is flagged for manual
  grading instead; then the course's late-submission policy, as `nbgrader autograde` applies it
  (nbgrader's AssignLatePenalties with the config's LateSubmissionPlugin, `PenaltyPerHour` in the
  config `make nbgrader` writes), which records the penalty in the gradebook;
- `autograded/<student>/<id>/`: the submission's notebooks and files, for formgrader's views, each
  task's grade cell of handout.ipynb holding that task's test messages as its output, so that
  formgrader's "Generate Feedback" (nbgrader's own render of this notebook) keeps them;
- feedback: `feedback/<student>/<id>/handout.html` (autograder.feedback's page: the scores, the
  failed tests by task, the passed ones collapsed) with the submission's timestamp.txt and
  submission_secret.txt, where `nbgrader release_feedback` finds it; `fetch_feedback` matches it to
  the student's handout.ipynb, so a student who did not submit that notebook gets no feedback file
  (the line printed for them says so).

A missing or malformed file costs that submission its points with the grader's message (the
grader stages only the files assignment.json lists), never the batch. nbgrader's own `autograde`
is not used: it runs the tests in the student's kernel, where the student's code can mark every
test passed (docs/design.md).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import shutil
import sys
import tempfile
import warnings
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from sqlalchemy.exc import SAWarning
from tqdm import tqdm
from traitlets import Float
from traitlets.config import Config
from traitlets.config.loader import PyFileConfigLoader

from autograder.assignment import REPO_ROOT, Assignment, AssignmentError, load_assignment
from autograder.build import build
from autograder.report_data import NBGRADER_CSV, lateness
from autograder.feedback import feedback_page
from autograder.grade import EXIT_USAGE
from autograder.grade_all import grade_one, write_scores
from autograder.harness.feedback_text import Feedback, build_feedback, task_text

with warnings.catch_warnings():
    # nbgrader 0.9.5's gradebook models raise SQLAlchemy 2 deprecation warnings on import.
    warnings.simplefilter("ignore", DeprecationWarning)
    from nbgrader.api import Gradebook, MissingEntry
    from nbgrader.plugins import ExportPlugin, LateSubmissionPlugin
    from nbgrader.preprocessors import AssignLatePenalties
    from nbgrader.utils import parse_utc

# The notebook of tools/nbgrader_course.py whose grade cells (one per task) hold the scores.
GRADE_NOTEBOOK = "handout"


class NbgraderGradeError(Exception):
    """The course folder or its gradebook cannot be graded into; the message says what to do."""


@dataclass
class StudentGrading:
    """One student's grading: the scores.csv row and what was written for them."""

    student: str
    row: dict[str, Any]
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        score = (f"{self.row['score']:g} / {self.row['max_score']:g}" if "score" in self.row else "no score")
        detail = "; ".join(filter(None, [self.row.get("error", ""), *self.notes]))
        return f"{self.student}: {score} ({self.row['status']}){': ' + detail if detail else ''}"


def collected(course: Path, assignment_id: str) -> dict[str, Path]:
    """Student id -> `submitted/<student>/<id>/`, for every collected submission, by id."""
    return {folder.parent.name: folder
            for folder in sorted((course / "submitted").glob(f"*/{assignment_id}"))
            if folder.is_dir() and not folder.parent.name.startswith(".")}


def stage(assignment: Assignment, submitted: Path, target: Path) -> Path:
    """Copy the files assignment.json lists from `submitted` to `target` (the student's `make submit`).

    A symlink is copied as a symlink (the grader refuses it, as it would on Gradescope); a missing
    file, or a folder under a file's name, is left out, and the grader's message says it is missing.
    """
    target.mkdir(parents=True)
    for name in assignment.files:
        source = submitted / name
        if source.is_symlink() or source.is_file():
            shutil.copy2(source, target / name, follow_symlinks=False)
    return target


def staged_folder(batch: Path) -> Path:
    """`<batch>-submissions/`: each student's graded files, `<student>/<file>`, the layout of
    grade_all's --submissions (so autograder.class_report can read them)."""
    return batch.with_name(batch.name + "-submissions")


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def record_grades(gradebook: Gradebook, assignment: Assignment, student: str, row: dict[str, Any],
                  timestamp: str | None) -> list[str]:
    """Write one submission's task scores into the gradebook; return notes for the student's line."""
    notes = []
    gradebook.update_or_create_student(student)
    try:
        submission = gradebook.find_submission(assignment.id, student)
    except MissingEntry:
        with warnings.catch_warnings():
            # add_submission's own autoflush warnings under SQLAlchemy 2 (nbgrader autograde shows
            # them too); the rows it creates are complete, as the export reads them back.
            warnings.simplefilter("ignore", SAWarning)
            submission = gradebook.add_submission(assignment.id, student)
    try:
        # nbgrader's own parser, as `nbgrader collect` wrote the file.
        submission.timestamp = parse_utc(timestamp) if timestamp else None
    except ValueError:
        notes.append(f"timestamp.txt holds {timestamp!r}, not a time; no timestamp recorded")
        submission.timestamp = None
    graded = row.get("status") == "graded"
    for task in assignment.tasks:
        grade = gradebook.find_grade(task.name, GRADE_NOTEBOOK, assignment.id, student)
        # A run the grader could not score is the instructor's to look at, not a zero.
        grade.auto_score = float(row[f"task:{task.name}"]) if graded else None
        grade.needs_manual_grade = not graded
    if not graded:
        notes.append("flagged for manual grading in formgrader")
    gradebook.db.commit()
    return notes


def assign_late_penalty(config: Config, db_url: str, assignment_id: str, student: str) -> None:
    """The course's late-submission policy on one submission, as `nbgrader autograde` applies it:
    nbgrader's AssignLatePenalties with the course config's `AssignLatePenalties.plugin_class` (a
    LateSubmissionPlugin), which records the penalty on the notebook in the gradebook (its own
    connection: the grades must be committed first)."""
    resources = {"nbgrader": {"notebook": GRADE_NOTEBOOK, "assignment": assignment_id, "student": student,
                              "db_url": db_url}}
    AssignLatePenalties(config=config).preprocess(nbformat.v4.new_notebook(), resources)


class PenaltyPerHour(LateSubmissionPlugin):
    """Late work loses `points_per_hour` points per hour or part of an hour after the due date (the
    student's extension included), never more than the submission's score (nbgrader caps it)."""

    points_per_hour = Float(1.0, help="points lost per started hour of lateness").tag(config=True)

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float) -> float:
        """The penalty, in points, of a submission `total_seconds_late` seconds after its due date."""
        return min(score, self.points_per_hour * math.ceil(total_seconds_late / 3600))


def feedback_of(assignment: Assignment, student: str, results: dict[str, Any], late: str = "") -> Feedback:
    """What the student reads (autograder.harness.feedback_text), with the late-penalty line."""
    feedback = build_feedback(results, assignment.title, student, {task.name: task.title for task in assignment.tasks})
    feedback.late = late
    return feedback


def late_line(gradebook: Gradebook, assignment: Assignment, student: str, score: float) -> str:
    """The feedback's line on a late submission, from the gradebook's lateness and the penalty the
    course's policy recorded (so the page and formgrader give one score); "" when on time."""
    submission = gradebook.find_submission(assignment.id, student)
    late = lateness(float(submission.total_seconds_late or 0))
    if not late:
        return ""
    penalty = float(submission.late_submission_penalty or 0)
    return (f"Submitted {late} (h:mm:ss after the due date): the course's late policy takes {penalty:g} point(s), "
            f"so {max(score - penalty, 0):g} / {assignment.max_score:g} count.")


def write_feedback(course: Path, assignment: Assignment, student: str, submitted: Path,
                   feedback: Feedback) -> list[str]:
    """feedback/<student>/<id>/handout.html beside the submission's timestamp and secret; notes.

    Any older feedback of the student is removed first: it belongs to an earlier grading.
    """
    folder = course / "feedback" / student / assignment.id
    if folder.exists():
        shutil.rmtree(folder)
    try:
        # Byte for byte: release_feedback hashes it as read, and fetch_feedback hashes the student's copy.
        secret = (submitted / "submission_secret.txt").read_bytes()
    except OSError:
        return ["no readable submission_secret.txt in the submission, so release_feedback could not "
                "match feedback to it; none written"]
    folder.mkdir(parents=True)
    (folder / "submission_secret.txt").write_bytes(secret)
    # release_feedback reads timestamp.txt unconditionally; an empty one is better than its crash.
    (folder / "timestamp.txt").write_text(_read(submitted / "timestamp.txt") or "", encoding="utf-8")
    (folder / f"{GRADE_NOTEBOOK}.html").write_text(feedback_page(feedback), encoding="utf-8")
    if not (submitted / f"{GRADE_NOTEBOOK}.ipynb").is_file():
        return [f"{GRADE_NOTEBOOK}.ipynb was not submitted, so fetch_feedback will not find the feedback"]
    return []


def copy_autograded(course: Path, assignment: Assignment, student: str, submitted: Path,
                    feedback: Feedback | None) -> list[str]:
    """autograded/<student>/<id>/: the submitted notebooks, files and timestamp, for formgrader; notes.

    Each task's grade cell of handout.ipynb gets that task's feedback (autograder.feedback's
    text) as its only output: formgrader shows it, and its "Generate Feedback" (nbgrader's
    generate_feedback, which renders this notebook) keeps every test message.
    """
    folder = course / "autograded" / student / assignment.id
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    notes = []
    for path in sorted(submitted.iterdir()):
        if path.name in (*assignment.files, "timestamp.txt") or path.suffix == ".ipynb":
            if path.is_file() and not path.is_symlink():
                shutil.copyfile(path, folder / path.name)
    handout = folder / f"{GRADE_NOTEBOOK}.ipynb"
    if feedback is not None and handout.is_file():
        try:
            notebook = nbformat.read(handout, as_version=4)
        except Exception as error:  # noqa: BLE001 - nbformat raises many kinds on a damaged file
            return [f"{handout.name} is not a notebook ({type(error).__name__}), so nbgrader's Generate "
                    "Feedback cannot show the test messages"]
        tasks = {task.name: task for task in feedback.tasks}
        for cell in notebook.cells:
            grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
            if cell.cell_type == "code" and grade_id in tasks:
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=task_text(tasks.pop(grade_id)))]
        if tasks:
            notes.append(f"{handout.name} has no grade cell for {', '.join(tasks)}: Generate Feedback will "
                         "not show those tasks' messages")
        nbformat.write(notebook, handout)
    return notes


def course_settings(course: Path) -> tuple[str, str, Config]:
    """(course id, gradebook URL, the whole config), read from the course's nbgrader_config.py as
    nbgrader reads them, with nbgrader's defaults: no course id, `sqlite:///<course>/gradebook.db`."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config()
    directory = config.CourseDirectory
    return (str(directory.get("course_id", "")), str(directory.get("db_url", f"sqlite:///{course / 'gradebook.db'}")),
            config)


def grade_course(course: Path, assignment_id: str, *, batch: Path | None = None, jobs: int = 2,
                 progress: bool = True) -> list[StudentGrading]:
    """Grade every collected submission of `assignment_id` and write everything the docstring lists."""
    try:
        assignment = load_assignment(assignment_id, REPO_ROOT)
    except AssignmentError as error:
        raise NbgraderGradeError(str(error)) from error
    course = course.resolve()
    batch = (batch or course / "batch" / assignment_id).resolve()
    course_id, db_url, config = course_settings(course)
    with Gradebook(db_url, course_id) as gradebook:
        try:
            cells = {cell.name for cell in gradebook.find_notebook(GRADE_NOTEBOOK, assignment_id).grade_cells}
        except MissingEntry as error:
            raise NbgraderGradeError(f"the gradebook has no {GRADE_NOTEBOOK}.ipynb of {assignment_id}: run "
                                     f"`nbgrader generate_assignment {assignment_id}` in {course} first") from error
        missing = [task.name for task in assignment.tasks if task.name not in cells]
        if missing:
            raise NbgraderGradeError(f"{GRADE_NOTEBOOK}.ipynb of {assignment_id} has no grade cell for task(s) "
                                     f"{', '.join(missing)}: run `make nbgrader`, then `nbgrader generate_assignment "
                                     f"{assignment_id} --force`")
    submissions = collected(course, assignment_id)
    batch.mkdir(parents=True, exist_ok=True)
    files = staged_folder(batch)
    if files.exists():
        shutil.rmtree(files)  # rebuilt from submitted/: a withdrawn submission must not linger
    staged = {student: stage(assignment, folder, files / student) for student, folder in submissions.items()}
    with tempfile.TemporaryDirectory(prefix="kvlab-nbgrader-") as work:
        package = build(assignment.id, Path(work))
        # Threads suffice: each grading is its own run_autograder process, which does the work.
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = [pool.submit(grade_one, package, folder, batch) for folder in staged.values()]
            rows = [future.result() for future in tqdm(as_completed(futures), total=len(futures), disable=not progress,
                                                       desc=f"grading {assignment.id}", unit="submission")]
    write_scores(batch / "scores.csv", assignment, rows)
    outcomes = []
    # The gradebook is SQLite: written from this thread only, after the gradings.
    with Gradebook(db_url, course_id) as gradebook:
        for row in sorted(rows, key=lambda row: row["submission"]):
            student = row["submission"]
            submitted = submissions[student]
            outcome = StudentGrading(student, row)
            try:
                outcome.notes += record_grades(gradebook, assignment, student, row, _read(submitted / "timestamp.txt"))
                assign_late_penalty(config, db_url, assignment.id, student)
                results_path = batch / student / "results.json"
                feedback = None
                if results_path.is_file():
                    results = json.loads(results_path.read_text(encoding="utf-8"))
                    late = late_line(gradebook, assignment, student, float(results.get("score") or 0))
                    feedback = feedback_of(assignment, student, results, late)
                    outcome.notes += write_feedback(course, assignment, student, submitted, feedback)
                else:
                    outcome.notes.append("no results, so no feedback")
                outcome.notes += copy_autograded(course, assignment, student, submitted, feedback)
            except Exception as error:  # noqa: BLE001 - one student's files must not stop the others
                gradebook.db.rollback()
                outcome.notes.append(f"stopped while recording it (its scores may be missing from the "
                                     f"gradebook): {type(error).__name__}: {error}")
            outcomes.append(outcome)
        write_lateness(batch / NBGRADER_CSV, gradebook, assignment.id, [outcome.student for outcome in outcomes])
    return outcomes


def write_lateness(path: Path, gradebook: Gradebook, assignment_id: str, students: list[str]) -> None:
    """`<batch>/nbgrader.csv`, for the class report: each submission's timestamp, due date, seconds
    late and late penalty, as the gradebook holds them (empty where it holds none)."""
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=["submission", "timestamp", "duedate", "seconds_late", "late_penalty"])
        writer.writeheader()
        for student in students:
            try:
                submission = gradebook.find_submission(assignment_id, student)
            except MissingEntry:
                writer.writerow({"submission": student})
                continue
            writer.writerow({"submission": student, "timestamp": _cell(submission.timestamp),
                             "duedate": _cell(submission.duedate), "seconds_late": _cell(float(submission.total_seconds_late)),
                             "late_penalty": _cell(float(submission.late_submission_penalty or 0))})


def _cell(value: Any) -> str:
    return "" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


class TaskCsvExportPlugin(ExportPlugin):
    """`nbgrader export` with a column per task: assignment, student_id, timestamp, duedate (the
    student's, extension included), seconds_late, raw_score (the tasks' sum), late_penalty (the
    course's LateSubmissionPlugin's, as recorded in the gradebook), score (raw_score - late_penalty),
    max_score, task:<name> (the grade cells, in notebook order), status (graded, needs manual
    grade, missing)."""

    def export(self, gradebook: Gradebook) -> None:
        """Write the CSV to `--to` (default grades.csv): one row per assignment and student."""
        dest = self.to or "grades.csv"
        wanted_assignments, wanted_students = set(map(str, self.assignment)), set(map(str, self.student))
        assignments = [a for a in gradebook.assignments if not wanted_assignments or a.name in wanted_assignments]
        tasks = list(dict.fromkeys(cell.name for a in assignments for nb in a.notebooks for cell in nb.grade_cells))
        columns = ["assignment", "student_id", "timestamp", "duedate", "seconds_late", "raw_score", "late_penalty",
                   "score", "max_score", *(f"task:{name}" for name in tasks), "status"]
        self.log.info("Exporting grades, one column per task, to %s", dest)
        with open(dest, "w", newline="", encoding="utf-8") as out:
            writer = csv.DictWriter(out, fieldnames=columns, restval="")
            writer.writeheader()
            for assignment in assignments:
                for student in gradebook.students:
                    if wanted_students and student.id not in wanted_students:
                        continue
                    row = {"assignment": assignment.name, "student_id": student.id,
                           "duedate": _cell(assignment.duedate), "max_score": _cell(assignment.max_score)}
                    try:
                        submission = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        writer.writerow({**row, "status": "missing"})
                        continue
                    penalty = float(submission.late_submission_penalty or 0)
                    row.update(timestamp=_cell(submission.timestamp), duedate=_cell(submission.duedate),
                               seconds_late=_cell(float(submission.total_seconds_late)),
                               raw_score=_cell(submission.score), late_penalty=_cell(penalty),
                               score=_cell(submission.score - penalty),
                               status="needs manual grade" if submission.needs_manual_grade else "graded")
                    for notebook in submission.notebooks:
                        for grade in notebook.grades:
                            row[f"task:{grade.name}"] = _cell(grade.score)
                    writer.writerow(row)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.nbgrader_grade", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--course", type=Path, default=REPO_ROOT / "dist" / "nbgrader",
                        help="the nbgrader course folder (default: dist/nbgrader)")
    parser.add_argument("--batch", type=Path, default=None,
                        help="where results.json and scores.csv go (default: <course>/batch/<id>)")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default: 2)")
    args = parser.parse_args(argv)
    if args.jobs < 1 or not (args.course / "nbgrader_config.py").is_file():
        print(f"error: --course must be a course folder made by `make nbgrader` (got {args.course}) "
              "and --jobs at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        outcomes = grade_course(args.course, args.assignment, batch=args.batch, jobs=args.jobs)
    except NbgraderGradeError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    for outcome in outcomes:
        print(outcome.line())
    batch = args.batch or args.course / "batch" / args.assignment
    graded = sum(outcome.row["status"] == "graded" for outcome in outcomes)
    print(f"{graded} of {len(outcomes)} submissions graded; scores in the gradebook and {batch / 'scores.csv'}.\n"
          f"Feedback: `nbgrader release_feedback {args.assignment}` in {args.course}. Class report: "
          f"python -m autograder.class_report --assignment {args.assignment} --batch {batch} "
          f"--submissions {staged_folder(batch)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
