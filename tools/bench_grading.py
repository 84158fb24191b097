"""Whole gradings of each reference on one CPU, in-process and sandboxed: the sandbox's overhead.

The goal is a sandboxed grading at most 1.5x an in-process one on one core. Each round grades
every assignment's reference once in each mode, each grading in a new interpreter pinned to one
CPU, and times `autograder.harness.run.run` there (the harness's own imports excluded, the
worker's start-up included). Rounds interleave the modes, because this machine's speed drifts by
tens of percent within minutes; the table gives the best and the median of each mode and their
ratios. A second table times the same child processes whole, as the benchmark waits for them: the
interpreter's start, the harness's imports and the grading, which is what Gradescope's
run_autograder waits for (its runner is such a process) and what a student waits for.

Then what crossing the sandbox costs on that CPU, the floor of the overhead: the start-up of a
worker (the interpreter, numpy and the course library), and a round trip that carries nothing
(a proxy's attribute read), split into the grader's and the worker's CPU time. A grading that makes
R round trips cannot be cheaper sandboxed than in-process + start-up + R x that round trip.

Run it after `make bytecode` (setup.sh compiles the same on Gradescope): without bytecode each
worker compiles its own modules and the course library at every start.

    python -m tools.bench_grading [--rounds N] [--cpu K] [--write-docs] [ASSIGNMENT ...]

`--write-docs` also writes what it prints into its section of docs/performance.md (between
`<!-- bench:grading -->` and `<!-- /bench:grading -->`; `tools.bench.publish`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kvlab.tables import format_table  # noqa: E402

MODES = ("inprocess", "sandbox")
EMPTY_ROUND_TRIPS = 2000


def grade_once(assignment: str, mode: str) -> dict[str, float]:
    """Grade the reference of `assignment` in this process; its seconds and score."""
    from autograder.harness import run  # noqa: PLC0415 - imported before the clock starts

    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()
        results = run.run(assignment, ROOT / "solutions" / assignment, Path(folder) / "results.json", mode=mode)
        seconds = time.perf_counter() - started
    return {"seconds": seconds, "score": results["score"], "max_score": results["extra_data"]["max_score"]}


def crossing_costs() -> dict[str, float]:
    """The start-up of a worker and the cost of an empty round trip, measured in this process."""
    from autograder.harness.course import COURSE  # noqa: PLC0415
    from autograder.harness.sandbox import Sandbox  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "probe.py").write_text("VALUE = 1\n")
        started = time.perf_counter()
        with Sandbox(Path(folder), [ROOT], config=COURSE) as sandbox:
            probe = sandbox.module("probe")
            probe.VALUE  # noqa: B018 - the first request waits for the worker and imports the module
            start_seconds = time.perf_counter() - started
            start_cpu = sandbox.cpu_seconds() or 0.0
            grader_before, wall_before = time.process_time(), time.perf_counter()
            for _ in range(EMPTY_ROUND_TRIPS):
                probe.VALUE  # noqa: B018
            wall = time.perf_counter() - wall_before
            grader = time.process_time() - grader_before
            worker = (sandbox.cpu_seconds() or 0.0) - start_cpu
    per = 1e6 / EMPTY_ROUND_TRIPS
    return {"start_seconds": start_seconds, "start_worker_cpu": start_cpu,
            "round_trip_us": wall * per, "grader_us": grader * per, "worker_us": worker * per}


def child(cpu: int, *args: str) -> dict[str, float]:
    """Run this module with `args` in a new interpreter pinned to `cpu`; the JSON it prints."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "tools.bench_grading", *args], cwd=ROOT, env=env, capture_output=True,
        text=True, check=False, preexec_fn=lambda: os.sched_setaffinity(0, {cpu}),
    )
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(lines[-1])


def timed_child(cpu: int, *args: str) -> dict[str, float]:
    """child(cpu, *args) and, as process_seconds, the wall time of its whole process."""
    started = time.perf_counter()
    answer = child(cpu, *args)
    return {**answer, "process_seconds": time.perf_counter() - started}


def ratio_rows(assignments: list[str], seconds: dict[tuple[str, str], list[float]]) -> list[list[str]]:
    """Per assignment: best and median of each mode, and the sandboxed/in-process ratios of both."""
    rows = []
    for assignment in assignments:
        inprocess, sandboxed = seconds[assignment, "inprocess"], seconds[assignment, "sandbox"]
        rows.append([
            assignment, f"{min(inprocess):.2f}", f"{statistics.median(inprocess):.2f}",
            f"{min(sandboxed):.2f}", f"{statistics.median(sandboxed):.2f}",
            f"{min(sandboxed) / min(inprocess):.2f}x",
            f"{statistics.median(sandboxed) / statistics.median(inprocess):.2f}x",
        ])
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignments", nargs="*", help="default: every folder under assignments/")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)), help="the CPU to pin to")
    parser.add_argument("--one", nargs=2, metavar=("ASSIGNMENT", "MODE"), help=argparse.SUPPRESS)
    parser.add_argument("--crossing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the tables into their section of docs/performance.md")
    args = parser.parse_args(argv)
    if args.one:  # a child: one grading
        print(json.dumps(grade_once(*args.one)))
        return 0
    if args.crossing:  # a child: the cost of crossing
        print(json.dumps(crossing_costs()))
        return 0
    if args.write_docs:
        # Imported here, not at the top: a child's whole-process time must not include it.
        from tools.bench import publish  # noqa: PLC0415
        return publish("grading", lambda: bench(args))
    return bench(args)


def bench(args: argparse.Namespace) -> int:
    """The rounds, their two tables and the cost of crossing, printed."""
    assignments = args.assignments or sorted(p.name for p in (ROOT / "assignments").iterdir() if p.is_dir())
    titles = {  # each measure of a grading, and the title of its table
        "seconds": f"Whole gradings of the references on CPU {args.cpu}, {args.rounds} interleaved rounds (seconds)",
        "process_seconds": "The same gradings' whole processes (interpreter start, harness imports, grading; seconds)",
    }
    times: dict[str, dict[tuple[str, str], list[float]]] = {
        measure: {(a, m): [] for a in assignments for m in MODES} for measure in titles}
    for round_number in range(args.rounds):
        for assignment in assignments:
            for mode in MODES:
                graded = timed_child(args.cpu, "--one", assignment, mode)
                if graded["score"] != graded["max_score"]:
                    raise RuntimeError(f"the reference of {assignment} scored {graded['score']} of "
                                       f"{graded['max_score']} {mode}: fix that before timing it")
                for measure, seconds in times.items():
                    seconds[assignment, mode].append(graded[measure])
        print(f"round {round_number + 1} of {args.rounds} done", file=sys.stderr)
    header = ["assignment", "in-process best", "median", "sandboxed best", "median", "ratio of bests", "of medians"]
    print("\n\n".join(format_table(titles[measure], header, ratio_rows(assignments, seconds))
                      for measure, seconds in times.items()))
    cost = child(args.cpu, "--crossing")
    print(f"\nCrossing the sandbox on CPU {args.cpu}: a worker starts in {cost['start_seconds']:.3f} s "
          f"({cost['start_worker_cpu']:.3f} s of its CPU); an empty round trip costs "
          f"{cost['round_trip_us']:.0f} us of wall time (grader {cost['grader_us']:.0f} us, "
          f"worker {cost['worker_us']:.0f} us of CPU)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
