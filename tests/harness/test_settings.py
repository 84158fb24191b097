"""The switches that change a grading (autograder/harness/settings.py): what each accepts, that the
limits can only be lowered, which switches results.json names, and a bad value's grader fault."""
from __future__ import annotations

from pathlib import Path

import pytest

from autograder.harness.backends import GraderFault
from autograder.harness.run import run
from autograder.harness.settings import (
    CALL_TIMEOUT_ENV,
    NO_BUBBLEWRAP_ENV,
    NO_LANDLOCK_ENV,
    SKIP_SETTLED_GUARDS_ENV,
    TIME_BUDGET_ENV,
    UNTIL_FIRST_CATCH_ENV,
    Settings,
)
from support.repo import REPO


def test_limit_overrides_can_only_lower() -> None:
    assert Settings.read({}).lowered(10.0, 480.0) == (10.0, 480.0), "unset: the values stand"
    assert Settings.read({CALL_TIMEOUT_ENV: "2.5"}).lowered(10.0, 480.0) == (2.5, 480.0), (
        "a smaller call timeout lowers the limit")
    assert Settings.read({CALL_TIMEOUT_ENV: "60", TIME_BUDGET_ENV: "900"}).lowered(10.0, 480.0) == (10.0, 480.0), (
        "a larger value must never raise a limit")
    assert Settings.read({TIME_BUDGET_ENV: "0"}).lowered(10.0, 480.0) == (10.0, 0.0), "a zero budget is allowed"


@pytest.mark.parametrize(("name", "text"), [
    *[(CALL_TIMEOUT_ENV, bad) for bad in ("soon", "nan", "-1", "0")],
    *[(TIME_BUDGET_ENV, bad) for bad in ("soon", "nan", "-1")],
    *[(flag, bad) for flag in (NO_BUBBLEWRAP_ENV, NO_LANDLOCK_ENV, UNTIL_FIRST_CATCH_ENV, SKIP_SETTLED_GUARDS_ENV)
      for bad in ("yes", "true", "2")],
])
def test_a_bad_value_is_a_grader_fault_that_names_it(name: str, text: str) -> None:
    with pytest.raises(GraderFault) as info:
        Settings.read({name: text})
    assert f"${name}={text!r}" in str(info.value), f"the fault must name ${name} and {text!r}: {info.value}"


@pytest.mark.parametrize(("environ", "bubblewrap", "landlock"), [
    ({}, True, True), ({NO_BUBBLEWRAP_ENV: "", NO_LANDLOCK_ENV: "0"}, True, True),
    ({NO_BUBBLEWRAP_ENV: "1"}, False, True), ({NO_LANDLOCK_ENV: " 1 "}, True, False),
])
def test_the_isolation_flags(environ: dict[str, str], bubblewrap: bool, landlock: bool) -> None:
    settings = Settings.read(environ)
    assert (settings.bubblewrap, settings.landlock) == (bubblewrap, landlock), f"{environ} gave {settings}"


def test_the_switches_named_are_those_set() -> None:
    assert Settings.read({}).switches() == [], "Gradescope's grading sets no switch"
    environ = {CALL_TIMEOUT_ENV: "2", TIME_BUDGET_ENV: "90.5", NO_BUBBLEWRAP_ENV: "1", NO_LANDLOCK_ENV: "0"}
    named = Settings.read(environ, seed=7).switches()
    assert named == ["KVLAB_CALL_TIMEOUT=2", "KVLAB_TIME_BUDGET=90.5", "KVLAB_NO_BUBBLEWRAP=1", "--seed=7"], named


def test_a_bad_switch_gives_the_fault_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Read before anything is graded, a bad value is the grader's fault: the student gets the
    contact-the-staff result, the staff the variable's name on stderr."""
    monkeypatch.setenv(NO_LANDLOCK_ENV, "yes")
    results = run("lecture02", REPO / "solutions" / "lecture02", tmp_path / "results.json")
    assert results["extra_data"]["status"] == "grader_fault", f"a bad switch must be a grader fault: {results}"
    assert f"${NO_LANDLOCK_ENV}='yes'" in capsys.readouterr().err, "stderr must name the bad switch"
