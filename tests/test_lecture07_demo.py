"""The lecture-7 demo, run as `make demo` runs it: on the solution, and on unfinished submissions.

On the solution: chained hashes that C shares with A up to its changed block only, a shared prefix
that saves exactly the tokens derived by hand without changing the logits, LRU hit ratios that fall
with the capacity, a PNG plot, and the GPU-time and storage tables. On stubs: exit 0, one "not
implemented yet" line per skipped part, no traceback, and the tables that need no student code.
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

from test_lecture02_demo import number, table

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "assignments" / "lecture07" / "demo.py"
SOLUTION = REPO / "solutions" / "lecture07"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run_demo(cwd: Path, *args: str, mooncake: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The demo as a subprocess in `cwd`; `mooncake` overrides where the real traces are looked for."""
    env = {k: v for k, v in os.environ.items() if k not in ("KVLAB_SUBMISSION", "KVLAB_MOONCAKE_DIR")}
    if mooncake is not None:
        env["KVLAB_MOONCAKE_DIR"] = str(mooncake)
    return subprocess.run([sys.executable, str(DEMO), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def plot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("plot") / "hit-ratio.png"


@pytest.fixture(scope="module")
def solution_run(tmp_path_factory: pytest.TempPathFactory, plot: Path) -> subprocess.CompletedProcess[str]:
    # From an empty folder, so the default (current directory) does not find a prefix_cache.py.
    return run_demo(tmp_path_factory.mktemp("cwd"), "--submission", str(SOLUTION), "--plot", str(plot))


def test_demo_runs_cleanly_on_the_solution(solution_run: subprocess.CompletedProcess[str], plot: Path) -> None:
    assert solution_run.returncode == 0, f"the demo exited {solution_run.returncode}:\n{solution_run.stderr}"
    assert "Traceback" not in solution_run.stdout + solution_run.stderr, f"the demo printed a traceback:\n{solution_run.stderr}"
    assert "not implemented" not in solution_run.stdout, f"the solution has no stubs:\n{solution_run.stdout}"
    assert plot.is_file() and plot.read_bytes()[:8] == PNG_SIGNATURE, f"--plot should write a PNG to {plot}"


def test_c_shares_exactly_the_blocks_before_its_change(solution_run: subprocess.CompletedProcess[str]) -> None:
    rows = table(solution_run.stdout, "(1)")
    assert [row[0] for row in rows] == ["0", "1", "2", "3", "4"], f"table (1) should list blocks 0-4: {rows}"
    a_digests = [row[3] for row in rows]
    c_digests = [row[7] for row in rows]
    shared = [c == f"{a} = A" for a, c in zip(a_digests, c_digests)]
    assert shared == [True, True, False, False, False], f"C should share A's first two digests only: {c_digests} vs A {a_digests}"
    assert all(c.endswith(" new") for c in c_digests[2:]), f"C's blocks 2-4 should be marked new: {c_digests}"
    b_shared = [row[5].endswith(" = A") for row in rows]
    assert b_shared == [True, True, True, False, False], f"B should share A's first three digests: {rows}"


# Worked out by hand from the demo's requests: 8 questions of 24, 27, ..., 45 tokens (276 in all).
# 80-token prefix = 5 full blocks of 16: input 8 * 80 + 276 = 916; the first request computes its
# 104 tokens, each later one its question only (276 - 24 = 252): 356 computed, 7 * 80 = 560 saved.
# Full blocks cached: the 5 of the prefix plus the questions' own, floor((80 + q) / 16) - 5 each:
# 1+1+1+2+2+2+2+2 = 13, so 18. 341-token prefix = 21 full blocks (336 tokens): the first request
# computes 365, each later one 5 + its question: 365 + 7 * 5 + 252 = 652 of 3,004.
@pytest.mark.parametrize("prefix, expected", [
    ("80 (1-shot)", {"input": 916, "computed": 356, "saved": 560, "blocks": 18}),
    ("341 (5-shot)", {"input": 3004, "computed": 652, "saved": 2352}),
])
def test_shared_prefix_saves_what_was_derived_by_hand(solution_run: subprocess.CompletedProcess[str], prefix: str,
                                                      expected: dict[str, int]) -> None:
    rows = {row[0]: row for row in table(solution_run.stdout, "(2)")}
    assert prefix in rows, f"table (2) should have a row for the {prefix} prefix: {rows}"
    row = rows[prefix]
    got = {"input": number(row[2]), "computed": number(row[3]), "saved": number(row[4]), "blocks": number(row[6])}
    for key, value in expected.items():
        assert got[key] == value, f"{prefix}: {key} should be {value}, got {got[key]} (row {row})"
    assert number(row[7]) < 1e-12, f"{prefix}: sharing blocks must not change the logits: max diff {row[7]}"


def test_lru_hit_ratio_falls_with_capacity(solution_run: subprocess.CompletedProcess[str]) -> None:
    rows = [row for row in table(solution_run.stdout, "(3b)") if row[1] == "LRU (yours)"]
    assert rows and rows[0][0] == "make_trace(seed=0)", f"table (3b) should start with the synthetic trace's LRU row: {rows}"
    for row in rows:
        ratios = [number(cell) for cell in row[2:]]
        assert ratios == sorted(ratios, reverse=True) and ratios[-1] < ratios[0], \
            f"{row[0]}: LRU hit ratio should fall from unlimited to 1,000 blocks: {ratios}"


def test_gpu_time_and_storage(solution_run: subprocess.CompletedProcess[str]) -> None:
    speedups = [number(row[-1]) for row in table(solution_run.stdout, "(4a)")]
    assert len(speedups) == 4 and speedups[0] == 1 and speedups[1:] == sorted(speedups[1:], reverse=True) \
        and speedups[-1] > 1, f"no cache, then LRU at unlimited, 10,000, 1,000: speedups above 1, falling: {speedups}"
    storage = {row[0]: row for row in table(solution_run.stdout, "(4b)")}
    # 10,000 blocks x 512 tokens x 327,680 bytes = 1.68e12 bytes, 2.62 x the 0.64 TB of HBM.
    assert storage["10,000"][2:] == ["1.68", "2.62"], f"10,000 blocks of 160 MiB: 1.68 TB, 2.62x HBM: {storage}"


SOLUTION_REGION = re.compile(r"^( *)# BEGIN SOLUTION\n.*?^ *# END SOLUTION\n", re.S | re.M)


def stubbed(name: str, definitions: set[str] | None) -> str:
    """solutions/lecture07/`name` with the regions inside the top-level `definitions` (all if None)
    replaced by a bare stub, as the starter has them."""
    text = SOLUTION.joinpath(name).read_text(encoding="utf-8")

    def replace(match: re.Match[str]) -> str:
        enclosing = re.findall(r"^(?:class|def) (\w+)", text[: match.start()], re.M)[-1]
        if definitions is not None and enclosing not in definitions:
            return match.group(0)
        return f"{match.group(1)}raise NotImplementedError()\n"

    return SOLUTION_REGION.sub(replace, text)


@pytest.mark.parametrize("definitions, expected, plotted", [
    (None, ["block_hashes is not implemented yet (task block_hashes): table (1) skipped",
            "BlockPool is not implemented yet (task block_pool): row '80 tokens' skipped",
            "hit_ratio is not implemented yet (task hit_ratio): the LRU rows skipped"], False),
    ({"LFUCache"}, ["LFUCache is not implemented yet (task eviction): the LFU rows skipped"], True),
    ({"PagedSequence"}, ["PagedSequence is not implemented yet (task paged_sequence): row '341 tokens' skipped"],
     True),
], ids=["starter", "lfu-stub", "paged-sequence-stub"])
def test_demo_on_unfinished_submissions(tmp_path: Path, definitions: set[str] | None, expected: list[str],
                                        plotted: bool) -> None:
    for name in ("paged_kv.py", "prefix_cache.py"):
        (tmp_path / name).write_text(stubbed(name, definitions), encoding="utf-8")
    empty = tmp_path / "no-traces"
    empty.mkdir()
    # No --submission and no --plot: the current folder holds the files, as in a student's bundle.
    run = run_demo(tmp_path, mooncake=empty)
    assert run.returncode == 0, f"the demo should finish on stubs; exit {run.returncode}:\n{run.stderr}"
    assert "Traceback" not in run.stdout + run.stderr, f"stubs should cost a line, not a traceback:\n{run.stdout}{run.stderr}"
    assert str(tmp_path) in run.stdout, f"the demo should run on the current folder's files:\n{run.stdout}"
    for line in expected:
        assert line in run.stdout, f"expected the line {line!r}; output:\n{run.stdout}"
    assert "absent from" in run.stdout and "set KVLAB_MOONCAKE_DIR" in run.stdout, \
        f"missing real traces should be named, with the variable to set:\n{run.stdout}"
    assert (tmp_path / "dist" / "lecture07-hit-ratio.png").is_file() == plotted, \
        f"the default plot should {'' if plotted else 'not '}be written when hit ratios {'exist' if plotted else 'do not'}"
    for tag in ("(3a)", "(4b)"):
        assert table(run.stdout, tag), f"table {tag} needs no student code and should print"


def test_missing_submission_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "paged_kv.py").write_text("", encoding="utf-8")
    (tmp_path / "prefix-cache.py").write_text("", encoding="utf-8")
    run = run_demo(tmp_path, "--submission", str(tmp_path))
    assert run.returncode == 2, f"a missing prefix_cache.py should exit 2, got {run.returncode}"
    assert "Did you mean 'prefix-cache.py'" in run.stderr and "Traceback" not in run.stderr, f"unclear error:\n{run.stderr}"


def test_demo_task_table_matches_assignment_json() -> None:
    assignment = json.loads((REPO / "assignments" / "lecture07" / "assignment.json").read_text(encoding="utf-8"))
    listed = {name: task["name"] for task in assignment["tasks"] for name in task.get("functions", [])}
    source = DEMO.read_text(encoding="utf-8")
    demo_tasks = ast.literal_eval(re.search(r"^TASKS = (\{.*?\})$", source, re.S | re.M).group(1))
    assert demo_tasks == listed, f"the demo's TASKS {demo_tasks} should match assignment.json's functions {listed}"
