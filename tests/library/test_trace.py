"""Tests of kvlab.trace: the synthetic trace's shape, id consistency, and loading the real traces.

The statistics are recomputed here from the requests (not taken from `trace_stats`), so a mistake in
the helper cannot hide a mistake in the generator.
"""
from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from pathlib import Path

import pytest

from kvlab import trace as kt
from tools.bench import floor_hit_ratio

SEEDS = (0, 1, 2)


@pytest.fixture(scope="module")
def traces() -> dict[int, list[kt.Request]]:
    # make_trace takes about 0.1 s; generating each seed once keeps the file fast.
    return {seed: kt.make_trace(seed) for seed in SEEDS}


def follow_up_share(trace: list[kt.Request]) -> float:
    """Share of requests that repeat all full blocks of one earlier request, including blocks that
    request introduced (so more than a shared template), and then continue with new blocks."""
    owner: dict[int, int] = {}
    follow_ups = 0
    for i, request in enumerate(trace):
        n = 0
        while n < len(request.blocks) and request.blocks[n] in owner:
            n += 1
        if 0 < n < len(request.blocks):
            earlier = trace[owner[request.blocks[n - 1]]]
            if n == earlier.input_len // kt.BLOCK:
                follow_ups += 1
        for block in request.blocks[n:]:
            owner[block] = i
    return follow_ups / len(trace)


def inconsistent_parents(trace: list[kt.Request]) -> list[tuple[int, int | None, int | None]]:
    """(block, first parent, other parent) for every id seen after two different parent ids."""
    parent_of: dict[int, int | None] = {}
    bad = []
    for request in trace:
        parent = None
        for block in request.blocks:
            known = parent_of.setdefault(block, parent)
            if known != parent:
                bad.append((block, known, parent))
            parent = block
    return bad


def test_same_seed_same_trace(traces: dict[int, list[kt.Request]]) -> None:
    assert kt.make_trace(0) == traces[0], "make_trace(0) differs between two calls: it must be deterministic"


def test_different_seeds_differ(traces: dict[int, list[kt.Request]]) -> None:
    assert traces[0] != traces[1], "make_trace(0) and make_trace(1) are identical: the seed is ignored"


@pytest.mark.parametrize("seed", SEEDS)
def test_shape_of_requests(traces: dict[int, list[kt.Request]], seed: int) -> None:
    trace = traces[seed]
    assert len(trace) == 23_608, f"seed {seed}: {len(trace)} requests, expected the default n_requests 23,608"
    arrivals = [r.arrival for r in trace]
    assert arrivals == sorted(arrivals), f"seed {seed}: arrivals are not sorted"
    assert 0 <= arrivals[0] and arrivals[-1] < 3600, (
        f"seed {seed}: arrivals span {arrivals[0]:.1f} .. {arrivals[-1]:.1f} s, expected within [0, 3600)")
    assert arrivals[-1] - arrivals[0] > 55 * 60, f"seed {seed}: the trace covers less than 55 minutes"
    for r in trace:
        assert type(r.blocks) is tuple and all(type(b) is int for b in r.blocks), (
            f"seed {seed}: blocks {type(r.blocks).__name__} of "
            f"{sorted({type(b).__name__ for b in r.blocks})}, expected a tuple of Python ints")
        assert len(r.blocks) == math.ceil(r.input_len / kt.BLOCK), (
            f"seed {seed}: input_len {r.input_len} has {len(r.blocks)} block ids, "
            "expected ceil(input_len / 512)")
        assert type(r.input_len) is int and type(r.output_len) is int and r.output_len >= 1, (
            f"seed {seed}: input_len {r.input_len!r}, output_len {r.output_len!r}: "
            "expected ints, output >= 1")


