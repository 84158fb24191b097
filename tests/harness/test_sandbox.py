"""The sandbox: a worker process holding student code, reached only through validated messages."""
from __future__ import annotations

import compileall
import json
import math
import os
import py_compile
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autograder.harness.sandbox import (
    BadValue,
    Limits,
    NoSafeIdentity,
    ProtocolError,
    Proxy,
    Sandbox,
    StudentCrash,
    StudentException,
    WorkerDied,
    WorkerTimeout,
)
from autograder.harness.backends import SandboxBackend
from autograder.harness.course import COURSE
from autograder.harness.sandbox import codec, isolation, kept, process
from autograder.harness.sandbox.errors import explain_exit
from autograder.harness.sandbox.worker import protocol
from support.isolation import bubblewrapped, readable_python
import kvlab
from kvlab import model

REPO = Path(__file__).resolve().parents[2]

STUDENT = '''
import os, sys, time
import numpy as np

CALLS = 0

def count():
    global CALLS
    CALLS += 1
    return CALLS

def echo(x):
    return x

def kind(x):
    return type(x).__name__

def arange(n, dtype="float64"):
    return np.arange(n, dtype=dtype)

def matrix():
    return np.asmatrix(np.eye(2))

def object_array():
    return np.array([1, "a"], dtype=object)

class Box:
    def __init__(self, n):
        self.n = n
    def __len__(self):
        return self.n
    def __contains__(self, x):
        return 0 <= x < self.n
    def __getitem__(self, i):
        return list(range(self.n))[i]
    def __iter__(self):
        return iter(range(self.n))
    def double(self):
        return 2 * self.n
    def rebind(self):
        self.double = lambda: "rebound"
    def __repr__(self):
        return f"Box({self.n})"

def box_double(box):
    return box.double()

def later():
    return "a function"

def rebind_later():
    global later
    later = 42

class AlwaysEqual:
    def __eq__(self, other):
        return True
    __hash__ = object.__hash__

class OutOfBlocks(RuntimeError):
    pass

class Custom(Exception):
    pass

def raise_out():
    raise OutOfBlocks("no free block")

def raise_value():
    raise ValueError("bad value")

def raise_custom():
    raise Custom("custom trouble")

def exit_zero():
    sys.exit(0)

def interrupt():
    raise KeyboardInterrupt

def hard_exit():
    os._exit(0)

def segfault():
    import ctypes
    ctypes.string_at(0)

def alarm_soon():
    import signal
    signal.setitimer(signal.ITIMER_REAL, 0.05)

def spin():
    while True:
        pass

def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass

def allocate():
    return np.ones(2**28)

def nap(seconds):
    time.sleep(seconds)
    return "rested"

def fill(megabytes):
    for i in range(megabytes):
        with open(f"fill-{i}", "wb") as f:
            f.write(b"x" * (1 << 20))

def many_files(count):
    os.mkdir("many")
    for i in range(count):
        open(f"many/{i}", "w").close()

def deep_chain(depth):
    for _ in range(depth):
        os.mkdir("d")
        os.chdir("d")

def fork():
    return os.fork()

def say(text):
    print(text)
    return len(text)

def flood():
    sys.stdout.write("x" * (50 << 20))
    return "done"

def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)

def read_file(path):
    with open(path) as f:
        return f.read()

class Sneaky(list):
    def __eq__(self, other):
        return True

def sneaky_pair():
    return Sneaky([1, 2])

def make_world_writable(path):
    os.chmod(path, 0o666)

def open_inet_socket():
    import socket
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    return "opened"

def open_message_queue():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.mq_open(b"/kvlab-test-queue", 0o100 | 2, 0o600, None)  # O_CREAT | O_RDWR
    return [fd, ctypes.get_errno()]

def bump(a):
    a.flat[0] += 1
    return a

def reshaped(a):
    a.shape = (a.size,)
    return a

def changed(d, change):
    first = next(iter(d)) if isinstance(d, dict) else None
    if change == "add_key":
        d["extra"] = np.zeros(3)
    elif change == "drop_key":
        del d[first]
    elif change == "move_key":
        d[first] = d.pop(first)
    elif change == "replace_item":
        d[first] = d[first].copy()
    elif change == "write_item":
        d[first].flat[0] += 1
    elif change == "poke_field":
        object.__setattr__(d, "vocab", d.vocab + 1)
    return d

def logits(params, cfg, tokens):
    import kvlab.model
    return kvlab.model.forward(params, cfg, tokens)

def listdir(path):
    return sorted(os.listdir(path))

def forge(data):
    os.write(int(sys.argv[2]), data)
    time.sleep(0.2)
    return 1
'''

LIBRARY = '''
def apply_double(box):
    return box.double()
'''


