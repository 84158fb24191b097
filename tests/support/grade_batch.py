"""Grade submissions one after another, each sandboxed and then in-process (tests/suites/test_suites.py).

    PYTHONPATH=. python tests/support/grade_batch.py < JOBS

Each line of stdin is one job, {"assignment", "submission", "root", "modes", "out", "env"}: with the
job's environment variables set (`env`: the stand-in traces), the grader's own entry
`autograder.harness.run.run` (what Gradescope's run_autograder calls) writes out/<mode>.json for
each mode of `modes` (sandbox, then in-process), on the tests root `root`, and what it printed (a
grader fault's traceback among it) to out/<mode>.log. When both are written, the
job's `out` is written to stdout as one line, which is all this process ever prints there; stdin's
end ends it.

The submissions share this process's start-up (numpy, pytest, the harness); each one's modules are
unloaded after its in-process run, so the next submission imports its own files even where one
submitted module imports another by name.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any
from unittest import mock

from autograder.harness.run import run

BACKENDS = ("sandbox", "inprocess")


def unload(folder: Path) -> None:
    """Forget every module imported from `folder`."""
    prefix = os.path.join(str(folder), "")
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(prefix):
            del sys.modules[name]


def grade(job: dict[str, Any]) -> None:
    """The modes of one job (see the module docstring)."""
    submission = Path(job["submission"]).resolve()
    out = Path(job["out"])
    out.mkdir(parents=True, exist_ok=True)
    with mock.patch.dict(os.environ, job["env"]):
        for mode in (mode for mode in BACKENDS if mode in job["modes"]):
            with open(out / f"{mode}.log", "w", encoding="utf-8") as log, \
                    contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                run(job["assignment"], submission, out / f"{mode}.json", mode=mode,
                    tests_root=Path(job["root"]))
            unload(submission)


def main() -> int:
    # A copy of stdout taken before any grading: pytest replaces file descriptors 1 and 2 while it
    # runs, and the gradings' own output goes to their logs.
    done = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8")
    for line in sys.stdin:
        if line.strip():
            job = json.loads(line)
            grade(job)
            done.write(job["out"] + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
