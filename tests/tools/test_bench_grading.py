"""tools/bench_grading.py: the tables it prints from its gradings, and the gradings it refuses to time.

The gradings themselves are the grader's (tested elsewhere); here each child process is replaced by
canned results, so the figures the benchmark derives can be checked exactly.
"""
from __future__ import annotations

import pytest

from tools import bench_grading

CROSSING = {"start_seconds": 0.15, "start_worker_cpu": 0.14, "round_trip_us": 97.0, "grader_us": 60.0,
            "worker_us": 37.0}


def fake_children(monkeypatch: pytest.MonkeyPatch, seconds: dict[tuple[str, str], list[float]],
                  process_seconds: dict[tuple[str, str], list[float]] | None = None, score: float = 100.0) -> None:
    """Stand-ins for bench_grading's children: the next canned time of each (assignment, mode), and
    of its whole process (by default the same), and the canned cost of crossing."""
    remaining = {key: list(values) for key, values in seconds.items()}
    process = {key: list(values) for key, values in (process_seconds or seconds).items()}

    def timed_child(cpu: int, *args: str) -> dict[str, float]:
        _, assignment, mode = args
        return {"seconds": remaining[assignment, mode].pop(0), "process_seconds": process[assignment, mode].pop(0),
                "score": score, "max_score": 100.0}

    monkeypatch.setattr(bench_grading, "timed_child", timed_child)
    monkeypatch.setattr(bench_grading, "child", lambda cpu, *args: CROSSING)


def table_row(out: str, title: str, assignment: str) -> list[str]:
    """The cells of `assignment`'s row in the table printed under `title`."""
    below = out[out.index(title):]
    return next(line for line in below.splitlines() if line.startswith(assignment)).split()


def test_the_tables_give_best_and_median_ratios(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    seconds = {("lecture02", "inprocess"): [0.5, 0.4, 0.8], ("lecture02", "sandbox"): [1.3, 1.6, 1.2]}
    process = {("lecture02", "inprocess"): [1.0, 1.2, 1.1], ("lecture02", "sandbox"): [1.6, 1.5, 2.0]}
    fake_children(monkeypatch, seconds, process)
    assert bench_grading.main(["lecture02", "--rounds", "3", "--cpu", "0"]) == 0
    out = capsys.readouterr().out
    # best 0.40 and 1.20 (3.00x); medians 0.50 and 1.30 (2.60x)
    assert table_row(out, "Whole gradings", "lecture02") == [
        "lecture02", "0.40", "0.50", "1.20", "1.30", "3.00x", "2.60x"]
    # whole processes: best 1.00 and 1.50 (1.50x); medians 1.10 and 1.60 (1.45x)
    assert table_row(out, "whole processes", "lecture02") == [
        "lecture02", "1.00", "1.10", "1.50", "1.60", "1.50x", "1.45x"]
    assert "a worker starts in 0.150 s" in out and "97 us of wall time (grader 60 us, worker 37 us" in out, out


def test_a_whole_process_is_timed_around_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([10.0, 12.5])
    monkeypatch.setattr(bench_grading.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(bench_grading, "child", lambda cpu, *args: {"seconds": 1.0, "score": 1.0})
    assert bench_grading.timed_child(0, "--one", "lecture02", "sandbox") == {
        "seconds": 1.0, "score": 1.0, "process_seconds": 2.5}


def test_a_reference_without_full_marks_is_not_timed(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_children(monkeypatch, {("lecture02", "inprocess"): [0.5], ("lecture02", "sandbox"): [1.3]}, score=97.0)
    with pytest.raises(RuntimeError, match="scored 97.0 of 100.0 inprocess"):
        bench_grading.main(["lecture02", "--rounds", "1", "--cpu", "0"])
