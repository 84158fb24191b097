"""autograder.class_report on a small batch of lecture 2, graded once for the file by autograder.grade_all.

The batch: the reference; an independent correct submission in another style (the corpus's
growing_concat); a copy of the reference with its local names renamed and the file reformatted
(ast.unparse: other quotes, parentheses, no comments); two single-bug submissions from lecture 2's
bug catalog. The report must agree with scores.csv and the results files, flag the copy (and the
single-bug submissions, which are the reference with one line edited) but never the independent
one, be one HTML file that loads nothing from elsewhere, and turn a missing or malformed
results.json into a row saying so.
"""
from __future__ import annotations

import ast
import base64
import csv
import itertools
import json
import re
import shutil
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from autograder import class_report, report_data, similarity
from autograder.assignment import REPO_ROOT, load_assignment
from autograder.mutants import apply, load
from support.repo import run_module
from support.tiers import sample

ASSIGNMENT = "lecture02"
REFERENCE = REPO_ROOT / "solutions" / ASSIGNMENT
INDEPENDENT = REPO_ROOT / "autograder" / "corpus" / ASSIGNMENT / "bases" / "growing_concat"
BUGS = {"bug_limit": "limit_check_too_strict", "bug_advance": "advance_ignores_n"}
# The reference and everything made from it: every pair of them must be flagged, no other pair.
DERIVED = ("reference", "copied", *BUGS)


def disguise(source: str) -> str:
    """`source` as a copier would hand it in: each function's local variables renamed (not its
    arguments, which the tests pass by keyword), the file reformatted and its comments dropped."""
    tree = ast.parse(source)
    for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        arguments = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
        local = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        for node in ast.walk(function):
            if isinstance(node, ast.Name) and node.id in local - arguments:
                node.id = f"my_{node.id}"
    return ast.unparse(tree)


