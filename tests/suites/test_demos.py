"""The lecture demos, run as `make demo` runs them, and the runner behind them (kvlab.demo).

For every assignment folder with a demo.py: on the reference it exits 0 and prints its tables; on
the starter it exits 0 with no traceback, each skipped part costing one "not implemented yet" line
that names the stub's task; a misnamed file is a clear error. Then each lecture's key figures: a
correct cache within rounding of the no-cache reference, both classic bugs visible from decode step
1, about 140x fewer FLOPs with a cache at 256 new tokens (lecture 2); chained hashes that C shares
with A up to its changed block only, a shared prefix that saves exactly the tokens derived by hand,
LRU hit ratios that fall with the capacity (lecture 7).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from autograder.assignment import load_assignment
from kvlab.demo import Student, load_module, not_implemented_message, submission_dir

REPO = Path(__file__).resolve().parents[2]
DEMOS = sorted(path.parent.name for path in (REPO / "assignments").glob("*/demo.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# format_table's rule under a table's header: dashes in two or more columns.
TABLE_RULE = re.compile(r"^-+(  +-+)+$", re.M)
NOT_IMPLEMENTED = re.compile(r"^(?P<name>\S+) is not implemented yet (?:\(task (?P<task>[\w-]+)\))?", re.M)
SOLUTION_REGION = re.compile(r"^( *)# BEGIN SOLUTION\n.*?^ *# END SOLUTION\n", re.S | re.M)
STUB_RAISE = re.compile(r"^ *raise NotImplementedError\(.*\)$", re.M)


def run_demo(assignment_id: str, cwd: Path, *args: str, mooncake: Path | None = None) -> subprocess.CompletedProcess[str]:
    """assignments/<id>/demo.py as a subprocess in `cwd`; `mooncake` overrides where real traces are looked for."""
    env = {k: v for k, v in os.environ.items() if k not in ("KVLAB_SUBMISSION", "KVLAB_MOONCAKE_DIR")}
    if mooncake is not None:
        env["KVLAB_MOONCAKE_DIR"] = str(mooncake)
    return subprocess.run([sys.executable, str(REPO / "assignments" / assignment_id / "demo.py"), *args], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=180)


def clean_exit(run: subprocess.CompletedProcess[str]) -> str | None:
    """Why `run` did not finish cleanly (exit 0, no traceback), or None."""
    if run.returncode != 0 or "Traceback" in run.stdout + run.stderr:
        return f"exit {run.returncode}:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return None


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


def stubbed(assignment_id: str, name: str, definitions: set[str]) -> str:
    """solutions/<id>/`name` with the regions inside the top-level `definitions` replaced by the
    starter's stub for each (its `raise NotImplementedError("<qualname> (task <task>)")`)."""
    text = (REPO / "solutions" / assignment_id / name).read_text(encoding="utf-8")
    stubs = STUB_RAISE.findall((REPO / "starter" / assignment_id / name).read_text(encoding="utf-8"))
    regions = list(SOLUTION_REGION.finditer(text))
    assert len(stubs) == len(regions), f"starter/{assignment_id}/{name} should have one stub per solution region"
    pieces, end = [], 0
    for region, stub in zip(regions, stubs):
        enclosing = re.findall(r"^(?:class|def) (\w+)", text[: region.start()], re.M)[-1]
        pieces += [text[end:region.start()], f"{stub}\n" if enclosing in definitions else region.group(0)]
        end = region.end()
    return "".join(pieces) + text[end:]


