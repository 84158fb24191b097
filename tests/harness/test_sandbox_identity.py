"""The worker's identity as root: a uid of its own per sandbox, what it leaves outside its folder
removed with it, and a fresh sibling that starts from nothing of the main worker.

Without bubblewrap these run the worker on an interpreter the unprivileged uid can read (the
system's, with this venv's packages, as Gradescope's image does) and skip where there is none."""
from __future__ import annotations

import errno
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from autograder.harness.sandbox import Sandbox, identity
from support.isolation import readable_python

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="a grader that is not root runs the worker as itself")

# Leaves a file in /tmp and /dev/shm, a System V semaphore set (the worker may make no segment) and an
# abstract socket (kept bound while the process lives), each named after its uid; `seen(uid)` looks for
# all four from another process. `outside_memory()` tries what would hold memory outside RLIMIT_AS.
STUDENT = '''
import ctypes, os, socket

KEPT = []
_libc = ctypes.CDLL(None, use_errno=True)
_libc.semget.restype, _libc.semget.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int]
_libc.shmget.restype, _libc.shmget.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
_libc.msgget.restype, _libc.msgget.argtypes = ctypes.c_int, [ctypes.c_int, ctypes.c_int]


def _names(uid):
    return [f"/tmp/kvlab-left-{uid}", f"/dev/shm/kvlab-left-{uid}"], 0x6B760000 + uid % 65536, f"kvlab-left-{uid}"


def leave():
    files, key, name = _names(os.getuid())
    for path in files:
        try:
            with open(path, "w") as file:
                file.write("state")
        except OSError:
            pass  # bubblewrap's view: nothing is writable outside the worker's folder
    semaphores = _libc.semget(key, 1, 0o1000 | 0o666)
    try:
        sock = socket.socket(socket.AF_UNIX)
    except OSError:
        pass  # seccomp refuses every socket
    else:
        sock.bind("\\0" + name)
        KEPT.append(sock)
    return os.getuid(), semaphores >= 0


def seen(uid):
    files, key, name = _names(uid)
    with open("/proc/net/unix") as table:
        sockets = sum(name in line for line in table)
    return [p for p in files if os.path.exists(p)], _libc.semget(key, 0, 0) >= 0, sockets


def outside_memory():
    refused = {}
    try:
        os.close(os.memfd_create("x"))
    except OSError as error:
        refused["memfd_create"] = error.errno
    for name, call in (("shmget", lambda: _libc.shmget(0, 1 << 20, 0o1000 | 0o600)),
                       ("msgget", lambda: _libc.msgget(0, 0o1000 | 0o600))):
        if call() < 0:
            refused[name] = ctypes.get_errno()
    return refused


def uid():
    return os.getuid()


class Thing:
    pass
'''


@pytest.fixture(scope="module", autouse=True)
def sandboxes_folder() -> Iterator[None]:
    """The sandboxes' folders in one of this module's own (the worker must reach them: mode 755),
    not in /tmp, where tests/harness/test_sandbox_isolation.py counts its own while this module may run beside it."""
    folder = tempfile.mkdtemp(prefix="kvlab-identity-")
    os.chmod(folder, 0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tempfile, "tempdir", folder)
        yield
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def student_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("identity-student")
    (folder / "stud.py").write_text(STUDENT, encoding="utf-8")
    return folder


def sandbox_args(bubblewrap: bool) -> dict[str, Any]:
    if bubblewrap:
        return {"bubblewrap": True}
    python = readable_python()
    if python is None:
        pytest.skip("no interpreter here that an unprivileged uid can run")
    return {"bubblewrap": False, "python": python}


def open_sandbox(student_dir: Path, bubblewrap: bool) -> Sandbox:
    box = Sandbox(student_dir, [], **sandbox_args(bubblewrap))
    if bubblewrap and not any("private filesystem view (bubblewrap)" in line for line in box.isolation):
        box.close()
        pytest.skip("bubblewrap cannot start here")
    return box


@pytest.fixture(params=[True, False], ids=["bubblewrap", "no-bubblewrap"])
def bubblewrap(request: pytest.FixtureRequest) -> bool:
    return request.param


@pytest.fixture
def sandbox(student_dir: Path, bubblewrap: bool) -> Iterator[Sandbox]:
    with open_sandbox(student_dir, bubblewrap) as box:
        yield box


