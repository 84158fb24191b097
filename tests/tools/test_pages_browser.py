"""The pages people read, opened in headless Chromium at 1,280 px: the student's feedback page
(autograder.feedback, as make nbgrader-grade writes it) and the class report with its links.

The results are built by the harness's own results.graded_results from test records (no grading:
these tests check what a reader sees, not the scores), for a class with a hostile student whose
folder name, exception class, messages and code carry markup. Each page must fit the width (no
horizontal scrolling, with every collapsed part opened), have every section, show the failed tests
before the passed ones, name no folder of the grading machine, and show the markup as text: no
script runs, no element comes from a submission.

Chromium is Debian's /usr/bin/chromium driven by Playwright's Python client (never `playwright
install`); without it the tests skip, saying so.
"""
from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autograder import class_report, nbgrader_grade
from autograder.assignment import REPO_ROOT, load_assignment
from autograder.feedback import feedback_page
from autograder.harness.results import GradedTest, graded_results
from autograder.report_page import SECTIONS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
WIDTH = 1280
ASSIGNMENT = "lecture07"
HOSTILE = "<img src=x onerror=document.title='pwned'>"
SCRIPT = "<script>document.title='pwned'</script>"
# Text from the grading machine that must not reach a student's page.
ISOLATION = ["private filesystem view (bubblewrap): hidden: /tmp/kvlab-autograder-0jk3_w7m/results, /work/course",
             "bound back read-only inside them: /work/course/.venv/lib/python3.11/site-packages",
             "network disabled (own network namespace)"]
LATE = "Submitted 0:40:00 late (h:mm:ss after the due date): the course's late policy takes 1 point(s), so 9 / 100 count."
MACHINE_PATHS = ("/tmp/", "/work/", "site-packages", ".venv", "kvlab-autograder")

pytestmark = pytest.mark.skipif(not CHROMIUM.is_file(), reason=f"{CHROMIUM} is not installed (Debian package "
                                "chromium): the pages are not checked in a browser")


