"""The class report's data (autograder.class_report is its command): one batch grading read into one
`Report` (the students, distributions, pass rates, failed tests grouped by concept, slowest gradings,
problems, similar pairs), which the page (autograder.report_page), the CSV and the feedback pages are
written from.

One module on purpose (over 400 lines): one Report and the readers that fill it, each small, which
the page, the CSV and the feedback pages all read.
"""
from __future__ import annotations

import ast
import builtins
import csv
import json
import math
import re
import shutil
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.assignment import Assignment
from autograder.feedback import feedback_page
from autograder.harness.feedback_text import build_feedback
from autograder.harness.results import CAPTURED_HEADING
from autograder.similarity import NOISE_CHARS, THRESHOLD, Budget, Pair, Skipped, compare

HIST_BINS = 10
TOP_TESTS = 15
TOP_SLOWEST = 10
TOP_UNFLAGGED = 10
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


def strip_values(text: str, asides: bool = False, lines: bool = False) -> str:
    """`text` with its values replaced: quoted strings by '…', numbers (and None, True, False) by #,
    lists of numbers (a shape, a range) by one #…, and with `asides`, parenthesized asides taken
    out; so messages that differ only in the values they quote compare equal. With `lines`, every
    line is kept whole (no length limit), its spaces collapsed."""
    text = _QUOTED.sub("'…'", text)
    text = _NUMBER.sub("#", text)
    text = _NUMBER_LIST.sub("#…", text)
    while asides and _ASIDE.search(text):
        text = _ASIDE.sub("", text)
    if lines:  # the line breaks kept (a source's literal, split into lines afterwards)
        return "\n".join(" ".join(line.split()) for line in text.split("\n"))
    text = " ".join(text.split())
    return text if len(text) <= MAX_CONCEPT_CHARS else text[: MAX_CONCEPT_CHARS - 1] + "…"


# A piece of the grader's own text shorter than this is too common to tell the grader from a student.
MIN_GRADER_PIECE = 8