@pytest.mark.parametrize("seed", SEEDS)
def test_ids_are_prefix_consistent(traces: dict[int, list[kt.Request]], seed: int) -> None:
    bad = inconsistent_parents(traces[seed])
    assert not bad, (
        f"seed {seed}: {len(bad)} ids follow two different parents, e.g. (id, parent, parent) {bad[:3]}")


@pytest.mark.parametrize("seed", SEEDS)
def test_statistics_like_mooncake_tool_agent(traces: dict[int, list[kt.Request]], seed: int) -> None:
    trace = traces[seed]
    n = len(trace)
    avg_input = sum(r.input_len for r in trace) / n
    avg_output = sum(r.output_len for r in trace) / n
    assert 7_800 <= avg_input <= 9_400, (
        f"seed {seed}: average input {avg_input:.0f} tokens, expected about 8,600")
    assert 160 <= avg_output <= 200, (
        f"seed {seed}: average output {avg_output:.1f} tokens, expected about 180")

    counts = Counter(b for r in trace for b in r.blocks)
    once = sum(1 for c in counts.values() if c == 1) / len(counts)
    assert once > 0.5, f"seed {seed}: {once:.0%} of distinct blocks are seen once, expected more than half"
    accesses = sorted(counts.values(), reverse=True)
    top = sum(accesses[: len(accesses) // 100]) / sum(accesses)
    assert top >= 0.25, f"seed {seed}: the hottest 1% of blocks take {top:.0%} of accesses, expected >= 25%"

    ratio = floor_hit_ratio(trace)
    assert 0.5 <= ratio <= 0.6, f"seed {seed}: unlimited-cache hit ratio {ratio:.3f}, expected 0.5-0.6"
    follow = follow_up_share(trace)
    assert follow >= 0.2, (
        f"seed {seed}: only {follow:.0%} of requests extend an earlier request's prompt; multi-turn "
        "sessions should make that at least 20%")


@pytest.mark.parametrize("n_requests", [1, 7, 500])
def test_small_traces(n_requests: int) -> None:
    trace = kt.make_trace(3, n_requests=n_requests, duration=60.0)
    assert len(trace) == n_requests, f"n_requests={n_requests} gave {len(trace)} requests"
    arrivals = [r.arrival for r in trace]
    assert arrivals == sorted(arrivals) and 0 <= arrivals[0] and arrivals[-1] < 60.0, (
        f"n_requests={n_requests}: arrivals {arrivals[:3]}.. not sorted within [0, 60)")
    assert not inconsistent_parents(trace), f"n_requests={n_requests}: ids follow different parents"


@pytest.mark.parametrize("bad", [
    {"n_requests": 0}, {"duration": 0.0}, {"n_templates": 0}, {"n_system_prompts": 0},
    {"zipf": -1.0}, {"mean_turns": 0.5}, {"median_gap": 0.0},
])
def test_make_trace_rejects_bad_knobs(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        kt.make_trace(0, **bad)


def test_request_is_frozen_and_keeps_a_tuple() -> None:
    r = kt.Request(1.5, 600, 10, [7, 8])  # type: ignore[arg-type]
    assert r.blocks == (7, 8), f"blocks given as a list became {r.blocks!r}, expected the tuple (7, 8)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.input_len = 1  # type: ignore[misc]


def test_trace_stats_on_a_hand_made_trace() -> None:
    trace = [
        kt.Request(0.0, 1024, 10, (0, 1)),
        kt.Request(30.0, 1100, 20, (0, 1, 2)),
        kt.Request(120.0, 512, 30, (0,)),
    ]
    stats = kt.trace_stats(trace)
    expected = {"requests": 3, "minutes": 2.0, "avg_input": (1024 + 1100 + 512) / 3,
                "avg_output": 20.0, "distinct_blocks": 3, "once_share": 1 / 3,
                "hottest_block_accesses": 3, "top1pct_share": 3 / 6}
    assert stats.keys() == expected.keys(), f"trace_stats keys {sorted(stats)}, expected {sorted(expected)}"
    for key, value in expected.items():
        assert stats[key] == pytest.approx(value), f"trace_stats()[{key!r}] = {stats[key]}, expected {value}"


# --- the real Mooncake traces -------------------------------------------------------------------

def test_mooncake_dir_default_and_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KVLAB_MOONCAKE_DIR", raising=False)
    root = Path(kt.__file__).resolve().parent.parent
    expected = root / "data" / "mooncake"
    assert kt.mooncake_dir() == expected, f"default mooncake_dir() {kt.mooncake_dir()}, expected {expected}"
    monkeypatch.setenv("KVLAB_MOONCAKE_DIR", str(tmp_path))
    assert kt.mooncake_dir() == tmp_path, f"KVLAB_MOONCAKE_DIR={tmp_path} gave {kt.mooncake_dir()}"


@pytest.mark.parametrize("name, n_requests, avg_input, avg_output", [
    ("conversation_trace.jsonl", 12_031, 12_035, 343),
    ("synthetic_trace.jsonl", 3_993, 15_325, 149),
])
def test_load_real_trace(name: str, n_requests: int, avg_input: int, avg_output: int) -> None:
    path = kt.mooncake_dir() / name
    if not path.is_file():
        pytest.skip(f"{path} not found; run `make traces` or set KVLAB_MOONCAKE_DIR")
    trace = kt.load_mooncake_trace(path)
    assert len(trace) == n_requests, f"{name}: {len(trace)} requests, expected {n_requests}"
    got_input = sum(r.input_len for r in trace) / len(trace)
    got_output = sum(r.output_len for r in trace) / len(trace)
    assert round(got_input) == avg_input, f"{name}: average input {got_input:.1f}, expected {avg_input}"
    assert round(got_output) == avg_output, f"{name}: average output {got_output:.1f}, expected {avg_output}"
    assert trace[0].arrival == 0.0 and trace[-1].arrival < 3600, (
        f"{name}: arrivals {trace[0].arrival} .. {trace[-1].arrival}: "
        "expected seconds (ms / 1000) within an hour")
    assert not inconsistent_parents(trace), f"{name}: some ids follow different parents"


def _write_trace(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


GOOD = {"timestamp": 1500, "input_length": 1000, "output_length": 5, "hash_ids": [4, 9]}


def test_load_small_file(tmp_path: Path) -> None:
    path = _write_trace(tmp_path, [json.dumps(GOOD), "", json.dumps({**GOOD, "timestamp": 2250})])
    trace = kt.load_mooncake_trace(path)
    expected = [kt.Request(1.5, 1000, 5, (4, 9)), kt.Request(2.25, 1000, 5, (4, 9))]
    assert trace == expected, f"loaded {trace}, expected {expected} (timestamps in ms, blank lines skipped)"


@pytest.mark.parametrize("line, reason", [
    ('{"timestamp": 0, "input_length": 10', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "hash_ids"}), "missing field.*hash_ids"),
    (json.dumps({k: v for k, v in GOOD.items() if k != "timestamp"}), "missing field.*timestamp"),
    (json.dumps({**GOOD, "timestamp": "soon"}), "timestamp"),
    (json.dumps({**GOOD, "input_length": 10.5}), "input_length"),
    (json.dumps({**GOOD, "output_length": -1}), "output_length"),
    (json.dumps({**GOOD, "hash_ids": [4, "9"]}), "hash_ids"),
    (json.dumps({**GOOD, "hash_ids": [4]}), "1 hash_ids for input_length 1000"),
])
def test_malformed_line_names_file_and_line(tmp_path: Path, line: str, reason: str) -> None:
    # The bad record sits on line 3, after a good line and a blank one, so the count must include both.
    path = _write_trace(tmp_path, [json.dumps(GOOD), "", line])
    with pytest.raises(ValueError, match=rf"trace\.jsonl, line 3: .*{reason}"):
        kt.load_mooncake_trace(path)
