"""What a student reads about one grading, from its results.json: one content, two renderings.

The same content wherever it is shown (nbgrader's feedback page, `make grade`'s terminal, the
class report's per-student links): the total and each task's score first; then the failed tests,
grouped by task, each named by its file and name, a failure whose message is identical to another's
in the same task shown once with the tests that share it; then the passed tests, collapsed. No
machine path reaches it: an absolute path in a message is cut to its last component
(results.scrub_paths, as results.json's test outputs already are), and the isolation report
(temporary folders, the interpreter's path) stays in results.json's `extra_data` and the staff's
views. A task's failures naming NotImplementedError (stubs left as they were) share one box.

`feedback_page` is self-contained HTML (inline CSS, no script, no external asset) that wraps long
lines to the page's width and prints legibly; everything from a submission is escaped.
`failures_text` (and `task_text`, one task) is the same content as plain text, lines wrapped to
TEXT_WIDTH: `make grade` prints it, and each grade cell of nbgrader's autograded notebook holds
its task's.
"""
from __future__ import annotations

import html
import textwrap
from dataclasses import dataclass, field
from typing import Any

from autograder.harness.results import scrub_paths

TEXT_WIDTH = 100
# A failure shared by more tests than this lists their names collapsed (a starter fails dozens).
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


def _points(value: float) -> str:
    return f"{value:g}"


# ---------------------------------------------------------------------------------------------
# HTML

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.45;color:#1f2328;
max-width:1100px;margin:0 auto;padding:1.2em 1.5em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de}
h3{font-size:1.05em;margin:1em 0 .3em}
.total{font-size:1.3em;font-weight:600}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
td,th{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.lost td:first-child{border-left:4px solid #cf222e}tr.full td:first-child{border-left:4px solid #1a7f37}
.failure{border:1px solid #d0d7de;border-left:4px solid #cf222e;border-radius:4px;margin:.6em 0;padding:.4em .7em}
ul.names{margin:.2em 0 .4em;padding:0;list-style:none;display:flex;flex-wrap:wrap;gap:.2em 1.2em}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:.9em}
pre{white-space:pre-wrap;overflow-wrap:anywhere;background:#f6f8fa;padding:.5em .7em;margin:.3em 0;border-radius:4px}
li code,td code{overflow-wrap:anywhere}
.count{color:#cf222e;font-weight:600}.ok{color:#1a7f37}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}
@media print{body{max-width:none;padding:0}details>*{display:block}.failure{break-inside:avoid}}
"""


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _task_table(feedback: Feedback) -> str:
    rows = []
    for task in feedback.tasks:
        state = "full" if task.score >= task.max_score else "lost"
        rows.append(f"<tr class='{state}'><td>{_e(task.name)}</td><td class='n'>{_points(task.score)}</td>"
                    f"<td class='n'>{_points(task.max_score)}</td><td>{_e(task.title)}</td></tr>")
    rows.append(f"<tr><th>total</th><th class='n'>{_points(feedback.score)}</th>"
                f"<th class='n'>{_points(feedback.max_score)}</th><th></th></tr>")
    return ("<table id='tasks'><tr><th>task</th><th>score</th><th>max</th><th>what it grades</th></tr>"
            + "".join(rows) + "</table>")


def _failures(feedback: Feedback) -> str:
    parts = []
    for task in feedback.tasks:
        if not task.failures:
            continue
        parts.append(f"<h3>{_e(task.name)}: {_points(task.score)} / {_points(task.max_score)}</h3>")
        for group in task.failures:
            count = len(group.tests)
            names = f"<ul class='names'>{''.join(f'<li><code>{_e(name)}</code></li>' for name in group.tests)}</ul>"
            if count > MAX_OPEN_NAMES:
                names = (f"<details class='names'><summary class='count'>{count} tests failed this way</summary>"
                         f"{names}</details>")
            else:
                names = f"<span class='count'>{'failed' if count == 1 else f'{count} tests failed this way'}:</span>{names}"
            parts.append(f"<div class='failure'>{names}<pre>{_e(group.message)}</pre></div>")
    return "".join(parts)


def _passed(feedback: Feedback) -> str:
    parts = []
    for task in feedback.tasks:
        if task.passed:
            names = "".join(f"<li><code>{_e(name)}</code></li>" for name in task.passed)
            parts.append(f"<h3>{_e(task.name)}</h3><ul>{names}</ul>")
    return "".join(parts)


def feedback_page(feedback: Feedback) -> str:
    """The student's page: summary, tasks, failed tests (by task), passed tests (collapsed)."""
    head = (f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<meta name='viewport' content='width=device-width,initial-scale=1'>"
            f"<title>{_e(feedback.title)}: feedback for {_e(feedback.student)}</title>"
            f"<style>{STYLE}</style></head><body>\n")
    parts = [head, f"<h1>{_e(feedback.title)}</h1>",
             f"<p>Feedback for <b>{_e(feedback.student)}</b>: <span class='total' id='total'>"
             f"{_points(feedback.score)} / {_points(feedback.max_score)} points</span></p>"]
    if feedback.note:
        parts.append(f"<pre id='note'>{_e(feedback.note)}</pre>")
    parts.append("<h2>Scores per task</h2>" + _task_table(feedback))
    parts.append(f"<section id='failed'><h2>Failed tests ({feedback.failed_count})</h2>")
    if feedback.failed_count:
        parts.append("<p>Grouped by task; tests that failed with the same message share one box.</p>")
        parts.append(_failures(feedback))
    else:
        parts.append("<p class='ok'>Every test passed.</p>" if feedback.passed_count else "<p>No test ran.</p>")
    parts.append("</section>")
    parts.append(f"<section id='passed'><h2>Passed tests ({feedback.passed_count})</h2>")
    if feedback.passed_count:
        parts.append(f"<details><summary>Show the {feedback.passed_count} passed tests</summary>"
                     f"{_passed(feedback)}</details>")
    parts.append("</section>\n</body></html>\n")
    return "".join(parts)


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
    """One task as text: its score, each distinct failure once with the tests that share it, and
    how many of its tests passed."""
    lines = [f"{task.name}: {_points(task.score)} / {_points(task.max_score)}"]
    for group in task.failures:
        count = f"{len(group.tests)} tests failed this way" if len(group.tests) > 1 else "failed"
        lines.extend(_wrapped(f"{count}: {', '.join(group.tests)}", "  "))
        lines.extend(_wrapped(group.message, "    | "))
    lines.append(f"  {len(task.passed)} test(s) passed, {task.failed_count} failed.")
    return "\n".join(lines)


def failures_text(feedback: Feedback) -> str:
    """The tasks that lost points (`task_text`), then the count of passed and failed tests."""
    parts = [task_text(task) for task in feedback.tasks if task.failures]
    parts.append(f"{feedback.passed_count} test(s) passed, {feedback.failed_count} failed.")
    return "\n\n".join(parts)
