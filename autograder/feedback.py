"""The student's feedback page: autograder.harness.feedback_text's `Feedback` as HTML.

The content is the one results.json's summary, `make grade` and nbgrader's grade cells show as text
(feedback_text says what it holds and in which order); this page adds the passed tests' names,
collapsed. It is self-contained HTML (inline CSS, no script, no external asset) that wraps long
lines to the page's width and prints legibly; everything from a submission is escaped. nbgrader's
feedback folder and the class report's per-student links hold it.
"""
from __future__ import annotations

import html
from typing import Any

from autograder.harness.feedback_text import MAX_OPEN_NAMES, Feedback, points_text

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.45;color:#1f2328;
max-width:1100px;margin:0 auto;padding:1.2em 1.5em}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em;border-bottom:1px solid #d0d7de}
h3{font-size:1.05em;margin:1em 0 .3em}
.total{font-size:1.3em;font-weight:600}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
td,th{border:1px solid #d0d7de;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
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
        rows.append(f"<tr class='{state}'><td>{_e(task.name)}</td><td class='n'>{points_text(task.score)}</td>"
                    f"<td class='n'>{points_text(task.max_score)}</td><td>{_e(task.title)}</td></tr>")
    rows.append(f"<tr><th>total</th><th class='n'>{points_text(feedback.score)}</th>"
                f"<th class='n'>{points_text(feedback.max_score)}</th><th></th></tr>")
    return ("<table id='tasks'><tr><th>task</th><th>score</th><th>max</th><th>what it grades</th></tr>"
            + "".join(rows) + "</table>")


def _failures(feedback: Feedback) -> str:
    parts = []
    for task in feedback.tasks:
        if not task.failures:
            continue
        parts.append(f"<h3>{_e(task.name)}: {points_text(task.score)} / {points_text(task.max_score)}</h3>")
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
             f"{points_text(feedback.score)} / {points_text(feedback.max_score)} points</span></p>"]
    if feedback.late:
        parts.append(f"<p id='late' class='count'>{_e(feedback.late)}</p>")
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

