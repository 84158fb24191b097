"""The switches that change how a grading runs, read once: `Settings.read()` at the start of a run.

Gradescope sets none of them; the repository's tests of the grader do, to grade many slow
submissions quickly or as a machine without bubblewrap or Landlock would:

- `KVLAB_CALL_TIMEOUT` (seconds per call into student code) and `KVLAB_TIME_BUDGET` (seconds for the
  whole run) can lower, never raise, assignment.json's call_timeout_seconds and --time-budget; a
  budget may be 0 (every test fails at once), a call timeout may not.
- `KVLAB_NO_BUBBLEWRAP=1` grades as Gradescope's Docker does (where bubblewrap cannot start): the
  worker runs as a uid of its own with file permissions as the only barrier besides Landlock and
  seccomp, and never as root (without an unprivileged identity grading stops with a grader fault).
- `KVLAB_NO_LANDLOCK=1` keeps the worker from taking Landlock, as on a kernel without it (the
  results say the isolation is reduced).
- `KVLAB_UNTIL_FIRST_CATCH=1` runs only the tests that can still change what the tests of the tests
  read of a corpus bug: whether some public test fails, and the first hidden failure in
  results.json's order. Once a public test has failed the other public tests are left out, and
  once a hidden test has failed, every later hidden test not of an earlier task. The tests left out
  are not in results.json, so the score of such a run is no grade.
- `KVLAB_SKIP_SETTLED_GUARDS=1` leaves out a growth guard (a test named `test_cost_does_not_grow...`,
  seconds of CPU at two sizes) once an earlier test of its task and its visibility has failed: the
  task loses points without it, and the first public and the first hidden failure stay where they
  were. The tests of the tests grade a catalog mutant so, whose checks read every failure but
  whose subject is seldom cost; the score of such a run is no grade either.
- `--seed N` (an argument of the runner, not the environment) replays a grading's draws.

A value these do not accept is a grader fault that names the variable and the value. results.json
names the switches that were set (`extra_data.switches`), so a result graded under them is never
taken for Gradescope's.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

from autograder.harness.backends import GraderFault

CALL_TIMEOUT_ENV = "KVLAB_CALL_TIMEOUT"
TIME_BUDGET_ENV = "KVLAB_TIME_BUDGET"
NO_BUBBLEWRAP_ENV = "KVLAB_NO_BUBBLEWRAP"
NO_LANDLOCK_ENV = "KVLAB_NO_LANDLOCK"
UNTIL_FIRST_CATCH_ENV = "KVLAB_UNTIL_FIRST_CATCH"
SKIP_SETTLED_GUARDS_ENV = "KVLAB_SKIP_SETTLED_GUARDS"


@dataclasses.dataclass(frozen=True)
class Settings:
    """One run's switches; None or True: not set (Gradescope's grading)."""

    call_timeout: float | None = None  # seconds: the lower of this and assignment.json's
    time_budget: float | None = None  # seconds: the lower of this and --time-budget
    bubblewrap: bool = True
    landlock: bool = True
    seed: int | None = None  # the draws' seed to replay; None: computed from the files
    until_first_catch: bool = False  # run only the tests that decide a bug's first catch
    skip_settled_guards: bool = False  # leave out a growth guard whose task has already failed

    @classmethod
    def read(cls, environ: Mapping[str, str] = os.environ, seed: int | None = None) -> Settings:
        """The switches in `environ` (and the seed the runner was given); GraderFault for a bad value."""
        return cls(call_timeout=_seconds(environ, CALL_TIMEOUT_ENV, allow_zero=False),
                   time_budget=_seconds(environ, TIME_BUDGET_ENV, allow_zero=True),
                   bubblewrap=not _flag(environ, NO_BUBBLEWRAP_ENV),
                   landlock=not _flag(environ, NO_LANDLOCK_ENV), seed=seed,
                   until_first_catch=_flag(environ, UNTIL_FIRST_CATCH_ENV),
                   skip_settled_guards=_flag(environ, SKIP_SETTLED_GUARDS_ENV))

    def switches(self) -> list[str]:
        """The switches that were set ("KVLAB_CALL_TIMEOUT=2", "--seed=7"), for results.json."""
        named = [(CALL_TIMEOUT_ENV, self.call_timeout), (TIME_BUDGET_ENV, self.time_budget),
                 (NO_BUBBLEWRAP_ENV, None if self.bubblewrap else 1),
                 (NO_LANDLOCK_ENV, None if self.landlock else 1), ("--seed", self.seed),
                 (UNTIL_FIRST_CATCH_ENV, 1 if self.until_first_catch else None),
                 (SKIP_SETTLED_GUARDS_ENV, 1 if self.skip_settled_guards else None)]
        return [f"{name}={_number(value)}" for name, value in named if value is not None]

    def lowered(self, call_timeout: float, time_budget: float) -> tuple[float, float]:
        """(call timeout, time budget): the given ones, each lowered by its switch when that is smaller."""
        return (call_timeout if self.call_timeout is None else min(call_timeout, self.call_timeout),
                time_budget if self.time_budget is None else min(time_budget, self.time_budget))


def _seconds(environ: Mapping[str, str], name: str, allow_zero: bool) -> float | None:
    """The number of seconds in `environ[name]`, None when unset or empty; GraderFault otherwise."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (value >= 0 if allow_zero else value > 0):  # NaN fails both
        raise GraderFault(f"${name}={text!r} is not a {'non-negative' if allow_zero else 'positive'} "
                          "number of seconds")
    return value


def _number(value: float) -> str:
    """2.0 as "2", 2.5 as "2.5": a number as one would set it."""
    return str(int(value)) if float(value).is_integer() else repr(value)


def _flag(environ: Mapping[str, str], name: str) -> bool:
    """Whether `environ[name]` is "1"; False when unset, empty or "0"; GraderFault otherwise."""
    text = environ.get(name, "").strip()
    if text not in ("", "0", "1"):
        raise GraderFault(f"${name}={text!r} is not 1 (set) or 0 (not set)")
    return text == "1"