@pytest.fixture(scope="module")
def folders() -> Iterator[dict[str, Path]]:
    """The student's folder (good and broken modules) and a course-library folder, in a folder any
    user may enter: without bubblewrap the worker's uid reads the library where it lies (pytest's
    own temporary folders are root's, mode 700)."""
    root = Path(tempfile.mkdtemp(prefix="kvlab-test-sandbox-"))
    root.chmod(0o755)
    student, lib = root / "student", root / "lib"
    (lib / "libpkg").mkdir(parents=True)
    student.mkdir()
    (student / "stud.py").write_text(STUDENT)
    (student / "broken.py").write_text("def f(:\n    return 1\n")
    (student / "needs_missing.py").write_text("import not_a_module_anywhere\n")
    (lib / "libpkg" / "__init__.py").write_text(LIBRARY)
    yield {"student": student, "lib": lib}
    shutil.rmtree(root)


@pytest.fixture(scope="module")
def box(folders: dict[str, Path]) -> Sandbox:
    """One sandbox reused by the whole module, as the grader reuses one across tests."""
    # The course library as the grader places it (packages=): a checkout in a private folder is out
    # of the worker's reach when bubblewrap does not bind it.
    with Sandbox(folders["student"], [folders["lib"]], packages=[REPO / "kvlab"], limits=Limits(call_timeout=5.0),
                 config=COURSE) as sandbox:
        yield sandbox


@pytest.fixture(autouse=True)
def _reset(request: pytest.FixtureRequest) -> None:
    if "box" in request.fixturenames:
        request.getfixturevalue("box").reset()


@pytest.fixture
def stud(box: Sandbox) -> Proxy:
    return box.module("stud")


def sandbox_folders() -> set[Path]:
    """The sandboxes' private folders now in the temporary folder."""
    return set(Path(tempfile.gettempdir()).glob("sandbox-*"))


def worker_is_unprivileged(sandbox: Sandbox) -> bool:
    return not any(line.startswith("reduced: running as") for line in sandbox.isolation)


# ----- isolation report ---------------------------------------------------------------------------

def test_isolation_report_matches_identity(box: Sandbox) -> None:
    report = "\n".join(box.isolation)
    if os.geteuid() != 0:
        assert "reduced: running as the grader's own user" in report, f"non-root must say reduced:\n{report}"
    elif bubblewrapped(box.isolation):
        for phrase in ("of its own (gid", "private filesystem view (bubblewrap)", "network disabled"):
            assert phrase in report, f"missing {phrase!r} in the report:\n{report}"
    else:
        assert "reduced" in report, f"root without bubblewrap must report what is reduced:\n{report}"


def test_fallback_without_bubblewrap_is_reported_and_works(folders: dict[str, Path]) -> None:
    sandbox = None
    try:
        sandbox = Sandbox(folders["student"], [folders["lib"]], bubblewrap=False, hide=[folders["lib"]])
        sandbox.cpu_seconds()  # waits for the first worker's start, where a refusal comes at the latest
    except NoSafeIdentity as refusal:
        if sandbox is not None:
            sandbox.close()
        # Root, and the unprivileged user cannot run this interpreter (pyenv's, under /root): the
        # grader must refuse rather than run student code as root.
        assert os.geteuid() == 0, f"only a root grader may refuse to start: {refusal}"
        pytest.skip(f"no unprivileged identity can run {sys.executable} here: {refusal}")
    with sandbox:
        report = "\n".join(sandbox.isolation)
        assert "bubblewrap disabled by the caller" in report or os.geteuid() != 0, f"report:\n{report}"
        if "Landlock (ABI" in report:  # the hidden folder lies outside what Landlock lets it read
            assert f"hidden by Landlock: {folders['lib']}" in report, f"Landlock hides it; the report says:\n{report}"
            if os.geteuid() == 0:
                assert "filesystem: protected by permissions and Landlock" in report, f"report:\n{report}"
        else:
            assert "reduced: not hidden" in report, f"hide without bubblewrap must be reported as reduced:\n{report}"
            assert "reduced: no Landlock" in report, f"a missing Landlock must be reported:\n{report}"
            if os.geteuid() == 0:
                assert "filesystem: protected by permissions only" in report, (
                    f"root without bubblewrap: the unprivileged user expected:\n{report}")
        if os.geteuid() == 0:
            assert sandbox.worker_uid != 0, "student code must never run as root"
        result = sandbox.module("stud").arange(3)
        assert np.array_equal(result, np.arange(3.0)), f"the fallback worker must still run code, got {result!r}"


@pytest.fixture
def unprobed(monkeypatch: pytest.MonkeyPatch) -> dict[Any, str | None]:
    """No isolation probe answered yet in this process, as at the start of a grading on Gradescope;
    the answers of the probes the test makes run."""
    answers: dict[Any, str | None] = {}
    monkeypatch.setattr(isolation, "_ANSWERS", answers)
    return answers