def held(uid: int) -> bool:
    """Whether some sandbox holds `uid` (its lock file cannot be locked)."""
    fd = os.open(identity.LOCKS / str(uid), os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def test_each_sandbox_holds_a_uid_of_its_own(sandbox: Sandbox, student_dir: Path, bubblewrap: bool) -> None:
    with open_sandbox(student_dir, bubblewrap) as other:
        uids = [box.module("stud").uid() for box in (sandbox, other)]
        assert uids == [sandbox.worker_uid, other.worker_uid], f"the workers run as {uids}, not as their plans say"
        assert uids[0] != uids[1] and all(uid in identity.POOL for uid in uids), (
            f"two sandboxes alive at once must hold two uids of identity.POOL, got {uids}")
        assert "of its own" in other.isolation[0], f"the report must say whose uid it is: {other.isolation[0]}"
        assert held(uids[1]), f"uid {uids[1]} must stay claimed while its sandbox is open"
    assert not held(uids[1]), f"closing the sandbox must give uid {uids[1]} back"


# What a worker without Landlock and seccomp could leave (the files and semaphore set of `leave`),
# made here as its uid, so that the cleanup is tested where those layers keep the worker from it.
PLANT = """
import ctypes, sys
uid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
for path in (f"/tmp/kvlab-left-{uid}", f"/dev/shm/kvlab-left-{uid}"):
    open(path, "w").write("state")
sys.exit(0 if libc.semget(0x6B760000 + uid % 65536, 1, 0o1000 | 0o666) >= 0 else 1)
"""


# A key linked into the uid's user keyring, which every uid may view and read (what seccomp keeps the worker
# itself from making).
PLANT_KEY = """
import ctypes, sys
call = ctypes.CDLL(None, use_errno=True).syscall
call.restype = ctypes.c_long
call(250, 1, None)  # a session keyring of its own: the key is its possession while it is made
key = call(248, b"user", f"kvlab-left-{sys.argv[1]}".encode(), b"state", 5, -3)
sys.exit(0 if key > 0 and call(250, 5, key, 0x3F3F3F3F) == 0 and call(250, 8, key, -4) == 0 else 1)
"""


def keys_of(uid: int) -> list[str]:
    """The lines of /proc/keys naming this test's key of `uid` (shown to every uid: it may view it)."""
    with open("/proc/keys", encoding="ascii", errors="replace") as table:
        return [line.strip() for line in table if f"kvlab-left-{uid}" in line]


def test_what_the_worker_leaves_outside_its_folder_goes_with_it(student_dir: Path) -> None:
    with open_sandbox(student_dir, False) as box:
        uid, made_semaphores = box.module("stud").leave()
        confined = any(line.startswith("Landlock (ABI") for line in box.isolation)
        if confined:
            assert not made_semaphores and not identity.owned_entries(uid), (
                f"Landlock and seccomp should have kept the worker from leaving files or semaphores: "
                f"{identity.owned_entries(uid)}, semaphores {made_semaphores}")
            python = os.path.realpath(sys.executable)
            subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", python, "-I", "-S", "-c",
                            PLANT, str(uid)], check=True, cwd="/")
        assert len(identity.owned_entries(uid)) == 2 and identity.owned_ipc(uid), (
            "the worker's uid should own two files and a System V semaphore set, the things this test removes")
        subprocess.run(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", os.path.realpath(sys.executable),
                        "-I", "-S", "-c", PLANT_KEY, str(uid)], check=True, cwd="/")
        assert keys_of(uid), "the uid's key should show in /proc/keys"
    deadline = time.monotonic() + 10.0  # the kernel collects an unlinked key a moment later
    while keys_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert keys_of(uid) == [], f"uid {uid} still holds keys after its sandbox closed: {keys_of(uid)}"
    assert identity.owned_entries(uid) == [], f"uid {uid} still owns {identity.owned_entries(uid)}"
    assert identity.owned_ipc(uid) == [], f"uid {uid} still owns the IPC objects {identity.owned_ipc(uid)}"


def test_a_fresh_sibling_starts_from_nothing_of_the_main_worker(sandbox: Sandbox, bubblewrap: bool) -> None:
    main = sandbox.module("stud")
    thing = main.Thing()
    uid, _ = main.leave()
    with sandbox.fresh() as sibling:
        files, semaphores, sockets = sibling.module("stud").seen(uid)
        assert sibling.worker_uid != uid, "the sibling must run as a uid of its own"
    assert (files, semaphores, sockets) == ([], False, 0), (
        f"a fresh sibling found the main worker's files {files}, semaphores {semaphores}, sockets {sockets}")
    if bubblewrap:
        thing.mark = 1  # with bubblewrap the main worker lives on beside its sibling
    else:
        with pytest.raises(ReferenceError, match="ended for a fresh call"):
            thing.mark = 1
    assert sandbox.module("stud").uid() == uid, "the main sandbox must go on serving calls, as its own uid"


def test_memory_outside_the_address_space_is_refused(sandbox: Sandbox) -> None:
    """RLIMIT_AS does not count memory files or System V segments and queues (which outlive the
    process): the worker's seccomp filter refuses them, with EPERM."""
    refused = sandbox.module("stud").outside_memory()
    assert refused == {"memfd_create": errno.EPERM, "shmget": errno.EPERM, "msgget": errno.EPERM}, (
        f"expected memfd_create, shmget and msgget refused with EPERM, got {refused}")
    assert not any(line.startswith("reduced: memory files") for line in sandbox.isolation), sandbox.isolation
