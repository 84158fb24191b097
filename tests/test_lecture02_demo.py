"""The lecture-2 demo, run as `make demo` runs it: on the solution, and on unfinished submissions.

On the solution its key figures must be the lecture's: a correct cache within rounding of the
no-cache reference, both classic bugs visible from decode step 1, about 140x fewer FLOPs with a
cache at 256 new tokens on the small model and about 4000x for Llama-3.1-8B generating 8000 tokens
after 1000. On a submission with stubs it must still exit 0, print one "not implemented yet" line
per skipped part, and no traceback; without the student's kv_bytes_per_token, the analytic tables
take the published figure instead, and say so.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kvlab.demo import load_module, not_implemented_message, submission_dir

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "assignments" / "lecture02" / "demo.py"
SOLUTION = REPO / "solutions" / "lecture02"


def run_demo(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KVLAB_SUBMISSION"}
    return subprocess.run([sys.executable, str(DEMO), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def table(stdout: str, tag: str) -> list[list[str]]:
    """The rows of the table whose title starts with `tag`, as lists of cell texts.

    Cells are separated by two or more spaces; the lines below the rule with as many cells as the
    header are rows (the notes under a table are sentences, not cells).
    """
    lines = stdout.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(tag)), None)
    assert start is not None, f"the demo printed no table {tag}; output:\n{stdout}"
    width = len(re.split(r"\s{2,}", lines[start + 1].strip()))
    rows = []
    for line in lines[start + 3:]:
        if not line.strip():
            break
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) == width:
            rows.append(cells)
    return rows


def section(stdout: str, tag: str) -> str:
    """The table whose title starts with `tag`, notes included: its lines up to the next blank one."""
    lines = stdout.split("\n")
    start = next((i for i, line in enumerate(lines) if line.startswith(tag)), None)
    assert start is not None, f"the demo printed no table {tag}; output:\n{stdout}"
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return "\n".join(lines[start:end])


def number(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("x"))


@pytest.fixture(scope="module")
def solution_run(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    # From an empty folder, so the default (current directory) does not find a kv_decode.py.
    return run_demo(tmp_path_factory.mktemp("cwd"), "--submission", str(SOLUTION))


def test_demo_runs_cleanly_on_the_solution(solution_run: subprocess.CompletedProcess[str]) -> None:
    assert solution_run.returncode == 0, f"the demo exited {solution_run.returncode}:\n{solution_run.stderr}"
    assert "Traceback" not in solution_run.stdout + solution_run.stderr, f"the demo printed a traceback:\n{solution_run.stderr}"
    assert "not implemented" not in solution_run.stdout, f"the solution has no stubs:\n{solution_run.stdout}"


def test_correct_cache_and_the_two_bugs(solution_run: subprocess.CompletedProcess[str]) -> None:
    rows = {row[0]: row for row in table(solution_run.stdout, "(1)")}
    correct = rows["your greedy_decode"]
    assert correct[1] == "yes" and number(correct[2]) < 1e-12, f"the correct cache should match the reference: {correct}"
    for bug in ("bug: prompt never cached", "bug: decode token at position 0"):
        assert rows[bug][3] == "1", f"{bug}: logits should first differ at step 1 (step 0 is the prefill): {rows[bug]}"
        assert rows[bug][4].startswith("step 1:"), f"{bug}: the first wrong token should come at step 1: {rows[bug]}"


def test_flop_ratios_are_the_lectures(solution_run: subprocess.CompletedProcess[str]) -> None:
    small = {row[0]: row for row in table(solution_run.stdout, "(2a)")}
    assert set(small) == {"64", "128", "256"}, f"table (2a) should have rows for 64, 128 and 256 new tokens: {small}"
    assert 130 <= number(small["256"][3]) <= 150, f"about 140x fewer FLOPs at 256 new tokens: {small['256']}"
    assert all(row[-1] == "yes" for row in small.values()), f"cached and no-cache tokens should agree: {small}"
    llama = {(row[0], row[1]): row for row in table(solution_run.stdout, "(2b)")}
    assert 3800 <= number(llama["1,000", "8,000"][4]) <= 4200, f"about 4000x for 8000 tokens after 1000: {llama}"


def test_memory_and_batching_tables_agree(solution_run: subprocess.CompletedProcess[str]) -> None:
    sizes = table(solution_run.stdout, "(3a)")
    assert sizes and all(row[-1] == "yes" for row in sizes), f"nbytes, kv_cache_bytes and the formula should agree: {sizes}"
    crossover = {row[0]: row for row in table(solution_run.stdout, "(3c)")}
    assert crossover["Llama-3.1-8B"][-1] == "122,532", f"16,060,522,496 weight bytes / 131,072 per token: {crossover}"
    assert all(row[4] == "yes" for row in crossover.values()), f"the solution's KV/token should match the published figures: {crossover}"
    steps = table(solution_run.stdout, "(4a)")
    assert [row[0] for row in steps] == ["1", "4", "16", "64"], f"table (4a) should cover B = 1, 4, 16, 64: {steps}"
    assert all(row[-1] == "yes" for row in steps), f"measured decode steps should match kvlab.costs: {steps}"
    intensities = [number(row[4]) for row in table(solution_run.stdout, "(4b)")]
    assert intensities == sorted(intensities) and intensities[-1] < 295, f"intensity grows with B, below the ridge: {intensities}"


SOLUTION_REGION = re.compile(r"^( *)# BEGIN SOLUTION\n.*?^ *# END SOLUTION\n", re.S | re.M)


def stubbed(functions: set[str] | None) -> str:
    """The solution with the regions inside `functions` (all if None) replaced by a bare stub."""
    text = SOLUTION.joinpath("kv_decode.py").read_text(encoding="utf-8")

    def replace(match: re.Match[str]) -> str:
        enclosing = re.findall(r"def (\w+)\(", text[: match.start()])[-1]
        if functions is not None and enclosing not in functions:
            return match.group(0)
        return f"{match.group(1)}raise NotImplementedError()\n"

    return SOLUTION_REGION.sub(replace, text)


@pytest.mark.parametrize("functions, expected", [
    (None, ["KVCache is not implemented yet (task kv_cache)", "greedy_decode is not implemented yet (task greedy_decode)",
            "kv_cache_bytes is not implemented yet (task kv_memory)", "kv_bytes_per_token is not implemented yet (task kv_memory)"]),
    ({"greedy_decode"}, ["greedy_decode is not implemented yet (task greedy_decode): row 'your greedy_decode' skipped",
                         "greedy_decode is not implemented yet (task greedy_decode): table (2) small-model rows skipped"]),
    ({"update"}, ["KVCache.update is not implemented yet (task kv_cache)"]),
], ids=["starter", "greedy-stub", "update-stub"])
def test_demo_on_unfinished_submissions(tmp_path: Path, functions: set[str] | None, expected: list[str]) -> None:
    (tmp_path / "kv_decode.py").write_text(stubbed(functions), encoding="utf-8")
    # No --submission: the current directory holds kv_decode.py, as in a student's folder.
    run = run_demo(tmp_path)
    assert run.returncode == 0, f"the demo should finish on stubs; exit {run.returncode}:\n{run.stderr}"
    assert "Traceback" not in run.stdout + run.stderr, f"stubs should cost a line, not a traceback:\n{run.stdout}{run.stderr}"
    assert str(tmp_path / "kv_decode.py") in run.stdout, f"the demo should run on the current folder's file:\n{run.stdout}"
    for line in expected:
        assert line in run.stdout, f"expected the line {line!r}; output:\n{run.stdout}"
    for tag in ("(2b)", "(4b)"):
        assert table(run.stdout, tag), f"the analytic table {tag} needs no student code and should print"


def test_published_figure_stands_in_for_kv_bytes_per_token(tmp_path: Path,
                                                           solution_run: subprocess.CompletedProcess[str]) -> None:
    (tmp_path / "kv_decode.py").write_text(stubbed({"kv_bytes_per_token"}), encoding="utf-8")
    run = run_demo(tmp_path)
    assert run.returncode == 0 and "Traceback" not in run.stdout + run.stderr, \
        f"a kv_bytes_per_token stub should cost notes, not a traceback; exit {run.returncode}:\n{run.stdout}{run.stderr}"
    note = "kv_bytes_per_token is not implemented yet (task kv_memory): Llama-3.1-8B uses its published figure, 131,072 bytes/token"
    for tag in ("(2b)", "(3c)", "(4b)"):
        assert note in section(run.stdout, tag), f"table {tag} should say it used the published figure:\n{section(run.stdout, tag)}"
    for tag in ("(2b)", "(4b)"):
        assert table(run.stdout, tag) == table(solution_run.stdout, tag), \
            f"with the published figure, table {tag} should read as with the solution's:\n{section(run.stdout, tag)}"
    crossover, reference = table(run.stdout, "(3c)"), table(solution_run.stdout, "(3c)")
    assert [row[2] for row in crossover] == [row[4] for row in crossover] == ["-", "-"], \
        f"no KV/token of yours, so nothing to match against the published figure: {crossover}"
    assert [[row[i] for i in (0, 1, 3, 5)] for row in crossover] == [[row[i] for i in (0, 1, 3, 5)] for row in reference], \
        f"the weights, published figures and crossover should not depend on your kv_bytes_per_token: {crossover} vs {reference}"
    steps = table(run.stdout, "(4a)")
    assert steps and all(row[-1] == "-" for row in steps), f"the tiny model has no published figure, so no comparison: {steps}"
    assert "column '= kvlab.costs' skipped" in section(run.stdout, "(4a)"), f"table (4a) should say why:\n{section(run.stdout, '(4a)')}"


def test_missing_submission_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "kv-decode.py").write_text("", encoding="utf-8")
    run = run_demo(tmp_path, "--submission", str(tmp_path))
    assert run.returncode == 2, f"a missing kv_decode.py should exit 2, got {run.returncode}"
    assert "Did you mean 'kv-decode.py'" in run.stderr and "Traceback" not in run.stderr, f"unclear error:\n{run.stderr}"


@pytest.mark.parametrize("explicit, env, cwd_has_file, expected", [
    ("given", "from-env", True, "given"),
    (None, "from-env", True, "from-env"),
    (None, None, True, "cwd"),
    (None, None, False, "fallback"),
])
def test_submission_folder_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, explicit: str | None,
                                      env: str | None, cwd_has_file: bool, expected: str) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    if cwd_has_file:
        (cwd / "kv_decode.py").write_text("", encoding="utf-8")
    monkeypatch.chdir(cwd)
    if env is None:
        monkeypatch.delenv("KVLAB_SUBMISSION", raising=False)
    else:
        monkeypatch.setenv("KVLAB_SUBMISSION", env)
    chosen = submission_dir(explicit, "kv_decode.py", Path("fallback"))
    want = cwd if expected == "cwd" else Path(expected)
    assert chosen == want, f"--submission {explicit}, $KVLAB_SUBMISSION {env}, cwd file {cwd_has_file}: chose {chosen}, expected {want}"


def test_demo_task_table_matches_assignment_json() -> None:
    assignment = json.loads((REPO / "assignments" / "lecture02" / "assignment.json").read_text(encoding="utf-8"))
    listed = {name: task["name"] for task in assignment["tasks"] for name in task.get("functions", [])}
    source = DEMO.read_text(encoding="utf-8")
    demo_tasks = ast.literal_eval(re.search(r"^TASKS = (\{.*?\})$", source, re.S | re.M).group(1))
    assert demo_tasks == listed, f"the demo's TASKS {demo_tasks} should match assignment.json's functions {listed}"


def test_not_implemented_message_names_the_stub_not_the_helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # load_module registers the module and puts its folder on sys.path: undo both afterwards.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "stubs", None)
    (tmp_path / "stubs.py").write_text(
        "class Box:\n"
        "    def fill(self):\n"
        "        return _helper()\n\n"
        "def _helper():\n"
        "    raise NotImplementedError()\n",
        encoding="utf-8",
    )
    module = load_module(tmp_path, "stubs")
    with pytest.raises(NotImplementedError) as caught:
        module.Box().fill()
    message = not_implemented_message(caught.value, module, {"Box": "boxes"}, "skipped")
    assert message == "Box.fill is not implemented yet (task boxes): skipped", f"got {message!r}"
