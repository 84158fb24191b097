"""report.html, the class report's page (autograder.class_report computes what it shows).

One self-contained file: inline CSS, the histograms as data: PNG (matplotlib), no script, no
external asset; the links are to the students' feedback pages beside it (feedback/). Everything
from a submission (its name, its messages, its code) is escaped. The page fits 1,280 px: tables
wrap their cells, a similar pair's code panes are collapsed (<details>) and share the width.
"""
from __future__ import annotations

import base64
import html
import io
import statistics
from collections.abc import Collection
from importlib.metadata import PackageNotFoundError, version
from typing import Any
from urllib.parse import quote

from autograder.report_data import HIST_BINS, TOP_SLOWEST, TOP_TESTS, Distribution, Report, bin_label, class_concepts
from autograder.similarity import MAX_EVIDENCE

STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;line-height:1.4;color:#1f2328;
max-width:1240px;margin:0 auto;padding:1em 1.2em}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:1.6em}
nav a{margin-right:1em}
table{border-collapse:collapse;margin:.5em 0;max-width:100%}
td,th{border:1px solid #d0d7de;padding:.2em .5em;text-align:left;vertical-align:top;overflow-wrap:break-word}
.w{display:inline-block;max-width:40em;overflow-wrap:break-word}#students-table .w{max-width:14em}
th{background:#f6f8fa}td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.plots{display:flex;flex-wrap:wrap;gap:.6em}.plot{border:1px solid #d0d7de;padding:.2em}
.plot img{display:block;max-width:100%}
.bar{display:inline-block;height:.7em;background:#4c78a8;vertical-align:middle}
.low td{background:#fff5f5}
details.pair{border:1px solid #d0d7de;border-radius:4px;margin:.4em 0;padding:.3em .6em}
details.pair summary{cursor:pointer}
.side{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:.6em;margin:.4em 0}
pre{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:12px;background:#f6f8fa;
border:1px solid #d0d7de;padding:.4em;margin:0;white-space:pre-wrap;overflow-wrap:anywhere}
mark{background:#ffd27a}.muted{color:#57606a}.flag{color:#b00;font-weight:bold}
@media print{details.pair>*{display:block}body{max-width:none}}
"""
# A test passed by less than this share of the graded submissions is shaded in the pass-rate table.
LOW_PASS_RATE = 0.5


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _breakable(value: Any) -> str:
    """`value` escaped, free to break after `_` and `::`: a test's name is one long word, which would
    otherwise widen its table past the page."""
    return _e(value).replace("_", "_<wbr>").replace("::", "::<wbr>")


def _table(headers: list[str], rows: list[list[Any]], numeric: Collection[int] = (), table_id: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td class='n'>{_e(c)}</td>" if i in numeric else f"<td><span class='w'>{_breakable(c)}</span></td>"
                         for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table{f' id={chr(39)}{table_id}{chr(39)}' if table_id else ''}><tr>{head}</tr>{body}</table>"


def plot_png(dist: Distribution) -> str:
    """The histogram as a base64 PNG (the same bins as the table), ticks on whole points."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to memory
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(3.6, 2.3), dpi=90)
    ax.bar(dist.edges[:-1], dist.counts, width=dist.edges[1] - dist.edges[0], align="edge",
           color="#4c78a8", edgecolor="white")
    ax.set_xlim(0, dist.edges[-1])
    ax.set_xlabel(f"points (of {dist.max_score:g})")
    ax.set_ylabel("submissions")
    ax.set_title(dist.name, fontsize=10)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _points(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _students(report: Report) -> str:
    tasks = [task.name for task in report.assignment.tasks]
    # A task's name may break after its underscores: seven of them side by side must fit the page.
    head = "".join(f"<th>{_breakable(h)}</th>" for h in ["student", "status", "score", *tasks,
                                                                         "submitted", "late"])
    rows = []
    for student in report.students:
        name = (f"<a class='w' href='{_e(quote(student.feedback))}'>{_e(student.name)}</a>" if student.feedback
                else f"<span class='w'>{_e(student.name)}</span>")
        cells = [name, _e(student.status), f"<b>{_points(student.score)}</b>",
                 *(_points(student.tasks[task]) for task in tasks), _e(student.submitted), _e(student.late)]
        numeric = {2, *range(3, 3 + len(tasks))}
        rows.append("<tr>" + "".join(f"<td class='n'>{c}</td>" if i in numeric else f"<td>{c}</td>"
                                     for i, c in enumerate(cells)) + "</tr>")
    return f"<table id='students-table'><tr>{head}</tr>{''.join(rows)}</table>"


def _pass_rates(report: Report) -> str:
    rows = []
    for rate in report.rates:
        width = round(rate.rate * 80)
        rows.append(f"<tr{' class=low' if rate.rate < LOW_PASS_RATE else ''}><td><span class='w'>{_breakable(rate.name)}</span></td>"
                    f"<td>{_breakable(rate.task)}</td><td class='n'>{rate.passed} of {rate.graded}</td>"
                    f"<td class='n'>{rate.rate:.0%}</td><td><span class='bar' style='width:{width}px'></span></td></tr>")
    return ("<table id='pass-rate-table'><tr><th>test</th><th>task</th><th>passed by</th><th>rate</th><th></th></tr>"
            + "".join(rows) + "</table>")


def _similarity(report: Report) -> list[str]:
    try:
        tool = f"copydetect {version('copydetect')}"
    except PackageNotFoundError:
        tool = "copydetect"
    parts = [f"<p class='muted'>{_e(tool)}: tokenized code (names, strings and layout ignored) "
             f"fingerprinted on runs of {report.noise} characters, the starter's code removed as "
             "boilerplate, each file compared with the same file of every other submission. "
             "Similarity of a side: the share of its code found in the other. A pair is flagged at "
             f"{report.threshold:.2f} or more on either side. Flagged pairs are for a person to read, "
             "not a verdict. A file too large to compare is listed under the problems above.</p>"]
    if report.similarity_note:
        parts.append(f"<p class='flag'>Not run: {_e(report.similarity_note)}</p>")
    flagged = report.flagged
    if flagged:
        parts.append(_table(["submission A", "submission B", "A in B", "B in A"],
                            [[p.a, p.b, f"{p.similarity[0]:.2f}", f"{p.similarity[1]:.2f}"] for p in flagged], {2, 3},
                            table_id="flagged"))
        if len(flagged) > MAX_EVIDENCE:
            parts.append(f"<p>The shared code of the {MAX_EVIDENCE} most similar pairs:</p>")
        for pair in flagged[:MAX_EVIDENCE]:
            parts.append(f"<details class='pair'><summary><span class='flag'>{_e(pair.a)} and {_e(pair.b)}: "
                         f"{pair.score:.2f}</span> (show the shared code)</summary>")
            for ev in pair.files:
                parts.append(f"<p>{_e(ev.file)}: {ev.similarity[0]:.2f} of {_e(pair.a)}'s code, "
                             f"{ev.similarity[1]:.2f} of {_e(pair.b)}'s (shared code highlighted)</p>")
                # ev.code is copydetect's HTML: the code escaped, the shared slices in <mark>.
                parts.append(f"<div class='side'><div><b>{_e(pair.a)}</b><pre>{ev.code[0]}</pre></div>"
                             f"<div><b>{_e(pair.b)}</b><pre>{ev.code[1]}</pre></div></div>")
            parts.append("</details>")
    elif not report.similarity_note:
        parts.append("<p>No pair reaches the threshold.</p>")
    rest = [p for p in report.shown_pairs if p.score < report.threshold]
    if rest:
        parts.append("<p>The most similar pairs below the threshold:</p>")
        parts.append(_table(["submission A", "submission B", "A in B", "B in A"],
                            [[p.a, p.b, f"{p.similarity[0]:.2f}", f"{p.similarity[1]:.2f}"] for p in rest], {2, 3}))
    return parts


SECTIONS = [("students", "Students"), ("distributions", "Score distributions"), ("pass-rates", "Pass rate of every test"),
            ("failures", "Tests failed most often"), ("slowest", "Slowest gradings"),
            ("problems", "Grader faults and unreadable results"), ("similarity", "Similar submissions")]


def render_html(report: Report, csv_name: str = "report.csv") -> str:
    """The page: plain HTML with inline CSS; every image a data: URL."""
    a = report.assignment
    graded = sum(s.graded for s in report.subs)
    total = next(d for d in report.distributions if d.name == "total")
    heading = dict(SECTIONS)
    parts = [f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>{_e(a.id)} class report</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{_e(a.title)}: class report</h1>",
             f"<p>{len(report.subs)} submissions, {graded} graded"
             + (f"; total score mean {statistics.fmean(total.scores):.4g} of {a.max_score:g}" if total.scores else "")
             + f". Every number on this page is in <code>{_e(csv_name)}</code>.</p>",
             "<nav>" + "".join(f"<a href='#{key}'>{_e(title)}</a>" for key, title in SECTIONS) + "</nav>"]

    parts.append(f"<section id='students'><h2>{heading['students']}</h2><p class='muted'>Each name links to "
                 "the feedback page that student reads. Submission time and lateness come from nbgrader "
                 "(make nbgrader-grade) and are empty for other batches.</p>")
    parts.append(_students(report) + "</section>")

    parts.append(f"<section id='distributions'><h2>{heading['distributions']}</h2><p class='muted'>Graded "
                 f"submissions only (status <code>graded</code>); {HIST_BINS} equal bins from 0 to the maximum, "
                 "the last one including the maximum.</p>")
    stat_rows = []
    for dist in report.distributions:
        s = dist.stats()
        stat_rows.append([dist.name, f"{dist.max_score:g}", s["graded"],
                          *(f"{s[k]:.4g}" if k in s else "" for k in ("mean", "median", "min", "max"))])
    parts.append(_table(["task", "max", "graded", "mean", "median", "min", "max"], stat_rows, {1, 2, 3, 4, 5, 6}))
    parts.append("<div class='plots'>")
    for dist in report.distributions:
        counts = ", ".join(f"{bin_label(dist.edges, i)}: {c}" for i, c in enumerate(dist.counts))
        parts.append(f"<div class='plot'><img alt='{_e(dist.name)} histogram: {_e(counts)}' "
                     f"src='data:image/png;base64,{plot_png(dist)}'></div>")
    parts.append("</div></section>")

    parts.append(f"<section id='pass-rates'><h2>{heading['pass-rates']}</h2><p class='muted'>Of the graded "
                 "submissions, those that passed every parametrization of the test; shaded under "
                 f"{LOW_PASS_RATE:.0%}.</p>{_pass_rates(report)}</section>")

    parts.append(f"<section id='failures'><h2>{heading['failures']}</h2>")
    if report.failed:
        parts.append(f"<p class='muted'>Of {graded} graded submissions. A test counts once per submission "
                     "whatever its parametrizations; its failure messages are grouped by the concept they "
                     "name in the grader's own words (the \"Likely cause\" sentence, the kind of exception "
                     "raised, or the first line), values replaced by # and text from the submission by …</p>")
        rows = []
        for test in report.failed[:TOP_TESTS]:
            ideas = test.top_concepts()
            for i, (idea, n) in enumerate(ideas[:3]):
                rows.append([test.name if i == 0 else "", test.task if i == 0 else "",
                             len(test.submissions) if i == 0 else "", test.failures if i == 0 else "",
                             n, idea])
            if len(ideas) > 3:
                rows.append(["", "", "", "", "", f"… {len(ideas) - 3} more concept(s) in the CSV"])
        parts.append(_table(["test", "task", "submissions failing", "failures", "submissions", "concept"],
                            rows, {2, 3, 4}))
        parts.append("<p>The same concepts over all tests (one mistake often fails several tests):</p>")
        parts.append(_table(["concept", "submissions", "tests"],
                            [list(c) for c in class_concepts(report.failed)[:TOP_TESTS]], {1, 2}))
    else:
        parts.append("<p>No graded submission failed a test.</p>")
    parts.append("</section>")

    parts.append(f"<section id='slowest'><h2>{heading['slowest']}</h2>")
    if report.slowest:
        times = [t for _, t in report.slowest]
        parts.append(f"<p class='muted'>results.json's execution_time; median {statistics.median(times):.3g} s "
                     f"over {len(times)}.</p>")
        parts.append(_table(["submission", "seconds"], [[n, f"{t:.3f}"] for n, t in report.slowest[:TOP_SLOWEST]], {1}))
    else:
        parts.append("<p>No results.json with an execution time.</p>")
    parts.append("</section>")

    parts.append(f"<section id='problems'><h2>{heading['problems']}</h2>")
    if report.problems:
        parts.append(_table(["submission", "what", "detail"], [list(p) for p in report.problems]))
    else:
        parts.append("<p>None: every submission was graded and its results.json read.</p>")
    parts.append("</section>")

    parts.append(f"<section id='similarity'><h2>{heading['similarity']}</h2>")
    parts.extend(_similarity(report))
    parts.append("</section></body></html>")
    return "\n".join(parts)
