"""A class report for instructors after a batch grading (`make class-report A= SUBS= [OUT=]`).

    python -m autograder.class_report --assignment lecture02 --batch OUTDIR --submissions DIR [--out DIR]

Reads what a batch grading wrote (`autograder.grade_all`, or the nbgrader batch, same layout):
OUTDIR/scores.csv (submission, score, max_score, one `task:<name>` column per task, status, error)
and OUTDIR/<name>/results.json; and the submitted files, DIR/<name>/<file> for each file that
assignment.json lists. Writes two files into --out (default: OUTDIR):

- report.html: one self-contained page (inline CSS, plots as base64 PNG, no external URL);
- report.csv: every number the page shows, one per row: section, subject, key, value.

Sections:
1. score distributions: per task (and the total) the graded submissions' count, mean, median,
   min, max, and a histogram of HIST_BINS equal bins over [0, max_score] (the last bin includes
   max_score, as numpy.histogram's does); only rows whose status is `graded` count;
2. the tests failed by most submissions (a test is its name without the parametrization, so
   `test_x[a]` and `test_x[b]` are one test), and their failure messages grouped by concept: the
   "Likely cause" sentence when there is one, the exception's last line for a student exception,
   else the first line, with numbers and quoted values stripped (`concept`); then the concepts
   over all tests, by the submissions whose failures name them;
3. the slowest gradings (results.json's `execution_time`, seconds);
4. problems: every row whose status is not `graded` (grader faults), every results.json that is
   missing or malformed, every submission folder without a scores.csv row and the reverse, every
   submitted file the similarity check could not read;
5. similar pairs: the submitted files compared pairwise with copydetect (winnowing over
   tokenized code, as MOSS does; names and layout are ignored), the starter's files removed as
   boilerplate. A pair's similarity is, for each side, the share of its code (token coverage,
   summed over the assignment's files) that the other side has too; a pair is flagged when the
   larger of the two reaches --threshold, and its matching code is shown side by side. The page
   and the CSV list the flagged pairs and the TOP_UNFLAGGED most similar others.

One module on purpose (over 400 lines): one command that reads one batch and writes one page; every
section is computed from the same loaded batch into one Report, which the HTML and the CSV writer both
read.
"""
from __future__ import annotations

import argparse
import base64
import csv
import html
import io
import itertools
import json
import logging
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.assignment import REPO_ROOT, Assignment, AssignmentError, load_assignment
from autograder.harness.results import CAPTURED_HEADING

EXIT_USAGE = 2
HIST_BINS = 10
# Chosen on the blind corpus (autograder/corpus/<id>/bases/: correct submissions written without
# the reference) and on renamed, reformatted copies of the references: on runs of 60 tokenized
# characters (about two lines of code) a base shares at most 0.71 of its code with the reference or
# another base (lecture 7's minimal_ordereddict; 0.41 leaving out the two "minimal" bases), a copy
# at least 0.94 (tests/tools/test_class_report.py checks both on every corpus). copydetect's defaults
# (25 characters, flagged at 0.33) flag independent submissions of these short assignments: their
# common idioms are longer than 25 characters.
NOISE_CHARS = 60
THRESHOLD = 0.8
TOP_TESTS = 15
TOP_SLOWEST = 10
TOP_UNFLAGGED = 10
# Flagged pairs whose shared code the page shows (the most similar first): a class that copied
# widely, or a threshold set low, would otherwise make a page of hundreds of megabytes.
MAX_EVIDENCE = 25
CSV_COLUMNS = ("section", "subject", "key", "value")


# ---------------------------------------------------------------------------------------------
# Reading the batch


@dataclass
class Submission:
    """One submission as the batch left it: its scores.csv row and its results.json (or why not)."""

    name: str
    row: dict[str, str] | None
    results: dict[str, Any] | None
    problem: str = ""  # why results.json could not be used, "" when it could

    @property
    def graded(self) -> bool:
        return self.row is not None and self.row.get("status") == "graded"


