"""How the sandbox fails: the student's exceptions, deaths, timeouts and limits, and replies a hostile
worker forges.

The sandbox's other tests: test_sandbox.py (its life: start, close, measurement),
test_sandbox_isolation.py, test_sandbox_values.py; their student module and fixtures:
tests/support/sandboxes.py.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autograder.harness.course import COURSE
from autograder.harness.sandbox import (
    Limits, ProtocolError, Proxy, Sandbox, StudentCrash, StudentException, WorkerDied, WorkerTimeout, codec, isolation,
    process,
)
from autograder.harness.sandbox.errors import explain_exit
from autograder.harness.sandbox.worker import messages, protocol
from support.isolation import bubblewrapped
from support.repo import REPO
# Fixtures, imported by name: pytest finds them in this module's namespace (box needs folders; reset_box is autouse).
from support.sandboxes import box, folders, reset_box, stud


# ----- exceptions -----------------------------------------------------------------------------------

def test_student_exception_class_is_the_raised_class(stud: Proxy) -> None:
    cls = stud.OutOfBlocks
    assert issubclass(cls, RuntimeError) and issubclass(cls, StudentException), f"bases: {cls.__mro__}"
    with pytest.raises(cls, match="no free block") as info:
        stud.raise_out()
    assert type(info.value) is stud.OutOfBlocks, "the class read from the module must be the class raised"
    text = info.value.student_traceback
    assert "stud.py" in text and "raise_out" in text, f"the student's frame must be shown:\n{text}"
    assert "worker/main.py" not in text, f"worker frames must not be shown:\n{text}"


@pytest.mark.parametrize(
    "function, builtin, name",
    [("raise_value", ValueError, "ValueError"), ("raise_custom", Exception, "Custom")],
)
def test_student_exceptions_keep_builtin_base(stud: Proxy, function: str, builtin: type, name: str) -> None:
    with pytest.raises(builtin) as info:
        getattr(stud, function)()
    assert isinstance(info.value, StudentException), "student exceptions derive from StudentException"
    assert type(info.value).__name__ == name, f"the class must be named {name}, got {type(info.value).__name__}"


@pytest.mark.parametrize("function, raised", [("exit_zero", "SystemExit"), ("interrupt", "KeyboardInterrupt")])
def test_crashes_are_reported_and_worker_survives(stud: Proxy, function: str, raised: str) -> None:
    with pytest.raises(StudentCrash, match=raised) as info:
        getattr(stud, function)()
    assert "stud.py" in str(info.value), f"the message must say where: {info.value}"
    assert stud.echo(1) == 1, "the worker must keep serving after a caught crash"


@pytest.mark.parametrize("module, error", [("needs_missing", ModuleNotFoundError), ("broken", SyntaxError)])
def test_import_failures_come_back_with_traceback(box: Sandbox, module: str, error: type) -> None:
    with pytest.raises(error) as info:
        box.module(module).anything
    text = info.value.student_traceback
    assert f"{module}.py" in text, f"the traceback must name the file:\n{text}"


# ----- deaths, timeouts, limits ---------------------------------------------------------------------

@pytest.mark.parametrize(
    "function, explanation",
    [("hard_exit", "exited with status 0"), ("segfault", "SIGSEGV")],
)
def test_death_is_explained_and_worker_restarts(stud: Proxy, function: str, explanation: str) -> None:
    survivor = stud.Box(1)
    with pytest.raises(WorkerDied, match=explanation) as info:
        getattr(stud, function)()
    assert function in str(info.value), f"the message must name the call: {info.value}"
    assert stud.count() == 1, "a fresh worker (module state reset) must serve the next call"
    with pytest.raises(ReferenceError):
        len(survivor)


def test_death_between_calls_is_reported(stud: Proxy) -> None:
    stud.alarm_soon()
    time.sleep(0.3)  # SIGALRM kills the idle worker meanwhile
    with pytest.raises(WorkerDied, match="SIGALRM.*between calls"):
        stud.echo(1)
    assert stud.echo(2) == 2, "a fresh worker must serve the next call"


def test_timeout_kills_and_restarts(stud: Proxy, box: Sandbox) -> None:
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"spin.*0\.5 s"):
        box.call("stud:spin", timeout=0.5)
    assert time.monotonic() - start < 3, "the timeout must stop the call promptly"
    assert stud.echo("alive") == "alive", "a fresh worker must serve the next call"


def test_cpu_time_decides_and_the_wall_clock_backs_it_up(folders: dict[str, Path]) -> None:
    # A generous backstop: on a loaded machine a spinning call gets a fraction of a core.
    limits = Limits(call_timeout=0.5, wall_factor=12.0)
    with Sandbox(folders["student"], [], limits=limits) as sandbox:
        stud = sandbox.module("stud")
        assert stud.nap(1.5) == "rested", "a call that waits longer than its CPU limit, using no CPU, must finish"
        with pytest.raises(WorkerTimeout, match=r"time limit of 0\.5 s of CPU time"):
            stud.spin()
        start = time.monotonic()
        with pytest.raises(WorkerTimeout, match=r"6 s of wall-clock time"):
            stud.nap(60)
        assert 5.9 < time.monotonic() - start < 9, "a sleeping call is stopped by the wall-clock backstop"
        assert stud.echo("alive") == "alive", "a fresh worker must serve the next call"


def readable_system_python() -> str | None:
    """An interpreter the unprivileged user can run (pyenv's under /root may not be), of this
    version, for the no-bubblewrap sandbox as Gradescope's Docker runs it; None when there is none."""
    for candidate in (f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}", sys.executable):
        probe = isolation.probe((candidate, "-I", "-S", "-c", "pass"), 65534, 65534)
        if os.path.exists(candidate) and probe is None:
            return candidate
    return None


ISOLATIONS = [
    pytest.param(True, sys.executable, id="bubblewrap"),
    pytest.param(False, readable_system_python() if os.geteuid() == 0 else sys.executable, id="no-bubblewrap"),
]


def test_a_worker_that_ends_at_once_is_left_to_the_wait_for_its_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """bubblewrap refusing to start (Gradescope's Docker) ends the worker before `launch` writes its
    init message: launch must hand it over for the wait to report, not raise BrokenPipeError (which
    voided the grading). Popen is made to return only once the process has ended (not yet reaped:
    stopping the worker reaps it)."""
    real_popen = subprocess.Popen

    def ended(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        proc = real_popen(*args, **kwargs)
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        return proc

    monkeypatch.setattr(process.subprocess, "Popen", ended)
    plan = isolation.Plan(["/bin/false"], {}, os.geteuid(), os.getegid(), [])
    init = messages.Init(seq=1, op=messages.INIT, home=str(tmp_path), seed=str(tmp_path), lib_dirs=[],
                         site_packages=[], limits={}, landlock=False, wire_types=[], codecs=[], remote=[])
    worker = process.launch(plan, sys.executable, tmp_path, tmp_path, init)
    try:
        assert os.read(worker.resp_r, 1) == b"", "the ended worker's reply pipe must be at its end"
    finally:
        worker.stop(False, lambda output: None)


# Gradescope's Docker: bubblewrap is installed but may not create namespaces. Here CAP_SYS_ADMIN is
# dropped from a child's bounding set, which makes bwrap fail the same way ("Creating new namespace
# failed"), at once: the narrow view's start fails, the probes of both views say why, and the worker
# runs without bubblewrap, its package copied (not bound) at that start; a second sandbox in the
# same process knows the answers.
REFUSED_BUBBLEWRAP = """
import json, sys
from pathlib import Path
from autograder.harness.sandbox import Sandbox
for _ in range(2):
    with Sandbox(Path(sys.argv[1]), [], python=sys.argv[2], packages=[Path(sys.argv[3])]) as sandbox:
        answer = sandbox.module("stud").count()
        doubled = sandbox.call("libpkg:apply_double", sandbox.module("stud").Box(2))
        copied = (sandbox.folder / "packages" / "libpkg" / "__init__.py").is_file()
        print(json.dumps([answer, sandbox.launches, sandbox.captured_output(), sandbox.isolation, doubled, copied]))
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("bwrap"),
                    reason="needs root, setpriv and bubblewrap")
def test_where_bubblewrap_cannot_start_the_worker_runs_without_it(folders: dict[str, Path]) -> None:
    python = readable_system_python()
    if python is None:
        pytest.skip("no interpreter here that the unprivileged user can run")
    done = subprocess.run(
        ["setpriv", "--bounding-set=-sys_admin", "--inh-caps=-sys_admin", sys.executable, "-c", REFUSED_BUBBLEWRAP,
         str(folders["student"]), python, str(folders["lib"] / "libpkg")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, f"the grader must survive bubblewrap's refusal:\n{done.stderr[-3000:]}"
    lines = done.stdout.splitlines()
    assert len(lines) == 2, f"two sandboxes expected to report: {done.stdout!r}"
    # The second sandbox of the process knows the probes' answers: it starts without bubblewrap at once.
    for line, expected_launches in zip(lines, (2, 1)):
        answer, launches, output, report, doubled, copied = json.loads(line)
        assert answer == 1, f"the worker without bubblewrap must serve the call, got {answer!r}"
        assert doubled == 4 and copied, (
            f"the package must be copied for the start without bubblewrap and import (apply_double gave {doubled!r})")
        assert launches == expected_launches, (
            f"{expected_launches} starts expected (the narrow view's refused, then one without), not {launches}")
        assert output == "", f"bubblewrap's complaints are not the student's output: {output!r}"
        text = "\n".join(report)
        for phrase in ("no bubblewrap: bwrap: Creating new namespace failed", "filesystem: protected by permissions"):
            assert phrase in text, f"the report must say {phrase!r}:\n{text}"


@pytest.mark.parametrize("bubblewrap, python", ISOLATIONS)
def test_folder_limits_stop_the_worker_and_leave_nothing(
    folders: dict[str, Path], bubblewrap: bool, python: str | None,
) -> None:
    if python is None:
        pytest.skip("no interpreter here that the unprivileged user can run")
    limits = Limits(call_timeout=10.0, disk_bytes=4 << 20, disk_files=200, disk_depth=64)
    with Sandbox(folders["student"], [], limits=limits, bubblewrap=bubblewrap, python=python) as sandbox:
        wrapped = bubblewrapped(sandbox.isolation)
        stud = sandbox.module("stud")
        if wrapped:  # the tmpfs refuses the bytes itself
            with pytest.raises(OSError, match="No space left"):
                stud.fill(8)
        else:  # measured at most DISK_CHECK_SECONDS (or a few ms of the worker's CPU time) later
            with pytest.raises(WorkerDied, match="its folder held more than 4 MB"):
                stud.fill(8)
                time.sleep(0.3)
                stud.echo("the next call")
        with pytest.raises(WorkerDied, match="more than 200 files and folders"):
            stud.many_files(500)
        # 3,000 folders: too many for either; too deep where the folder is walked.
        with pytest.raises(WorkerDied, match="more than 200 files and folders" if wrapped else "nested more than 64 deep"):
            stud.deep_chain(3000)
        assert "many" not in stud.listdir("."), "a restarted worker starts from the submitted files only"
    assert not sandbox.folder.exists(), f"nothing of the sandbox may remain: {sandbox.folder}"


# (grader_only, the folders made): rm -rf takes any depth and count; shutil.rmtree first fails on
# the deep chain, and rm -rf must then take it (20,000 files would only time Python's rmtree).
@pytest.mark.parametrize(("grader_only", "made"), [(False, ("deep", "wide")), (True, ("deep",))],
                         ids=["rm", "rmtree-first"])
def test_remove_tree_takes_any_depth_and_count(tmp_path: Path, grader_only: bool, made: tuple[str, ...]) -> None:
    from autograder.harness.sandbox.process import remove_tree

    deep, wide = tmp_path / "deep", tmp_path / "wide"
    deep.mkdir()
    fd = os.open(deep, os.O_RDONLY)
    for _ in range(3000):  # through descriptors: the full path is longer than the kernel accepts
        os.mkdir("d", dir_fd=fd)
        inner = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.close(fd)
    if "wide" in made:
        wide.mkdir()
        for i in range(20000):
            (wide / str(i)).touch()
    for path in (tmp_path / name for name in made):
        assert remove_tree(path, grader_only) is None and not path.exists(), f"{path.name} must be removed completely"


@pytest.mark.parametrize(
    "returncode, cpu, rss, bubblewrap, expected",
    [
        (-24, 1.0, 0, False, "CPU time limit of 1 s"),
        (128 + 9, 1.2, 0, True, "CPU time limit of 1 s"),
        (-9, 0.1, 500 << 20, False, "ran out of memory (limit 512 MB)"),
        (-11, 0.1, 0, False, "SIGSEGV"),
        (137, 0.1, 0, False, "exited with status 137"),
    ],
)
def test_exit_explanations(returncode: int, cpu: float, rss: int, bubblewrap: bool, expected: str) -> None:
    text = explain_exit(returncode, cpu_seconds=cpu, max_rss_bytes=rss, cpu_limit=1,
                        memory_limit=512 << 20, signal_offset=bubblewrap)
    assert expected in text, f"status {returncode} explained as {text!r}, expected {expected!r}"


def test_cpu_limit_kills(folders: dict[str, Path]) -> None:
    with Sandbox(folders["student"], [], limits=Limits(cpu_seconds=1, call_timeout=20)) as sandbox:
        with pytest.raises(WorkerDied, match="CPU time limit of 1 s"):
            sandbox.module("stud").spin()


def test_memory_limit_gives_memory_error(stud: Proxy) -> None:
    with pytest.raises(MemoryError):
        stud.allocate()
    assert stud.echo(2) == 2, "the worker must survive a refused allocation"


def test_fork_is_refused(stud: Proxy, box: Sandbox) -> None:
    if any("RLIMIT_NPROC does not bind root" in line for line in box.isolation):
        pytest.skip("the worker runs as root, which RLIMIT_NPROC does not bind")
    with pytest.raises(OSError):
        stud.fork()


def test_output_is_captured_and_truncated(stud: Proxy, box: Sandbox) -> None:
    assert stud.say("hello") == 5, "printing must not disturb the reply"
    assert "hello" in box.captured_output(), f"output not captured: {box.captured_output()!r}"
    assert stud.flood() == "done", "a 50 MB print must not corrupt the protocol"
    text = box.captured_output()
    assert len(text) < box.limits.output_bytes + 200, f"output kept beyond the limit: {len(text)} characters"
    assert "more bytes of output not kept" in text, "truncation must be noted"
    box.reset()
    assert box.captured_output() == "", "reset must clear the captured output"


# ----- hostile replies ------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "data",
    [b"\xff" * 40, protocol.HEADER.pack(1 << 31, 1 << 40), protocol.HEADER.pack(5, 0) + b"{nope"],
    ids=["garbage", "huge-length", "bad-json"],
)
def test_garbage_from_worker_is_a_protocol_error(stud: Proxy, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        stud.forge(data)
    assert stud.echo(3) == 3, "a fresh worker must serve the next call"


@pytest.mark.parametrize(
    "tree",
    [
        ["A", 0], ["G", 0], ["Z"], ["I", "1"], ["F", 1], ["L", "x"], ["D", [[1, ["N"]]]], ["R", -1, "t"],
        ["C", "os:system", []], ["X", "m", "", []], ["Y", 5], "N", [], [["N"]],
        ["P", "O", "dtype"], ["P", "<U3", "type"], ["P", "f" * 100, "type"], ["P", "<f8", "class"],
        ["E", 1], ["E", "1"], ["E", 0, 1],
        # Arrays (blob 0 holds 16 bytes): the dtype, shape and order checked, and against the bytes.
        ["A", 0, "<f8", [2]], ["A", 0, "<f8", [2], "C", 7], ["A", 1, "<f8", [2], "C"], ["A", -1, "<f8", [2], "C"],
        ["A", True, "<f8", [2], "C"], ["A", 0, "|O", [2], "C"], ["A", 0, "<U2", [2], "C"], ["A", 0, "|V8", [2], "C"],
        ["A", 0, "<M8[s]", [2], "C"], ["A", 0, "f8", [2], "C"], ["A", 0, "float64", [2], "C"],
        ["A", 0, ["<f8"], [2], "C"], ["A", 0, "<f8", [3], "C"], ["A", 0, "<f8", [1], "C"], ["A", 0, "<f8", [-1, -2], "C"],
        ["A", 0, "<f8", [2.0], "C"], ["A", 0, "<f8", [True, 2], "C"], ["A", 0, "<f8", "2", "C"],
        ["A", 0, "<f8", 2, "C"], ["A", 0, "<f8", [2], "K"], ["A", 0, "<f8", [2], None], ["A", 0, "<f8", [2], ["C"]],
        ["A", 0, "<f8", [1] * 65 + [2], "C"], ["A", 2, "<f8", [0, 1 << 70], "C"], ["A", 2, "<f8", [0, 1 << 62], "C"],
        ["A", 2, "<f8", [0] * 70, "C"], ["A", 0, "<f8", [2 ** 32, 2 ** 32, 0], "C"],
        ["G", 0, "<f8", [2], "C"], ["G", 0, "<f8", [], "C"], ["G", 0, "|O", [], "C"], ["G", 0],
        ["J", 0, "<f8", [2], "C"], ["J", 0, "<i4", [4], "C"], ["J", 0, "<i8", [3], "C"], ["J", 0, "<i8", [1, 2], "C"],
        ["J", 0, "<i8", 2, "C"], ["J", 0, "<i8", [2]], ["J", 5, "<i8", [2], "C"],
        ["W", "kvlab.trace:Request", "L", [0, "<f8", [2], "C"]],
    ],
    ids=str,
)
def test_decoder_rejects_hostile_trees(tree: object) -> None:
    blobs = [np.arange(2.0).tobytes(), b"PK\x03\x04 not an array", b""]
    decoder = codec.Decoder([memoryview(blob) for blob in blobs], lambda number, name: None, codec.WireTypes(COURSE))
    with pytest.raises(ProtocolError):
        decoder.decode(tree)


@pytest.mark.parametrize("array", [
    np.arange(6.0).reshape(2, 3), np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3)),
    np.arange(24, dtype=np.int16).reshape(2, 3, 4)[:, ::2, 1:], np.array(2.5, dtype=np.float32),
    np.zeros((0, 3), dtype=np.complex64), np.arange(4, dtype=">u4"), np.array([True, False]),
    np.arange(3.0, dtype=np.longdouble), np.ones((2, 2), dtype=np.float16).T,
], ids=lambda a: f"{a.dtype.str}{a.shape}{'F' if a.flags.f_contiguous and not a.flags.c_contiguous else ''}")
def test_arrays_cross_with_their_dtype_shape_order_and_values(array: np.ndarray) -> None:
    blobs: list[object] = []
    tree = codec.encode(array, blobs, lambda value: None, codec.WireTypes(COURSE))
    data = [memoryview(bytes(blob)) for blob in blobs]  # as the worker would send them back
    back = codec.Decoder(data, lambda number, name: None, codec.WireTypes(COURSE)).decode(tree)
    assert back.dtype == array.dtype and back.shape == array.shape and np.array_equal(back, array), (
        f"{array.dtype}{array.shape} came back as {back.dtype}{back.shape}")
    fortran = array.flags.f_contiguous and not array.flags.c_contiguous
    assert (back.flags.f_contiguous and not back.flags.c_contiguous) == fortran, "the memory order must be kept"
    assert back.flags.writeable and back.flags.aligned and back.base is None, "a decoded array is its own copy"
    scalar = array.reshape(-1)[:1].reshape(()) if array.size else None
    if scalar is not None:
        blobs = []
        one = codec.encode(scalar[()], blobs, lambda value: None, codec.WireTypes(COURSE))
        got = codec.Decoder([memoryview(bytes(b)) for b in blobs], lambda n, t: None, codec.WireTypes(COURSE)).decode(one)
        assert type(got) is type(scalar[()]) and got == scalar[()], f"the numpy scalar {scalar!r} came back as {got!r}"


def test_arrays_of_other_dtypes_are_not_sent() -> None:
    for array in (np.array(["a"]), np.array([1, "a"], dtype=object), np.zeros(2, dtype="M8[s]"),
                  np.zeros(2, dtype=[("x", "<f8")])):
        with pytest.raises(TypeError):
            codec.encode(array, [], lambda value: None, codec.WireTypes(COURSE))
