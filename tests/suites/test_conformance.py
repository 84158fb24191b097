"""The conformance checks' rule tables (assignments/<id>/tests/conformance_checks.py, RULES) quote the
stubs: each rule's sentence is in the docstring of the class or function it names, in the starter
file students get, so a failure's quoted rule is the sentence the student reads."""
from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path

import pytest

from autograder import corpus
from autograder.assignment import discover, load_assignment
from support.repo import REPO

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
