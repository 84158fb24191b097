"""Gradescope's results.json: built from per-test records, validated, written once and atomically.

Whatever happens while grading, the trusted runner ends by writing exactly one file through
`write_results`: a graded result (`graded_results`) or, when the grader itself failed, a result
that says so and blames nobody (`fault_results`). Every file is validated against
`results_schema.json` before it is written, so a bug here turns into a "contact the staff" result
instead of a file Gradescope rejects (which would show the student nothing at all).
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.assignment import Assignment
from autograder.harness.feedback_text import build_feedback, scrub_paths, summary_text

SCHEMA_PATH = Path(__file__).with_name("results_schema.json")

FAULT_MESSAGE = ("The autograder itself failed (not your code): please contact the course staff. "
                 "Your score of 0 is a placeholder until the staff regrade your submission.")

# Bounds on text that comes from student code, so one print loop or a huge exception message
# cannot bloat results.json (Gradescope shows it on one page) or hide the other tests' results.
MAX_MESSAGE_CHARS = 4000
MAX_CAPTURED_CHARS = 2000
CAPTURED_HEADING = "--- output printed by your code during this test (stdout and stderr) ---"


@dataclass
class GradedTest:
    """What the runner learned about one test: the student-facing part of a pytest report."""

    name: str
    task: str
    points: float
    passed: bool
    output: str
    hidden: bool
    draws: tuple[int, ...] = ()  # what the test drew for this run (kvlab.testing.draws.drawn), for the staff


def truncate(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping both ends (a traceback's last line is the
    exception; an output's first lines are usually the telling ones) and saying how much was cut."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit // 2], text[-(limit // 2):]
    return f"{head}\n[... {len(text) - len(head) - len(tail)} more characters cut ...]\n{tail}"


def with_captured_output(output: str, captured: str) -> str:
    """Append the student's captured stdout/stderr (bounded) under a heading, when there is any."""
    if not captured.strip():
        return output
    block = f"{CAPTURED_HEADING}\n{truncate(captured, MAX_CAPTURED_CHARS)}"
    return f"{output}\n\n{block}" if output else block


def encodable(text: str) -> str:
    """`text` with anything UTF-8 cannot encode (lone surrogates from undecodable file names or
    bytes) replaced, so a student's odd file name cannot make results.json unwritable."""
    return text.encode("utf-8", "replace").decode("utf-8")


def _points(value: float) -> float | int:
    """Points as JSON shows them: 40 rather than 40.0, and no 99.99999999 from float sums."""
    value = round(float(value), 6)
    return int(value) if value.is_integer() else value


def task_scores(assignment: Assignment, records: Sequence[GradedTest]) -> list[dict[str, Any]]:
    """Per task of assignment.json, in its order: name, title, earned score, max_score."""
    rows = []
    for task in assignment.tasks:
        mine = [r for r in records if r.task == task.name]
        rows.append({"name": task.name, "title": task.title,
                     "score": _points(sum(r.points for r in mine if r.passed)),
                     "max_score": _points(task.points)})
    return rows


def graded_results(assignment: Assignment, records: Sequence[GradedTest], execution_time: float,
                   isolation: Sequence[str], seed: int | None = None,
                   switches: Sequence[str] = ()) -> dict[str, Any]:
    """results.json for a submission the tests ran on (whatever its score); `seed`, the draws'
    (kvlab.testing.draws), goes to the staff's extra_data, so that the grading can be replayed, and
    so do the `switches` it ran under (settings.Settings.switches; none on Gradescope)."""
    tasks = task_scores(assignment, records)
    index = {task.name: number for number, task in enumerate(assignment.tasks, start=1)}
    seen: dict[str, int] = {}
    tests = []
    # Grouped by task in assignment.json's order; within a task the failed tests first, each kind in
    # the order pytest ran them, and numbered as listed: what the student reads first is what to fix.
    for record in sorted(records, key=lambda r: (index[r.task], r.passed)):
        seen[record.task] = seen.get(record.task, 0) + 1
        audience = "hidden" if record.hidden else "public"
        tests.append({
            "name": encodable(record.name),
            "number": f"{index[record.task]}.{seen[record.task]}",
            "score": _points(record.points if record.passed else 0),
            "max_score": _points(record.points),
            "status": "passed" if record.passed else "failed",
            "output": encodable(scrub_paths(record.output)),
            "tags": [record.task],
            "visibility": assignment.visibility[audience],
            **({"extra_data": {"draws": list(record.draws)}} if record.draws else {}),
        })
    results: dict[str, Any] = {
        "score": _points(sum(t["score"] for t in tasks)),
        "execution_time": round(execution_time, 3),
        "output": "",
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        # The runner's own stdout/stderr (tracebacks of grader faults) is for the staff only.
        "stdout_visibility": "hidden",
        "tests": tests,
        # The isolation report names the grading machine's folders: the staff's, never the output.
        "extra_data": {"assignment": assignment.id, "status": "graded",
                       "max_score": _points(assignment.max_score),
                       "tasks": [{k: t[k] for k in ("name", "score", "max_score")} for t in tasks],
                       "isolation": list(isolation),
                       **({"seed": seed} if seed is not None else {}),
                       **({"switches": list(switches)} if switches else {})},
    }
    results["output"] = encodable(summary_of(results, assignment))
    return results


def summary_of(results: dict[str, Any], assignment: Assignment) -> str:
    """The top-level output: the feedback page's content as text (feedback_text), built from
    `results`' own fields. It is always visible, so a test whose own visibility is not `visible`
    is only counted there: its name and message wait for that test's visibility."""
    titles = {task.name: task.title for task in assignment.tasks}
    shown = [test for test in results["tests"] if test["visibility"] == "visible"]
    text = summary_text(build_feedback({**results, "tests": shown}, assignment.title, "", titles))
    later = len(results["tests"]) - len(shown)
    if later:
        text += (f"\n{later} more test(s) count in the scores above; their names and messages are shown "
                 "when the course staff release them.")
    return text


def fault_results(assignment_id: str, max_score: float, execution_time: float) -> dict[str, Any]:
    """results.json when the grader failed: score 0, no per-test results, the contact-staff message."""
    return {
        "score": 0,
        "execution_time": round(execution_time, 3),
        "output": FAULT_MESSAGE,
        "output_format": "text",
        "test_output_format": "text",
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": [],
        "extra_data": {"assignment": assignment_id, "status": "grader_fault",
                       "max_score": _points(max_score), "tasks": [], "isolation": []},
    }


def load_schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate(results: dict[str, Any]) -> None:
    """Raise jsonschema.ValidationError unless `results` matches results_schema.json."""
    # Imported here: processes that only read or copy results (local grading) skip its import.
    from autograder.schema import jsonschema

    jsonschema().Draft202012Validator(load_schema()).validate(results)


def validate_file(path: Path) -> None:
    """Raise (OSError, ValueError or jsonschema.ValidationError) unless `path` is a valid results.json."""
    validate(json.loads(Path(path).read_text(encoding="utf-8")))


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Validate `results`, then write them to `path` atomically."""
    validate(results)
    write_json_atomically(path, results)


def write_json_atomically(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` through a temp file and os.replace.

    The temp file lives in the target's folder so os.replace is a rename within one filesystem:
    a reader (or a crash) sees the old file or the whole new one, never half of it.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=".results-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(data, out, indent=2, ensure_ascii=False)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