class ReferenceRuns:
    """Each assignment's demo run on its reference solution: once, when first asked for."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        self.tmp_path_factory = tmp_path_factory
        self.runs: dict[str, tuple[Path, subprocess.CompletedProcess[str]]] = {}

    def __call__(self, assignment_id: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
        """(the folder it ran in, the run)."""
        if assignment_id not in self.runs:
            # From an empty folder, so the default (current directory) does not find the student's files.
            cwd = self.tmp_path_factory.mktemp(f"{assignment_id}-reference")
            # Lecture 7 writes its plot here; module 6's server benchmark (part 2) has its own test
            # (tests/library/test_module06_demo.py), one run per mode.
            args = {"lecture07": ("--plot", str(cwd / "hit-ratio.png")), "module06": ("--part", "1")}.get(assignment_id, ())
            solution = REPO / "solutions" / assignment_id
            self.runs[assignment_id] = cwd, run_demo(assignment_id, cwd, "--submission", str(solution), *args)
        return self.runs[assignment_id]


@pytest.fixture(scope="module")
def reference_runs(tmp_path_factory: pytest.TempPathFactory) -> ReferenceRuns:
    return ReferenceRuns(tmp_path_factory)


@pytest.mark.parametrize("assignment_id", DEMOS)
def test_demo_prints_its_tables_on_the_reference(assignment_id: str, reference_runs: ReferenceRuns) -> None:
    _, run = reference_runs(assignment_id)
    problem = clean_exit(run)
    assert problem is None, f"{assignment_id}: the demo should run cleanly on the reference; {problem}"
    assert "not implemented" not in run.stdout, f"{assignment_id}: the reference has no stubs:\n{run.stdout}"
    assert f"Your files: {REPO / 'solutions' / assignment_id}" in run.stdout, \
        f"{assignment_id}: the demo should name the folder it ran on:\n{run.stdout[:500]}"
    assert TABLE_RULE.search(run.stdout), f"{assignment_id}: the demo printed no table:\n{run.stdout}"


@pytest.mark.parametrize("assignment_id", DEMOS)
def test_demo_skips_every_stub_with_its_task_on_the_starter(assignment_id: str, tmp_path: Path) -> None:
    assignment = load_assignment(assignment_id)
    for name in assignment.files:
        (tmp_path / name).write_bytes((REPO / "starter" / assignment_id / name).read_bytes())
    # No --submission: the current folder holds the files, as in a student's bundle.
    run = run_demo(assignment_id, tmp_path, mooncake=tmp_path)
    problem = clean_exit(run)
    assert problem is None, f"{assignment_id}: stubs should cost a line each, not a traceback; {problem}"
    assert f"Your files: {tmp_path}" in run.stdout, f"{assignment_id}: the demo should run on the current folder's files"
    named = [(m["name"], m["task"]) for m in NOT_IMPLEMENTED.finditer(run.stdout)]
    assert named, f"{assignment_id}: on the starter, the demo should say what it skipped:\n{run.stdout}"
    tasks = {task.name for task in assignment.tasks}
    unknown = [(name, task) for name, task in named if task not in tasks]
    assert not unknown, f"{assignment_id}: each skip line should name a task of assignment.json ({sorted(tasks)}): {unknown}"
    assert run.stdout.count("not implemented") == len(named), \
        f"{assignment_id}: every 'not implemented' line should read '<name> is not implemented yet (task <task>)':\n{run.stdout}"


@pytest.mark.parametrize("assignment_id", DEMOS)
def test_misnamed_file_is_a_clear_error(assignment_id: str, tmp_path: Path) -> None:
    files = load_assignment(assignment_id).files
    for name in files:
        (tmp_path / name).write_bytes((REPO / "solutions" / assignment_id / name).read_bytes())
    misnamed = files[0].replace("_", "-") if "_" in files[0] else f"my_{files[0]}"
    (tmp_path / files[0]).rename(tmp_path / misnamed)
    run = run_demo(assignment_id, tmp_path, "--submission", str(tmp_path))
    assert run.returncode == 2, f"{assignment_id}: a missing {files[0]} should exit 2, got {run.returncode}"
    assert f"Did you mean {misnamed!r}" in run.stderr and "Traceback" not in run.stderr, \
        f"{assignment_id}: unclear error:\n{run.stderr}"


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


STUBS_SOURCE = (
    "class Box:\n"
    "    def __init__(self):\n"
    "        raise NotImplementedError('Box.__init__ (task boxes)')\n\n"
    "    def fill(self):\n"
    "        return _helper()\n\n"
    "def _helper():\n"
    "    raise NotImplementedError()\n\n"
    "def call(fn):\n"
    "    return fn()\n"
)


def _library_stub() -> None:
    raise NotImplementedError("not the student's")


@pytest.mark.parametrize("make, expected", [
    (lambda m: m.Box(), "Box is not implemented yet (task boxes): skipped"),
    (lambda m: m.Box.__new__(m.Box).fill(), "Box.fill is not implemented yet: skipped"),
    (lambda m: m.call(_library_stub), "call is not implemented yet: skipped"),
    (lambda m: _library_stub(), None),
], ids=["stub-message-names-task", "bare-raise-in-helper-names-caller", "raised-beyond-student-code", "no-student-frame"])
def test_not_implemented_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make: Callable[[ModuleType], object],
                                 expected: str | None) -> None:
    # load_module registers the module and puts its folder on sys.path: undo both afterwards.
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setitem(sys.modules, "stubs", None)
    (tmp_path / "stubs.py").write_text(STUBS_SOURCE, encoding="utf-8")
    module = load_module(tmp_path, "stubs")
    with pytest.raises(NotImplementedError) as caught:
        make(module)
    message = not_implemented_message(caught.value, [module], "skipped")
    assert message == expected, f"got {message!r}, expected {expected!r}"
    student = Student(tmp_path, {"stubs": module}, None)
    if expected is None:
        with pytest.raises(NotImplementedError), student.skip("skipped"):
            make(module)
    else:
        with student.skip("skipped") as attempt:
            make(module)
        assert attempt.notes == [expected], f"Student.skip should keep the line for the table's notes: {attempt.notes}"


# Lecture 2: the lecture's figures.

def test_lecture02_correct_cache_and_the_two_bugs(reference_runs: ReferenceRuns) -> None:
    reference = reference_runs("lecture02")[1]
    rows = {row[0]: row for row in table(reference.stdout, "(1)")}
    correct = rows["your greedy_decode"]
    assert correct[1] == "yes" and number(correct[2]) < 1e-12, f"the correct cache should match the reference: {correct}"
    for bug in ("bug: prompt never cached", "bug: decode token at position 0"):
        assert rows[bug][3] == "1", f"{bug}: logits should first differ at step 1 (step 0 is the prefill): {rows[bug]}"
        assert rows[bug][4].startswith("step 1:"), f"{bug}: the first wrong token should come at step 1: {rows[bug]}"


def test_lecture02_flop_ratios_are_the_lectures(reference_runs: ReferenceRuns) -> None:
    reference = reference_runs("lecture02")[1]
    small = {row[0]: row for row in table(reference.stdout, "(2a)")}
    assert set(small) == {"64", "128", "256"}, f"table (2a) should have rows for 64, 128 and 256 new tokens: {small}"
    assert 130 <= number(small["256"][3]) <= 150, f"about 140x fewer FLOPs at 256 new tokens: {small['256']}"
    assert all(row[-1] == "yes" for row in small.values()), f"cached and no-cache tokens should agree: {small}"
    llama = {(row[0], row[1]): row for row in table(reference.stdout, "(2b)")}
    assert 3800 <= number(llama["1,000", "8,000"][4]) <= 4200, f"about 4000x for 8000 tokens after 1000: {llama}"


def test_lecture02_memory_and_batching_tables_agree(reference_runs: ReferenceRuns) -> None:
    reference = reference_runs("lecture02")[1]
    sizes = table(reference.stdout, "(3a)")
    assert sizes and all(row[-1] == "yes" for row in sizes), f"nbytes, kv_cache_bytes and the formula should agree: {sizes}"
    crossover = {row[0]: row for row in table(reference.stdout, "(3c)")}
    assert crossover["Llama-3.1-8B"][-1] == "122,532", f"16,060,522,496 weight bytes / 131,072 per token: {crossover}"
    assert all(row[4] == "yes" for row in crossover.values()), f"the solution's KV/token should match the published figures: {crossover}"
    steps = table(reference.stdout, "(4a)")
    assert [row[0] for row in steps] == ["1", "4", "16", "64"], f"table (4a) should cover B = 1, 4, 16, 64: {steps}"
    assert all(row[-1] == "yes" for row in steps), f"measured decode steps should match kvlab.costs: {steps}"
    intensities = [number(row[4]) for row in table(reference.stdout, "(4b)")]
    assert intensities == sorted(intensities) and intensities[-1] < 295, f"intensity grows with B, below the ridge: {intensities}"


def test_lecture02_published_figure_stands_in_for_kv_bytes_per_token(
        tmp_path: Path, reference_runs: ReferenceRuns) -> None:
    reference = reference_runs("lecture02")[1]
    (tmp_path / "kv_decode.py").write_text(stubbed("lecture02", "kv_decode.py", {"kv_bytes_per_token"}), encoding="utf-8")
    run = run_demo("lecture02", tmp_path)
    problem = clean_exit(run)
    assert problem is None, f"a kv_bytes_per_token stub should cost notes, not a traceback; {problem}"
    note = "kv_bytes_per_token is not implemented yet (task kv_memory): Llama-3.1-8B uses its published figure, 131,072 bytes/token"
    for tag in ("(2b)", "(3c)", "(4b)"):
        assert note in section(run.stdout, tag), f"table {tag} should say it used the published figure:\n{section(run.stdout, tag)}"
    for tag in ("(2b)", "(4b)"):
        assert table(run.stdout, tag) == table(reference.stdout, tag), \
            f"with the published figure, table {tag} should read as with the solution's:\n{section(run.stdout, tag)}"
    crossover, expected = table(run.stdout, "(3c)"), table(reference.stdout, "(3c)")
    assert [row[2] for row in crossover] == [row[4] for row in crossover] == ["-", "-"], \
        f"no KV/token of yours, so nothing to match against the published figure: {crossover}"
    assert [[row[i] for i in (0, 1, 3, 5)] for row in crossover] == [[row[i] for i in (0, 1, 3, 5)] for row in expected], \
        f"the weights, published figures and crossover should not depend on your kv_bytes_per_token: {crossover} vs {expected}"
    steps = table(run.stdout, "(4a)")
    assert steps and all(row[-1] == "-" for row in steps), f"the tiny model has no published figure, so no comparison: {steps}"
    assert "column '= kvlab.costs' skipped" in section(run.stdout, "(4a)"), f"table (4a) should say why:\n{section(run.stdout, '(4a)')}"


# Lecture 7: the lecture's figures.

def test_lecture07_plot_and_hashes(reference_runs: ReferenceRuns) -> None:
    folder, reference = reference_runs("lecture07")
    plot = folder / "hit-ratio.png"
    assert plot.is_file() and plot.read_bytes()[:8] == PNG_SIGNATURE, f"--plot should write a PNG to {plot}"
    rows = table(reference.stdout, "(1)")
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
def test_lecture07_shared_prefix_saves_what_was_derived_by_hand(reference_runs: ReferenceRuns, prefix: str,
                                                                expected: dict[str, int]) -> None:
    reference = reference_runs("lecture07")[1]
    rows = {row[0]: row for row in table(reference.stdout, "(2)")}
    assert prefix in rows, f"table (2) should have a row for the {prefix} prefix: {rows}"
    row = rows[prefix]
    got = {"input": number(row[2]), "computed": number(row[3]), "saved": number(row[4]), "blocks": number(row[6])}
    for key, value in expected.items():
        assert got[key] == value, f"{prefix}: {key} should be {value}, got {got[key]} (row {row})"
    assert number(row[7]) < 1e-12, f"{prefix}: sharing blocks must not change the logits: max diff {row[7]}"


def test_lecture07_hit_ratios_gpu_time_and_storage(reference_runs: ReferenceRuns) -> None:
    reference = reference_runs("lecture07")[1]
    rows = [row for row in table(reference.stdout, "(3b)") if row[1] == "LRU (yours)"]
    assert rows and rows[0][0] == "make_trace(seed=0)", f"table (3b) should start with the synthetic trace's LRU row: {rows}"
    for row in rows:
        ratios = [number(cell) for cell in row[2:]]
        assert ratios == sorted(ratios, reverse=True) and ratios[-1] < ratios[0], \
            f"{row[0]}: LRU hit ratio should fall from unlimited to 1,000 blocks: {ratios}"
    speedups = [number(row[-1]) for row in table(reference.stdout, "(4a)")]
    assert len(speedups) == 4 and speedups[0] == 1 and speedups[1:] == sorted(speedups[1:], reverse=True) \
        and speedups[-1] > 1, f"no cache, then LRU at unlimited, 10,000, 1,000: speedups above 1, falling: {speedups}"
    storage = {row[0]: row for row in table(reference.stdout, "(4b)")}
    # 10,000 blocks x 512 tokens x 327,680 bytes = 1.68e12 bytes, 2.62 x the 0.64 TB of HBM.
    assert storage["10,000"][2:] == ["1.68", "2.62"], f"10,000 blocks of 160 MiB: 1.68 TB, 2.62x HBM: {storage}"


@pytest.mark.parametrize("definitions, expected, plotted", [
    ({"LFUCache"}, ["LFUCache is not implemented yet (task eviction): the LFU rows skipped"], True),
    ({"PagedSequence"}, ["PagedSequence is not implemented yet (task paged_sequence): row '341 tokens' skipped"], True),
    ({"block_hashes", "BlockPool", "hit_ratio"},
     ["block_hashes is not implemented yet (task block_hashes): table (1) skipped",
      "BlockPool is not implemented yet (task block_pool): row '80 tokens' skipped",
      "hit_ratio is not implemented yet (task hit_ratio): the LRU rows skipped"], False),
], ids=["lfu-stub", "paged-sequence-stub", "hashes-pool-hit-ratio-stubs"])
def test_lecture07_on_unfinished_submissions(tmp_path: Path, definitions: set[str], expected: list[str],
                                             plotted: bool) -> None:
    for name in ("paged_kv.py", "prefix_cache.py"):
        (tmp_path / name).write_text(stubbed("lecture07", name, definitions), encoding="utf-8")
    empty = tmp_path / "no-traces"
    empty.mkdir()
    # No --plot: the default goes to dist/ under the current folder.
    run = run_demo("lecture07", tmp_path, mooncake=empty)
    problem = clean_exit(run)
    assert problem is None, f"stubs should cost a line each, not a traceback; {problem}"
    for line in expected:
        assert line in run.stdout, f"expected the line {line!r}; output:\n{run.stdout}"
    assert all(words in run.stdout for words in ("absent from", "make traces", "KVLAB_MOONCAKE_DIR")), \
        f"missing real traces should be named, with where to get them:\n{run.stdout}"
    assert (tmp_path / "dist" / "lecture07-hit-ratio.png").is_file() == plotted, \
        f"the default plot should {'' if plotted else 'not '}be written when hit ratios {'exist' if plotted else 'do not'}"
    for tag in ("(3a)", "(4b)"):
        assert table(run.stdout, tag), f"table {tag} needs no student code and should print"