def root_only_interpreter(folder: Path) -> str:
    """A stand-in for this interpreter that only root may run (a script in a folder of mode 0700)."""
    folder.mkdir(mode=0o700)
    script = folder / "python"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
    script.chmod(0o700)
    return str(script)


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root grader could run student code as root")
@pytest.mark.parametrize("bubblewrap", [True, False], ids=["bubblewrap", "no-bubblewrap"])
@pytest.mark.parametrize("cause", ["no-such-user", "root-only-interpreter"])
def test_no_unprivileged_identity_stops_instead_of_running_as_root(
    folders: dict[str, Path], bubblewrap: bool, cause: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Forced with a user that does not exist (refused when the sandbox is made) or an interpreter
    the worker's uid cannot run (refused at its first start, once every probe said why): no payload
    ever runs here. The sandbox's folder goes in tmp_path, where no other test's sandbox can appear
    meanwhile."""
    settings: dict[str, Any] = {"user": "no-such-user-kvlab"} if cause == "no-such-user" else {
        "python": root_only_interpreter(tmp_path / "locked")}
    why = "there is no user no-such-user-kvlab" if cause == "no-such-user" else "Permission denied"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    before = sandbox_folders()
    with pytest.raises(NoSafeIdentity) as refusal:
        with Sandbox(folders["student"], [folders["lib"]], bubblewrap=bubblewrap, **settings) as sandbox:
            sandbox.module("stud").count()
    text = str(refusal.value)
    for phrase in ("will not run student code as root", why, "setup.sh"):
        assert phrase in text, f"the refusal must say {phrase!r} (why, and the staff's fix): {text}"
    assert sandbox_folders() <= before, f"a refused sandbox must remove its folder: {sandbox_folders() - before}"


# A worker starts before any probe has run; the probes run only when it fails to start, and only
# their answers change the plan (isolation.plan's `optimistic`).

def test_a_worker_starts_without_waiting_for_the_probes(folders: dict[str, Path],
                                                         unprobed: dict[Any, str | None]) -> None:
    with Sandbox(folders["student"], [folders["lib"]]) as sandbox:
        assert sandbox.module("stud").count() == 1, "the worker must serve its first call"
        assert sandbox.launches == 1, f"one worker expected, {sandbox.launches} started"
    assert not unprobed, (f"a worker that starts needs no probe, yet {len(unprobed)} ran: "
                          + ", ".join(command[0] for command, _, _ in unprobed))


def test_a_view_the_interpreter_cannot_start_in_is_probed_and_replaced(
    box: Sandbox, folders: dict[str, Path], unprobed: dict[Any, str | None], monkeypatch: pytest.MonkeyPatch,
) -> None:
    """/usr left out of the system folders: the narrow view covers it, so neither the interpreter
    nor setpriv can start there."""
    if not bubblewrapped(box.isolation):
        pytest.skip("the views are bubblewrap's; report: " + "; ".join(box.isolation))
    monkeypatch.setattr(isolation, "SYSTEM_FOLDERS", isolation.SYSTEM_FOLDERS - {"usr"})
    with Sandbox(folders["student"], [folders["lib"]]) as sandbox:
        report = "\n".join(sandbox.isolation)  # read first: it waits for a worker to have started
        assert "reduced: the whole filesystem is visible read-only" in report, (
            f"the wider view must replace the one the interpreter cannot start in:\n{report}")
        assert sandbox.module("stud").count() == 1, "the worker started in the wider view must serve calls"
        assert sandbox.launches == 2, f"one failed start and one in the wider view expected, not {sandbox.launches}"
        assert sandbox.captured_output() == "", (
            f"the failed start's complaint is not the student's output: {sandbox.captured_output()!r}")
    answers = [answer is None for answer in unprobed.values()]
    assert answers == [False, True], (
        f"the narrow view's probe should have failed and the wide view's (probed once the narrow one "
        f"was refused) passed, and no other run: {list(unprobed.values())}")


def test_a_worker_that_fails_to_start_in_a_sound_view_is_reported_dead(
    box: Sandbox, folders: dict[str, Path], unprobed: dict[Any, str | None],
) -> None:
    """An address space too small for numpy: the worker dies at its start, the probe (which has no
    such limit) passes, so the plan stands and the death is reported as the worker's."""
    if not bubblewrapped(box.isolation):
        pytest.skip("the views are bubblewrap's; report: " + "; ".join(box.isolation))
    with Sandbox(folders["student"], [folders["lib"]], limits=Limits(memory_bytes=40 << 20)) as sandbox:
        with pytest.raises(WorkerDied, match="during start-up"):
            sandbox.module("stud").count()
        assert sandbox.launches == 1, f"a sound plan must not be replaced: {sandbox.launches} workers started"
        report = "\n".join(sandbox.isolation)
    assert "only the system folders" in report, f"the narrow view must stand:\n{report}"
    assert unprobed and all(answer is None for answer in unprobed.values()), (
        f"the plan's probe must have run, and passed: {unprobed}")


def test_non_root_report_says_reduced(tmp_path: Path) -> None:
    """The report of a grader that is not root (checked in a forked child that drops to nobody)."""
    def make_report() -> list[str]:
        return isolation.plan(
            python=sys.executable, user=None, hide=[tmp_path], lib_dirs=[], site_packages=[],
            root_dir=tmp_path, home=tmp_path, limits=Limits(), bubblewrap=True,
        ).report

    if os.geteuid() != 0:
        report = make_report()
    else:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: drop root, compute the report, hand it back, leave at once
            try:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
                os.write(write, json.dumps(make_report()).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read, "rb") as stream:
            data = stream.read()
        os.waitpid(pid, 0)
        report = json.loads(data)
    text = "\n".join(report)
    assert "reduced: running as the grader's own user" in text, f"non-root report must say reduced:\n{text}"
    assert "reduced: not hidden" in text, f"hide paths must be reported as not hidden:\n{text}"


@pytest.mark.parametrize(("path", "folder", "under"), [
    ("/a/b", "/a", True), ("/a", "/a", True), ("/ab", "/a", False), ("/a", "/a/b", False), ("/x", "/", True),
])
def test_is_under_compares_whole_names(path: str, folder: str, under: bool) -> None:
    assert isolation.is_under(Path(path), Path(folder)) is under, f"is_under({path}, {folder}) should be {under}"


def test_hidden_paths_are_invisible(folders: dict[str, Path], tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "answers.txt").write_text("42")
    with Sandbox(folders["student"], [folders["lib"]], hide=[secret]) as sandbox:
        if not bubblewrapped(sandbox.isolation):
            pytest.skip("hiding needs root and a working bubblewrap; report: " + "; ".join(sandbox.isolation))
        stud = sandbox.module("stud")
        # Covered by bubblewrap (an empty folder, the file absent), and Landlock refuses to list it.
        try:
            listed = stud.listdir(str(secret))
        except PermissionError:
            listed = []
        assert listed == [], "a hidden folder must look empty to the worker"
        with pytest.raises((FileNotFoundError, PermissionError)):
            stud.read_file(str(secret / "answers.txt"))


def test_landlock_and_seccomp_confine_the_worker_without_bubblewrap(folders: dict[str, Path]) -> None:
    # World-readable and world-writable folders outside the worker's own: only Landlock keeps it out.
    outside = Path(tempfile.mkdtemp(prefix="kvlab-outside-"))
    try:
        outside.chmod(0o777)
        (outside / "answers.txt").write_text("42")
        (outside / "answers.txt").chmod(0o644)
        with Sandbox(folders["student"], [folders["lib"]], bubblewrap=False) as sandbox:
            stud = sandbox.module("stud")
            assert stud.echo(1) == 1, "the worker must serve a call"  # started: its layers are in the report
            report = "\n".join(sandbox.isolation)
            assert "seccomp: memory files, System V and POSIX IPC, network sockets and permission changes refused" in report, report
            with pytest.raises(PermissionError):
                stud.open_inet_socket()
            fd, errno = stud.open_message_queue()
            assert fd == -1 and errno == 1, f"mq_open must fail with EPERM; got fd {fd}, errno {errno}"
            if "Landlock (ABI" not in report:
                pytest.skip(f"this kernel offers no Landlock:\n{report}")
            with pytest.raises(PermissionError):
                stud.read_file(str(outside / "answers.txt"))
            with pytest.raises(PermissionError):
                stud.write_file(str(outside / "planted.txt"), "x")
            stud.write_file("scratch.txt", "notes")
            assert stud.read_file("scratch.txt") == "notes", "the worker's own folder must stay writable"
            with pytest.raises(PermissionError):  # seccomp: a worker of the grader's own user could open its files
                stud.make_world_writable("scratch.txt")
        assert not (outside / "planted.txt").exists(), "the worker wrote outside its folder"
    finally:
        shutil.rmtree(outside)


def test_fresh_call_result_is_plain_data_or_the_students_failure(folders: dict[str, Path]) -> None:
    # A list subclass stays in the sibling's process as a reference; read after the sibling closed
    # it would be a grader fault. It is refused while the sibling lives, about the student's code.
    with Sandbox(folders["student"], [folders["lib"]]) as sandbox:
        backend = SandboxBackend(sandbox)
        assert backend.fresh_call("stud", "echo", [1, {"a": 2}]) == [1, {"a": 2}], "plain data must come back as is"
        with pytest.raises(BadValue, match="plain data"):
            backend.fresh_call("stud", "sneaky_pair")


def test_worker_cannot_write_lib_dirs(box: Sandbox, stud: Proxy, folders: dict[str, Path]) -> None:
    if not worker_is_unprivileged(box):
        pytest.skip("the worker runs as the grader's user, which can write lib_dirs: " + "; ".join(box.isolation))
    target = folders["lib"] / "libpkg" / "evil.py"
    with pytest.raises(OSError):
        stud.write_file(str(target), "x = 1")
    assert not target.exists(), "the worker wrote into a library folder"


@pytest.mark.parametrize("wrapped", [True, False], ids=["bubblewrap", "no-bubblewrap"])
def test_packages_are_imported_from_the_sandbox_and_read_only(folders: dict[str, Path], wrapped: bool) -> None:
    """Sandbox(packages=...): under bubblewrap bound into the sandbox's folder (nothing copied on
    disk), otherwise copied there once, read-only, and a fresh sibling imports from that copy
    (unless the worker runs as the grader's user, which could have changed it)."""
    kvlab_source = Path(kvlab.__file__).resolve().parent
    python = sys.executable if wrapped else readable_python()
    if python is None:
        pytest.skip("no interpreter here that an unprivileged uid can run without bubblewrap")
    with Sandbox(folders["student"], [], packages=[folders["lib"] / "libpkg", kvlab_source], bubblewrap=wrapped,
                 python=python, limits=Limits(call_timeout=5.0), config=COURSE) as sandbox:
        stud = sandbox.module("stud")
        placed = sandbox.folder / "packages" / "libpkg" / "__init__.py"
        assert stud.read_file(str(placed)) == LIBRARY, "the worker must read the package where the sandbox placed it"
        assert stud.kind(sandbox.call("libpkg:apply_double", stud.Box(2))) == "int", "the package must import"
        copied = not bubblewrapped(sandbox.isolation)
        assert placed.exists() is copied, (
            "a package must be copied without bubblewrap and only bound with it (on disk: "
            f"{'a copy' if placed.exists() else 'nothing'})")
        if worker_is_unprivileged(sandbox):
            with pytest.raises(OSError):
                stud.write_file(str(placed), "x = 1")
        with sandbox.fresh() as sibling:
            sibling_stud = sibling.module("stud")
            assert sibling_stud.kind(sibling.call("libpkg:apply_double", sibling_stud.Box(2))) == "int", (
                "a fresh sibling must import the package")
            # Its own copy only where a worker could have changed its sandbox's (the grader's own user).
            own_copy = copied and not worker_is_unprivileged(sandbox)
            should = "copy the package itself" if own_copy else "bind it, or import from its sandbox's copy"
            assert (sibling.folder / "packages" / "libpkg" / "__init__.py").exists() is own_copy, (
                f"the sibling should {should}")
    assert not sandbox.folder.exists(), "the sandbox's folder, copies included, must be removed"


def test_worker_can_write_its_own_folder(stud: Proxy) -> None:
    stud.write_file("scratch.txt", "notes")
    assert stud.read_file("scratch.txt") == "notes", "the worker's private folder must be writable"


# ----- values ---------------------------------------------------------------------------------------

VALUES = [
    None, True, False, 0, -(2**70), 1.5, -0.0, float("inf"), "", "héllo", b"\x00\xff",
    [1, [2, (3, 4)]], (1, "a"), {"a": [1, 2], "b": {"c": None}},
    np.arange(6, dtype=np.int16).reshape(2, 3), np.zeros((0, 3)), np.asfortranarray(np.ones((2, 3))),
    np.array(3.5), np.array([1 + 2j], dtype=np.complex64), np.array([True, False]),
    np.float32(1.5), np.int64(-3), np.uint8(255), np.bool_(True),
    np.float32, np.bool_, np.dtype("float16"), np.dtype(">i4"),
]


def same(a: object, b: object) -> bool:
    """Equal values of exactly the same types (arrays: dtype, shape, values)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or a != a and b != b)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a == b
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=lambda v: getattr(v, "__name__", type(v).__name__))
def test_values_round_trip(stud: Proxy, value: object) -> None:
    back = stud.echo(value)
    assert same(back, value), f"sent {value!r} ({type(value).__name__}), got {back!r} ({type(back).__name__})"


def test_nan_and_config_round_trip(stud: Proxy) -> None:
    model = pytest.importorskip("kvlab.model", reason="kvlab.model is not written yet")
    assert math.isnan(stud.echo(float("nan"))), "nan must survive the trip"
    assert stud.kind(model.TINY) == "Config", "a Config must arrive in the worker as a Config"
    back = stud.echo(model.TINY)
    assert type(back) is model.Config and back == model.TINY, f"Config came back as {back!r}"


def test_request_round_trip(stud: Proxy) -> None:
    trace = pytest.importorskip("kvlab.trace", reason="kvlab.trace is not written yet")
    request = trace.Request(arrival=0.5, input_len=700, output_len=10, blocks=(1, 2))
    back = stud.echo(request)
    assert type(back) is trace.Request and back == request, f"Request came back as {back!r}"


def test_array_subclass_comes_back_as_ndarray(stud: Proxy) -> None:
    result = stud.matrix()
    assert type(result) is np.ndarray, f"an ndarray subclass must arrive as a plain ndarray, got {type(result)}"


def test_object_array_from_student_is_refused(stud: Proxy) -> None:
    with pytest.raises(TypeError, match="dtype object") as info:
        stud.object_array()
    assert isinstance(info.value, StudentException), "the refusal must be reported as the student's problem"


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "a"], dtype=object), lambda x: x, len, object(), {1: "non-str key"},
        np.floating, np.dtype(object),
    ],
    ids=["object-array", "lambda", "builtin", "object", "int-key", "abstract-type", "object-dtype"],
)
def test_trusted_values_that_cannot_cross(stud: Proxy, value: object) -> None:
    with pytest.raises(TypeError, match="cannot"):
        stud.echo(value)


def test_exception_class_cannot_go_back(stud: Proxy) -> None:
    with pytest.raises(TypeError, match="exception class"):
        stud.echo(stud.OutOfBlocks)


# ----- proxies --------------------------------------------------------------------------------------

def test_student_object_is_a_proxy(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(3)
    assert isinstance(b, Proxy), f"a student object must come back as a proxy, got {type(b)}"
    assert (type(b).__name__, type(b).__module__) == ("Box", "stud"), (
        f"a proxy's class must be named after the student's (messages name type(value)), got {type(b)!r}")
    assert type(stud.Box(4)) is type(b), "the proxies of one student class must share their class"
    assert len(b) == 3, "len() must reach the student's __len__"
    assert 2 in b and 5 not in b, "`in` must reach the student's __contains__"
    assert b[1] == 1 and b[-1] == 2, "indexing must reach the student's __getitem__"
    assert list(b) == [0, 1, 2], "iteration must reach the student's __iter__"
    assert b.n == 3 and b.double() == 6, "attributes and methods must be round trips"
    assert repr(b) == "Box(3)" and str(b) == "Box(3)", f"repr/str must be the student's, got {repr(b)!r}"
    assert bool(b) is True, "bool() must reach the student's object (here through __len__)"
    b.n = 5
    assert len(b) == 5, "an attribute write must reach the student's object"
    assert stud.box_double(b) == 10, "a proxy argument must arrive as the worker object it names"
    assert box.call("libpkg:apply_double", b) == 10, "a library call must get the student's object"


def test_a_method_asked_again_is_one_round_trip(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(3)
    assert b.double() == 6, "the first call of a method: its lookup, then the call"
    before = box.requests
    assert b.double() == 6, "the method called again must give the same result"
    assert box.requests - before == 1, f"a method called again took {box.requests - before} round trips, not 1"
    b.rebind()  # an attribute of the instance now shadows the class's method
    assert b.double() == "rebound", "the method is looked up again at every call: the instance's attribute wins"
    b.n = 4
    other = stud.Box(5)
    assert other.double() == 10 and stud.Box(2).n == 2, "another object of the class must not share the shortcut"


@pytest.mark.parametrize("use", ["==", "!=", "bool", "len", "iter", "asarray", "int"])
def test_a_method_used_as_a_value_fails_closed(stud: Proxy, use: str) -> None:
    """Only the worker says an attribute is a method; whatever it says, the shortcut never lets a
    method compare, convert or iterate as if it were a value the test expected."""
    b = stud.Box(3)
    b.double()
    method = b.double
    uses = {"==": lambda: method == 6, "!=": lambda: method != 6, "bool": lambda: bool(method),
            "len": lambda: len(method), "iter": lambda: list(method), "asarray": lambda: np.asarray(method),
            "int": lambda: int(method)}
    with pytest.raises(BadValue, match="is a method of your class"):
        uses[use]()


def test_a_function_of_a_module_is_named_after_its_first_lookup(stud: Proxy, box: Sandbox) -> None:
    """The worker says `stud.later` is a function: from then on `stud.later(...)` is one round trip
    (the worker looks the name up at each use), in later tests and workers too; the name arrives in
    the worker as the function; a plain value of the module still crosses by value at each read."""
    stud.later  # the lookup, once
    for when in ("after its lookup", "after a reset", "after a restart"):
        before = box.requests
        assert stud.later() == "a function", f"the named function must be called {when}"
        assert box.requests - before == 1, f"a call of a named function {when} took {box.requests - before} round trips"
        (box.reset if when == "after its lookup" else box.restart)()
    assert stud.kind(stud.later) == "function", "a named function passed as an argument must arrive as the function"
    assert stud.count() == 1 and stud.CALLS == 1 and stud.CALLS == 1, "a module's int must come by value"
    stud.rebind_later()  # the name now holds an int: it is looked up at the use, and calling it fails
    with pytest.raises(TypeError, match="not callable"):
        stud.later()


def test_a_reset_sends_nothing_when_the_worker_holds_nothing(stud: Proxy, box: Sandbox) -> None:
    """The worker numbers an object only to send it here, and keeps what was sent by number: with
    neither since the last reset, its table is empty and the reset skips the round trip."""
    stud.echo  # its first lookup hands out a reference to the function; later uses name it
    box.reset()
    assert stud.echo([1, "two"]) == [1, "two"], "plain data both ways"
    before = box.requests
    box.reset()
    assert box.requests == before, "a reset after plain data only must not cross"
    b = stud.Box(2)  # a reference: the worker numbered the object
    for holds in ("a reference", "an array sent by number"):
        before = box.requests
        box.reset()
        assert box.requests == before + 1, f"a reset after the worker got {holds} must cross"
        assert stud.echo(np.zeros(1000)).shape == (1000,), "8 kB: sent by number"
    with pytest.raises(ReferenceError):
        len(b)


# ----- arrays handed back by number ------------------------------------------------------------------

@pytest.fixture
def echoed(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the worker handed back by number instead of its bytes in this test: "array", "dict" or
    the wire type's class name, one per number (a dict's arrays each after it)."""
    kinds: list[str] = []
    real = kept.Sent.value

    def spy(self: kept.Sent, number: object) -> object:
        value = real(self, number)
        kinds.append({np.ndarray: "array", dict: "dict"}.get(type(value), type(value).__name__))
        return value

    monkeypatch.setattr(kept.Sent, "value", spy)
    return kinds


def test_arrays_passed_back_unchanged_cross_as_their_number(stud: Proxy, echoed: list[str]) -> None:
    arrays = [np.arange(4096.0).reshape(64, 64), np.ones(1000, dtype=np.float32), np.zeros(3)]
    back = stud.echo(arrays)
    assert len(back) == 3 and all(b.dtype == a.dtype and np.array_equal(b, a) for a, b in zip(arrays, back)), (
        "the arrays came back changed")
    assert echoed == ["array", "array"], (f"the two arrays of at least {protocol.ECHO_MIN_BYTES} bytes must come "
                                          f"back as their numbers, the small one as bytes; came back by number: {echoed}")
    back[0][0, 0] = -1.0
    assert arrays[0][0, 0] == 0.0 and stud.echo(arrays)[0][0, 0] == 0.0, (
        "an array handed back by number must be a new array, as one decoded from its bytes is")


def test_a_dict_of_arrays_passed_back_unchanged_crosses_as_one_number(stud: Proxy, echoed: list[str]) -> None:
    params = {"w": np.arange(4096.0).reshape(64, 64), "b": np.ones(1000, dtype=np.float32), "small": np.zeros(3)}
    back = stud.echo(params)
    assert list(back) == list(params), f"the dict came back with keys {list(back)}"
    for name, array in params.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array), f"{name} came back changed"
    assert echoed == ["dict", "array", "array", "array"], (
        f"the dict must come back as one number, its arrays (the small one too) with it; came back: {echoed}")
    back["small"][0] = 5.0
    assert back["small"].flags.writeable and stud.echo(params)["small"][0] == 0.0, (
        "the arrays of a dict handed back by number must be new writable arrays, as decoded ones are")


