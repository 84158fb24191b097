"""Conformance runs: generated call sequences on a student's object, every call checked against the
contract, and a failure reported as the student reads it.

A checks module declares, per contract, a Hypothesis state machine (one rule per method, drawing
its arguments from the whole stated input domain: 0, negatives, bools, floats, None, numpy
integers, empty and repeated inputs) and a table of `Rule`s, each a sentence quoted exactly from
the stub's docstrings. After every call the machine reads every observable the contract defines
(return value or exception type, public attributes, counters) and compares it with what the rule
gives from the state it read before the call; the hidden suite also compares with a trusted
reference where the contract's state cannot be read (a cache's recency order). Where the contract
leaves a choice (which free block `allocate` hands out), the checks module says so beside the
rule and compares up to it.

A failure is shrunk by Hypothesis to a shortest diverging sequence; its message (`Transcript.fail`)
lists the calls made, what each answered, the call that diverged, what came back against what the
contract gives, and the rule's sentence with where it is stated.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, seed, settings
from hypothesis.internal.conjecture import providers
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

from kvlab.testing.draws import conformance_seed


@dataclass(frozen=True)
class Rule:
    """A rule of a contract: `sentence` quoted exactly from the docstring of `where` ("file.py:Name")."""

    where: str
    sentence: str


@dataclass(frozen=True)
class Outcome:
    """What a call gave: its value, or the exception it raised."""

    value: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        return f"returned {short(self.value)}"


def outcome_of(call: Callable[[], Any]) -> Outcome:
    """Call, and keep what it returned or raised (a student's exception of any type is a finding),
    but a stub's NotImplementedError, which fails the test as it fails every other (not written yet)."""
    try:
        return Outcome(call())
    except NotImplementedError:
        raise
    except Exception as error:  # noqa: BLE001 - whatever the student's code raises is reported
        return Outcome(error=error)


def short(value: Any, limit: int = 120) -> str:
    """repr(value), cut to `limit` characters: a transcript line stays readable."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Transcript:
    """The calls of one generated sequence, each with what the student's code answered."""

    def __init__(self, setup: str) -> None:
        self.lines = [setup]

    def add(self, call: str, got: Outcome | None = None) -> None:
        self.lines.append(call if got is None else f"{call}  # {got.describe()}")

    def fail(self, call: str, problem: str, rule: Rule) -> str:
        """The student's message: the diverging call, what differs, the rule, and the calls so far."""
        steps = "\n".join(f"    {line}" for line in self.lines)
        return (f"{call}: {problem}.\nThe rule ({rule.where}): \"{rule.sentence}\"\n"
                f"The calls, shortest sequence found, in order (with what your code answered):\n{steps}")

    def check(self, ok: bool, call: str, problem: str, rule: Rule) -> None:
        """AssertionError with `fail`'s message unless `ok`."""
        if not ok:
            raise AssertionError(self.fail(call, problem, rule))


def raised(got: Outcome, expected: type[BaseException]) -> bool:
    return got.error is not None and isinstance(got.error, expected)


def is_plain_int(value: Any) -> bool:
    """An int and not a bool (a Python int; numpy integers are not)."""
    return type(value) is int


def machine_settings(max_examples: int, steps: int) -> settings:
    """Settings of a conformance run, the same for every submission of one grading seed.

    No database and no files (the worker's and the grader's folders stay as they were), no
    deadline (the grader's per-call limits time the student's code), no explain phase (it would
    print the tests' file names and lines), one failure reported (an ExceptionGroup would hide its
    message), no blob (it is a replay key for the staff, not the student).
    """
    return settings(
        max_examples=max_examples, stateful_step_count=steps, derandomize=False, database=None, deadline=None,
        phases=(Phase.explicit, Phase.generate, Phase.shrink), report_multiple_bugs=False, print_blob=False,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
    )


@contextmanager
def _no_local_constants() -> Iterator[None]:
    """Hypothesis (the pinned 6.168) also draws, one time in twenty, constants it reads from the source
    of every non-library module imported so far, and caches them in ./.hypothesis/constants. The
    sequences would then depend on what the process imported before (the student's modules, when
    graded in-process) and the run would write files; for a conformance run that reader answers
    nothing, and its cache of answers is emptied before and after. tests/suites/test_conformance.py
    checks that these names still exist in the pinned Hypothesis."""
    read = providers._get_local_constants
    providers.CONSTANTS_CACHE.cache.clear()
    providers._get_local_constants = lambda: providers.Constants()
    try:
        yield
    finally:
        providers._get_local_constants = read
        providers.CONSTANTS_CACHE.cache.clear()


def run_machine(machine: type[RuleBasedStateMachine], run_settings: settings) -> None:
    """Run `machine` with the conformance seed (`kvlab.testing.draws.conformance_seed`): the same
    sequences in every process, whatever it imported before."""
    with _no_local_constants():
        run_state_machine_as_test(seed(conformance_seed())(machine), settings=run_settings)


def run_given(test: Callable[[], None]) -> None:
    """Run a Hypothesis `@given` test as `run_machine` runs a machine."""
    with _no_local_constants():
        seed(conformance_seed())(test)()
