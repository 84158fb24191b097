"""Scaffold a new assignment from tools/assignment_template/ (`make new A=<id>`).

    python -m tools.new_assignment ID

Every `*.tmpl` file of the template is written to the same path in the repository with `@ID@`
replaced by ID (in its path and its text) and `.tmpl` dropped, then `make starter` runs for the new
assignment. The result is a one-task example (`mean`) with each part an assignment needs: the
solution with solution markers, the generated starter, assignment.json, a handout, a public and a
hidden test that both call the check's body in the public `<id>_checks.py` with their own inputs, a bug
catalog with one mutant, and a demo. It passes every repository check as it is;
no other file of the repository needs an edit (every tool finds assignments with
autograder.assignment.discover). Replace the example with the assignment's content.
"""
from __future__ import annotations

import argparse
import importlib.util
import keyword
import sys
from pathlib import Path

from autograder.assignment import discover
from tools import make_starter

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = Path(__file__).resolve().parent / "assignment_template"
PLACEHOLDER = "@ID@"


class NewAssignmentError(Exception):
    """The assignment cannot be created as asked; the message says why."""


def planned_files(assignment_id: str, root: Path = ROOT) -> dict[Path, str]:
    """Target path -> text for every template file."""
    return {root / path.relative_to(TEMPLATE).as_posix().replace(PLACEHOLDER, assignment_id).removesuffix(".tmpl"):
            path.read_text(encoding="utf-8").replace(PLACEHOLDER, assignment_id)
            for path in sorted(TEMPLATE.rglob("*.tmpl"))}


def check_id(assignment_id: str, root: Path = ROOT) -> None:
    """NewAssignmentError unless `assignment_id` can name a new assignment and its submitted module."""
    if not assignment_id.isidentifier() or keyword.iskeyword(assignment_id):
        raise NewAssignmentError(f"{assignment_id!r} is not a valid id: use letters, digits and _ (e.g. lecture03)")
    if assignment_id in discover(root):
        raise NewAssignmentError(f"assignment {assignment_id!r} already exists")
    # The example's submitted file is <id>.py, imported as a top-level module: it must not shadow one.
    if importlib.util.find_spec(assignment_id) is not None:
        raise NewAssignmentError(f"{assignment_id!r} is already an importable module name; choose another id")


def scaffold(assignment_id: str, root: Path = ROOT) -> list[Path]:
    """Write the new assignment's files and its starter under `root`; return the paths written."""
    check_id(assignment_id, root)
    files = planned_files(assignment_id, root)
    existing = [path.relative_to(root).as_posix() for path in files if path.exists()]
    if existing:
        raise NewAssignmentError(f"would overwrite {', '.join(existing)}")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="\n")
    return [*files, *make_starter.write_starters([assignment_id], root / "starter", root)]


def main(argv: list[str] | None = None) -> int:
    """Command line: scaffold, print what was written, exit 1 with the reason on error."""
    parser = argparse.ArgumentParser(prog="python -m tools.new_assignment", description=__doc__.split("\n")[0])
    parser.add_argument("id", help="the new assignment's id, e.g. lecture03")
    args = parser.parse_args(argv)
    try:
        written = scaffold(args.id)
    except (NewAssignmentError, make_starter.StarterError) as error:
        print(f"new_assignment: error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path.relative_to(ROOT)}")
    print(f"\n{args.id} is a one-task example that passes every repository check; replace its content "
          "(see docs/design.md, \"Adding an assignment\").")
    return 0


if __name__ == "__main__":
    sys.exit(main())
