"""Record which hidden test first catches each corpus bug and catalog mutant (tests/support/first_catch.py).

    python -m tools.first_catch lecture07 lecture02        # both kinds
    python -m tools.first_catch lecture07 --kind corpus

Grades every bug in-process, one per grading slot (tests/support/graders.py), and rewrites the
records that tests/suites/test_corpus.py and test_suites.py hold the suite to. The gradings draw from
each bug's own seed (autograder/harness/seeds.py), so a new grading key means new records. Run it after a change to the hidden
tests that is meant to move a first catch, and commit the records with the change.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from autograder import corpus  # noqa: E402
from support import first_catch  # noqa: E402 - found through the tests folder added above
from support.graders import Graders  # noqa: E402
from support.suite import suites  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("assignments", nargs="+")
    parser.add_argument("--kind", choices=first_catch.KINDS, action="append")
    args = parser.parse_args(argv)
    known = suites()
    with tempfile.TemporaryDirectory(prefix="first-catch-") as scratch:
        batches = {}
        for assignment in args.assignments:
            for kind in args.kind or first_catch.KINDS:
                if kind == "corpus" and not corpus.folder(assignment).is_dir():
                    continue  # an assignment without a blind corpus yet (`make new`'s)
                batches[assignment, kind] = first_catch.jobs(known[assignment], kind, Path(scratch) / assignment / kind)
        every = [job for batch in batches.values() for job in batch]
        graders = Graders(sorted(every, key=lambda job: job.label))
        try:
            for (assignment, kind), batch in batches.items():
                graded = {job.label: graders.futures[job.assignment, job.label].result() for job in batch}
                record = first_catch.records(graded)
                path = first_catch.record_path(assignment, kind)
                path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
                missed = sorted(name for name, caught in record.items() if caught is None)
                print(f"{path}: {len(record)} bugs, {len(missed)} passing every hidden test {missed or ''}")
        finally:
            graders.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
