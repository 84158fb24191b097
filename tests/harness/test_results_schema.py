"""results.json: what results.py builds validates against results_schema.json, which is strict.

Every kind of result the grader can produce (graded with passes and failures, a missing file, a
grader fault, run_autograder's last-resort fallback) is checked against the schema; malformed
variants must be rejected; the file is written atomically and never invalid.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from autograder.assignment import load_assignment
from autograder.build import run_autograder_script
from autograder.harness.feedback_text import build_feedback, summary_text
from autograder.harness.results import (
    FAULT_MESSAGE,
    MAX_CAPTURED_CHARS,
    GradedTest,
    fault_results,
    graded_results,
    load_schema,
    validate,
    with_captured_output,
    write_results,
)
from kvlab.submission import missing_file_message

ASSIGNMENT = load_assignment("lecture02")
ISOLATION = ["unprivileged user nobody", "limits: 60 s CPU"]
SEED = 2**48 - 1  # the largest a grading computes (autograder/harness/seeds.py)
SWITCHES = ["KVLAB_CALL_TIMEOUT=2.5", "KVLAB_NO_LANDLOCK=1", f"--seed={SEED}"]


def records(passed: bool, output: str = "") -> list[GradedTest]:
    """Two tests per task, a public and a hidden one, each worth half the task's points."""
    return [GradedTest(name=f"test_{task.name}[{hidden}]", task=task.name, points=task.points / 2,
                       passed=passed, output=output, hidden=hidden)
            for task in ASSIGNMENT.tasks for hidden in (False, True)]


def all_passed() -> dict[str, Any]:
    return graded_results(ASSIGNMENT, records(True), 1.5, ISOLATION, seed=SEED, switches=SWITCHES)


def all_failed() -> dict[str, Any]:
    return graded_results(ASSIGNMENT, records(False, "logits differ from the reference"), 1.5, ISOLATION, seed=0)


def missing_file(tmp_path: Path) -> dict[str, Any]:
    (tmp_path / "kv-decode.py").write_text("x = 1\n")
    return graded_results(ASSIGNMENT, records(False, missing_file_message(tmp_path, "kv_decode.py")), 0.2, ISOLATION)


def grader_fault() -> dict[str, Any]:
    return fault_results("lecture02", ASSIGNMENT.max_score, 0.3)


def run_autograder_fallback() -> dict[str, Any]:
    """The JSON run_autograder writes when the runner left no valid file (between its heredoc markers)."""
    script = run_autograder_script(ASSIGNMENT).decode()
    body = script.split("<<'KVLAB_FAULT_RESULT'\n", 1)[1].split("\nKVLAB_FAULT_RESULT\n", 1)[0]
    return json.loads(body)


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", "the schema must declare draft 2020-12"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("make", [all_passed, all_failed, grader_fault, run_autograder_fallback])
def test_every_kind_of_result_validates(make: Callable[[], dict[str, Any]]) -> None:
    validate(make())


def test_missing_file_result_validates_and_says_what_was_found(tmp_path: Path) -> None:
    results = missing_file(tmp_path)
    validate(results)
    for test in results["tests"]:
        assert "kv_decode.py" in test["output"] and "kv-decode.py" in test["output"], (
            f"a missing-file message must name the expected and the found file: {test['output']!r}"
        )
    assert results["score"] == 0, f"a missing file scores 0, got {results['score']}"


def test_grader_fault_blames_nobody_and_scores_zero() -> None:
    for results in (grader_fault(), run_autograder_fallback()):
        assert results["score"] == 0 and results["tests"] == [], "a grader fault has score 0 and no test results"
        assert results["output"] == FAULT_MESSAGE, f"unexpected fault output {results['output']!r}"
        assert "not your code" in results["output"] and "contact the course staff" in results["output"], (
            "the fault message must say it is not the student's code and to contact the staff"
        )
        assert results["extra_data"]["status"] == "grader_fault", "extra_data.status must record the fault"


def test_graded_results_number_tests_by_task_and_sum_points() -> None:
    results = graded_results(ASSIGNMENT, list(reversed(records(True))), 1.0, ISOLATION)
    numbers = [t["number"] for t in results["tests"]]
    assert numbers == ["1.1", "1.2", "2.1", "2.2", "3.1", "3.2"], f"tests must be numbered task.test: {numbers}"
    assert [t["tags"] for t in results["tests"]][::2] == [[t.name] for t in ASSIGNMENT.tasks], (
        "each test must be tagged with its task, in assignment.json's task order"
    )
    assert results["score"] == ASSIGNMENT.max_score, f"all passed must score {ASSIGNMENT.max_score}: {results['score']}"
    for task in ASSIGNMENT.tasks:
        assert task.name in results["output"] and task.title in results["output"], (
            f"the summary must list task {task.name} with its title"
        )
    assert not any(line in results["output"] for line in ISOLATION), (
        f"the isolation report is the staff's (extra_data), not the student's summary: {results['output']}")
    assert results["extra_data"]["isolation"] == ISOLATION, f"extra_data must keep it: {results['extra_data']}"