def records(assignment: Any, hostile: bool, failing: int) -> list[GradedTest]:
    """Three tests per task, the first `failing` tasks failing; a hostile student's messages carry
    markup and a machine path, and a starter-like failure repeats across the tests of a task."""
    out = []
    for number, task in enumerate(assignment.tasks):
        # A long test name is one unbreakable word: it must wrap, not widen its table.
        for i, name in enumerate(("test_one", "test_two[a-1]", f"test_three{'_with_a_long_descriptive_name' * 4}")):
            failed = number < failing
            message = ""
            if failed:
                message = ("Not implemented yet: your code raised NotImplementedError.\nTraceback (most recent call "
                           f"last):\n  File \"paged_kv.py\", line 51, in __init__\nNotImplementedError: {task.name}")
                if hostile and i == 0:
                    message = (f"Your code raised an exception:\n  File \"/tmp/kvlab-grade-x/worker/paged_kv.py\", "
                               f"line 9\npaged_kv.{HOSTILE}: {SCRIPT} Likely cause: {'a' * 300} "
                               + "a very long line " * 40)
            out.append(GradedTest(f"test_{task.name}.py::{name}", task.name, task.points / 6, not failed, message, False))
            out.append(GradedTest(f"test_hidden_{task.name}.py::{name}", task.name, task.points / 6, not failed,
                                  message, True))
    return out


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A feedback page (hostile student) and a class report of three students, with their feedback."""
    assignment = load_assignment(ASSIGNMENT, REPO_ROOT)
    root = tmp_path_factory.mktemp("pages")
    batch, subs = root / "batch", root / "submissions"
    students = {HOSTILE: (True, 3), "alice": (False, 0), "alice_copy": (False, 1)}
    rows = []
    for name, (hostile, failing) in students.items():
        results = graded_results(assignment, records(assignment, hostile, failing), 1.5, ISOLATION)
        (batch / name).mkdir(parents=True)
        (batch / name / "results.json").write_text(json.dumps(results), encoding="utf-8")
        extra = results["extra_data"]
        rows.append({"submission": name, "score": results["score"], "max_score": extra["max_score"],
                     "status": "graded", **{f"task:{t['name']}": t["score"] for t in extra["tasks"]}})
        shutil.copytree(assignment.solution, subs / name, ignore=shutil.ignore_patterns("__pycache__"))
        if hostile:
            (subs / name / assignment.files[0]).write_text(
                (assignment.solution / assignment.files[0]).read_text() + f"\n# </pre>{SCRIPT}\n")
    columns = ["submission", "score", "max_score", *(f"task:{t.name}" for t in assignment.tasks), "status", "error"]
    with (batch / "scores.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.DictWriter(out, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
    assert class_report.main(["--assignment", ASSIGNMENT, "--batch", str(batch), "--submissions", str(subs)]) == 0
    feedback = root / "handout.html"
    hostile_results = json.loads((batch / HOSTILE / "results.json").read_text(encoding="utf-8"))
    page = feedback_page(nbgrader_grade.feedback_of(assignment, HOSTILE, hostile_results, LATE))
    feedback.write_text(page, encoding="utf-8")
    return {"feedback": feedback, "report": batch / "report.html"}


def opened(browser: Any, path: Path) -> tuple[Any, list[str]]:
    """The page at 1,280 px with every <details> opened, and the dialogs a script opened."""
    page = browser.new_page(viewport={"width": WIDTH, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(path.as_uri())
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    return page, dialogs


def check_reader_view(page: Any, dialogs: list[str], sections: list[str]) -> str:
    """The checks every page passes; returns its visible text."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= WIDTH, f"{page.url}: the page is {width} px wide at {WIDTH} px: something runs off the right edge"
    missing = [s for s in sections if page.query_selector(f"#{s}") is None]
    assert not missing, f"{page.url}: sections {missing} are missing"
    assert page.title() != "pwned" and not dialogs, f"{page.url}: a submission's markup ran (title {page.title()!r})"
    injected = page.evaluate("document.querySelectorAll('script, img:not([src^=\"data:\"]), [onerror]').length")
    assert injected == 0, f"{page.url}: {injected} element(s) made from a submission's text"
    text = page.inner_text("body")
    assert SCRIPT in text, f"{page.url}: the submission's markup should show as text"
    return text


def test_feedback_page_reads_well(browser: Any, pages: dict[str, Path]) -> None:
    page, dialogs = opened(browser, pages["feedback"])
    text = check_reader_view(page, dialogs, ["total", "late", "tasks", "failed", "passed"])
    order = page.evaluate("document.getElementById('failed').compareDocumentPosition(document.getElementById('passed'))")
    assert order & 4, "the failed tests must come before the passed ones"
    leaked = [p for p in MACHINE_PATHS if p in text]
    assert not leaked, f"the student's page shows machine paths {leaked}"
    assert HOSTILE in text, "the hostile student's name should show as text"
    assert "test_block_pool.py::test_one" in text and "test_hidden_block_pool.py::test_one" in text, \
        "a public and a hidden test of one name must be told apart by their file"
    assert text.count("NotImplementedError: paged_sequence") == 1, \
        "a failure repeated across a task's tests should be shown once"
    page.close()


def test_class_report_reads_well(browser: Any, pages: dict[str, Path]) -> None:
    page, dialogs = opened(browser, pages["report"])
    check_reader_view(page, dialogs, [key for key, _ in SECTIONS])
    assert page.query_selector("details.pair pre mark") is not None, "the copied pair's shared code is not shown"
    links = page.eval_on_selector_all("#students-table a", "links => links.map(a => a.href)")
    assert len(links) == 3, f"one feedback link per student expected: {links}"
    for link in links:
        student, student_dialogs = browser.new_page(viewport={"width": WIDTH, "height": 900}), []
        student.on("dialog", lambda dialog: (student_dialogs.append(dialog.message), dialog.dismiss()))
        student.goto(link)
        assert student.query_selector("#tasks") is not None, f"{link} is not a feedback page"
        assert student.evaluate("document.documentElement.scrollWidth") <= WIDTH and not student_dialogs, \
            f"{link} overflows or runs a script"
        student.close()
    page.close()
