"""The conformance checks' rule tables (assignments/<id>/tests/conformance_checks.py, RULES) quote the
stubs: each rule's sentence is in the docstring of the class or function it names, in the starter
file students get, so a failure's quoted rule is the sentence the student reads; and the first-catch
record (tests/support/first_catch.py) reads that rule back from a failure's message."""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from autograder import corpus
from autograder.assignment import discover, load_assignment
from kvlab.testing.conformance import Outcome, Rule, Transcript, run_given
from support import first_catch
from support.repo import REPO
from support.verdicts import Verdict

TABLES = [a for a in discover(REPO) if (REPO / "assignments" / a / "tests" / "conformance_checks.py").is_file()]


def rules_of(assignment: str) -> dict:
    """RULES of the assignment's conformance_checks.py, imported beside its sibling checks modules."""
    folder = REPO / "assignments" / assignment / "tests"
    sys.path.insert(0, str(folder))
    try:
        spec = importlib.util.spec_from_file_location(f"conformance_checks_{assignment}", folder / "conformance_checks.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(folder))
    return module.RULES


def docstring(path: Path, dotted: str) -> str | None:
    """The docstring of `dotted` ("Class", "Class.method", "function") in the Python file `path`."""
    nodes: list[ast.AST] = [ast.parse(path.read_text(encoding="utf-8"))]
    for name in dotted.split("."):
        nodes = [child for node in nodes for child in ast.iter_child_nodes(node)
                 if isinstance(child, (ast.ClassDef, ast.FunctionDef)) and child.name == name]
    return ast.get_docstring(nodes[0]) if nodes else None


@pytest.mark.parametrize("assignment", TABLES)
def test_every_rule_quotes_its_stub(assignment: str) -> None:
    starter = load_assignment(assignment, REPO).starter
    wrong = []
    for key, rule in rules_of(assignment).items():
        file, _, dotted = rule.where.partition(":")
        text = docstring(starter / file, dotted)
        if text is None or corpus.normalized(rule.sentence) not in corpus.normalized(text):
            wrong.append(f"{key}: {rule.where} does not state {rule.sentence!r}")
    assert not wrong, f"{assignment}'s conformance rules quote no stub sentence:\n" + "\n".join(wrong)


def test_a_failure_names_its_rule_for_the_first_catch_record() -> None:
    # The record reads the quoted rule back from the message a conformance check writes.
    rule = Rule("paged_kv.py:BlockPool", "A call that raises changes nothing.")
    log = Transcript("pool = BlockPool(TINY, n_blocks=2, block_size=2)")
    log.add("pool.decref(5)", Outcome(error=ValueError("unknown block 5")))
    message = log.fail("pool.decref(5)", "afterwards num_free is 1; the rule gives 2", rule)
    found = first_catch.first_catch([Verdict("3.1 test_generated_calls", "block_pool", 1.0, "failed", message, False)])
    assert found == {"test": "test_generated_calls", "rule": rule.sentence, "task": "block_pool"}, found


def test_a_move_to_another_rule_is_reported() -> None:
    then = {"test": "test_walk", "rule": "", "task": "block_pool"}
    same_rule = {"test": "test_generated", "rule": "A call that raises changes nothing.", "task": "block_pool"}
    assert first_catch.moved(then, then) is None, "the same first test is no move"
    assert first_catch.moved(then, same_rule), "another test first, where the record quotes no rule, is a move"
    assert first_catch.moved(same_rule, {**same_rule, "test": "test_other"}) is None, "the same rule quoted is kept"
    assert first_catch.moved(same_rule, {**same_rule, "rule": "Number of cached blocks."}), "another rule is a move"
    assert first_catch.moved(then, None), "a bug no longer caught is reported"


def test_a_run_reads_no_local_constants_and_writes_no_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The switch of kvlab.testing.conformance._no_local_constants, on the pinned Hypothesis's own names.
    from hypothesis import given, strategies as st
    from hypothesis.internal.conjecture import providers

    assert callable(providers._get_local_constants) and hasattr(providers.CONSTANTS_CACHE, "cache"), (
        "the pinned Hypothesis no longer has the names the conformance runs switch its local constants off with")
    monkeypatch.chdir(tmp_path)
    drawn: list[int] = []

    @given(st.integers(0, 10**6))
    def draw(value: int) -> None:
        drawn.append(value)

    run_given(draw)
    first, drawn[:] = list(drawn), []
    run_given(draw)
    assert drawn == first, "two conformance runs of one test drew different values"
    assert not list(tmp_path.iterdir()), f"a conformance run wrote {sorted(p.name for p in tmp_path.iterdir())}"