class GraderWords:
    """The grader's own text: every string literal (and literal part of an f-string) of the tests
    and the harness, split into lines. A failure message mixes it with values and with text from
    the student's code (an exception's message, a returned object's repr): `mask` keeps only the
    grader's pieces, so the student cannot choose the concept a failure is grouped under."""

    def __init__(self, pieces: set[str]) -> None:
        self.pieces = sorted(pieces, key=len, reverse=True)
        self._masked: dict[str, str] = {}

    @classmethod
    def of(cls, sources: list[Path]) -> GraderWords:
        pieces: set[str] = set()
        for path in sources:
            try:
                tree = ast.parse(path.read_text(encoding="utf-8"))
            except (OSError, SyntaxError, UnicodeDecodeError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    # Lines and sentences: a message may quote one sentence of a longer literal.
                    pieces.update(piece.strip() for piece in re.split(r"\n|(?<=\.) ", strip_values(node.value, lines=True))
                                  if len(piece.strip()) >= MIN_GRADER_PIECE)
        return cls(pieces)

    def mask(self, line: str) -> str:
        """`line` with every run not covered by a piece of the grader's text, and holding a letter,
        replaced by "…" (runs of digits and punctuation are values, which strip_values replaces)."""
        if line not in self._masked:
            covered = [False] * len(line)
            for piece in self.pieces:
                at = line.find(piece)
                while at >= 0:
                    covered[at:at + len(piece)] = [True] * len(piece)
                    at = line.find(piece, at + 1)
            out, run = [], []
            for char, mine in zip(line, covered):
                if mine:
                    if run:
                        out.append("…" if any(c.isalpha() for c in run) else "".join(run))
                        run = []
                    out.append(char)
                else:
                    run.append(char)
            if run:
                out.append("…" if any(c.isalpha() for c in run) else "".join(run))
            self._masked[line] = "".join(out)
        return self._masked[line]


def grader_words(assignment: Assignment) -> GraderWords:
    """The grader's text of `assignment`: its public and hidden tests, the course's test helpers
    (kvlab/testing) and the harness, which writes the messages about exceptions and limits."""
    root = assignment.root
    folders = [assignment.public_tests, assignment.hidden_tests, root / "kvlab" / "testing", root / "autograder" / "harness"]
    return GraderWords.of(sorted(path for folder in folders if folder.is_dir() for path in folder.glob("*.py")))


def concept(output: str, words: GraderWords | None = None) -> str:
    """The concept a failure message names, in the grader's own words (`words.mask`; every word
    counts as the grader's when `words` is None), values stripped (see `strip_values`).

    For "Your code raised an exception:" (the harness's words, then the student's traceback), the
    exception's class when Python defines it, else "an exception of its own class". Otherwise the
    last "Likely cause" sentence that holds the grader's words, or else the message's first line,
    without its parenthesized asides (the inputs, which vary with the parametrization). The
    student's captured output (after results.CAPTURED_HEADING) never counts.
    """
    text = output.split(CAPTURED_HEADING, 1)[0].strip()
    if not text:
        return "(no message)"
    lines = [line for line in text.splitlines() if line.strip()]
    if lines[0].startswith("Your code raised an exception"):
        # The exception line is the traceback's last unindented line; a note in parentheses (the
        # memory limit) may follow it. Its message, and a class of the student's, are the student's.
        raised = [line for line in lines[1:] if not line[0].isspace() and not line.startswith(("Traceback", "("))]
        kind = raised[-1].split(":", 1)[0].strip() if raised else ""
        builtin = isinstance(getattr(builtins, kind, None), type) and issubclass(getattr(builtins, kind), BaseException)
        return "your code raised " + (kind if builtin else "an exception of its own class")
    # Values first (the grader's pieces hold none), then whatever is not the grader's.
    mask = (lambda line: words.mask(strip_values(line))) if words is not None else strip_values
    for line in reversed(lines):
        for cause in reversed(re.findall(r"Likely cause:\s*([^\n]+)", mask(line))):
            # The grader's sentence, not a "Likely cause:" of the student's followed by theirs.
            if not cause.startswith("…") and len(cause.replace("…", "").strip(" .,;:#")) >= MIN_GRADER_PIECE:
                return strip_values("Likely cause: " + cause)
    return strip_values(mask(lines[0]), asides=True)


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
    # concept -> the submissions whose failures named it
    concepts: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def top_concepts(self) -> list[tuple[str, int]]:
        return sorted(((c, len(s)) for c, s in self.concepts.items()), key=lambda item: (-item[1], item[0]))


def failed_tests(subs: list[Submission], words: GraderWords | None = None) -> list[FailedTest]:
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
            idea = concept(output, words)
            entry.concepts[idea].add(sub.name)
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
# 6-7. Every test's pass rate; the students


@dataclass
class TestRate:
    """One test (all its parametrizations): the graded submissions that passed all of it."""

    name: str
    task: str
    passed: int
    graded: int

    @property
    def rate(self) -> float:
        return self.passed / self.graded if self.graded else 0.0


def pass_rates(assignment: Assignment, subs: list[Submission]) -> list[TestRate]:
    """Every test any graded results.json lists, in assignment.json's task order, then by name."""
    failed: dict[str, set[str]] = defaultdict(set)
    seen: dict[str, set[str]] = defaultdict(set)
    tasks: dict[str, str] = {}
    for sub in subs:
        if sub.results is None or not sub.graded:
            continue
        for test in sub.results["tests"]:
            key = test_key(str(test["name"]))
            tasks.setdefault(key, str((test.get("tags") or [""])[0]))
            seen[key].add(sub.name)
            if test.get("status") != "passed":
                failed[key].add(sub.name)
    order = {task.name: i for i, task in enumerate(assignment.tasks)}
    rates = [TestRate(key, tasks[key], len(seen[key] - failed[key]), len(seen[key])) for key in seen]
    return sorted(rates, key=lambda r: (order.get(r.task, len(order)), r.name))


# What nbgrader knows of each submission, written by autograder.nbgrader_grade beside scores.csv.
NBGRADER_CSV = "nbgrader.csv"


@dataclass
class Student:
    """One row of the per-student table."""

    name: str
    status: str
    score: float | None
    tasks: dict[str, float | None]
    submitted: str = ""  # nbgrader's timestamp to the second, "" when the batch does not know it
    late: str = ""  # how late (h:mm:ss) and the penalty, "" when on time or unknown
    feedback: str = ""  # the feedback page's path relative to the report, "" when there is none


def feedback_file(index: int, name: str) -> str:
    """feedback/<n>-<name>.html with the name's unsafe characters replaced (the index keeps two
    names that differ only in those apart)."""
    return f"feedback/{index:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', name)[:60]}.html"


def lateness(seconds: float | None) -> str:
    """`seconds` after the due date as "h:mm:ss late", rounded up (a submission half a second late is
    not "0:00:00 late"); "" when on time or unknown."""
    if not seconds or seconds <= 0:
        return ""
    whole = math.ceil(seconds)
    return f"{whole // 3600}:{whole % 3600 // 60:02d}:{whole % 60:02d} late"


def students(assignment: Assignment, subs: list[Submission], batch: Path) -> list[Student]:
    """A row per submission: status, scores, nbgrader's timestamp and lateness (when the batch is
    nbgrader's), and its feedback page (when it has results)."""
    known: dict[str, dict[str, str]] = {}
    try:
        known = {row["submission"]: row for row in read_scores(batch / NBGRADER_CSV)}
    except (OSError, ValueError, KeyError):
        pass  # not an nbgrader batch
    out = []
    for index, sub in enumerate(subs, start=1):
        row = sub.row or {}
        extra = known.get(sub.name, {})
        late = lateness(number(extra.get("seconds_late")))
        penalty = number(extra.get("late_penalty"))
        if late and penalty:
            late += f", {penalty:g} point(s) off"
        out.append(Student(sub.name, str(row.get("status") or "not graded"), number(row.get("score")),
                           {task.name: number(row.get(f"task:{task.name}")) for task in assignment.tasks},
                           re.sub(r"\.\d+", "", extra.get("timestamp", "")), late,  # to the second
                           feedback_file(index, sub.name) if sub.results is not None else ""))
    return out


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
    rates: list[TestRate]
    students: list[Student]
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
        for rate in self.rates:
            out.append(("pass_rate", rate.name, "passed", rate.passed))
            out.append(("pass_rate", rate.name, "graded", rate.graded))
        for student in self.students:
            out.append(("student", student.name, "status", student.status))
            out.append(("student", student.name, "score", "" if student.score is None else f"{student.score:g}"))
            out.extend(("student", student.name, f"task:{task}", "" if v is None else f"{v:g}")
                       for task, v in student.tasks.items())
            if student.submitted:
                out.append(("student", student.name, "submitted", student.submitted))
            if student.late:
                out.append(("student", student.name, "late", student.late))
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
                 threshold: float = THRESHOLD, noise: int = NOISE_CHARS, budget: Budget | None = None) -> Report:
    """Everything the page shows, from the batch folder and the submitted files."""
    subs = load_batch(batch, submissions)
    pairs: list[Pair] = []
    skipped: list[Skipped] = []
    note = ""
    if submissions is None:
        note = "no --submissions folder given"
    else:
        try:
            pairs, skipped, note = compare(assignment.files, submission_folders(submissions), assignment.starter,
                                           noise, threshold, budget)
        except Exception as error:  # noqa: BLE001 - the rest of the report is still worth having
            note = f"the comparison failed: {type(error).__name__}: {error}"
    unread = [(s.submission, "not compared", f"{s.file}: {s.reason}") for s in skipped]
    return Report(assignment, subs, distributions(assignment, subs), failed_tests(subs, grader_words(assignment)),
                  slowest(subs), problems(subs, submissions) + unread, pairs, threshold, noise,
                  pass_rates(assignment, subs), students(assignment, subs, batch), note)


def write_csv(report: Report, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        writer.writerows(report.rows())


def write_feedback_pages(report: Report, out: Path) -> None:
    """out/feedback/: each student's feedback page (autograder.feedback), as the student reads it."""
    folder = out / "feedback"
    if folder.exists():
        shutil.rmtree(folder)  # an earlier report's pages may name students no longer in the batch
    folder.mkdir(parents=True)
    titles = {task.name: task.title for task in report.assignment.tasks}
    for sub, student in zip(report.subs, report.students):
        if student.feedback and sub.results is not None:
            page = feedback_page(build_feedback(sub.results, report.assignment.title, sub.name, titles))
            (out / student.feedback).write_text(page, encoding="utf-8")