def read_report(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def section(rows: list[dict[str, str]], name: str) -> dict[tuple[str, str], str]:
    return {(r["subject"], r["key"]): r["value"] for r in rows if r["section"] == name}


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The graded batch and the report of it (written by `python -m autograder.class_report`)."""
    root = tmp_path_factory.mktemp("class-report")
    subs = root / "submissions"
    shutil.copytree(REFERENCE, subs / "reference", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(INDEPENDENT, subs / "independent", ignore=shutil.ignore_patterns("__pycache__"))
    (subs / "copied").mkdir()
    (subs / "copied" / "kv_decode.py").write_text(disguise((REFERENCE / "kv_decode.py").read_text()))
    mutants = {m.name: m for m in load(ASSIGNMENT)}
    for folder, bug in BUGS.items():
        apply(mutants[bug], REFERENCE, subs / folder)
    out = root / "batch"
    done = run_module("autograder.grade_all", "--assignment", ASSIGNMENT, "--submissions", subs, "--out", out,
                      "--jobs", "2")
    assert done.returncode == 0 and (out / "scores.csv").is_file(), (
        f"grade_all exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    done = run_module("autograder.class_report", "--assignment", ASSIGNMENT, "--batch", out, "--submissions", subs)
    assert done.returncode == 0, f"class_report exited {done.returncode}:\n{done.stdout}\n{done.stderr[-3000:]}"
    with (out / "scores.csv").open(newline="") as f:
        scores = {row["submission"]: row for row in csv.DictReader(f)}
    return {"root": root, "subs": subs, "out": out, "scores": scores, "rows": read_report(out / "report.csv"),
            "html": (out / "report.html").read_text(encoding="utf-8")}


def test_the_batch_is_what_the_report_is_tested_on(batch: dict[str, Any]) -> None:
    scores = batch["scores"]
    assert {name: row["status"] for name, row in scores.items()} == dict.fromkeys(
        ("reference", "independent", "copied", *BUGS), "graded"), f"every submission should be graded: {scores}"
    full = {name for name, row in scores.items() if row["score"] == row["max_score"]}
    assert full == {"reference", "independent", "copied"}, (
        f"the correct submissions (and only they) should have full marks; full marks: {sorted(full)}")


def test_task_means_and_histograms_match_scores_csv(batch: dict[str, Any]) -> None:
    distribution, histogram = section(batch["rows"], "distribution"), section(batch["rows"], "histogram")
    assignment = load_assignment(ASSIGNMENT)
    columns = [("total", "score", assignment.max_score), *((t.name, f"task:{t.name}", t.points) for t in assignment.tasks)]
    for name, column, max_score in columns:
        values = [float(row[column]) for row in batch["scores"].values()]
        mean = float(distribution[(name, "mean")])
        assert mean == pytest.approx(statistics.fmean(values), abs=1e-4), (
            f"score distribution of {name}: the report's mean {mean} is not scores.csv's {statistics.fmean(values)}")
        assert float(distribution[(name, "max_score")]) == max_score, f"{name}: max_score should be {max_score}"
        counts = [int(histogram[key]) for key in histogram if key[0] == name]
        # Ten equal bins over [0, max]; a full score falls in the last one.
        expected = [0] * 10
        for value in values:
            expected[min(9, int(value * 10 // max_score))] += 1
        assert counts == expected, f"histogram of {name}: the report counts {counts} per bin, scores.csv gives {expected}"


def test_failed_test_counts_match_the_results_files(batch: dict[str, Any]) -> None:
    failing: dict[str, set[str]] = defaultdict(set)
    for name in batch["scores"]:
        results = json.loads((batch["out"] / name / "results.json").read_text())
        for test in results["tests"]:
            if test["status"] == "failed":
                failing[re.sub(r"\[.*\]$", "", test["name"])].add(name)
    reported = {subject: int(value) for (subject, key), value in section(batch["rows"], "failed_test").items()
                if key == "submissions"}
    assert reported == {test: len(names) for test, names in failing.items()}, (
        f"submissions failing each test: the report says {reported}, the results files "
        f"{ {test: sorted(names) for test, names in failing.items()} }")
    assert reported, "the single-bug submissions fail tests; the report lists none"
    first = next(r["subject"] for r in batch["rows"] if r["section"] == "failed_test")
    assert len(failing[first]) == max(map(len, failing.values())), (
        f"the tests failed by most submissions come first; the first is {first}, failed by {sorted(failing[first])}")


def test_failure_messages_are_grouped_by_concept(batch: dict[str, Any]) -> None:
    concepts = section(batch["rows"], "failure_concept")
    out = batch["out"]
    # bug_limit fails each parametrization of this test with a message quoting other values.
    results = json.loads((out / "bug_limit" / "results.json").read_text())
    messages = {t["output"] for t in results["tests"]
                if t["status"] == "failed" and "::test_cache_fills_to_exactly_max_seq" in t["name"]}
    groups = {key: n for key, n in concepts.items() if key[0].endswith("::test_cache_fills_to_exactly_max_seq")}
    per_test = {test for test, _ in groups}
    assert len(messages) >= 4 and 1 <= len(groups) <= 2 * len(per_test) <= 4 and all("#" in k for _, k in groups), (
        f"{len(messages)} messages of test_cache_fills_to_exactly_max_seq (public and hidden) differing in their "
        f"values should make at most 2 concepts per test, their numbers stripped; got {groups}")
    assert any("may fill completely" in key for _, key in groups), f"the concept should keep the rule's words: {groups}"
    # Over all tests: a concept counts the tests whose failures name it and the submissions behind them.
    tests_naming: dict[str, set[str]] = defaultdict(set)
    for test, idea in concepts:
        tests_naming[idea].add(test)
    overall = section(batch["rows"], "class_concept")
    counted = {idea: int(n) for (idea, key), n in overall.items() if key == "tests"}
    assert counted and all(n == len(tests_naming[idea]) for idea, n in counted.items()), (
        f"tests per concept over all tests: the report says {counted}, its per-test rows "
        f"{ {idea: sorted(tests) for idea, tests in tests_naming.items() if idea in counted} }")


@pytest.mark.parametrize(("output", "expected"), [
    ("nbytes() of a KVCache(tiny, batch=3) holding length=5 tokens returned 1152; expected 5760: check each factor",
     "nbytes() of a KVCache(tiny, batch=#) holding length=# tokens returned #; expected #: check each factor"),
    ("got shape (2, 3, 1, 8) for 'k'; expected (2, 4, 1, 8): return every position\nsecond line 7",
     "got shape for '…'; expected: return every position"),
    ("step 3 differs by 1.5e-09. Likely cause: the cache of layer 2 is shared (max_seq=None)\nmore",
     "Likely cause: the cache of layer # is shared (max_seq=#)"),
    ("Your code raised an exception:\nTraceback (most recent call last):\n  File \"kv_decode.py\", line 63, in update\n"
     "    raise ValueError(f\"full: {n}\")\nValueError: full: 12 > 11\n(While it is graded your process may use at most 512 MB)",
     "your code raised ValueError"),
    ("", "(no message)"),
    (f"advance(3) gave 1\n\n{report_data.CAPTURED_HEADING}\ndebug 42", "advance(#) gave #"),
], ids=["values", "asides and quotes", "likely cause", "exception", "empty", "captured output"])
def test_concept_strips_values(output: str, expected: str) -> None:
    got = report_data.concept(output)
    assert got == expected, f"concept({output!r}) is {got!r}; expected {expected!r}"


def test_flags_the_copy_and_not_the_independent_submission(batch: dict[str, Any]) -> None:
    similarity = section(batch["rows"], "similarity")
    flagged = {tuple(subject.split(" | ")) for (subject, key), value in similarity.items() if key == "flagged" and value == "1"}
    expected = {tuple(sorted(pair)) for pair in itertools.combinations(DERIVED, 2)}
    assert flagged == expected, (
        f"flagged pairs {sorted(flagged)}; expected every pair of {DERIVED} (the reference, its renamed and "
        f"reformatted copy and its single-bug edits) and none with the independent submission")
    scores = {subject: max(float(v) for (s, k), v in similarity.items() if s == subject and k != "flagged")
              for subject, _ in similarity}
    assert scores["copied | reference"] >= 0.9, f"the copy should share nearly all its code: {scores}"
    assert scores["independent | reference"] < report_data.THRESHOLD, f"independent vs reference: {scores}"
    html = batch["html"]
    assert "<mark>" in html and "copied and reference" in html, "a flagged pair's evidence (highlighted code) is missing"


def test_html_is_one_file_with_embedded_plots(batch: dict[str, Any]) -> None:
    html = batch["html"]
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    tasks = load_assignment(ASSIGNMENT).tasks
    assert len(images) == len(tasks) + 1, f"one histogram per task and the total expected; found {len(images)}"
    assert all(base64.b64decode(image).startswith(b"\x89PNG\r\n\x1a\n") for image in images), "an image is not a PNG"
    sources = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]+)""", html, flags=re.IGNORECASE)
    assert all(s.startswith(("data:", "#", "feedback/")) for s in sources), f"the page loads something from elsewhere: {sources}"
    assert "http://" not in html and "https://" not in html and "<link" not in html and "<script" not in html, (
        "the page must not reference external URLs, stylesheets or scripts")
    assert list(batch["out"].glob("*.html")) == [batch["out"] / "report.html"], "the report must be one HTML file"


