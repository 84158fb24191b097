"""Grade several submissions in one process, each sandboxed and then in-process (tests/test_suites.py).

    PYTHONPATH=. python tests/grade_batch.py JOBS.json

JOBS.json is a list of {"assignment", "submission", "tests_root", "out"}; for each, the grader's
own entry `autograder.harness.run.run` (what Gradescope's run_autograder calls) writes
out/sandbox.json and out/inprocess.json, and what it printed to stderr (where a grader fault's
traceback goes) to out/sandbox.log and out/inprocess.log. The submissions share this process's
start-up (numpy, pytest, the harness); each one's modules are unloaded after its in-process run, so
the next submission imports its own files even where one submitted module imports another by name.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

from autograder.harness.run import run

MODES = ("sandbox", "inprocess")


def unload(folder: Path) -> None:
    """Forget every module imported from `folder`."""
    prefix = os.path.join(str(folder), "")
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(prefix):
            del sys.modules[name]


def main(argv: list[str]) -> int:
    for job in json.loads(Path(argv[0]).read_text(encoding="utf-8")):
        submission = Path(job["submission"]).resolve()
        for mode in MODES:
            out = Path(job["out"])
            out.mkdir(parents=True, exist_ok=True)
            with open(out / f"{mode}.log", "w", encoding="utf-8") as log, contextlib.redirect_stderr(log):
                run(job["assignment"], submission, out / f"{mode}.json", mode=mode,
                    tests_root=Path(job["tests_root"]))
            unload(submission)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
