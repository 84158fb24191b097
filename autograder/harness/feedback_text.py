"""What a student reads about one grading, as text, built from results.json's fields: the model the
feedback page renders (autograder/feedback.py) and the text results.json's top-level `output`,
`make grade` and nbgrader's grade cells show, so that every place says the same.

The content, in reading order: the total and each task's score; then the failed tests, grouped by
task, each named by its file and name, a failure whose message is identical to another's in the
same task shown once with the tests that share it (a task's failures naming NotImplementedError,
stubs left as they were, share one); then the passed tests, only counted here (the page lists them
collapsed). No machine path reaches it: an absolute path in a message is cut to its last component
(`scrub_paths`, which results.json's test outputs go through too), and the isolation report
(temporary folders, the interpreter's path) stays in results.json's `extra_data` and the staff's
views.

It lives in the trusted harness because the runner builds results.json's summary with it; standard
library only, like text_table, so the runner's results import nothing more.
"""
from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field
from typing import Any

from autograder.harness.text_table import text_table

# An absolute path of two or more components, not inside a word or a relative path: the worker's
# temporary folders, the interpreter's packages. Only its last component is kept.
_ABSOLUTE_PATH = re.compile(r"(?<![\w.~/-])/(?:[\w.+@-]+/)+([\w.+@-]+)")


def scrub_paths(text: str) -> str:
    """`text` with every absolute path of two or more components cut to `…/<last component>`: the
    grading machine's folders are not for the student (the staff have them in extra_data)."""
    return _ABSOLUTE_PATH.sub(lambda m: f"…/{m.group(1)}", text)


TEXT_WIDTH = 100
# A failure shared by more tests than this names only the first ones (a starter fails dozens of
# tests on one stub): in the text the rest are counted, on the page listed collapsed.
MAX_OPEN_NAMES = 3


@dataclass
class FailureGroup:
    """Tests of one task that failed with the same message: shown once, with their names."""

    message: str
    tests: list[str] = field(default_factory=list)


@dataclass
class TaskFeedback:
    """One task: its score, its failures grouped by message, its passed tests' names."""

    name: str
    title: str
    score: float
    max_score: float
    failures: list[FailureGroup] = field(default_factory=list)
    passed: list[str] = field(default_factory=list)

    @property
    def failed_count(self) -> int:
        return sum(len(group.tests) for group in self.failures)


@dataclass
class Feedback:
    """Everything the student reads, in the order they read it."""

    title: str
    student: str
    score: float
    max_score: float
    tasks: list[TaskFeedback]
    note: str = ""  # the grader's own message when it could not grade (a fault), else ""
    late: str = ""  # on the page: nbgrader's lateness and late penalty, when the submission was late

    @property
    def failed_count(self) -> int:
        return sum(task.failed_count for task in self.tasks)

    @property
    def passed_count(self) -> int:
        return sum(len(task.passed) for task in self.tasks)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _group_key(message: str) -> str:
    """Failures of a task with the same key share one box: the same message, or, for stubs left as
    they were, any message naming NotImplementedError (a starter fails dozens of tests on a handful
    of stubs; the first traceback says what to implement first)."""
    return "NotImplementedError" if "NotImplementedError" in message else message


def build_feedback(results: dict[str, Any], title: str, student: str,
                   task_titles: dict[str, str] | None = None) -> Feedback:
    """The feedback of one results.json (a graded run or a fault), tasks in results.json's order.

    `task_titles`: task name -> what it grades (assignment.json); a task results.json does not list
    (a fault's) is left out.
    """
    extra = results.get("extra_data") or {}
    titles = task_titles or {}
    tasks = {str(t.get("name")): TaskFeedback(str(t.get("name")), titles.get(str(t.get("name")), ""),
                                              _number(t.get("score")), _number(t.get("max_score")))
             for t in extra.get("tasks") or [] if isinstance(t, dict)}
    for test in results.get("tests") or []:
        tags = test.get("tags") or ["other"]
        task = tasks.setdefault(str(tags[0]), TaskFeedback(str(tags[0]), titles.get(str(tags[0]), ""), 0, 0))
        name = str(test.get("name", "?"))
        if test.get("status") == "passed" or _number(test.get("score")) >= _number(test.get("max_score")) > 0:
            task.passed.append(name)
            continue
        message = scrub_paths(str(test.get("output") or "(no message)")).strip()
        key = _group_key(message)
        group = next((g for g in task.failures if _group_key(g.message) == key), None)
        if group is None:
            task.failures.append(group := FailureGroup(message))
        group.tests.append(name)
    graded = extra.get("status") == "graded"
    return Feedback(title, student, _number(results.get("score")),
                    _number(extra.get("max_score", sum(t.max_score for t in tasks.values()))),
                    list(tasks.values()), "" if graded else scrub_paths(str(results.get("output") or "")))


def points_text(value: float) -> str:
    """Points as a student reads them: 35, 2.5."""
    return f"{value:g}"


# ---------------------------------------------------------------------------------------------
# Text


def _wrapped(text: str, indent: str) -> list[str]:
    """`text`'s lines, each indented by `indent` and its own indentation, wrapped to TEXT_WIDTH."""
    out = []
    for line in text.splitlines() or [""]:
        own = indent + line[: len(line) - len(line.lstrip())]
        out.extend(textwrap.wrap(line.strip(), max(20, TEXT_WIDTH - len(own)), initial_indent=own,
                                 subsequent_indent=own + "  ", break_on_hyphens=False) or [own.rstrip()])
    return out


def task_text(task: TaskFeedback) -> str:
    """One task as text: its score, each distinct failure once with the tests that share it (the
    first MAX_OPEN_NAMES named, the rest counted), and how many of its tests passed."""
    lines = [f"{task.name}: {points_text(task.score)} / {points_text(task.max_score)}"]
    for group in task.failures:
        count = f"{len(group.tests)} tests failed this way" if len(group.tests) > 1 else "failed"
        names = ", ".join(group.tests[:MAX_OPEN_NAMES])
        if len(group.tests) > MAX_OPEN_NAMES:
            names += f" and {len(group.tests) - MAX_OPEN_NAMES} more"
        lines.extend(_wrapped(f"{count}: {names}", "  "))
        lines.extend(_wrapped(group.message, "    | "))
    lines.append(f"  {len(task.passed)} test(s) passed, {task.failed_count} failed.")
    return "\n".join(lines)


def failures_text(feedback: Feedback) -> str:
    """The tasks that lost points (`task_text`), then the count of passed and failed tests."""
    parts = [task_text(task) for task in feedback.tasks if task.failures]
    parts.append(f"{feedback.passed_count} test(s) passed, {feedback.failed_count} failed.")
    return "\n\n".join(parts)


def summary_text(feedback: Feedback) -> str:
    """The whole feedback as text: the total and the task table, then `failures_text`."""
    rows = [[task.name, points_text(task.score), points_text(task.max_score), task.title] for task in feedback.tasks]
    rows.append(["total", points_text(feedback.score), points_text(feedback.max_score), ""])
    table = text_table(f"{feedback.title}: {points_text(feedback.score)} / {points_text(feedback.max_score)} points",
                       ["task", "score", "max", "what it grades"], rows, right=[False, True, True, False])
    heading = "Failed tests, by task (a message several tests share is shown once):\n" if feedback.failed_count else ""
    return f"{table}\n\n{heading}{failures_text(feedback)}"
