"""The sandbox: a worker process holding student code, reached only through validated messages.

Here its life: CPU measured from outside, the start and a round trip timed, close, the submitted
files copied, and the bytecode a worker starts from. The rest by subject: test_sandbox_isolation.py,
test_sandbox_values.py (values, proxies, arrays), test_sandbox_failures.py (exceptions, deaths,
timeouts, limits, hostile replies); their student module and fixtures: tests/support/sandboxes.py.
"""
from __future__ import annotations

import compileall
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from autograder.harness.sandbox import Proxy, Sandbox, process
# Fixtures, imported by name: pytest finds them in this module's namespace (box needs folders; reset_box is autouse).
from support.sandboxes import STUDENT, box, folders, reset_box, stud
import kvlab


# ----- measurement and performance ------------------------------------------------------------------

def test_cpu_is_measured_from_outside(stud: Proxy, box: Sandbox) -> None:
    before = box.cpu_seconds()
    stud.burn(0.2)
    used = box.last_call_cpu
    assert used is not None and 0.15 <= used <= 1.0, f"a 0.2 s CPU burn measured as {used}"
    assert box.cpu_seconds() - before >= 0.15, "cpu_seconds() must grow with the worker's work"


def test_start_and_round_trip_are_fast(folders: dict[str, Path]) -> None:
    with Sandbox(folders["student"], []) as sandbox:
        stud = sandbox.module("stud")
        echo = stud.echo  # the attribute read is one round trip; keep the function proxy
        small = np.arange(16.0)
        times = []
        for _ in range(200):
            start = time.perf_counter()
            echo(small)
            times.append(time.perf_counter() - start)
        start_seconds = sandbox.last_start_seconds
    median = statistics.median(times)
    assert start_seconds is not None and start_seconds < 3, f"worker start took {start_seconds} s"
    assert median < 2e-3, f"a round trip with a small array took {median * 1e6:.0f} us (median)"


def test_close_kills_worker_and_removes_folder(folders: dict[str, Path]) -> None:
    sandbox = Sandbox(folders["student"], [])
    sandbox.module("stud").echo(1)
    worker = sandbox._res.worker
    assert worker is not None, "a worker must be running after a call"
    pid, root = worker.cpu_pid, sandbox.folder
    sandbox.close()
    deadline = time.monotonic() + 2
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not os.path.exists(f"/proc/{pid}"), f"worker process {pid} survived close()"
    assert not root.exists(), f"private folder {root} survived close()"


def test_student_source_dir_is_copied_not_used(folders: dict[str, Path], box: Sandbox, stud: Proxy) -> None:
    assert stud.read_file("stud.py").startswith("\nimport os"), "the worker's folder must hold a copy of stud.py"
    stud.write_file("stud.py", "overwritten by the worker")
    assert (folders["student"] / "stud.py").read_text() == STUDENT, "the worker must work on a copy of the files"


def test_a_new_worker_starts_from_the_submitted_files_only(box: Sandbox) -> None:
    stud = box.module("stud")
    stud.write_file("left-behind.txt", "from the first worker")
    stud.write_file("stud.py", "broken = (")
    box.restart()
    stud = box.module("stud")
    assert stud.listdir(".").count("left-behind.txt") == 0, "a restarted worker must not see what the last one wrote"
    assert stud.read_file("stud.py").startswith("\nimport os"), "a restarted worker gets the submitted files again"


# ----- the bytecode a worker starts from ----------------------------------------------------------

# Prints the files the interpreter compiles from source while it imports a module (bytecode that
# it uses instead is not compiled): argv is the folder to import from, the module, numpy's folder.
COMPILE_SPY = """
import builtins, sys
compiled, real = [], builtins.compile
def spy(source, filename, *args, **kwargs):
    compiled.append(filename)
    return real(source, filename, *args, **kwargs)
builtins.compile = spy
sys.path[:0] = [sys.argv[1]]
sys.path.append(sys.argv[3])
__import__(sys.argv[2])
print("\\n".join(compiled))
"""


def compiled_on_import(folder: Path, module: str) -> set[str]:
    """The files under `folder` that an interpreter started as the worker is (-I -S -B) compiles
    from source to import `module` from there."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-c", COMPILE_SPY, str(folder), module, str(Path(np.__file__).parents[1])],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, f"importing {module} from {folder} failed:\n{done.stderr[-2000:]}"
    return {name for name in done.stdout.split() if Path(name).is_relative_to(folder)}


@pytest.mark.parametrize("compiled", [True, False], ids=["with-bytecode", "without"])
def test_a_worker_imports_its_modules_from_the_bytecode_placed_beside_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, compiled: bool,
) -> None:
    package, root = tmp_path / "package", tmp_path / "root"
    package.mkdir()
    root.mkdir()
    modules = tuple(Path(shutil.copy2(source, package / source.name)) for source in process.WORKER_MODULES)
    if compiled:
        for module in modules:
            py_compile.compile(str(module), doraise=True)
    monkeypatch.setattr(process, "WORKER_MODULES", modules)
    folder = process.place_worker(root)
    compiled_here = {Path(name).name for name in compiled_on_import(folder, "worker.main")}
    expected = set() if compiled else {module.name for module in modules}
    assert compiled_here == expected, (
        f"the worker's start compiled {sorted(compiled_here) or 'nothing'}; expected {sorted(expected) or 'nothing'}"
    )
    if not compiled:
        assert not any((folder / "worker" / "__pycache__").iterdir()), "a worker must write no bytecode (-B)"


def test_the_course_librarys_copy_keeps_its_bytecode(tmp_path: Path) -> None:
    library = tmp_path / "source" / "kvlab"
    shutil.copytree(Path(kvlab.__file__).parent, library, ignore=shutil.ignore_patterns("__pycache__"))
    assert compileall.compile_dir(library, quiet=1)
    staged = tmp_path / "staged"
    process.copy_read_only(library, staged / "kvlab")
    try:
        compiled_here = compiled_on_import(staged, "kvlab.model")
    finally:
        for folder, _, _ in os.walk(staged):
            os.chmod(folder, 0o755)  # so that pytest can remove it
    assert not compiled_here, f"the worker would compile the copied library's {sorted(compiled_here)}"
