"""The parts of `kvlab.testing`'s plugin that need pytest to import: the `student` fixture and the
two hooks that keep a failure's message from printing twice.

`kvlab.testing` loads this module through `pytest_plugins`, so pytest imports it only when it runs
the plugin; importing `kvlab.testing` itself (as the sandbox's worker does for `kvlab.testing.probe`,
`kvlab.testing.drills` and `kvlab.testing.store_loan`, with numpy as its only package) needs no pytest.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvlab.testing import Submission

# Why a failure message printed twice: with assertion rewriting (pytest's default, so a student's
# `make test`), a failed `assert problem is None, problem` shows the message, then pytest's own
# account of the expression, which is the message again: `assert '<message>' is None`. The grader
# runs with --assert=plain and shows the message only. These two hooks make the public run read the
# same: the account of `<str> is None` becomes a marker, and the marker's line is cut from the failure.
_MESSAGE_ABOVE = "<kvlab: see the message above>"


def pytest_assertrepr_compare(config: pytest.Config, op: str, left: Any, right: Any) -> list[str] | None:
    if op == "is" and right is None and isinstance(left, str):
        return [_MESSAGE_ABOVE]
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Cut the marker's line (and pytest's "where" lines under it) from a failed assertion's text."""
    try:
        return (yield)
    except AssertionError as error:
        text = error.args[0] if error.args and isinstance(error.args[0], str) else ""
        cut = text.find(f"\nassert {_MESSAGE_ABOVE}")
        if cut >= 0:
            error.args = (text[:cut], *error.args[1:])
        raise


@pytest.fixture(scope="session")
def _submission(pytestconfig: pytest.Config) -> Submission:
    return Submission(Path(pytestconfig.getoption("--submission")))


@pytest.fixture
def student(_submission: Submission) -> Submission:
    """The submitted modules: `student.kv_decode.greedy_decode(...)`."""
    return _submission
