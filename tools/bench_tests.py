"""The repository's own test tiers, timed as a contributor waits for them.

    python -m tools.bench_tests [--tier everyday|all|both] [--baseline REV] [--write-docs]

Runs `make test` (the everyday tier) and `make test-all` (every test, what CI runs) in this
checkout, one after the other, and prints for each its wall-clock seconds, the CPU seconds of
everything it ran (user and system time of every process it waited for: pytest, its workers, the
gradings and their sandboxed workers), and pytest's closing line. With `--baseline REV`, the same
for `make test` of revision REV first, in a temporary worktree beside this checkout sharing its
.venv, traces and ../shared (the "before" of a change to the suite's time). The goals: the everyday
tier within 300 s and `make test-all` within 900 s of wall time on 2 idle cores.

Before and after the runs it times a fixed CPU loop (`LOOP`, best of 3): the same tests have
taken 75% longer on one day than on another, and only that loop's seconds say how fast the machine
was while they ran.

`--write-docs` also writes what it prints into its section of docs/performance.md (between
`<!-- bench:tests -->` and `<!-- /bench:tests -->`; `tools.bench.publish`). Run it on an otherwise
idle machine: the figures are for the whole machine's two cores.
"""
from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import timeit
from dataclasses import dataclass
from pathlib import Path

from tools.bench import ROOT, publish

TIERS = {"everyday": "test", "all": "test-all"}
GOALS = {"everyday": 300.0, "all": 900.0}
# The machine's speed: pure interpreter work, no I/O, timed in this process.
LOOP = "sum(range(10**8))"
# pytest's closing line, e.g. "==== 1021 passed, 3 skipped, 766 deselected in 287.05s (0:04:47) ====".
SUMMARY = re.compile(r"^=+ (.*\d+ (?:passed|failed).*) in [\d.]+s.*=+$", re.MULTILINE)


@dataclass(frozen=True)
class Timing:
    label: str
    wall: float
    cpu: float
    summary: str
    ok: bool


def run_make(target: str, checkout: Path, label: str) -> Timing:
    """`make TARGET` in `checkout`: its wall and CPU seconds and pytest's closing line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run(["make", "-s", target], cwd=checkout, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    found = SUMMARY.findall(done.stdout)
    summary = found[-1] if found else f"no pytest summary (make exited {done.returncode})"
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-6000:] + done.stderr[-3000:])
    return Timing(label, wall, cpu, summary, done.returncode == 0)


def loop_seconds(rounds: int = 3) -> float:
    """The best wall time of LOOP over `rounds` runs in this process: the machine's speed."""
    return min(timeit.repeat(LOOP, number=1, repeat=rounds))


def speed_line(when: str) -> str:
    """What the bench prints of the machine's speed `when` ("before the runs", "after the runs")."""
    return f"machine speed: {LOOP} takes {loop_seconds():.2f} s {when}"


def baseline_checkout(revision: str, folder: Path) -> Path:
    """A worktree of `revision` in `folder`, sharing this checkout's .venv, installed traces and
    neighbouring `shared/` folder (the course's, which some tests read as ../shared)."""
    checkout = folder / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(checkout), revision], cwd=ROOT, check=True,
                   capture_output=True)
    (checkout / ".venv").symlink_to(ROOT / ".venv")
    # make rebuilds a venv older than its requirements, and the checkout has just written them: dated
    # back to the shared venv's stamp, they leave it as it is, and the baseline's time holds no install.
    # In nanoseconds: a float second rounds up about half the time, and make compares to the nanosecond.
    stamp = (ROOT / ".venv" / ".installed").stat().st_mtime_ns
    for path in (checkout / "requirements").glob("*.txt"):
        os.utime(path, ns=(stamp, stamp))
    if (ROOT.parent / "shared").is_dir():
        (folder / "shared").symlink_to(ROOT.parent / "shared")
    if (ROOT / "data" / "mooncake").is_dir():
        shutil.copytree(ROOT / "data" / "mooncake", checkout / "data" / "mooncake")
    return checkout


def remove_checkout(checkout: Path) -> None:
    """Remove a worktree baseline_checkout made, whatever was left in it."""
    subprocess.run(["git", "worktree", "remove", "--force", str(checkout)], cwd=ROOT, check=False, capture_output=True)


def bench(tiers: list[str], baseline: str | None) -> list[Timing]:
    """Time each tier (and the baseline's `make test` first), printing a table as it goes."""
    timings = []
    print(speed_line("before the runs"))
    print(f"{'run':<34} {'wall s':>8} {'CPU s':>8}  pytest's closing line")
    runs: list[tuple[str, Path, str]] = []
    with tempfile.TemporaryDirectory(prefix="kvlab-bench-tests-", dir=ROOT.parent) as scratch:
        before: Path | None = None
        if baseline is not None:
            before = baseline_checkout(baseline, Path(scratch))
            runs.append((f"before: make test at {baseline[:12]}", before, "test"))
        runs += [(f"{tier}: make {TIERS[tier]}", ROOT, TIERS[tier]) for tier in tiers]
        try:
            for label, checkout, target in runs:
                timing = run_make(target, checkout, label)
                timings.append(timing)
                print(f"{label:<34} {timing.wall:8.0f} {timing.cpu:8.0f}  {timing.summary}", flush=True)
        finally:
            if before is not None:
                remove_checkout(before)
    print(speed_line("after the runs"))
    for tier in tiers:
        timing = next(t for t in timings if t.label.startswith(f"{tier}:"))
        verdict = "within" if timing.wall <= GOALS[tier] else "OVER"
        print(f"{tier}: {timing.wall:.0f} s wall, {verdict} its goal of {GOALS[tier]:.0f} s")
    failed = [t.label for t in timings if not t.ok]
    if failed:  # figures of a failing suite are not the suite's figures: nothing is published
        raise RuntimeError(f"failed: {', '.join(failed)}; what they printed is above")
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", choices=[*TIERS, "both"], default="both")
    parser.add_argument("--baseline", metavar="REV", help="also time `make test` of this git revision, first")
    parser.add_argument("--write-docs", action="store_true",
                        help="write the figures into their section of docs/performance.md")
    args = parser.parse_args(argv)
    tiers = list(TIERS) if args.tier == "both" else [args.tier]
    print(f"{os.cpu_count()} cores; TEST_JOBS={os.environ.get('TEST_JOBS', '2 (the Makefile default)')}")
    try:
        if args.write_docs:
            publish("tests", lambda: bench(tiers, args.baseline))
        else:
            bench(tiers, args.baseline)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
