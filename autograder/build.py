"""Build the Gradescope autograder package: `python -m autograder.build [ID ...]` (default: every assignment).

Writes `dist/<id>-autograder.zip` (`make autograder A=<id>`). Its root is Gradescope's
/autograder/source: `setup.sh` and `run_autograder` (from `autograder/gradescope/`, the assignment
id and the fallback grader-fault result filled in), the pinned `requirements/`, and what grading
needs: `kvlab/`, `autograder/__init__.py`, the assignment registry that reads assignment.json
(`REGISTRY_FILES`), `autograder/harness/` (the sandbox included), the course's grading key
`autograder/grading.key` (it seeds the hidden tests' draws: never in a student bundle), the hidden
tests `autograder/hidden/<id>/`, `assignments/<id>/assignment.json` with the public tests, and the
Mooncake traces the assignment's "traces" lists, under `data/mooncake/` (read from
`kvlab.trace.mooncake_dir()` at build time: they are data, never committed here; run_autograder
points KVLAB_MOONCAKE_DIR at them). Nothing else: no solutions, no mutants, no repository tests.

The zip is deterministic (sorted entries, fixed timestamps and modes), so the same sources give
the same bytes and a rebuilt package can be compared with the uploaded one.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import zipfile
from collections.abc import Collection
from pathlib import Path

from autograder.assignment import (
    REGISTRY_FILES, REPO_ROOT, Assignment, AssignmentError, discover, load_assignment,
)
from autograder.harness.results import fault_results
from autograder.harness.seeds import KEY_FILE
from autograder.mooncake_traces import missing_line
from kvlab.trace import mooncake_dir

TEMPLATES = Path(__file__).resolve().parent / "gradescope"
EXECUTABLES = ("setup.sh", "run_autograder")
# The earliest time a zip can record; any fixed value makes the bytes reproducible.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


def files_under(root: Path, folder: str) -> dict[str, bytes]:
    """Every file under root/folder, by its posix path relative to root, minus caches (`__pycache__`,
    `.pyc`, a test run's `.pytest_cache` and `.hypothesis`) and other dot-files. Gradescope packages
    and student bundles (tools/release.py) both copy folders with it."""
    files = {}
    for path in sorted((root / folder).rglob("*")):
        relative = path.relative_to(root)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        if path.is_file() and path.suffix != ".pyc":
            files[relative.as_posix()] = path.read_bytes()
    return files


def _file(root: Path, name: str) -> dict[str, bytes]:
    path = root / name
    if not path.is_file():
        raise FileNotFoundError(f"the package needs {path}, which does not exist")
    return {name: path.read_bytes()}


def run_autograder_script(assignment: Assignment) -> bytes:
    """run_autograder for this assignment, its last-resort result rendered by results.py itself."""
    fallback = json.dumps(fault_results(assignment.id, assignment.max_score, 0.0), indent=2)
    text = (TEMPLATES / "run_autograder").read_text(encoding="utf-8")
    return text.replace("@ASSIGNMENT@", assignment.id).replace("@FAULT_RESULT@", fallback).encode()


class MissingTraces(FileNotFoundError):
    """The hidden tests replay Mooncake traces that are not installed: the message is `make traces`' line."""


def _traces(assignment: Assignment) -> dict[str, bytes]:
    """The trace files the hidden tests read; a package without them would fail every student."""
    folder = mooncake_dir()
    missing = [name for name in assignment.traces if not (folder / name).is_file()]
    if missing:
        raise MissingTraces(missing_line(missing))
    return {f"data/mooncake/{name}": (folder / name).read_bytes() for name in assignment.traces}


def package_files(assignment: Assignment, root: Path = REPO_ROOT) -> dict[str, bytes]:
    """The package's files: zip path -> content."""
    hidden = assignment.hidden_tests.relative_to(assignment.root).as_posix()
    public = assignment.public_tests.relative_to(assignment.root).as_posix()
    files = {
        "setup.sh": (TEMPLATES / "setup.sh").read_bytes(),
        "run_autograder": run_autograder_script(assignment),
        # The image's setup.sh installs grader.txt, which includes the others but instructor.txt.
        **{name: data for path in sorted((root / "requirements").glob("*.txt")) if path.name != "instructor.txt"
           for name, data in _file(root, f"requirements/{path.name}").items()},
        **files_under(root, "kvlab"),
        **_file(root, "autograder/__init__.py"),
        **{name: data for registry_file in REGISTRY_FILES for name, data in _file(root, registry_file).items()},
        **files_under(root, "autograder/harness"),
        **_file(root, KEY_FILE),
        **files_under(assignment.root, hidden),
        **_file(assignment.root, f"assignments/{assignment.id}/assignment.json"),
        **files_under(assignment.root, public),
        **_traces(assignment),
    }
    return dict(sorted(files.items()))


def zip_bytes(files: dict[str, bytes], executables: Collection[str] = ()) -> bytes:
    """A deterministic zip of `files` (zip path -> content): entries sorted, fixed timestamps, mode
    755 for the `executables`, 644 for everything else. Gradescope packages and student bundles
    (tools/release.py) both use it, so the same sources always give the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, content in sorted(files.items()):
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.create_system = 3  # Unix, so unzip applies the mode bits below
            info.external_attr = ((0o100755 if name in executables else 0o100644) << 16)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    return buffer.getvalue()


def build(assignment_id: str, out_dir: Path, root: Path = REPO_ROOT) -> Path:
    """Write out_dir/<id>-autograder.zip atomically; return its path."""
    assignment = load_assignment(assignment_id, root)
    data = zip_bytes(package_files(assignment, root), EXECUTABLES)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{assignment.id}-autograder.zip"
    # Concurrent builds (make grade in two shells) each replace the file whole.
    handle, temp = tempfile.mkstemp(prefix=f".{target.name}-", dir=out_dir)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def command_line(prog: str, doc: str, argv: list[str] | None, root: Path = REPO_ROOT) -> tuple[list[str], Path]:
    """(assignment ids, output folder) from the command line the Gradescope package and the student
    bundle (tools/release.py) share: `prog [ID ...] [--out DIR]`, every assignment and root/dist by default."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0])
    parser.add_argument("ids", nargs="*", metavar="ID", help="assignment ids (default: every assignment)")
    parser.add_argument("--out", type=Path, default=root / "dist", help="output folder (default: dist/)")
    args = parser.parse_args(argv)
    return args.ids or discover(root), args.out


def main(argv: list[str] | None = None) -> int:
    ids, out = command_line("python -m autograder.build", __doc__, argv)
    for assignment_id in ids:
        try:
            path = build(assignment_id, out)
        except MissingTraces as error:
            # `make` goes on with the other assignments, and ends with this same line.
            print(f"{assignment_id}: package not built. {error}")
            continue
        except (AssignmentError, FileNotFoundError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"built {path} ({path.stat().st_size // 1024} KB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
