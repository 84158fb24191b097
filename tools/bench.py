"""Replay timings of the reference `hit_ratio` (`make bench`).

Replays the real Mooncake conversation trace (12,031 requests, from `kvlab.trace.mooncake_dir()`)
through `solutions/lecture07/prefix_cache.py`'s `hit_ratio` for each policy (LRU, LFU) and capacity
(unlimited, 100,000, 10,000 and 1,000 blocks), best of 3 runs each, and prints the seconds per replay
beside a floor: the same replay with a bare set and no eviction (walk each request's blocks while
they are in the set, then add them all), which no cache can beat in pure Python. The same follows
for the synthetic trace `make_trace(seed=0)` and, when present, Mooncake's synthetic trace.

The target: at most 1 s per (policy, capacity) on the conversation trace. The machine is shared,
so timings are the best of several runs and still vary by a few tens of percent.

    python -m tools.bench [--repeats N] [--write-docs]

`--write-docs` also writes what it prints into its own section of docs/performance.md (between
`<!-- bench:replay -->` and `<!-- /bench:replay -->`). The helpers for that (`write_docs_section`,
`publish`) live here and serve the other benches too (`tools.bench_grading`, `tools.bench_kvstore`).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
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
PERFORMANCE_PAGE = ROOT / "docs" / "performance.md"


def section_markers(name: str) -> tuple[str, str]:
    """The opening and closing markers of bench section `name` in docs/performance.md."""
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def write_docs_section(name: str, content: str, page: Path = PERFORMANCE_PAGE) -> None:
    """Replace what lies between section `name`'s markers in `page` by `content`.

    Everything outside the markers (the markers included) is kept byte for byte. Each marker must
    appear exactly once, the opening one first: otherwise ValueError, naming the marker, and the
    page is left as it was (a page edited by hand must never lose text silently).
    """
    opening, closing = section_markers(name)
    text = page.read_text(encoding="utf-8")
    for marker in (opening, closing):
        if text.count(marker) != 1:
            raise ValueError(f"{page} holds {marker} {text.count(marker)} times, not once: "
                             f"restore section {name!r} by hand before writing it")
    start = text.index(opening) + len(opening)
    end = text.index(closing)
    if end < start:
        raise ValueError(f"{page}: {closing} comes before {opening}")
    page.write_text(text[:start] + "\n" + content.strip("\n") + "\n" + text[end:], encoding="utf-8")


def machine_description() -> str:
    """The machine the figures come from: its cores, CPU model (where Linux says) and Python."""
    model = ""
    with contextlib.suppress(OSError):
        found = re.search(r"^model name\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.MULTILINE)
        model = f" ({found.group(1).strip()})" if found else ""
    return f"{os.cpu_count()} cores{model}, Python {platform.python_version()}"


def invoked_command() -> str:
    """How this process was started, as `python -m package.module ARGS` where it can tell."""
    script = Path(sys.argv[0]).resolve()
    try:
        module = ".".join(script.relative_to(ROOT).with_suffix("").parts)
    except ValueError:
        module = script.name
    return " ".join(["python -m", module, *sys.argv[1:]])


class _Tee(io.StringIO):
    """Keeps a copy of what is written and passes it on (a bench's output still reaches the console)."""

    def __init__(self, target: Any) -> None:
        super().__init__()
        self.target = target

    def write(self, text: str) -> int:
        self.target.write(text)
        return super().write(text)

    def flush(self) -> None:
        self.target.flush()


def publish(name: str, run: Callable[[], Any], page: Path = PERFORMANCE_PAGE) -> Any:
    """Call run() (a bench that prints its figures), then write what it printed to section `name`.

    The section says which command made the figures and on what machine (never when: the page
    holds the figures of the last run), then the printed text verbatim, with this checkout's path
    made relative. Nothing is written if run() raises. Returns run()'s result.
    """
    with contextlib.redirect_stdout(_Tee(sys.stdout)) as copy:
        result = run()
    printed = copy.getvalue().replace(f"{ROOT}/", "").rstrip()
    write_docs_section(name, f"Figures from the last run of `{invoked_command()}`, on {machine_description()}:\n\n"
                             f"```text\n{printed}\n```", page)
    print(f"\nwrote section {name!r} of {page}")
    return result


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
    target_note = (f"target: <= {target:g} s per replay" if target is not None
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
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the figures into their section of docs/performance.md")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    if args.write_docs:
        return publish("replay", lambda: replay_all(args.repeats))
    return replay_all(args.repeats)


def replay_all(repeats: int) -> int:
    """Print the replay table of every trace present (the conversation trace first)."""
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
        print(bench_trace(name, trace, reference, repeats, target))
    return 0


if __name__ == "__main__":
    sys.exit(main())