def mixed(visibility: str = "visible") -> dict[str, Any]:
    """Per task, in the order pytest ran them: a pass, two failures with one message, a pass, a
    failure with another; the hidden ones (the second failure) with `visibility`."""
    assignment = replace(ASSIGNMENT, visibility={"public": "visible", "hidden": visibility})
    runs = [("test_a", True, ""), ("test_b", False, "cache length 3, expected 4 (see /tmp/kvlab-x1/w/kv.py)"),
            ("test_c", False, "cache length 3, expected 4 (see /tmp/kvlab-x1/w/kv.py)"), ("test_d", True, ""),
            ("test_e", False, "logits differ")]
    return graded_results(assignment, [GradedTest(f"test_{task.name}.py::{name}", task.name, task.points / 5,
                                                  passed, output, hidden=name == "test_c")
                                       for task in ASSIGNMENT.tasks for name, passed, output in runs], 1.0, ISOLATION)


def test_failed_tests_come_first_in_each_task_and_are_numbered_as_listed() -> None:
    results = mixed()
    for number, task in enumerate(ASSIGNMENT.tasks, start=1):
        listed = [(t["number"], t["name"].rsplit("::", 1)[1]) for t in results["tests"] if t["tags"] == [task.name]]
        want = [(f"{number}.{i}", name) for i, name in enumerate(["test_b", "test_c", "test_e", "test_a", "test_d"], 1)]
        assert listed == want, f"task {task.name}: failures first, each kind in run order, numbered as listed: {listed}"


def test_the_summary_is_the_feedback_pages_content_as_text() -> None:
    """results.json's output is feedback_text's summary of results.json itself: what the feedback
    page, `make grade` and Gradescope show is one content."""
    results = mixed()
    titles = {task.name: task.title for task in ASSIGNMENT.tasks}
    assert results["output"] == summary_text(build_feedback(results, ASSIGNMENT.title, "", titles)), (
        f"the summary must be feedback_text's: {results['output']}")
    output = results["output"]
    assert output.index("total") < output.index("Failed tests") and "/tmp/" not in output, (
        f"scores first, then the failures, no machine path: {output}")
    for task in ASSIGNMENT.tasks:
        shared = f"2 tests failed this way: test_{task.name}.py::test_b, test_{task.name}.py::test_c"
        assert output.count(f"test_{task.name}.py::test_b") == 1 and shared in output, (
            f"a message two tests share is shown once, with both names: {output}")
        assert f"test_{task.name}.py::test_a" not in output, f"passed tests are only counted: {output}"
    assert output.count("cache length 3, expected 4") == len(ASSIGNMENT.tasks), f"once per task: {output}"


def test_a_test_not_yet_visible_is_only_counted_in_the_summary() -> None:
    results = mixed("after_published")
    assert "::test_c" not in results["output"], f"a hidden test's name reaches the summary: {results['output']}"
    assert f"{len(ASSIGNMENT.tasks)} more test(s) count in the scores above" in results["output"], (
        f"the summary must say that some tests are not listed yet: {results['output']}")


def test_visibility_follows_assignment_json() -> None:
    results = all_passed()
    for test in results["tests"]:
        audience = "hidden" if test["name"].endswith("[True]") else "public"
        assert test["visibility"] == ASSIGNMENT.visibility[audience], (
            f"{test['name']}: visibility {test['visibility']}, assignment.json says {ASSIGNMENT.visibility[audience]}"
        )


def test_a_tests_draws_are_recorded_for_the_staff() -> None:
    """kvlab.testing.draws.drawn records what each test drew; the grader puts it in that test's extra_data."""
    from kvlab.testing.draws import drawn, take_draws

    take_draws()
    values = [drawn(1, 10**9), drawn(5, 5)]
    assert values[1] == 5 and take_draws() == values and take_draws() == [], "take_draws gives each draw once"
    drew = GradedTest(name="test_drew", task=ASSIGNMENT.tasks[0].name, points=ASSIGNMENT.tasks[0].points,
                      passed=True, output="", hidden=True, draws=tuple(values))
    rest = [GradedTest(name=f"test_{task.name}", task=task.name, points=task.points, passed=True, output="",
                       hidden=True) for task in ASSIGNMENT.tasks[1:]]
    results = graded_results(ASSIGNMENT, [drew, *rest], 1.0, ISOLATION)
    validate(results)
    extra = {t["name"]: t.get("extra_data") for t in results["tests"]}
    assert extra["test_drew"] == {"draws": values}, f"the test's draws are not in its extra_data: {extra}"
    assert all(extra[f"test_{task.name}"] is None for task in ASSIGNMENT.tasks[1:]), (
        f"a test that drew nothing must have no extra_data: {extra}")


def test_the_draws_seed_is_kept_for_the_staff() -> None:
    """The seed a grading drew from is in the top-level extra_data (the staff's), so it can be replayed."""
    results = all_passed()
    validate(results)
    assert results["extra_data"]["seed"] == SEED, f"extra_data must keep the draws' seed {SEED}: {results['extra_data']}"
    assert "seed" not in grader_fault()["extra_data"], "a grader fault drew nothing and records no seed"


