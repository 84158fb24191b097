"""Which hidden test first catches each corpus bug and catalog mutant, and what rule its message names.

The record, one JSON file per assignment and kind, is written by `python -m tools.first_catch <id>...`
and checked on the gradings tests/suites/test_corpus.py and test_suites.py already make
(`test_bug_keeps_its_first_catch`, `test_mutant_keeps_its_first_catch`): a change that lets a caught
bug through, or moves its first hidden failure to a test whose message names another rule, fails.

- autograder/corpus/<id>/first_catch.json: the blind corpus's bugs;
- autograder/mutants/<id>.first_catch.json: the bug catalog's mutants.

Each maps a bug's name to {"test": the first hidden test it fails, by name (numbers move when
tests are added), "rule": the rule sentence that test's message quotes ("" for a message that
quotes none: the hand-written scenarios), "task": that test's task}.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from autograder import corpus, mutants
from autograder.harness.settings import CALL_TIMEOUT_ENV, SKIP_SETTLED_GUARDS_ENV, UNTIL_FIRST_CATCH_ENV
from support.graders import Job, JobResults
from support.repo import REPO
from support.suite import Suite
from support.traces import stand_in_traces
from support.verdicts import Verdict

KINDS = ("corpus", "catalog")
# Seconds of CPU per call for the corpus bugs' gradings (KVLAB_CALL_TIMEOUT, which only lowers the
# assignment's limit): a bug whose cost runs past any limit (an O(n) eviction, a free queue in a list)
# then fails after 3 s instead of 10, and every correct call fits, as the hostile suite shows by
# grading every reference at 2 s per call. The bases are graded at the assignment's own limit.
BUG_CALL_TIMEOUT = 3.0
# How a conformance failure quotes its rule (kvlab.testing.conformance.Transcript.fail).
QUOTED_RULE = re.compile(r'The rule \([^)]*\): "(.+?)"\n')


def record_path(assignment: str, kind: str) -> Path:
    """Where the record of `kind` ("corpus" or "catalog") of `assignment` is committed."""
    if kind == "corpus":
        return corpus.folder(assignment) / "first_catch.json"
    return REPO / "autograder" / "mutants" / f"{assignment}.first_catch.json"


def load(assignment: str, kind: str) -> dict[str, dict[str, str]]:
    path = record_path(assignment, kind)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


def first_catch(outcomes: Iterable[Verdict]) -> dict[str, str] | None:
    """The first hidden test, in the suite's order, that did not pass: its name, quoted rule and task."""
    first = next((o for o in outcomes if not o.public and not o.passed), None)
    if first is None:
        return None
    quoted = QUOTED_RULE.search(first.message)
    return {"test": first.test.split(" ", 1)[-1], "rule": quoted.group(1) if quoted else "", "task": first.task}


def moved(recorded: dict[str, str], now: dict[str, str] | None) -> str | None:
    """None when `now` still catches the bug as recorded, else what changed. A recorded catch that
    quotes a rule (a conformance check's) must quote the same rule, in whatever test; one that
    quotes none (a hand-written scenario's) must come from the same test."""
    if now is None:
        return f"it was caught first by {recorded['test']} and now passes every hidden test"
    if recorded["rule"] and now["rule"] == recorded["rule"]:
        return None
    if not recorded["rule"] and (now["task"], now["test"]) == (recorded["task"], recorded["test"]):
        return None
    return (f"its first hidden failure moved from {recorded['test']} (rule: {recorded['rule'] or 'none quoted'}) to "
            f"{now['test']} (rule: {now['rule'] or 'none quoted'})")


def bug_switches(whole: bool = False) -> dict[str, str]:
    """The grader's switches (environment variables) for a corpus bug's grading: the per-call limit
    above and, unless it is to be graded `whole`, an end once what is read of it here and in
    test_corpus.py is settled (KVLAB_UNTIL_FIRST_CATCH)."""
    return {CALL_TIMEOUT_ENV: str(BUG_CALL_TIMEOUT), **({} if whole else {UNTIL_FIRST_CATCH_ENV: "1"})}


def mutant_switches(mutant: mutants.Mutant, whole: bool = False) -> dict[str, str]:
    """The grader's switches for a catalog mutant's grading: its own per-call limit if it has one
    and, unless it is to be graded `whole`, no growth guard after its task has failed
    (KVLAB_SKIP_SETTLED_GUARDS: every check of test_suites.py reads the same of it)."""
    return {**({} if mutant.call_timeout is None else {CALL_TIMEOUT_ENV: str(mutant.call_timeout)}),
            **({} if whole else {SKIP_SETTLED_GUARDS_ENV: "1"})}


def jobs(suite: Suite, kind: str, base: Path) -> list[Job]:
    """The gradings of every bug of `kind` of the suite's assignment, in-process (as test_corpus.py
    and test_suites.py grade them)."""
    name = suite.id
    env = stand_in_traces(suite.assignment.traces, base / "traces", real_if_present=False)
    whole = suite.tests_root(base / "root-all")
    found = []
    if kind == "corpus":
        for bug in corpus.bugs(name):
            out = base / bug.name
            root = suite.tests_root(out / "root", (bug.task,)) if suite.checks.mutants_run_own_tasks else whole
            submission = corpus.apply(name, bug, out / "submission")
            found.append(Job(name, f"corpus/{bug.name}", submission, root, out, suite.checks.run_seconds,
                             {**env, **bug_switches()}, modes=("inprocess",)))
        return found
    for mutant in suite.catalog:
        out = base / mutant.name
        root = suite.tests_root(out / "root", mutant.tasks) if suite.checks.mutants_run_own_tasks else whole
        submission = mutants.apply(mutant, suite.assignment.solution, out / "submission")
        found.append(Job(name, f"catalog/{mutant.name}", submission, root, out, suite.checks.run_seconds,
                         {**env, **mutant_switches(mutant)}, modes=("inprocess",)))
    return found


def records(graded: dict[str, JobResults]) -> dict[str, Any]:
    """{bug name: first_catch(...) or None} of gradings by their jobs' labels ("<kind>/<bug name>")."""
    return {label.split("/", 1)[1]: first_catch(result.outcomes("inprocess")) for label, result in sorted(graded.items())}


def check_kept(assignment: str, kind: str, name: str, outcomes: Iterable[Verdict]) -> None:
    """AssertionError unless bug `name` of `kind` is still caught as its record says (see `moved`)."""
    recorded = load(assignment, kind)
    assert name in recorded, (f"{assignment} {kind} bug {name} has no first-catch record; "
                              f"run `python -m tools.first_catch {assignment}`")
    change = moved(recorded[name], first_catch(outcomes))
    assert change is None, (f"{assignment} {kind} bug {name}: {change} (rerun `python -m tools.first_catch "
                            f"{assignment}` if the move is meant)")
