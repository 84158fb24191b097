"""tools/bench_grading.py: the table it prints from its gradings, and the gradings it refuses to time.

The gradings themselves are the grader's (tested elsewhere); here each child process is replaced by
canned results, so the figures the benchmark derives can be checked exactly.
"""
from __future__ import annotations

from typing import Any

import pytest

from tools import bench_grading

CROSSING = {"start_seconds": 0.15, "start_worker_cpu": 0.14, "round_trip_us": 97.0, "grader_us": 60.0,
            "worker_us": 37.0}


def fake_children(seconds: dict[tuple[str, str], list[float]], score: float = 100.0) -> Any:
    """A stand-in for bench_grading.child: the next canned time of each (assignment, mode)."""
    remaining = {key: list(values) for key, values in seconds.items()}

    def child(cpu: int, *args: str) -> dict[str, float]:
        if args[0] == "--crossing":
            return CROSSING
        _, assignment, mode = args
        return {"seconds": remaining[assignment, mode].pop(0), "score": score, "max_score": 100.0}

    return child


def test_the_table_gives_best_and_median_ratios(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seconds = {("lecture02", "inprocess"): [0.5, 0.4, 0.8], ("lecture02", "sandbox"): [1.3, 1.6, 1.2]}
    monkeypatch.setattr(bench_grading, "child", fake_children(seconds))
    assert bench_grading.main(["lecture02", "--rounds", "3", "--cpu", "0"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("lecture02"))
    # best 0.40 and 1.20 (3.00x); medians 0.50 and 1.30 (2.60x)
    assert row.split() == ["lecture02", "0.40", "0.50", "1.20", "1.30", "3.00x", "2.60x"], row
    assert "a worker starts in 0.150 s" in out and "97 us of wall time (grader 60 us, worker 37 us" in out, out


def test_a_reference_without_full_marks_is_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    seconds = {("lecture02", "inprocess"): [0.5], ("lecture02", "sandbox"): [1.3]}
    monkeypatch.setattr(bench_grading, "child", fake_children(seconds, score=97.0))
    with pytest.raises(RuntimeError, match="scored 97.0 of 100.0 inprocess"):
        bench_grading.main(["lecture02", "--rounds", "1", "--cpu", "0"])
