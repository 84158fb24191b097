"""Lay out an nbgrader course folder for the assignments (`make nbgrader`, OUT=dist/nbgrader).

    python -m tools.nbgrader_course [ID ...] [--out DIR] [--exchange DIR] [--course-id ID]

Writes, and replaces on every run, only these two parts of the course folder (the gradebook,
release/, submitted/, feedback/ and the rest are nbgrader's and are never touched):

    nbgrader_config.py     course id, exchange root (when --exchange is given), the hooks below, the
                           per-task export plugin and the late-submission plugin; it puts this
                           repository on sys.path (KVLAB_REPOSITORY, else the course folder's
                           path relative to it when it is inside the clone)
    source/<id>/           the student bundle of tools/release.py (kvlab/, tests/, Makefile,
                           pytest.ini, requirements.txt, README.md, data, demo.py) with the reference
                           solution's .py files in place of the starter, solution markers included,
                           plus two notebooks:
      handout.ipynb        the handout (README.md), one locked markdown cell per section, then one
                           locked grade cell per task of assignment.json (grade_id = the task's
                           name, points = its points) that runs the task's public tests; these
                           cells carry the scores that autograder.nbgrader_grade writes
      demo.ipynb           the demo, run on the student's files in their folder

nbgrader's ClearSolutions only edits notebooks: `generate_assignment` copies every other file of
source/<id>/ unchanged. The course's GenerateAssignment.post_convert_hook,
`clear_released_solutions`, therefore rewrites each released .py file as `make starter` would
(tools.make_starter.starter_text, nbgrader's own ClearSolutions on the file's text) and then checks
that no marker and no solution line is left in release/<id>/. nbgrader logs and ignores an
exception from a hook, so a failure deletes release/<id>/ and raises SystemExit instead: the
command fails and nothing that could leak is left to release.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path

import nbformat

from autograder.assignment import Assignment, AssignmentError, discover, load_assignment
from tools import make_starter, release

ROOT = Path(__file__).resolve().parent.parent
COURSE_ID = "kvlab"
# The notebook whose grade cells hold the task scores (and whose name the feedback file takes).
HANDOUT_NOTEBOOK = "handout.ipynb"
DEMO_NOTEBOOK = "demo.ipynb"
# nbgrader's default release folder, relative to the course root (the hook's working directory).
RELEASE_DIRECTORY = "release"
MARKERS = ("BEGIN SOLUTION", "END SOLUTION")
NBGRADER_SCHEMA_VERSION = 3
KERNELSPEC = {"name": "python3", "language": "python", "display_name": "Python 3"}
# The generated config's late policy (autograder.nbgrader_grade.PenaltyPerHour): points lost per
# started hour after the due date; the instructor edits it in nbgrader_config.py.
LATE_POINTS_PER_HOUR = 1.0


class CourseError(Exception):
    """The course folder cannot be laid out, or a release would leak; the message says why."""


def _metadata(grade_id: str, *, grade: bool = False, points: float | None = None) -> dict:
    """nbgrader cell metadata: a locked cell, a grade cell (an "autograder tests" cell) when `grade`."""
    meta = {"grade": grade, "solution": False, "locked": True, "task": False,
            "grade_id": grade_id, "schema_version": NBGRADER_SCHEMA_VERSION}
    if grade:
        meta["points"] = points
    return {"nbgrader": meta}


def _sections(markdown: str) -> list[str]:
    """The handout split before each `## ` heading (never inside a ``` block)."""
    sections: list[list[str]] = [[]]
    fenced = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        if line.startswith("## ") and not fenced and any(s.strip() for s in sections[-1]):
            sections.append([])
        sections[-1].append(line)
    return ["\n".join(lines).strip("\n") for lines in sections if any(s.strip() for s in lines)]


def grade_cell_source(assignment: Assignment, task_name: str) -> str:
    """The code of a task's grade cell: its public tests, as `make test TASK=<task>` runs them."""
    task = assignment.task(task_name)
    files = ", ".join(assignment.files)
    return (
        f"# Task {task.name} ({task.points:g} points): {task.title}.\n"
        f"# This cell runs the task's public tests on your {files} (`make test TASK={task.name}`).\n"
        "# Your score comes from the course's hidden tests, run after you submit; it appears here\n"
        "# and in your feedback.\n"
        "import subprocess, sys\n"
        f"checks = subprocess.run([sys.executable, '-m', 'pytest', '-q', '--submission', '.', "
        f"'--task', {task.name!r}, 'tests'],\n"
        "                        capture_output=True, text=True)\n"
        "print(checks.stdout, checks.stderr)\n"
        f"assert checks.returncode == 0, 'a public test of task {task.name} failed: its message is above'\n"
    )


def handout_notebook(assignment: Assignment) -> nbformat.NotebookNode:
    """handout.ipynb: the handout's sections as locked markdown cells, then a grade cell per task."""
    cells = [nbformat.v4.new_markdown_cell(text, metadata=_metadata(f"handout-{number}"))
             for number, text in enumerate(_sections(assignment.handout.read_text(encoding="utf-8")), 1)]
    cells.append(nbformat.v4.new_markdown_cell(
        "## Tasks and points\n\nOne cell per task: running it runs that task's public tests on your "
        "files. The points shown for these cells after grading are your score for each task.",
        metadata=_metadata("tasks-heading")))
    cells += [nbformat.v4.new_code_cell(grade_cell_source(assignment, task.name),
                                        metadata=_metadata(task.name, grade=True, points=task.points))
              for task in assignment.tasks]
    return nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC})


DEMO_CELL = (
    "# The demo on the files in this folder, in a fresh process, so it always sees your latest edits.\n"
    "import subprocess, sys\n"
    "with subprocess.Popen([sys.executable, 'demo.py', '--submission', '.'], stdout=subprocess.PIPE,\n"
    "                      stderr=subprocess.STDOUT, text=True) as demo:\n"
    "    for line in demo.stdout:\n"
    "        print(line, end='')\n"
)


def demo_notebook(assignment: Assignment) -> nbformat.NotebookNode:
    """demo.ipynb: the demo's docstring, then one cell that runs demo.py on the student's files."""
    text = assignment.demo.read_text(encoding="utf-8")
    match = re.match(r'\s*(?:#[^\n]*\n\s*)*[rR]?"""(.*?)"""', text, re.DOTALL)
    about = match.group(1).strip() if match else f"The demo of {assignment.title}."
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell(f"# Demo\n\n```\n{about}\n```", metadata=_metadata("demo-about")),
        nbformat.v4.new_code_cell(DEMO_CELL, metadata=_metadata("demo-run")),
    ], metadata={"kernelspec": KERNELSPEC})


def source_files(assignment_id: str, root: Path = ROOT) -> dict[str, bytes]:
    """Path in source/<id>/ -> bytes: the student bundle with the solutions (markers kept) and notebooks."""
    try:
        assignment = load_assignment(assignment_id, root)
        files = release.bundle_contents(assignment_id, root)
    except (AssignmentError, release.ReleaseError) as error:
        raise CourseError(str(error)) from error
    for path in sorted(assignment.solution.glob("*.py")):
        files[path.name] = path.read_bytes()
    for name, notebook in ((HANDOUT_NOTEBOOK, handout_notebook(assignment)),
                           (DEMO_NOTEBOOK, demo_notebook(assignment) if assignment.demo.is_file() else None)):
        if notebook is not None:
            nbformat.validate(notebook)
            files[name] = nbformat.writes(notebook).encode()
    return files


def config_text(course_id: str, exchange: Path | None, root: Path = ROOT, out: Path | None = None) -> str:
    """The course's nbgrader_config.py, for the course folder `out` (default: dist/nbgrader of
    `root`): the repository is named relative to it, never by the clone's absolute path."""
    course = (out or root / "dist" / "nbgrader").resolve()
    if course.is_relative_to(root.resolve()):
        where = "the folder that holds this course folder"
        found = (f"os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "
                 f"{os.path.relpath(root.resolve(), course)!r}))")
    else:
        # Outside the clone: naming it would write the instructor's folders into the course.
        where = "none: set KVLAB_REPOSITORY to the repository's folder before running nbgrader"
        found = "None"
    points_per_hour = LATE_POINTS_PER_HOUR
    exchange_line = (f"c.Exchange.root = {str(exchange)!r}" if exchange is not None else
                     "# c.Exchange.root: nbgrader's default, /srv/nbgrader/exchange (make nbgrader EXCHANGE=DIR sets it)")
    return f'''"""nbgrader configuration of the {course_id} course; written by `make nbgrader` (tools/nbgrader_course.py).

Scores come from `make nbgrader-grade A=<id>` (autograder/nbgrader_grade.py), which runs the hidden
tests in the course's sandbox; `nbgrader autograde` is refused, since it runs tests in the
student's own kernel, where the student's code could mark every test passed.
"""
import os
import sys

# The repository this course folder was made from (the hooks, the grader and the plugins):
# KVLAB_REPOSITORY when set, else {where}.
REPOSITORY = os.environ.get("KVLAB_REPOSITORY") or {found}
if REPOSITORY and REPOSITORY not in sys.path:
    sys.path.insert(0, REPOSITORY)

c = get_config()  # noqa: F821 - defined by traitlets when it loads this file
c.CourseDirectory.course_id = {course_id!r}
{exchange_line}
# generate_assignment copies .py files as they are; this hook clears their solutions (and fails,
# deleting release/<id>/, if any solution line is left).
c.GenerateAssignment.post_convert_hook = "tools.nbgrader_course.clear_released_solutions"
c.Autograde.pre_convert_hook = "tools.nbgrader_course.refuse_autograde"
# `nbgrader export`: one row per student and assignment, a column per task (grade cell), the
# lateness and the late penalty.
c.ExportApp.plugin_class = "autograder.nbgrader_grade.TaskCsvExportPlugin"
# Late work (a due date set with `nbgrader db assignment add <id> --duedate=...`, or in formgrader):
# make nbgrader-grade applies this LateSubmissionPlugin as `nbgrader autograde` would and records the
# penalty in the gradebook. nbgrader's own LateSubmissionPlugin with penalty_method "none" or
# "zero" works here too.
c.AssignLatePenalties.plugin_class = "autograder.nbgrader_grade.PenaltyPerHour"
c.PenaltyPerHour.points_per_hour = {points_per_hour!r}
'''


def write_course(assignment_ids: list[str], out: Path, *, course_id: str = COURSE_ID,
                 exchange: Path | None = None, root: Path = ROOT) -> list[Path]:
    """Write nbgrader_config.py and source/<id>/ for each assignment; return the folders written."""
    contents = {assignment_id: source_files(assignment_id, root) for assignment_id in assignment_ids}
    out.mkdir(parents=True, exist_ok=True)
    (out / "nbgrader_config.py").write_text(config_text(course_id, exchange, root, out), encoding="utf-8")
    written = []
    for assignment_id, files in contents.items():
        folder = out / "source" / assignment_id
        if folder.exists():
            shutil.rmtree(folder)
        for name, data in files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(data)
        written.append(folder)
    return written


def _region_lines(text: str) -> set[str]:
    """Stripped lines inside the solution regions of `text`, as release.solution_lines keeps them."""
    lines, inside = set(), False
    for line in text.split("\n"):
        if MARKERS[0] in line:
            inside = True
        elif MARKERS[1] in line:
            inside = False
        elif inside and len(line.strip()) >= release.MIN_LEAK_LINE:
            lines.add(line.strip())
    return lines


def leaks(folder: Path, solution_lines: set[str]) -> list[str]:
    """'file: what' for every file under `folder` holding a marker or one of `solution_lines`."""
    found = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        text = path.read_bytes().decode("utf-8", errors="replace")
        hits = [m for m in MARKERS if m in text] + sorted(line for line in solution_lines if line in text)
        if hits:
            found.append(f"{path.relative_to(folder).as_posix()}: {hits[0]!r}")
    return found


def clear_release(course_root: Path, assignment_id: str, root: Path = ROOT) -> list[str]:
    """Replace each released .py file that has solution regions by its starter; return their names.

    CourseError when a file cannot be cleared or anything of a solution is left in release/<id>/.
    """
    folder = course_root / RELEASE_DIRECTORY / assignment_id
    if not folder.is_dir():
        raise CourseError(f"{folder} does not exist: nothing was generated")
    try:
        assignment = load_assignment(assignment_id, root)
        table = make_starter.task_table(assignment.tasks, f"assignments/{assignment_id}/assignment.json")
    except (AssignmentError, make_starter.StarterError) as error:
        raise CourseError(str(error)) from error
    cleared, solution = [], set()
    for path in sorted(folder.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if not any(marker in text for marker in MARKERS):
            continue
        solution |= _region_lines(text)
        try:
            starter, _ = make_starter.starter_text(text, table, f"{RELEASE_DIRECTORY}/{assignment_id}/{path.name}")
        except make_starter.StarterError as error:
            raise CourseError(str(error)) from error
        path.write_text(starter, encoding="utf-8", newline="\n")
        cleared.append(path.name)
    left = leaks(folder, solution)
    if left:
        raise CourseError(f"solution text left in {folder}: {'; '.join(left)}")
    return cleared


def clear_released_solutions(assignment: str, student: str, notebooks: list[str]) -> None:
    """GenerateAssignment.post_convert_hook (nbgrader calls it in the course root after copying).

    On any failure release/<id>/ is deleted and SystemExit raised: nbgrader swallows an Exception
    from a hook (it only logs it), and a release holding the solution must never go out.
    """
    course_root = Path.cwd()
    try:
        names = clear_release(course_root, assignment)
    except Exception as error:  # noqa: BLE001 - whatever failed, nothing uncleared may stay
        shutil.rmtree(course_root / RELEASE_DIRECTORY / assignment, ignore_errors=True)
        raise SystemExit(f"nbgrader_course: {RELEASE_DIRECTORY}/{assignment}/ deleted, its solutions could not "
                         f"be cleared: {type(error).__name__}: {error}") from error
    print(f"nbgrader_course: cleared the solutions of {', '.join(names) or 'no file'} "
          f"in {RELEASE_DIRECTORY}/{assignment}/", file=sys.stderr)


def refuse_autograde(assignment: str, student: str, notebooks: list[str]) -> None:
    """Autograde.pre_convert_hook: stop `nbgrader autograde` (SystemExit: nbgrader swallows Exceptions)."""
    raise SystemExit("nbgrader autograde is not used in this course: it runs the tests in the student's kernel, "
                     f"where their code can mark every test passed. Run `make nbgrader-grade A={assignment}`.")


def main(argv: list[str] | None = None) -> int:
    """Command line: lay out the course folder, print what was written, exit 1 with the reason on error."""
    parser = argparse.ArgumentParser(prog="python -m tools.nbgrader_course", description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", help="assignments (default: every assignment)")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "nbgrader", help="course folder (default: dist/nbgrader)")
    parser.add_argument("--exchange", type=Path, default=None,
                        help="nbgrader's exchange folder, Exchange.root (default: nbgrader's, /srv/nbgrader/exchange)")
    parser.add_argument("--course-id", default=COURSE_ID, help=f"CourseDirectory.course_id (default: {COURSE_ID})")
    args = parser.parse_args(argv)
    try:
        written = write_course(args.ids or discover(ROOT), args.out, course_id=args.course_id,
                               exchange=args.exchange.resolve() if args.exchange else None)
    except CourseError as error:
        print(f"nbgrader_course: error: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.out / 'nbgrader_config.py'}")
    for folder in written:
        print(f"wrote {folder}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