def read_scores(path: Path) -> list[dict[str, str]]:
    """scores.csv's rows (raises OSError when it is missing, ValueError when it has no submission column)."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        if "submission" not in (reader.fieldnames or ()):
            raise ValueError(f"{path} has no `submission` column (columns: {reader.fieldnames})")
        return list(reader)


def read_results(path: Path) -> tuple[dict[str, Any] | None, str]:
    """(results, "") for a usable results.json, else (None, what is wrong with it)."""
    if not path.is_file():
        return None, "results.json missing"
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return None, f"results.json malformed: {type(error).__name__}: {error}"
    tests = results.get("tests") if isinstance(results, dict) else None
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "name" in t and "status" in t for t in tests):
        return None, "results.json malformed: no `tests` list of objects with a name and a status"
    return results, ""


def load_batch(batch: Path, submissions: Path | None) -> list[Submission]:
    """Every submission named by scores.csv or by a folder of `submissions`, in name order."""
    rows = {row["submission"]: row for row in read_scores(batch / "scores.csv")}
    names = set(rows)
    if submissions is not None:
        names |= {p.name for p in submission_folders(submissions)}
    out = []
    for name in sorted(names):
        results, problem = read_results(batch / name / "results.json")
        out.append(Submission(name, rows.get(name), results, problem))
    return out


def submission_folders(submissions: Path) -> list[Path]:
    """The submission folders of `submissions`, as autograder.grade_all finds them."""
    return sorted(p for p in submissions.iterdir() if p.is_dir() and not p.name.startswith("."))


def number(text: Any) -> float | None:
    """A scores.csv cell as a float, None when empty or not a number."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------------
# 1. Score distributions


@dataclass
class Distribution:
    """One task's (or the total's) scores over the graded submissions."""

    name: str
    max_score: float
    scores: list[float]
    edges: list[float]
    counts: list[int]

    def stats(self) -> dict[str, float]:
        if not self.scores:
            return {"graded": 0}
        return {"graded": len(self.scores), "mean": statistics.fmean(self.scores),
                "median": statistics.median(self.scores), "min": min(self.scores), "max": max(self.scores)}