def test_the_switches_a_grading_ran_under_are_named() -> None:
    """A grading under the tests' switches (settings.py) says so; one without them (Gradescope's)
    writes no `switches` at all."""
    assert all_passed()["extra_data"]["switches"] == SWITCHES, f"extra_data: {all_passed()['extra_data']}"
    assert "switches" not in all_failed()["extra_data"], f"no switch set, none named: {all_failed()['extra_data']}"


def test_captured_output_is_bounded_and_headed() -> None:
    combined = with_captured_output("assertion message", "x" * (10 * MAX_CAPTURED_CHARS))
    assert combined.startswith("assertion message\n"), "the failure message must come first"
    assert len(combined) < 2 * MAX_CAPTURED_CHARS, f"captured output must be truncated, got {len(combined)} chars"
    assert "printed by your code" in combined and "more characters cut" in combined, (
        "captured output needs a heading and a note that it was cut"
    )
    assert with_captured_output("message", "  \n") == "message", "blank output must add nothing"


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda results: results.pop(key)


def _set(path: tuple[Any, ...], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(results: dict[str, Any]) -> None:
        target = results
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


MALFORMED = {
    "no score": _drop("score"),
    "no tests": _drop("tests"),
    "unknown top-level field": _set(("scores",), 1),
    "score as text": _set(("score",), "40"),
    "negative execution time": _set(("execution_time",), -1),
    "unknown visibility": _set(("visibility",), "public"),
    "unknown output format": _set(("output_format",), "markdown"),
    "test status other than passed/failed": _set(("tests", 0, "status"), "error"),
    "test number not task.test": _set(("tests", 0, "number"), "1"),
    "unknown test field": _set(("tests", 0, "points"), 1),
    "test without tags": _set(("tests", 0, "tags"), []),
    "test without output": lambda results: results["tests"][0].pop("output"),
    "extra_data status unknown": _set(("extra_data", "status"), "ok"),
    "a test's draws as text": _set(("tests", 0, "extra_data"), {"draws": "17"}),
    "a test's extra_data with another field": _set(("tests", 0, "extra_data"), {"seed": 17}),
    "the draws' seed negative": _set(("extra_data", "seed"), -1),
    "the draws' seed as text": _set(("extra_data", "seed"), "17"),
    "the draws' seed past a JSON number's exact integers": _set(("extra_data", "seed"), 2**53),
    "a switch that is not a grader's": _set(("extra_data", "switches"), ["PATH=/usr/bin"]),
    "a switch without its value": _set(("extra_data", "switches"), ["KVLAB_NO_LANDLOCK"]),
    "an empty list of switches": _set(("extra_data", "switches"), []),
    "leaderboard order unknown": _set(("leaderboard",), [{"name": "speed", "value": 1, "order": "up"}]),
}


@pytest.mark.parametrize("corrupt", MALFORMED.values(), ids=MALFORMED.keys())
def test_schema_rejects_malformed_results(corrupt: Callable[[dict[str, Any]], None]) -> None:
    results = copy.deepcopy(all_failed())
    corrupt(results)
    with pytest.raises(jsonschema.ValidationError):
        validate(results)


def test_undecodable_student_text_still_writes(tmp_path: Path) -> None:
    odd = graded_results(ASSIGNMENT, records(False, "found: kv\udcffdecode.py"), 0.1, ISOLATION)
    write_results(tmp_path / "results.json", odd)
    written = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert written["tests"][0]["output"] == "found: kv?decode.py", f"got {written['tests'][0]['output']!r}"


def test_write_results_is_atomic_and_refuses_invalid_results(tmp_path: Path) -> None:
    path = tmp_path / "results" / "results.json"
    write_results(path, all_passed())
    assert json.loads(path.read_text()) == all_passed(), "write_results must write what it was given"
    broken = all_failed()
    broken["tests"][0]["status"] = "error"
    with pytest.raises(jsonschema.ValidationError):
        write_results(path, broken)
    assert json.loads(path.read_text()) == all_passed(), "a refused write must leave the earlier file intact"
    assert [p.name for p in path.parent.iterdir()] == ["results.json"], "no temporary file may be left behind"


def test_machine_paths_in_a_test_output_are_cut_to_their_last_part() -> None:
    message = "open('/tmp/kvlab-grade-x1/worker/data.bin') failed; see /work/course/.venv/lib/x.py and paged_kv.py"
    results = graded_results(ASSIGNMENT, [GradedTest("test_f.py::test_x", ASSIGNMENT.tasks[0].name, 1.0, False,
                                                     message, False)], 1.0, ISOLATION)
    output = results["tests"][0]["output"]
    assert "/tmp/" not in output and "/work/" not in output, f"a machine path reaches the student: {output!r}"
    assert "…/data.bin" in output and "…/x.py" in output and "paged_kv.py" in output, \
        f"the file each path names should stay: {output!r}"