@pytest.mark.parametrize("change", ["add_key", "drop_key", "move_key", "replace_item", "write_item"])
def test_a_dict_changed_in_the_worker_crosses_by_its_items(stud: Proxy, echoed: list[str], change: str) -> None:
    params = {"w": np.arange(4096.0).reshape(64, 64), "small": np.zeros(3)}
    expected = {k: v.copy() for k, v in params.items()}
    if change == "add_key":
        expected["extra"] = np.zeros(3)
    elif change == "drop_key":
        del expected["w"]
    elif change == "move_key":
        expected["w"] = expected.pop("w")
    elif change == "write_item":
        expected["w"][0, 0] += 1
    back = stud.changed(params, change)
    assert list(back) == list(expected) and all(np.array_equal(back[k], v) for k, v in expected.items()), (
        f"{change}: the dict must come back as it is in the worker, got keys {list(back)}")
    assert "dict" not in echoed, f"{change}: a changed dict came back by number, so as the grader sent it"


def test_a_frozen_wire_type_passed_back_unchanged_is_the_value_sent(stud: Proxy, echoed: list[str]) -> None:
    assert stud.echo(model.TINY) is model.TINY and echoed == ["Config"], (
        f"a Config handed back unchanged must cross as its number, as the very value sent; came back: {echoed}")
    poked = stud.changed(model.TINY, "poke_field")
    assert poked.vocab == model.TINY.vocab + 1 and echoed == ["Config"], (
        "a Config changed in the worker (object.__setattr__) must cross by value, with the change")


