"""Grade one submission locally exactly as Gradescope would (`make grade A= SUB= OUT=`).

    python -m autograder.grade --assignment lecture02 --submission DIR --out results.json

It builds the Gradescope package, unpacks it into a temporary folder laid out like /autograder
(`source/` the unzipped package, made root-only as setup.sh does; `submission/` a copy of DIR;
`results/`), runs `source/run_autograder` there with AUTOGRADER_ROOT pointing at it and
KVLAB_PYTHON at this interpreter (setup.sh itself is not run: this venv stands in for the image's),
copies results/results.json to OUT and prints the score table.

Exit status: 0 whenever the submission was graded, whatever its score; 2 for a usage error (an
unknown assignment, a missing submission folder); 3 when the result is a grader fault (the
runner's log is printed to help find out why).
"""
from __future__ import annotations

import argparse
import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.assignment import REPO_ROOT, AssignmentError, discover, load_assignment
from autograder.build import build
from autograder.harness.results import fault_results, write_json_atomically

# Gradescope's longest allowed run is 40 minutes; a local run that takes longer is stuck.
RUN_TIMEOUT_SECONDS = 40 * 60
EXIT_USAGE = 2
EXIT_GRADER_FAULT = 3
ETXTBSY_ATTEMPTS = 40  # 2 s in all


@dataclass
class Graded:
    """One local Gradescope-style run: the results it wrote and the runner's log."""

    results: dict[str, Any]
    log: str

    @property
    def fault(self) -> bool:
        return self.results.get("extra_data", {}).get("status") != "graded"


def unpack(package: Path, source: Path) -> None:
    """Unzip as Gradescope does, keeping each file's mode bits (zipfile alone drops them)."""
    with zipfile.ZipFile(package) as archive:
        for info in archive.infolist():
            target = archive.extract(info, source)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)


def start_runner(script: Path, root: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Start run_autograder. Executing a file fails with ETXTBSY while any process holds it open for
    writing, and a fork in another thread (grade_all grades several at once) copies the descriptor
    another thread's unzip still holds until that child's exec: a moment, so try again."""
    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen([str(script)], cwd=root, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)

    for _ in range(ETXTBSY_ATTEMPTS - 1):
        try:
            return start()
        except OSError as error:
            if error.errno != errno.ETXTBSY:
                raise
            time.sleep(0.05)
    return start()


def grade_submission(package: Path, submission: Path, out: Path, python: str = sys.executable) -> Graded:
    """Run the package's run_autograder on `submission` in a fresh /autograder-like folder."""
    with tempfile.TemporaryDirectory(prefix="kvlab-autograder-") as name:
        root = Path(name)
        os.chmod(root, 0o755)  # like /autograder: the sandbox user may traverse it, not list source/
        source = root / "source"
        # Root-only before anything is extracted: a worker grading beside this one (grade-all) must
        # never see the hidden tests, not even while they are being unpacked.
        source.mkdir(mode=0o700)
        unpack(package, source)
        # symlinks=True: a student's symlink stays a symlink, which the runner refuses to follow.
        shutil.copytree(submission, root / "submission", symlinks=True)
        # Root-only too: the runner copies the files into the sandbox, which lets only its own
        # worker read them; a batch's other workers must see neither the files nor the results.
        (root / "submission").chmod(0o700)
        (root / "results").mkdir(mode=0o700)
        env = {**os.environ, "AUTOGRADER_ROOT": str(root), "KVLAB_PYTHON": python}
        started = time.monotonic()
        process = start_runner(source / "run_autograder", root, env)
        try:
            log, _ = process.communicate(timeout=RUN_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            log, _ = process.communicate()
            log += f"\ngrade: run_autograder was stopped after {RUN_TIMEOUT_SECONDS} s\n".encode()
        produced = root / "results" / "results.json"
        if produced.is_file():
            # Already validated by the runner or by run_autograder, whichever wrote it.
            results = json.loads(produced.read_text(encoding="utf-8"))
        else:
            # Only a run_autograder stopped above gets here (Gradescope would show nothing at all).
            (assignment_id,) = discover(source)  # a package holds exactly one assignment
            max_score = load_assignment(assignment_id, source).max_score
            results = fault_results(assignment_id, max_score, time.monotonic() - started)
        write_json_atomically(out, results)
        return Graded(results=results, log=log.decode(errors="replace"))


def score_tables(results: dict[str, Any]) -> str:
    """What the student reads (results.json's output: the scores, then the failed tests by task),
    then the isolation report, which names the machine's folders and is the staff's."""
    isolation = "\n".join(["Isolation (staff only, results.json's extra_data):",
                           *(f"- {line}" for line in results["extra_data"].get("isolation", []))])
    return f"{results['output']}\n\n{isolation}"


def report(results: dict[str, Any], log: str) -> str:
    """What a person reads after a run: the tables and the draws' seed, or the fault and the runner's log."""
    if results["extra_data"]["status"] != "graded":
        return f"{results['output']}\n\nrun_autograder's log (staff only on Gradescope):\n{log}"
    return f"{score_tables(results)}\n\n{seed_line(results)}"


def seed_line(results: dict[str, Any]) -> str:
    """The seed of the hidden tests' draws, and how to replay them."""
    seed = results["extra_data"].get("seed")
    if seed is None:
        return "The draws' seed is not in results.json."
    return (f"The hidden tests drew from seed {seed}: the same files give the same draws (results.json keeps\n"
            f"it in extra_data; `python -m autograder.harness.run ... --seed {seed}` replays them after the key changes).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.grade", description=__doc__.split("\n")[0])
    parser.add_argument("--assignment", required=True, help="assignment id, e.g. lecture02")
    parser.add_argument("--submission", required=True, type=Path, help="folder holding the submitted files")
    parser.add_argument("--out", required=True, type=Path, help="where to copy results.json")
    args = parser.parse_args(argv)
    try:
        load_assignment(args.assignment, REPO_ROOT)
    except AssignmentError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not args.submission.is_dir():
        print(f"error: the submission folder {args.submission} does not exist (SUB=folder holding the files)",
              file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="kvlab-build-") as dist:
        graded = grade_submission(build(args.assignment, Path(dist)), args.submission, args.out)
    print(report(graded.results, graded.log))
    print(f"\nresults written to {args.out}")
    return EXIT_GRADER_FAULT if graded.fault else 0


if __name__ == "__main__":
    sys.exit(main())
