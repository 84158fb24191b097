"""The module-6 demo runs end to end: part 1's table with the lab's DeepSeek-V3 figure beside the MLA
one, and part 2's server-backed TTFT comparison (one run per mode, to stay short)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
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