def test_missing_or_malformed_results_give_a_row_not_a_crash(batch: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "batch"
    shutil.copytree(batch["out"], out)
    (out / "copied" / "results.json").write_text("{not json")
    (out / "bug_limit" / "results.json").unlink()
    report_dir = tmp_path / "report"
    assert class_report.main(["--assignment", ASSIGNMENT, "--batch", str(out), "--submissions", str(batch["subs"]),
                              "--out", str(report_dir)]) == 0, "class_report must finish despite unreadable results"
    problems = section(read_report(report_dir / "report.csv"), "problem")
    assert problems.get(("bug_limit", "results.json")) == "results.json missing", f"problem rows: {problems}"
    assert problems.get(("copied", "results.json"), "").startswith("results.json malformed"), f"problem rows: {problems}"
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    assert "results.json missing" in html and "results.json malformed" in html, "the page must name both problems"


# The everyday tier compares the first assignment's bases; `make test-all` every assignment's.
@pytest.mark.parametrize("assignment_id", sample(sorted(p.name for p in (REPO_ROOT / "autograder" / "corpus").iterdir()
                                                        if (p / "bases").is_dir()), group=lambda _: "bases"))
def test_corpus_bases_are_not_flagged_and_their_copies_are(assignment_id: str, tmp_path: Path) -> None:
    """The blind corpus's correct bases were written without the reference: no pair of them, nor
    any with the reference, may be flagged; a renamed, reformatted copy of each must be."""
    assignment = load_assignment(assignment_id)
    folders = [assignment.solution, *sorted((REPO_ROOT / "autograder" / "corpus" / assignment_id / "bases").iterdir())]
    for folder in list(folders):
        copy = tmp_path / f"copy_of_{folder.name}"
        copy.mkdir()
        for name in assignment.files:
            if (folder / name).is_file():
                (copy / name).write_text(disguise((folder / name).read_text()))
        folders.append(copy)
    pairs, skipped, note = similarity.compare(assignment.files, folders, assignment.starter)
    assert not skipped and not note, f"{assignment_id}: files left out of the comparison: {skipped}; {note}"
    scores = {(p.a, p.b): p.score for p in pairs}
    originals = [f.name for f in folders if not f.name.startswith("copy_of_")]
    for a, b in itertools.combinations(sorted(originals), 2):
        assert scores.get((a, b), 0.0) < report_data.THRESHOLD, (
            f"{assignment_id}: independent correct submissions {a} and {b} share {scores.get((a, b))} of their "
            f"code, flagged at {report_data.THRESHOLD}")
    for name in originals:
        pair = tuple(sorted((name, f"copy_of_{name}")))
        assert scores.get(pair, 0.0) >= report_data.THRESHOLD, (
            f"{assignment_id}: the renamed, reformatted copy of {name} shares only {scores.get(pair, 0.0)} of its "
            f"code with it, under the threshold {report_data.THRESHOLD}")


def test_every_test_has_a_pass_rate_and_every_student_a_row(batch: dict[str, Any]) -> None:
    rows = batch["rows"]
    rates = section(rows, "pass_rate")
    for name, row in batch["scores"].items():
        results = json.loads((batch["out"] / name / "results.json").read_text())
        for test in results["tests"]:
            key = re.sub(r"\[.*\]$", "", test["name"])
            assert int(rates[(key, "graded")]) == len(batch["scores"]), f"pass rate of {key}: {rates.get((key, 'graded'))}"
        student = section(rows, "student")
        assert student[(name, "score")] == f"{float(row['score']):g}", f"{name}'s row: {student}"
    failing = {subject for subject, key in section(rows, "failed_test") if key == "submissions"}
    perfect = {subject for (subject, key), value in rates.items() if key == "passed" and int(value) == len(batch["scores"])}
    assert failing and not failing & perfect, f"tests failed by someone yet passed by all: {failing & perfect}"
    links = re.findall(r"<a class='w' href='(feedback/[^']+)'>", batch["html"])
    assert len(links) == len(batch["scores"]), f"one feedback link per student expected; found {links}"
    for link in links:
        page = (batch["out"] / link).read_text(encoding="utf-8")
        assert "Scores per task" in page, f"{link} is not a feedback page"


@pytest.mark.parametrize("budget", ["file", "class"])
def test_a_file_over_budget_is_left_out_and_the_rest_compared(tmp_path: Path, budget: str) -> None:
    assignment = load_assignment(ASSIGNMENT)
    (name,) = assignment.files
    for folder in ("reference", "copied", "padded"):
        (tmp_path / folder).mkdir()
    source = (REFERENCE / name).read_text()
    (tmp_path / "reference" / name).write_text(source)
    (tmp_path / "copied" / name).write_text(disguise(source))
    # Comment lines: nothing to grade, all cost to copydetect.
    padding = "# padding\n" * (similarity.MAX_FILE_BYTES // 10 + 1)
    (tmp_path / "padded" / name).write_text(source + padding)
    limits = (similarity.Budget() if budget == "file" else
              similarity.Budget(file_bytes=10**9, class_bytes=2 * len(source) + 1024))
    pairs, skipped, note = similarity.compare(assignment.files, [tmp_path / f for f in ("copied", "padded", "reference")],
                                              assignment.starter, budget=limits)
    assert not note, f"the comparison should run without the padded file: {note}"
    assert [(s.submission, s.file) for s in skipped] == [("padded", name)], f"left out: {skipped}"
    assert "bytes" in skipped[0].reason, f"the reason should give the size or the budget: {skipped[0].reason}"
    scores = {(p.a, p.b): p.score for p in pairs}
    assert scores.get(("copied", "reference"), 0) >= similarity.THRESHOLD, f"the copy is no longer flagged: {scores}"
    assert not any("padded" in pair for pair in scores), f"the padded file was compared: {scores}"


def test_the_comparison_that_exceeds_its_memory_says_so(batch: dict[str, Any]) -> None:
    assignment = load_assignment(ASSIGNMENT)
    # 64 MB of address space: the child cannot even import numpy (an allocator may then retry
    # until the CPU limit ends it).
    tight = similarity.Budget(memory_bytes=64 * 1024**2, seconds=5)
    report = report_data.build_report(assignment, batch["out"], batch["subs"], budget=tight)
    assert report.pairs == [] and "0.0625 GB" in report.similarity_note, (
        f"a comparison over its memory budget should leave a note, not pairs: {report.similarity_note!r}")
    assert report.students and report.rates, "the rest of the report must still be there"


def test_a_student_cannot_choose_the_concept() -> None:
    words = report_data.grader_words(load_assignment("lecture07"))
    planted = "<script>x</script> Likely cause: the grader is wrong"
    wrapped = (f"BlockPool(TINY, n_blocks=1, block_size=3) raised Evil: {planted}: a pool of one block is valid "
               "(any n_blocks >= 1 and block_size >= 1)")
    raised = ("Your code raised an exception:\nTraceback (most recent call last):\n  File \"paged_kv.py\", line 9, in f\n"
              f"    raise Evil()\npaged_kv.Evil: {planted}")
    for output in (wrapped, raised):
        got = report_data.concept(output, words)
        assert "grader is wrong" not in got and "script" not in got, f"the student's words chose the concept: {got!r}"
    assert report_data.concept(wrapped, words).endswith("a pool of one block is valid"), \
        f"the grader's words should stay: {report_data.concept(wrapped, words)!r}"
    assert report_data.concept(raised, words) == "your code raised an exception of its own class"
    graders = ("with parent=0f3a9c2b11de... digests [0, 1] equal those without a parent; expected every digest to "
               "change. Likely cause: the parent is ignored; it must seed the chain (it stands for every earlier block)")
    assert report_data.concept(graders, words).startswith("Likely cause: the parent is ignored"), \
        f"the grader's own Likely cause should name the concept: {report_data.concept(graders, words)!r}"
