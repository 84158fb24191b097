"""Grade the reference solutions as Gradescope would (`make grade-reference`).

    python -m autograder.grade_reference [ID ...]        (default: every assignment)

For each assignment it grades `solutions/<id>` through the Gradescope package (autograder.grade)
and prints the score tables. Exit status 1 unless every reference gets full marks with every test
passed; 2 for an unknown assignment.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from autograder.assignment import REPO_ROOT, AssignmentError, discover, load_assignment
from autograder.build import MissingTraces, build
from autograder.grade import EXIT_USAGE, grade_submission, report


def full_marks_problem(results: dict[str, Any]) -> str | None:
    """None when the results are full marks with every test passed, else what fell short."""
    if results["extra_data"]["status"] != "graded":
        return "the grader failed"
    failed = [t["name"] for t in results["tests"] if t["status"] != "passed"]
    if failed:
        return f"{len(failed)} test(s) failed: {', '.join(failed)}"
    if results["score"] != results["extra_data"]["max_score"]:
        return f"scored {results['score']} of {results['extra_data']['max_score']}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grade_reference", description=__doc__.split("\n")[0])
    parser.add_argument("assignments", nargs="*", metavar="ID", help="assignment ids (default: every assignment)")
    args = parser.parse_args(argv)
    args.assignments = args.assignments or discover(REPO_ROOT)
    try:
        for assignment_id in args.assignments:
            load_assignment(assignment_id, REPO_ROOT)
    except AssignmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    problems = []
    with tempfile.TemporaryDirectory(prefix="kvlab-reference-") as name:
        for assignment_id in args.assignments:
            try:
                package = build(assignment_id, Path(name))
            except MissingTraces as error:
                print(f"== reference solution of {assignment_id}: not graded. {error}\n")
                continue
            graded = grade_submission(package, REPO_ROOT / "solutions" / assignment_id,
                                      Path(name) / f"{assignment_id}-results.json")
            print(f"== reference solution of {assignment_id}\n{report(graded.results, graded.log)}\n")
            problem = full_marks_problem(graded.results)
            if problem:
                problems.append(f"{assignment_id}: {problem}")
    for problem in problems:
        print(f"error: the reference solution of {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
