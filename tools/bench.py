"""Replay timings of the reference `hit_ratio` (`make bench`).

Replays the real Mooncake conversation trace (12,031 requests, from `kvlab.trace.mooncake_dir()`)
through `solutions/lecture07/prefix_cache.py`'s `hit_ratio` for each policy (LRU, LFU) and capacity
(unlimited, 100,000, 10,000 and 1,000 blocks), best of 3 runs each, and prints the seconds per replay
beside a floor: the same replay with a bare set and no eviction (walk each request's blocks while
they are in the set, then add them all), which no cache can beat in pure Python. The same follows
for the synthetic trace `make_trace(seed=0)` and, when present, Mooncake's synthetic trace.

The target (course issue): at most 1 s per (policy, capacity) on the conversation trace. The
machine is shared, so timings are the best of several runs and still vary by a few tens of percent.

    python -m tools.bench [--repeats N]
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    # `python tools/bench.py` as well as `python -m tools.bench`: kvlab lives at the repository root.
    sys.path.insert(0, str(ROOT))

from kvlab.tables import format_table, human_ratio  # noqa: E402
from kvlab.trace import BLOCK, Request, load_mooncake_trace, make_trace, mooncake_dir  # noqa: E402

SOLUTION = ROOT / "solutions" / "lecture07"
POLICIES = ("lru", "lfu")
CAPACITIES: tuple[int | None, ...] = (None, 100_000, 10_000, 1_000)
TARGET_SECONDS = 1.0
CONVERSATION = "conversation_trace.jsonl"
MOONCAKE_SYNTHETIC = "synthetic_trace.jsonl"


def load_reference() -> ModuleType:
    """The reference `prefix_cache` module (it imports its sibling `paged_kv`, hence the path)."""
    sys.path.insert(0, str(SOLUTION))
    import prefix_cache  # noqa: PLC0415 - importable only once its folder is on the path

    return prefix_cache


def floor_hit_ratio(trace: Sequence[Request], block_size: int = BLOCK) -> float:
    """The unlimited cache's hit ratio with a bare set: the least work any replay must do.

    Same accounting as `hit_ratio` (token-weighted, a hit capped at the prompt's length), but no
    recency or use counts to maintain and nothing ever evicted.
    """
    seen: set[int] = set()
    hit = total = 0
    for request in trace:
        n = 0
        for block in request.blocks:
            if block not in seen:
                break
            n += 1
        hit += min(n * block_size, request.input_len)
        total += request.input_len
        seen.update(request.blocks)
    return hit / total if total else 0.0


def best_of(repeats: int, fn: Callable[[], Any]) -> tuple[float, Any]:
    """(fastest wall-clock seconds over `repeats` calls of fn, fn's last result)."""
    best = float("inf")
    result = None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def capacity_label(capacity: int | None) -> str:
    return "unlimited" if capacity is None else f"{capacity:,}"


def bench_trace(name: str, trace: Sequence[Request], reference: ModuleType, repeats: int,
                target: float | None) -> str:
    """The table of one trace: the floor, then every (policy, capacity) replay, best of `repeats`."""
    floor_seconds, floor_ratio = best_of(repeats, lambda: floor_hit_ratio(trace))
    rows: list[list[Any]] = [["bare set (floor)", "unlimited", floor_ratio, floor_seconds, 1.0, None]]
    for policy in POLICIES:
        for capacity in CAPACITIES:
            seconds, ratio = best_of(repeats, lambda: reference.hit_ratio(trace, capacity, policy))
            rows.append([f"reference {policy.upper()}", capacity_label(capacity), ratio, seconds,
                         seconds / floor_seconds, None if target is None else seconds <= target])
    target_note = (f"target: <= {target:g} s per replay (course issue)" if target is not None
                   else "no target for this trace")
    return format_table(
        f"{name}: {len(trace):,} requests, best of {repeats} runs",
        ["replay", "capacity (blocks)", "hit ratio", "seconds", "vs floor", "meets target"],
        rows,
        formats=[None, None, ".4f", ".3f", human_ratio, None],
        notes=["floor: a bare set, no eviction (the unlimited hit ratio with the least work); " + target_note],
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="runs per replay; the fastest counts (default 3)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    reference = load_reference()

    folder = mooncake_dir()
    traces: list[tuple[str, list[Request], float | None]] = []
    conversation = folder / CONVERSATION
    if conversation.is_file():
        traces.append((f"Mooncake {CONVERSATION}", load_mooncake_trace(conversation), TARGET_SECONDS))
    else:
        print(f"The Mooncake conversation trace is absent ({conversation} does not exist): "
              "set KVLAB_MOONCAKE_DIR to the folder holding it. Benchmarking the synthetic traces only.")
    traces.append(("make_trace(seed=0)", make_trace(seed=0), None))
    if (folder / MOONCAKE_SYNTHETIC).is_file():
        traces.append((f"Mooncake {MOONCAKE_SYNTHETIC}", load_mooncake_trace(folder / MOONCAKE_SYNTHETIC), None))

    print(f"Replays through the reference hit_ratio, {SOLUTION.relative_to(ROOT)}/prefix_cache.py")
    for name, trace, target in traces:
        print()
        print(bench_trace(name, trace, reference, args.repeats, target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
