"""The sandbox's isolation: what its report says for each identity and view, the probes that pick a
view, hidden folders, Landlock and seccomp without bubblewrap, and what the worker may write or import.

The sandbox's other tests: test_sandbox.py (its life: start, close, measurement), test_sandbox_values.py,
test_sandbox_failures.py; their student module and fixtures: tests/support/sandboxes.py.
"""
from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from autograder.harness.backends import SandboxBackend
from autograder.harness.course import COURSE
from autograder.harness.sandbox import BadValue, Limits, NoSafeIdentity, ProtocolError, Proxy, Sandbox, WorkerDied, isolation
from autograder.harness.sandbox.sandbox import SECCOMP_SAYS
from support.isolation import bubblewrapped, readable_python
# Fixtures, imported by name: pytest finds them in this module's namespace (box needs folders; reset_box is autouse).
from support.sandboxes import LIBRARY, box, folders, reset_box, stud
import kvlab


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
            assert SECCOMP_SAYS in report, report
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


# What the worker refuses itself in every mode (seccomp), and with Landlock: errno by attempt.
REFUSED_BY_SECCOMP = {"setxattr": 95, "getxattr": 95, "utime": 1, "add_key": 1, "keyctl": 1, "unix socket": 1,
                      "prlimit of the parent": 1, "new user namespace": 1}
REFUSED_BY_LANDLOCK = {"/dev/ptmx": 13, "/dev listed": 13, "/dev/urandom read": 0}


@pytest.mark.parametrize("wrapped", [True, False], ids=["bubblewrap", "no-bubblewrap"])
def test_keys_metadata_sockets_and_devices_are_refused(folders: dict[str, Path], wrapped: bool) -> None:
    """Keyrings, extended attributes, timestamps, every socket, other processes' limits and new
    namespaces are refused by the filter; /dev beyond the few files a program reads, by Landlock."""
    with Sandbox(folders["student"], [folders["lib"]], bubblewrap=wrapped) as sandbox:
        stud = sandbox.module("stud")
        stud.write_file("memo.txt", "memo")
        found = stud.refusals("memo.txt")
        report = "\n".join(sandbox.isolation)
    if wrapped and not bubblewrapped(sandbox.isolation):
        pytest.skip(f"bubblewrap does not work here:\n{report}")
    wrong = {name: found[name] for name, errno in REFUSED_BY_SECCOMP.items() if found[name] != errno}
    assert not wrong, f"expected errno {REFUSED_BY_SECCOMP}, got {wrong} ({report})"
    if "Landlock (ABI" not in report:
        pytest.skip(f"this kernel offers no Landlock:\n{report}")
    wrong = {name: found[name] for name, errno in REFUSED_BY_LANDLOCK.items() if found[name] != errno}
    assert not wrong, f"expected errno {REFUSED_BY_LANDLOCK}, got {wrong}"


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_names_real_calls_and_fits_bpf(machine: str) -> None:
    """Every call the filter names has a number on x86_64 (whose table has them all: a misspelt name
    would be refused nowhere), each machine's program builds (its jumps fit BPF's 8 bits) and ends
    in returns."""
    from autograder.harness.sandbox.worker import seccomp

    names = [name for _, group in seccomp.REFUSED for name in group] + list(seccomp.SELF_ONLY)
    unknown = [name for name in names if name not in seccomp.MACHINES["x86_64"][1]]
    assert not unknown, f"calls without an x86_64 number: {unknown}"
    program = seccomp.program(machine)
    assert program[-1][0] == seccomp.RET and len(program) < 4096, f"{len(program)} instructions"


@pytest.mark.parametrize("what", ["type", "escape in type", "keys"])
def test_bad_names_from_the_worker_are_the_students_failure(stud: Proxy, what: str) -> None:
    """A type name or a key the worker sends that is not printable text (a NUL, a newline, an
    escape) fails the call as the student's (a ProtocolError, a StudentException), never the grader."""
    with pytest.raises(ProtocolError, match="not printable text of at most"):
        stud.badly_named(what)
    assert stud.echo(1) == 1, "the next call gets a new worker"


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
