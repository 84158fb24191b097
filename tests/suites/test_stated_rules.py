"""Every name a graded test relies on is stated to students, proven mechanically.

For every assignment, the reference solution is graded through the sandbox (the grader's own entry,
`autograder.harness.run.run`, in a subprocess) while the sandbox records what the trusted side uses
on the student's objects: every attribute read or written, every keyword argument of a call into
the student's code, every exception type the student's code raised to a test
(`autograder.harness.sandbox.recording`, and the names `kvlab.testing.probe:ask` asks for in the worker;
the course library's own objects living in the worker, a
`kvlab.kvstore.MemoryStore` or kvlab.paged's cache adapter, are not the student's). Each name must appear, as a word, in what students are
given for the assignment: its starter file(s) or its handout (assignments/<id>/README.md). A name
the tests use but the student never reads about is a rule graded but never stated.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.assignment import discover, load_assignment
from support.traces import stand_in_traces
from support.tiers import sample

REPO = Path(__file__).resolve().parents[2]

# Run in a subprocess: the grader runs pytest itself, which must not nest inside this session.
RECORD = """
import json, sys
from pathlib import Path
from autograder.harness.run import run
from autograder.harness.sandbox import Sandbox, recording
assignment, solution, results, out = sys.argv[1:5]
call = Sandbox.call
with recording(library=("kvlab.",)) as names:
    # kvlab.testing.probe:ask reads the student's attributes and calls its methods in the worker, out of
    # the hook's sight: its questions name them here.
    def asking(self, qualname, *args, **kwargs):
        if qualname == "kvlab.testing.probe:ask":
            names.update(("attribute", name) for _, name, _ in args[0])
        return call(self, qualname, *args, **kwargs)
    Sandbox.call = asking
    graded = run(assignment, Path(solution), Path(results), mode="sandbox")
Path(out).write_text(json.dumps({"score": graded["score"], "status": graded["extra_data"]["status"],
                                 "output": graded.get("output", ""), "names": sorted(names)}))
"""


def stated_text(assignment_id: str) -> str:
    """What a student is given to read about the assignment: the starter files and the handout."""
    assignment = load_assignment(assignment_id, REPO)
    parts = [assignment.starter / name for name in assignment.files] + [assignment.handout]
    return "\n".join(path.read_text(encoding="utf-8") for path in parts)


# The everyday tier checks the first assignment (the same check, on the others' handouts, in make test-all).
@pytest.mark.parametrize("assignment_id", sample(discover(REPO), group=lambda _: "names"))
def test_every_name_the_tests_use_is_stated(assignment_id: str, tmp_path: Path) -> None:
    assignment = load_assignment(assignment_id, REPO)
    env = {**os.environ, "PYTHONPATH": str(REPO),
           # The names asked of the student's objects do not depend on the trace's length: the
           # 3,000-request stand-in, even where Mooncake's is installed (test_gradescope_package
           # grades the real one).
           **stand_in_traces(assignment.traces, tmp_path / "traces", real_if_present=False)}
    out = tmp_path / "names.json"
    done = subprocess.run(
        [sys.executable, "-c", RECORD, assignment_id, str(assignment.solution), str(tmp_path / "results.json"),
         str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert done.returncode == 0 and out.is_file(), f"recording the reference's grading failed:\n{done.stderr[-3000:]}"
    recorded = json.loads(out.read_text(encoding="utf-8"))
    assert recorded["status"] == "graded" and recorded["score"] == assignment.max_score, (
        f"the reference of {assignment_id} scored {recorded['score']} ({recorded['status']}) while recorded: "
        f"{recorded['output'][:2000]}"
    )
    kinds = {kind for kind, _ in recorded["names"]}
    assert "attribute" in kinds, f"the recording of {assignment_id} saw no attribute at all: is the hook on?"
    text = stated_text(assignment_id)
    unstated = [f"{kind} {name!r}" for kind, name in recorded["names"]
                if not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text)]
    assert not unstated, (
        f"{assignment_id}: the tests use on the student's objects names that neither the starter file(s) nor "
        f"the handout mention: {', '.join(unstated)}. State each one (a stub docstring, outside the solution "
        "markers, or the handout), then run `python -m tools.make_starter`"
    )