def histogram(scores: list[float], max_score: float, bins: int = HIST_BINS) -> tuple[list[float], list[int]]:
    """(edges, counts): `bins` equal bins over [0, max_score]; bin i is [edge_i, edge_i+1), the last
    one closed, so a full score lands in the last bin. A score outside [0, max_score] is clipped
    into the first or last bin (it is still a submission, and the table says what its value is)."""
    top = max_score if max_score > 0 else 1.0
    edges = [top * i / bins for i in range(bins + 1)]
    counts = [0] * bins
    for score in scores:
        # score * bins // top, not score // (top / bins): 0.9 // 0.3 is 2.0 in floating point
        counts[min(bins - 1, max(0, int(score * bins // top)))] += 1
    return edges, counts


def distributions(assignment: Assignment, subs: list[Submission]) -> list[Distribution]:
    """The total's and each task's distribution over the rows whose status is `graded`."""
    graded = [s.row for s in subs if s.graded and s.row is not None]
    columns = [("total", "score", assignment.max_score)]
    columns += [(task.name, f"task:{task.name}", task.points) for task in assignment.tasks]
    out = []
    for name, column, max_score in columns:
        scores = [v for v in (number(row.get(column)) for row in graded) if v is not None]
        edges, counts = histogram(scores, max_score)
        out.append(Distribution(name, max_score, scores, edges, counts))
    return out


def bin_label(edges: list[float], i: int) -> str:
    close = "]" if i == len(edges) - 2 else ")"
    return f"[{edges[i]:g}, {edges[i + 1]:g}{close}"


def plot_png(dist: Distribution) -> str:
    """The histogram as a base64 PNG (the same bins as the table)."""
    import matplotlib

    matplotlib.use("Agg")  # no display: render to memory
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4.2, 2.6), dpi=90)
    ax.bar(dist.edges[:-1], dist.counts, width=dist.edges[1] - dist.edges[0], align="edge",
           color="#4c78a8", edgecolor="white")
    ax.set_xlim(0, dist.edges[-1])
    ax.set_xlabel(f"points (of {dist.max_score:g})")
    ax.set_ylabel("submissions")
    ax.set_title(dist.name, fontsize=10)
    ax.yaxis.get_major_locator().set_params(integer=True)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


# ---------------------------------------------------------------------------------------------
# 2. Failed tests, grouped by concept

_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
# A value standing alone (not the 32 of float32): an int, a float, 1e-09, 0x1f, None, True, False.
# A sentence's full stop after a number is kept ("max_seq 4. The cache ...").
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|\.\d+|None|True|False)(?!\w)")
_NUMBER_LIST = re.compile(r"#(?:\s*(?:,|\.\.|\*|x)\s*#)+")
# A parenthesized aside after a space (not a call's arguments), innermost first: the inputs
# ("tiny (L=3, H=4)"), a hint some parametrizations add; taken out so the messages of one mistake
# compare equal.
_ASIDE = re.compile(r"\s+\([^()]*\)")
_PARAMS = re.compile(r"\[.*\]$")
MAX_CONCEPT_CHARS = 300


def strip_values(text: str, asides: bool = False) -> str:
    """`text` with its values replaced: quoted strings by '…', numbers (and None, True, False) by #,
    lists of numbers (a shape, a range) by one #…, and with `asides`, parenthesized asides taken
    out; so messages that differ only in the values they quote compare equal."""
    text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("#", text)
    text = _NUMBER_LIST.sub("#…", text)
    while asides and _ASIDE.search(text):
        text = _ASIDE.sub("", text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_CONCEPT_CHARS else text[: MAX_CONCEPT_CHARS - 1] + "…"


def concept(output: str) -> str:
    """The concept a failure message names, values stripped (see `strip_values`).

    The "Likely cause" sentence when the message has one; for "Your code raised an exception:"
    the exception's own line (the traceback's last); otherwise the message's first line, without
    its parenthesized asides (the inputs, which vary with the parametrization). The student's
    captured output (after results.CAPTURED_HEADING) never counts.
    """
    text = output.split(CAPTURED_HEADING, 1)[0].strip()
    if not text:
        return "(no message)"
    likely = re.search(r"Likely cause:\s*([^\n]+)", text)
    if likely:
        return strip_values("Likely cause: " + likely.group(1))
    lines = [line for line in text.splitlines() if line.strip()]
    if lines[0].startswith("Your code raised an exception"):
        # The exception line is the traceback's last unindented line; a note in parentheses (the
        # memory limit) may follow it.
        raised = [line for line in lines[1:] if not line[0].isspace() and not line.startswith(("Traceback", "("))]
        return strip_values("your code raised " + (raised[-1] if raised else "an exception"))
    return strip_values(lines[0], asides=True)


def test_key(name: str) -> str:
    """A test without its parametrization: test_x[a-1] -> test_x."""
    return _PARAMS.sub("", name)


@dataclass
class FailedTest:
    """One test (all its parametrizations, public and hidden copies) across the class."""

    name: str
    task: str
    submissions: set[str] = field(default_factory=set)
    failures: int = 0
    # concept -> the submissions whose failures named it, and one full first line as an example
    concepts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    examples: dict[str, str] = field(default_factory=dict)

    def top_concepts(self) -> list[tuple[str, int]]:
        return sorted(((c, len(s)) for c, s in self.concepts.items()), key=lambda item: (-item[1], item[0]))


def failed_tests(subs: list[Submission]) -> list[FailedTest]:
    """Every test some graded submission failed, most submissions first, then by name."""
    tests: dict[str, FailedTest] = {}
    for sub in subs:
        if sub.results is None or not sub.graded:
            continue
        for test in sub.results["tests"]:
            if test.get("status") != "failed":
                continue
            key = test_key(str(test["name"]))
            tags = test.get("tags") or [""]
            entry = tests.setdefault(key, FailedTest(key, str(tags[0])))
            entry.submissions.add(sub.name)
            entry.failures += 1
            output = str(test.get("output") or "")
            idea = concept(output)
            entry.concepts[idea].add(sub.name)
            first = next((line for line in output.splitlines() if line.strip()), "")
            entry.examples.setdefault(idea, first[:MAX_CONCEPT_CHARS])
    return sorted(tests.values(), key=lambda t: (-len(t.submissions), t.name))


def class_concepts(failed: list[FailedTest]) -> list[tuple[str, int, int]]:
    """(concept, submissions, tests) over all tests: one mistake often fails several tests with
    the same "Likely cause"; most submissions first."""
    who: dict[str, set[str]] = defaultdict(set)
    where: dict[str, int] = defaultdict(int)
    for test in failed:
        for idea, names in test.concepts.items():
            who[idea] |= names
            where[idea] += 1
    return sorted(((idea, len(who[idea]), where[idea]) for idea in who), key=lambda item: (-item[1], -item[2], item[0]))


# ---------------------------------------------------------------------------------------------
# 3-4. Slowest gradings, problems


def slowest(subs: list[Submission]) -> list[tuple[str, float]]:
    """(submission, execution_time) for every results.json that has one, slowest first."""
    times = [(s.name, float(s.results["execution_time"])) for s in subs
             if s.results is not None and isinstance(s.results.get("execution_time"), (int, float))]
    return sorted(times, key=lambda item: (-item[1], item[0]))


def problems(subs: list[Submission], submissions: Path | None) -> list[tuple[str, str, str]]:
    """(submission, kind, detail): grader faults, unusable results.json, rows or folders missing."""
    folders = {p.name for p in submission_folders(submissions)} if submissions is not None else None
    out = []
    for sub in subs:
        if sub.row is None:
            out.append((sub.name, "not graded", "a submission folder without a row in scores.csv"))
        elif sub.row.get("status") != "graded":
            out.append((sub.name, str(sub.row.get("status") or "no status"), str(sub.row.get("error") or "")))
        if sub.problem and sub.row is not None:
            out.append((sub.name, "results.json", sub.problem))
        if folders is not None and sub.name not in folders:
            out.append((sub.name, "no files", "a row of scores.csv without a submission folder: not compared"))
    return out


# ---------------------------------------------------------------------------------------------
# 5. Similar pairs (copydetect)


@dataclass
class FileEvidence:
    """One file of a pair: each side's similarity and its code, the shared parts highlighted (HTML)."""

    file: str
    similarity: tuple[float, float]
    code: tuple[str, str]


@dataclass
class Pair:
    a: str
    b: str
    similarity: tuple[float, float]  # share of a's code found in b, and of b's found in a
    files: list[FileEvidence]

    @property
    def score(self) -> float:
        return max(self.similarity)


def similar_pairs(files: tuple[str, ...], submissions: list[Path], boilerplate: Path, noise: int = NOISE_CHARS,
                  evidence_at: float = THRESHOLD) -> tuple[list[Pair], list[tuple[str, str]]]:
    """(pairs, skipped): every pair of submissions that shares any code, most similar first (see
    the module docstring), and the (submission, file) pairs left out because they are not UTF-8 text.

    Each file is compared only with the same file of the other submissions; `boilerplate`'s files
    (the starter) are removed from every fingerprint. The MAX_EVIDENCE most similar pairs whose
    similarity reaches `evidence_at` get their shared code (`Pair.files`), highlighted.
    """
    import matplotlib

    matplotlib.use("Agg")  # copydetect imports pyplot
    from copydetect import CopyDetector
    from copydetect.utils import highlight_overlap

    detector = CopyDetector(extensions=["py"], noise_t=noise, guarantee_t=noise, same_name_only=True,
                            autoopen=False, silent=True)
    owner: dict[str, str] = {}
    for folder in submissions:
        for name in files:
            path = folder / name
            if path.is_file():
                detector.add_file(str(path))
                owner[str(path)] = folder.name
    for name in files:
        if (boilerplate / name).is_file():
            detector.add_file(str(boilerplate / name), "boilerplate")
    if len(owner) < 2:
        return [], []
    detector.run()
    skipped = sorted((owner[path], Path(path).name) for path in owner if path not in detector.file_data)
    index = {path: i for i, path in enumerate(detector.test_files)}
    # per pair: overlap tokens and coverage of each side, summed over the files, and the files
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    compared: dict[tuple[str, str], list[tuple[str, str, float, float]]] = defaultdict(list)
    for first, second in itertools.combinations(sorted(owner), 2):
        if owner[first] == owner[second] or Path(first).name != Path(second).name:
            continue
        if first not in detector.file_data or second not in detector.file_data:
            continue  # not UTF-8: copydetect skipped it
        if owner[first] > owner[second]:
            first, second = second, first
        sim_first, sim_second = (max(float(x), 0.0) for x in detector.similarity_matrix[index[first], index[second]])
        cover = (detector.file_data[first].token_coverage, detector.file_data[second].token_coverage)
        key = (owner[first], owner[second])
        entry = sums[key]
        entry[0] += sim_first * cover[0]
        entry[1] += sim_second * cover[1]
        entry[2] += cover[0]
        entry[3] += cover[1]
        compared[key].append((first, second, sim_first, sim_second))
    pairs = []
    for (a, b), (shared_a, shared_b, cover_a, cover_b) in sums.items():
        similarity = (float(shared_a / cover_a) if cover_a else 0.0, float(shared_b / cover_b) if cover_b else 0.0)
        if max(similarity) > 0:
            pairs.append(Pair(a, b, similarity, []))
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    for pair in pairs[:MAX_EVIDENCE]:
        if pair.score < evidence_at:
            break  # the shared code is shown for flagged pairs only: building it costs
        for first, second, sim_first, sim_second in compared[(pair.a, pair.b)]:
            slices = detector.slice_matrix.get((first, second))
            if slices is None and (second, first) in detector.slice_matrix:
                slices = detector.slice_matrix[(second, first)][::-1]
            if slices is None:
                continue  # nothing of this file shared
            code = [highlight_overlap(detector.file_data[path].raw_code, part, "<mark>", "</mark>",
                                      truncate=6, escape_html=True)[0]
                    for path, part in ((first, slices[0]), (second, slices[1]))]
            pair.files.append(FileEvidence(Path(first).name, (sim_first, sim_second), (code[0], code[1])))
    return pairs, skipped


# ---------------------------------------------------------------------------------------------
# The report


@dataclass
class Report:
    assignment: Assignment
    subs: list[Submission]
    distributions: list[Distribution]
    failed: list[FailedTest]
    slowest: list[tuple[str, float]]
    problems: list[tuple[str, str, str]]
    pairs: list[Pair]
    threshold: float
    noise: int
    similarity_note: str = ""  # why the similarity check could not run, "" when it ran

    @property
    def flagged(self) -> list[Pair]:
        return [p for p in self.pairs if p.score >= self.threshold]

    @property
    def shown_pairs(self) -> list[Pair]:
        """The flagged pairs and the TOP_UNFLAGGED most similar of the others (a class of n has
        n(n-1)/2 pairs: the page and the CSV list only these)."""
        return self.flagged + [p for p in self.pairs if p.score < self.threshold][:TOP_UNFLAGGED]

    def rows(self) -> list[tuple[str, str, str, Any]]:
        """report.csv's rows (section, subject, key, value), in the page's order."""
        out: list[tuple[str, str, str, Any]] = []
        for dist in self.distributions:
            out.append(("distribution", dist.name, "max_score", f"{dist.max_score:g}"))
            out.extend(("distribution", dist.name, k, f"{v:.6g}") for k, v in dist.stats().items())
            out.extend(("histogram", dist.name, bin_label(dist.edges, i), c) for i, c in enumerate(dist.counts))
        for test in self.failed:
            out.append(("failed_test", test.name, "task", test.task))
            out.append(("failed_test", test.name, "submissions", len(test.submissions)))
            out.append(("failed_test", test.name, "failures", test.failures))
            out.extend(("failure_concept", test.name, c, n) for c, n in test.top_concepts())
        for idea, names, tests in class_concepts(self.failed)[:TOP_TESTS]:
            out.append(("class_concept", idea, "submissions", names))
            out.append(("class_concept", idea, "tests", tests))
        out.extend(("execution_time", name, "seconds", f"{t:.3f}") for name, t in self.slowest)
        out.extend(("problem", name, kind, detail) for name, kind, detail in self.problems)
        if self.similarity_note:
            out.append(("similarity", "", "not run", self.similarity_note))
        for pair in self.shown_pairs:
            subject = f"{pair.a} | {pair.b}"
            out.append(("similarity", subject, f"{pair.a} in {pair.b}", f"{pair.similarity[0]:.3f}"))
            out.append(("similarity", subject, f"{pair.b} in {pair.a}", f"{pair.similarity[1]:.3f}"))
            out.append(("similarity", subject, "flagged", int(pair.score >= self.threshold)))
        return out


def build_report(assignment: Assignment, batch: Path, submissions: Path | None,
                 threshold: float = THRESHOLD, noise: int = NOISE_CHARS) -> Report:
    """Everything the page shows, from the batch folder and the submitted files."""
    subs = load_batch(batch, submissions)
    pairs: list[Pair] = []
    skipped: list[tuple[str, str]] = []
    note = ""
    if submissions is None:
        note = "no --submissions folder given"
    else:
        try:
            pairs, skipped = similar_pairs(assignment.files, submission_folders(submissions), assignment.starter,
                                           noise, threshold)
        except Exception as error:  # noqa: BLE001 - the rest of the report is still worth having
            note = f"copydetect failed: {type(error).__name__}: {error}"
    unread = [(name, "not compared", f"{file} is not UTF-8 text") for name, file in skipped]
    return Report(assignment, subs, distributions(assignment, subs), failed_tests(subs), slowest(subs),
                  problems(subs, submissions) + unread, pairs, threshold, noise, note)


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(report.rows())


STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;max-width:1400px;color:#222}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
.plots{display:flex;flex-wrap:wrap;gap:.8em}.plot{border:1px solid #ddd;padding:.3em}
.side{display:grid;grid-template-columns:1fr 1fr;gap:.6em}pre{background:#fafafa;border:1px solid #ddd;
padding:.4em;overflow-x:auto;font-size:12px;margin:0}mark{background:#ffd27a}.muted{color:#666}
.flag{color:#b00;font-weight:bold}
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _table(headers: list[str], rows: list[list[Any]], numeric: Collection[int] = ()) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td class='n'>{_e(c)}</td>" if i in numeric else f"<td>{_e(c)}</td>"
                         for i, c in enumerate(row)) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(report: Report, csv_name: str = "report.csv") -> str:
    """The page: plain HTML with inline CSS; every image a data: URL."""
    a = report.assignment
    graded = sum(s.graded for s in report.subs)
    total = next(d for d in report.distributions if d.name == "total")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{_e(a.id)} class report</title>"
             f"<style>{STYLE}</style></head><body>",
             f"<h1>{_e(a.title)}: class report</h1>",
             f"<p>{len(report.subs)} submissions, {graded} graded"
             + (f"; total score mean {statistics.fmean(total.scores):.4g} of {a.max_score:g}" if total.scores else "")
             + f". Every number on this page is in <code>{_e(csv_name)}</code>.</p>"]

    parts.append("<h2>Score distributions</h2><p class='muted'>Graded submissions only (status "
                 f"<code>graded</code>); {HIST_BINS} equal bins from 0 to the maximum, the last one "
                 "including the maximum.</p>")
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
    parts.append("</div>")

    parts.append("<h2>Tests failed most often</h2>")
    if report.failed:
        parts.append(f"<p class='muted'>Of {graded} graded submissions. A test counts once per submission "
                     "whatever its parametrizations; its failure messages are grouped by the concept they "
                     "name (the \"Likely cause\" sentence, the exception raised, or the first line), numbers "
                     "and values replaced by #.</p>")
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

    parts.append("<h2>Slowest gradings</h2>")
    if report.slowest:
        times = [t for _, t in report.slowest]
        parts.append(f"<p class='muted'>results.json's execution_time; median {statistics.median(times):.3g} s "
                     f"over {len(times)}.</p>")
        parts.append(_table(["submission", "seconds"], [[n, f"{t:.3f}"] for n, t in report.slowest[:TOP_SLOWEST]], {1}))
    else:
        parts.append("<p>No results.json with an execution time.</p>")

    parts.append("<h2>Grader faults and unreadable results</h2>")
    if report.problems:
        parts.append(_table(["submission", "what", "detail"], [list(p) for p in report.problems]))
    else:
        parts.append("<p>None: every submission was graded and its results.json read.</p>")

    parts.append("<h2>Similar submissions</h2>")
    try:
        from importlib.metadata import version

        tool = f"copydetect {version('copydetect')}"
    except Exception:  # noqa: BLE001 - only a label
        tool = "copydetect"
    parts.append(f"<p class='muted'>{_e(tool)}: tokenized code (names, strings and layout ignored) "
                 f"fingerprinted on runs of {report.noise} characters, the starter's code removed as "
                 "boilerplate, each file compared with the same file of every other submission. "
                 "Similarity of a side: the share of its code found in the other. A pair is flagged at "
                 f"{report.threshold:.2f} or more on either side. Flagged pairs are for a person to read, "
                 "not a verdict.</p>")
    if report.similarity_note:
        parts.append(f"<p class='flag'>Not run: {_e(report.similarity_note)}</p>")
    flagged = report.flagged
    if flagged:
        parts.append(_table(["submission A", "submission B", "A in B", "B in A"],
                            [[p.a, p.b, f"{p.similarity[0]:.2f}", f"{p.similarity[1]:.2f}"] for p in flagged], {2, 3}))
        if len(flagged) > MAX_EVIDENCE:
            parts.append(f"<p>The shared code of the {MAX_EVIDENCE} most similar pairs:</p>")
        for pair in flagged[:MAX_EVIDENCE]:
            parts.append(f"<h3 class='flag'>{_e(pair.a)} and {_e(pair.b)}: {pair.score:.2f}</h3>")
            for ev in pair.files:
                parts.append(f"<p>{_e(ev.file)}: {ev.similarity[0]:.2f} of {_e(pair.a)}'s code, "
                             f"{ev.similarity[1]:.2f} of {_e(pair.b)}'s (shared code highlighted)</p>")
                # ev.code is copydetect's HTML: the code escaped, the shared slices in <mark>.
                parts.append(f"<div class='side'><div><b>{_e(pair.a)}</b><pre>{ev.code[0]}</pre></div>"
                             f"<div><b>{_e(pair.b)}</b><pre>{ev.code[1]}</pre></div></div>")
    elif not report.similarity_note:
        parts.append("<p>No pair reaches the threshold.</p>")
    rest = [p for p in report.shown_pairs if p.score < report.threshold]
    if rest:
        parts.append("<p>The most similar pairs below the threshold:</p>")
        parts.append(_table(["submission A", "submission B", "A in B", "B in A"],
                            [[p.a, p.b, f"{p.similarity[0]:.2f}", f"{p.similarity[1]:.2f}"] for p in rest], {2, 3}))
    parts.append("</body></html>")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.class_report", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--batch", required=True, type=Path, help="the batch grading's output folder (scores.csv)")
    parser.add_argument("--submissions", type=Path, help="the folder of submission folders that was graded")
    parser.add_argument("--out", type=Path, help="where report.html and report.csv go (default: --batch)")
    parser.add_argument("--threshold", type=float, default=THRESHOLD,
                        help=f"similarity at which a pair is flagged, 0..1 (default: {THRESHOLD})")
    parser.add_argument("--noise", type=int, default=NOISE_CHARS,
                        help=f"shortest match counted, in tokenized characters (default: {NOISE_CHARS})")
    args = parser.parse_args(argv)
    try:
        assignment = load_assignment(args.assignment, REPO_ROOT)
    except AssignmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not (args.batch / "scores.csv").is_file():
        print(f"error: {args.batch / 'scores.csv'} not found: --batch must be a batch grading's output folder",
              file=sys.stderr)
        return EXIT_USAGE
    if args.submissions is not None and not args.submissions.is_dir():
        print(f"error: --submissions must be a folder (got {args.submissions})", file=sys.stderr)
        return EXIT_USAGE
    if not 0 <= args.threshold <= 1 or args.noise < 1:
        print("error: --threshold must be within 0..1 and --noise at least 1", file=sys.stderr)
        return EXIT_USAGE
    logging.getLogger().setLevel(logging.ERROR)  # copydetect warns once per file it skips
    try:
        report = build_report(assignment, args.batch, args.submissions, args.threshold, args.noise)
    except (OSError, ValueError) as error:
        print(f"error: cannot read {args.batch / 'scores.csv'}: {error}", file=sys.stderr)
        return EXIT_USAGE
    out = args.out or args.batch
    out.mkdir(parents=True, exist_ok=True)
    write_csv(report, out / "report.csv")
    (out / "report.html").write_text(render_html(report), encoding="utf-8")
    print(f"{len(report.subs)} submissions, {len(report.problems)} problem(s), {len(report.flagged)} flagged "
          f"pair(s); report in {out / 'report.html'} and {out / 'report.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
