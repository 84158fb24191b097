"""tools/mutate.py: its operators, the solution markers it keeps to, stable ids, and one short sweep."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from tools import mutate

REPO = Path(__file__).resolve().parents[2]

# Code outside the markers (module constant, docstring, the function after) must never be mutated.
SAMPLE = '''\
"""A sample module."""
LIMIT = 1 + 2


def helper(a, b):
    """Doc."""
    # BEGIN SOLUTION
    if a < b and not a:
        raise ValueError(f"bad {a + 1}")
    for x in a[1:b]:
        break
    return helper(b, a)
    # END SOLUTION


def outside(x):
    return x * 2
'''
HELPERS = {"helper", "outside"}
RAISE_LINE = 9


@pytest.fixture(scope="module")
def sample_mutants() -> list[mutate.Mutant]:
    return mutate.mutants_of(SAMPLE, "sample.py", HELPERS)


@pytest.mark.parametrize(("operator", "mutated"), [
    ("compare", "if (a <= b) and not a:"),
    ("compare", "if (a >= b) and not a:"),
    ("boolop", "if (a < b or not a):"),
    ("negate", "if a < b and (a):"),
    ("negate", "if not (a < b and not a):"),
    ("statement", "pass"),
    ("slice", "for x in a[(1 + 1):b]:"),
    ("slice", "for x in a[1:(b - 1)]:"),
    ("constant", "for x in a[2:b]:"),
    ("constant", "for x in a[0:b]:"),
    ("loop-control", "continue"),
    ("return-none", "return None"),
    ("drop-arg", "return helper(a)"),
    ("drop-arg", "return helper(b)"),
])
def test_operator_produces(sample_mutants: list[mutate.Mutant], operator: str, mutated: str) -> None:
    found = sorted({m.mutated for m in sample_mutants if m.operator == operator})
    assert mutated in found, f"no {operator} mutant turns its line into {mutated!r}; its mutants give {found}"


def test_only_code_between_markers_changes(sample_mutants: list[mutate.Mutant]) -> None:
    head, tail = SAMPLE.split(mutate.BEGIN)[0], SAMPLE.split(mutate.END)[1]
    inside = mutate.solution_lines(SAMPLE)
    for m in sample_mutants:
        assert m.line in inside, f"{m.id} mutates line {m.line}, outside the solution lines {sorted(inside)}"
        assert m.text.split(mutate.BEGIN)[0] == head, f"{m.id} changes the text before {mutate.BEGIN}"
        assert m.text.split(mutate.END)[1] == tail, f"{m.id} changes the text after {mutate.END}"


def test_error_messages_are_left_alone(sample_mutants: list[mutate.Mutant]) -> None:
    changed = [m.id for m in sample_mutants
               if m.line == RAISE_LINE and m.mutated != "pass" and 'f"bad {a + 1}"' not in m.mutated]
    assert not changed, f"mutants inside the f-string message: {changed}"


def test_mutants_are_distinct_valid_programs(sample_mutants: list[mutate.Mutant]) -> None:
    shapes = [ast.dump(ast.parse(m.text)) for m in sample_mutants]
    assert ast.dump(ast.parse(SAMPLE)) not in shapes, "a mutant is the original program"
    assert len(set(shapes)) == len(shapes), "two mutants are the same program"


def test_ids_are_stable_and_unique(sample_mutants: list[mutate.Mutant]) -> None:
    ids = [m.id for m in sample_mutants]
    assert len(set(ids)) == len(ids), f"ids repeat: {ids}"
    bad = [i for i in ids if not re.fullmatch(r"sample\.py:[a-z-]+:[0-9a-f]{12}:\d+", i)]
    assert not bad, f"ids not of the form file:operator:digest:index: {bad}"
    again = mutate.mutants_of(SAMPLE, "sample.py", HELPERS)
    assert [(m.id, m.text) for m in again] == [(m.id, m.text) for m in sample_mutants], "a second run differs"
    # Code added after the markers moves no mutant.
    extended = mutate.mutants_of(SAMPLE + "\n\ndef more(y):\n    return y - 1\n", "sample.py", HELPERS)
    assert [m.id for m in extended] == ids, "code added after the solution changed the ids"
    # Nor do lines added above it (a longer docstring): an id names the change, not its line.
    shifted = mutate.mutants_of("# a new comment line\n" + SAMPLE, "sample.py", HELPERS)
    assert [m.id for m in shifted] == ids, "a line added above the solution changed the ids"


@pytest.mark.parametrize("path", sorted((REPO / "autograder" / "mutants").glob("*.equivalent.json")), ids=lambda p: p.name)
def test_equivalent_lists_match_current_mutants(path: Path) -> None:
    assignment = path.name.removesuffix(".equivalent.json")
    listed = json.loads(path.read_text(encoding="utf-8"))
    ids = {m.id for m in mutate.generate(REPO / "solutions" / assignment)}
    stale = sorted(set(listed) - ids)
    assert not stale, f"{path.name} lists mutants that no longer exist (the solution changed?): {stale}"
    unexplained = sorted(i for i, reason in listed.items() if not reason.strip())
    assert not unexplained, f"{path.name}: equivalent mutants without a reason: {unexplained}"


def test_a_hanging_run_counts_as_killed_by_timeout(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "test_hang.py").write_text("import time\n\n\ndef test_hang():\n    time.sleep(60)\n", encoding="utf-8")
    status, _ = mutate.Runner(tests, timeout=3).run(tmp_path, tmp_path / "run.log")
    assert status == mutate.TIMEOUT, f"a run sleeping past its timeout ended as {status!r}"


def test_short_sweep_of_lecture02_kills(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results.json"
    equivalent = mutate.load_equivalents("lecture02")
    picked = [m.id for m in mutate.generate(mutate.REPO / "solutions" / "lecture02") if m.id not in equivalent][5:9]
    code = mutate.main(["lecture02", "--limit", "3", "--json", str(out), *(f"--mutant={i}" for i in picked)])
    printed = capsys.readouterr().out
    assert code == 0, f"the sweep exited with {code}:\n{printed}"
    results = json.loads(out.read_text(encoding="utf-8"))
    run = [m for m in results["mutants"] if m["equivalent"] is None]
    assert len(run) == 3, f"--limit 3 ran {len(run)} mutants"
    assert {m["id"] for m in run} <= set(picked), f"--mutant chose {picked}, the sweep ran {[m['id'] for m in run]}"
    assert results["rates"]["hidden"]["killed"] >= 1, f"no mutant killed by the hidden suite:\n{printed}"
    assert "hidden kill rate" in printed and "public kill rate" in printed, f"the rates are not printed:\n{printed}"


def test_an_unknown_mutant_id_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        mutate.main(["lecture02", "--mutant", "kv_decode.py:nothing:000000000000:0"])
    assert "no such mutant" in capsys.readouterr().err, "an unknown --mutant id was not named"
