"""Grade a batch of submissions as Gradescope would (`make grade-all A= SUBS= OUT= JOBS=`).

    python -m autograder.grade_all --assignment lecture02 --submissions DIR --out OUTDIR --jobs 2

Each subfolder of DIR is one submission (its name identifies it). The package is built once; each
submission then runs through its own /autograder-like folder (autograder.grade), N at a time,
with a progress bar. Writes OUTDIR/<name>/results.json for each and OUTDIR/scores.csv (submission,
score, max_score, one column per task, status, error). A submission that breaks anything, the
grader included, gets a row saying so and never stops the batch.
"""
from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from autograder.assignment import REPO_ROOT, Assignment, AssignmentError, load_assignment
from autograder.build import build
from autograder.grade import EXIT_USAGE, grade_submission


def grade_one(package: Path, submission: Path, out_dir: Path) -> dict[str, Any]:
    """One submission's scores.csv row (without the task columns' order applied)."""
    row: dict[str, Any] = {"submission": submission.name}
    try:
        results = grade_submission(package, submission, out_dir / submission.name / "results.json").results
    except Exception as error:  # noqa: BLE001 - one broken submission must not stop the batch
        return {**row, "status": "error", "error": f"{type(error).__name__}: {error}"}
    extra = results["extra_data"]
    row.update(score=results["score"], max_score=extra["max_score"], status=extra["status"],
               error="" if extra["status"] == "graded" else "grader fault: see the results' output")
    row.update({f"task:{t['name']}": t["score"] for t in extra["tasks"]})
    return row


def write_scores(path: Path, assignment: Assignment, rows: list[dict[str, Any]]) -> None:
    """scores.csv, one row per submission in name order."""
    columns = ["submission", "score", "max_score", *(f"task:{t.name}" for t in assignment.tasks), "status", "error"]
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda row: row["submission"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grade_all", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--submissions", required=True, type=Path, help="folder with one subfolder per submission")
    parser.add_argument("--out", required=True, type=Path, help="output folder")
    parser.add_argument("--jobs", type=int, default=2, help="submissions graded at once (default: 2)")
    args = parser.parse_args(argv)
    try:
        assignment = load_assignment(args.assignment, REPO_ROOT)
    except AssignmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not args.submissions.is_dir() or args.jobs < 1:
        print(f"error: --submissions must be a folder (got {args.submissions}) and --jobs at least 1",
              file=sys.stderr)
        return EXIT_USAGE
    submissions = sorted(p for p in args.submissions.iterdir() if p.is_dir() and not p.name.startswith("."))
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kvlab-build-") as dist:
        package = build(assignment.id, Path(dist))
        # Threads suffice: each grading is its own run_autograder process, which does the work.
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(grade_one, package, submission, args.out) for submission in submissions]
            rows = [future.result() for future in tqdm(as_completed(futures), total=len(futures),
                                                       desc=f"grading {assignment.id}", unit="submission")]
    write_scores(args.out / "scores.csv", assignment, rows)
    graded = sum(row["status"] == "graded" for row in rows)
    print(f"{graded} of {len(rows)} submissions graded; scores in {args.out / 'scores.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
