"""One test's outcome (`Verdict`), read from a pytest junit report or from the grader's results.json.

The junit half (`read_junit`, `Verdict.data_skip`, `assert_all_not_implemented`) reads the runs of
the students' own path (`pytest -p kvlab.testing`, `make test` in a bundle) for test_starter.py and
test_release.py; `support.graders.JobResults` makes Verdicts of results.json. Every assert carries a
message, since a failure here must say what went wrong without the reader opening this file.
"""
from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kvlab.trace import mooncake_dir

# The one skip a students'-path run may report: autograder/hidden/lecture07/test_hidden_hit_ratio.py's
# test on Mooncake's conversation trace, which the repository does not ship (kvlab.trace.mooncake_dir).
# Matched by its whole reason, so any other skip (or this one reworded) still fails the checks.
DATA_FILE = "conversation_trace.jsonl"
DATA_SKIP_REASON = f"Mooncake's {DATA_FILE} is not installed (see kvlab.trace.mooncake_dir)"

# Characters of a message shown per test in a listing: enough for the first lines of a failure.
LISTED_CHARS = 300


@dataclass(frozen=True)
class Verdict:
    """One test's result, from a junit report or from results.json."""

    test: str  # junit: "<classname>.<name>"; results.json: "<number> <name>", e.g. "1.3 test_update"
    task: str  # the task marker's; "ungraded" for a test without one
    points: float
    status: str  # "passed", "failed", "error" or "skipped"
    message: str  # the failure and error messages joined by " | ", or the skip reason
    public: bool

    @property
    def passed(self) -> bool:
        """True only for a pass: a skip earns nothing either."""
        return self.status == "passed"

    @property
    def data_skip(self) -> bool:
        """The tolerated skip, and only while its cause holds: the Mooncake trace really is absent.

        The test runs inherit this process's environment, so both resolve mooncake_dir() alike.
        """
        return (self.status == "skipped" and self.message == DATA_SKIP_REASON
                and not (mooncake_dir() / DATA_FILE).is_file())


def failure_message(node: ET.Element) -> str:
    """The whole exception message of a failure or error element.

    pytest may shorten the `message` attribute; the element text holds the report, whose "E" lines
    are the exception (never the test's source). A `pytest.fail(..., pytrace=False)` report has no
    "E" lines: its text is the message itself.
    """
    text = node.text or ""
    lines = [re.sub(r"^E\s{1,7}", "", line) for line in text.splitlines() if line.startswith("E ")]
    return "\n".join(lines) or text.strip() or node.get("message", "")


def read_junit(report: Path) -> list[Verdict]:
    """One Verdict per test case of a pytest --junitxml report, in report order."""
    assert report.is_file(), f"pytest wrote no junit report at {report}"
    outcomes = []
    for case in ET.parse(report).iter("testcase"):
        task = next((p.get("value", "") for p in case.iter("property") if p.get("name") == "task"), "")
        name, points = ast.literal_eval(task) if task else ("ungraded", 0.0)
        failure, error, skipped = case.find("failure"), case.find("error"), case.find("skipped")
        problems = [node for node in (failure, error) if node is not None]
        if problems:
            # A failing test that also errors in teardown is a failure: the test itself went wrong.
            status = "failed" if failure is not None else "error"
            message = " | ".join(failure_message(node) for node in problems)
        elif skipped is not None:
            status, message = "skipped", skipped.get("message", "")
        else:
            status, message = "passed", ""
        classname = case.get("classname", "")
        outcomes.append(Verdict(f"{classname}.{case.get('name')}", name, float(points), status, message,
                                public=classname.startswith("assignments.")))
    return outcomes


def listing(outcomes: Sequence[Verdict]) -> str:
    """One line per outcome for a failure message: task, test, status and the start of its message."""
    return "\n".join(f"  [{o.task}] {o.test}: {o.status}: {o.message[:LISTED_CHARS]}" for o in outcomes)


def not_passed(outcomes: Sequence[Verdict]) -> list[Verdict]:
    """The outcomes that did not pass, the tolerated data skip aside."""
    return [o for o in outcomes if not o.passed and not o.data_skip]


def assert_all_not_implemented(outcomes: Sequence[Verdict], output: str) -> None:
    """Every test failed with a NotImplementedError (the data skip aside); none passed or errored.

    `output` is the run's console output, shown when the report holds no test at all.
    """
    assert outcomes, f"no test ran; the run's output:\n{output[-3000:]}"
    wrong = [o for o in outcomes
             if not (o.status == "failed" and "NotImplementedError" in o.message) and not o.data_skip]
    assert not wrong, (f"{len(wrong)} of {len(outcomes)} tests did not fail with NotImplementedError on the "
                       f"starter (a test that passes on a stub gives points for nothing):\n{listing(wrong)}")