def test_remote_functions_get_the_sent_arrays_read_only(stud: Proxy, box: Sandbox,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights a worker's forward sends back by number reach the trusted forward as the kept
    arrays themselves (no copy per decode step), read-only, so it cannot change them either."""
    params, tokens = model.init_params(model.TINY, seed=1), np.array([[1, 2, 3]])
    seen: list[bool] = []
    real = model.forward

    def spy(weights: dict[str, np.ndarray], *args: object, **kwargs: object) -> np.ndarray:
        kept_arrays = [id(a) for a in box.objects.sent.arrays.values()]
        seen.extend(id(a) in kept_arrays and not a.flags.writeable for a in weights.values())
        return real(weights, *args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    got = stud.logits(params, model.TINY, tokens)
    assert np.array_equal(got, real(params, model.TINY, tokens)), "the forward run for the worker gave other logits"
    assert seen and all(seen), f"{seen.count(False)} of the {len(seen)} weights reached forward as copies"


def _in_library_local(box: Sandbox, function: Any, *args: Any) -> Any:
    with box.library_local():
        return function(*args)


@pytest.mark.parametrize("local", [
    _in_library_local,
    # What the lecture-2 decode tests use (decode_checks.decoded): the grader's student.run_local.
    lambda box, function, *args: SandboxBackend(box).run_local(function, *args),
], ids=["library_local", "run_local"])
def test_library_local_runs_the_remote_functions_in_the_worker(stud: Proxy, box: Sandbox, local: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside `library_local` the worker's forward is its own copy (no callback, nothing run here);
    outside, and after the block, it calls back again."""
    params, tokens = model.init_params(model.TINY, seed=1), np.array([[1, 2, 3]])
    expected, ran_here = model.forward(params, model.TINY, tokens), []
    real = model.forward
    monkeypatch.setattr(model, "forward", lambda *args, **kwargs: ran_here.append(1) or real(*args, **kwargs))
    got = local(box, stud.logits, params, model.TINY, tokens)
    assert np.array_equal(got, expected) and not ran_here, (
        f"inside library_local the forward ran here {len(ran_here)} time(s); it must run in the worker")
    assert np.array_equal(stud.logits(params, model.TINY, tokens), expected) and ran_here == [1], (
        "after library_local the worker's forward must call back to this process again")


def test_an_array_changed_here_after_it_was_sent_comes_back_as_sent(stud: Proxy, echoed: list[str]) -> None:
    # The request carries a view of the grader's array; what a number names must be a copy of it.
    sent = np.arange(1024.0)
    box = stud.Box(sent)
    sent[:] = -1.0
    back = box.n
    assert echoed and np.array_equal(back, np.arange(1024.0)), "the worker's array is the one that was sent"
    assert back.flags.writeable, "an array handed back by number is writable, as one decoded from bytes is"


@pytest.mark.parametrize("change", ["bump", "reshaped"])
def test_arrays_changed_in_the_worker_cross_as_bytes(stud: Proxy, echoed: list[str], change: str) -> None:
    sent = np.arange(2048.0).reshape(32, 64)
    back = getattr(stud, change)(sent)
    expected = {"bump": np.concatenate([[1.0], np.arange(1.0, 2048.0)]).reshape(32, 64),
                "reshaped": np.arange(2048.0)}[change]
    assert back.shape == expected.shape and np.array_equal(back, expected), (
        f"{change}: the array changed in the worker must come back as it is there, got shape {back.shape}")
    assert not echoed, f"{change}: a changed array came back by number {echoed}, so as the grader sent it"


@pytest.mark.parametrize(("values", "as_one_array"), [
    (list(range(-40, 60)), True), ([2 ** 62] * 64, True), (list(range(63)), False), ([True] * 64, False),
    ([1] * 63 + [2 ** 70], False), ([1] * 63 + [1.5], False),
], ids=["ints", "large-ints", "short", "bools", "beyond-int64", "a-float"])
def test_long_lists_of_ints_come_back_as_one_array(stud: Proxy, monkeypatch: pytest.MonkeyPatch, values: list[object],
                                                   as_one_array: bool) -> None:
    """The worker sends a list of at least INT_LIST_MIN ints as one int64 array (a block table, not a
    tree node per id); anything else in the list, or a shorter one, crosses item by item, exactly."""
    tags: list[str] = []
    real = codec.Decoder.decode

    def spy(self: codec.Decoder, tree: object, depth: int = 0) -> object:
        tags.append(tree[0] if isinstance(tree, list) and tree else "?")  # type: ignore[index]
        return real(self, tree, depth)

    echo = stud.echo  # its reference crosses now, not with the reply below
    monkeypatch.setattr(codec.Decoder, "decode", spy)
    back = echo(values)
    assert back == values and [type(v) for v in back] == [type(v) for v in values], (
        "the list came back with other values or types")
    assert (tags == ["J"]) == as_one_array, f"the reply crossed as {tags[:3]}..., one array expected: {as_one_array}"


def test_numbers_name_nothing_after_a_reset(box: Sandbox, stud: Proxy) -> None:
    stud.echo(np.zeros(4096))
    assert box.objects.sent.arrays, "the array just sent must be kept while the test lasts"
    box.reset()
    assert not box.objects.sent.arrays, "a reset (a new test) must forget the arrays sent before it"


def test_always_equal_object_equals_nothing_trusted(stud: Proxy) -> None:
    sneaky = stud.AlwaysEqual()
    assert isinstance(sneaky, Proxy), "an object with a custom __eq__ must stay a reference"
    for other in (1, None, "x", [1], np.zeros(1)):
        assert not (sneaky == other), f"a student __eq__ must not make a proxy equal to {other!r}"
    assert sneaky == sneaky, "a proxy equals itself"


def test_stale_proxy_after_reset(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(2)
    box.reset()
    with pytest.raises(ReferenceError):
        len(b)
    assert stud.count() >= 1, "module proxies stay valid across a reset"


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
    worker = process.launch(plan, sys.executable, tmp_path, tmp_path, {"seq": 1, "op": "init"})
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
