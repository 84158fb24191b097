"""A class report for instructors after a batch grading (`make class-report A= SUBS= [OUT=]`).

    python -m autograder.class_report --assignment lecture02 --batch OUTDIR --submissions DIR [--out DIR]

Reads what a batch grading wrote (`autograder.grade_all`, or the nbgrader batch, same layout):
OUTDIR/scores.csv (submission, score, max_score, one `task:<name>` column per task, status, error),
OUTDIR/<name>/results.json and, for an nbgrader batch, OUTDIR/nbgrader.csv (timestamps, lateness);
and the submitted files, DIR/<name>/<file> for each file that assignment.json lists. Writes into
--out (default: OUTDIR):

- report.html: one self-contained page (autograder.report_page: inline CSS, plots as base64 PNG, no
  external URL, no script);
- report.csv: every number the page shows, one per row: section, subject, key, value;
- feedback/: each student's feedback page (autograder.feedback), linked from the page.

Sections:
1. the students: status, score per task, nbgrader's submission time and lateness, feedback link;
2. score distributions: per task (and the total) the graded submissions' count, mean, median,
   min, max, and a histogram of HIST_BINS equal bins over [0, max_score] (the last bin includes
   max_score, as numpy.histogram's does); only rows whose status is `graded` count;
3. every test's pass rate (a test is its file and name without the parametrization, so
   `test_f.py::test_x[a]` and `test_f.py::test_x[b]` are one test);
4. the tests failed by most submissions, and their failure messages grouped by concept, in the
   grader's own words (`concept`, `GraderWords`); then the concepts over all tests, by the
   submissions whose failures name them;
5. the slowest gradings (results.json's `execution_time`, seconds);
6. problems: every row whose status is not `graded` (grader faults), every results.json that is
   missing or malformed, every submission folder without a scores.csv row and the reverse, every
   submitted file the similarity check left out (too large, over the class's budget, not text);
7. similar pairs (autograder.similarity: copydetect within a budget per file and per class, in a
   limited child process): the flagged pairs and the TOP_UNFLAGGED most similar others.

The batch is read into one Report (autograder.report_data), which the page (autograder.report_page),
the CSV and the feedback pages are all written from; the comparison lives in autograder.similarity.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from autograder.assignment import REPO_ROOT, AssignmentError, load_assignment
from autograder.report_data import NOISE_CHARS, THRESHOLD, build_report, write_csv, write_feedback_pages
from autograder.report_page import render_html

EXIT_USAGE = 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.class_report", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--batch", required=True, type=Path, help="the batch grading's output folder (scores.csv)")
    parser.add_argument("--submissions", type=Path, help="the folder of submission folders that was graded")
    parser.add_argument("--out", type=Path, help="where report.html and report.csv go (default: --batch)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"similarity at which a pair is flagged, 0..1 (default: {THRESHOLD})")
    parser.add_argument("--noise", type=int, default=NOISE_CHARS,
                        help=f"shortest match counted, in tokenized characters (default: {NOISE_CHARS})")
    args = parser.parse_args(argv)
    try:
        assignment = load_assignment(args.assignment, REPO_ROOT)
    except AssignmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not (args.batch / "scores.csv").is_file():
        print(f"error: {args.batch / 'scores.csv'} not found: --batch must be a batch grading's output folder",
              file=sys.stderr)
        return EXIT_USAGE
    if args.submissions is not None and not args.submissions.is_dir():
        print(f"error: --submissions must be a folder (got {args.submissions})", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.threshold <= 1 or args.noise < 1:
        print("error: --threshold must be within 0..1 and --noise at least 1", file=sys.stderr)
        return EXIT_USAGE
    logging.getLogger().setLevel(logging.ERROR)  # copydetect warns once per file it skips
    try:
        report = build_report(assignment, args.batch, args.submissions, args.threshold, args.noise)
    except (OSError, ValueError) as error:
        print(f"error: cannot read {args.batch / 'scores.csv'}: {error}", file=sys.stderr)
        return EXIT_USAGE
    out = args.out or args.batch
    out.mkdir(parents=True, exist_ok=True)
    write_csv(report, out / "report.csv")
    write_feedback_pages(report, out)
    (out / "report.html").write_text(render_html(report), encoding="utf-8")
    print(f"{len(report.subs)} submissions, {len(report.problems)} problem(s), {len(report.flagged)} flagged "
          f"pair(s); report in {out / 'report.html'} and {out / 'report.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
