"""The student module the sandbox's tests grade (tests/harness/test_sandbox*.py) and its fixtures.

`STUDENT` does, one function or class each, what those tests ask of a worker (values, objects,
exceptions, deaths, writes, hostile replies); `folders` places it beside a broken module and a
course-library folder, `box` is one sandbox over them, `stud` the student's module in it. A test
file imports the fixtures by name (no conftest.py: each file says where its fixtures come from), so
each file gets its own `box`, as the grader reuses one sandbox across one file's tests.
"""
from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from autograder.harness.course import COURSE
from autograder.harness.sandbox import Limits, Proxy, Sandbox
from support.repo import REPO

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

def refusals(path):
    """{what: errno (0: allowed)} for what the worker's filter and Landlock must refuse."""
    import ctypes, socket
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    def errno_of(action):
        try:
            result = action()
        except OSError as exc:
            return exc.errno
        return ctypes.get_errno() if result == -1 else 0
    calls = {
        "setxattr": lambda: os.setxattr(path, "user.kvlab-test", b"memo"),
        "getxattr": lambda: os.getxattr(path, "user.kvlab-test"),
        "utime": lambda: os.utime(path, (0, 0)),
        "add_key": lambda: libc.syscall(248, b"user", b"kvlab-test", b"memo", 4, -4),
        "keyctl": lambda: libc.syscall(250, 0, -4, 0, 0, 0),
        "unix socket": lambda: socket.socket(socket.AF_UNIX).close(),
        "prlimit of the parent": lambda: __import__("resource").prlimit(os.getppid(), __import__("resource").RLIMIT_NOFILE),
        "new user namespace": lambda: libc.syscall(272, 0x10000000),
        "/dev/ptmx": lambda: os.close(os.open("/dev/ptmx", os.O_RDONLY | os.O_NOCTTY)),
        "/dev listed": lambda: os.listdir("/dev"),
    }
    found = {name: errno_of(action) for name, action in calls.items()}
    with open("/dev/urandom", "rb") as f:
        found["/dev/urandom read"] = 0 if len(f.read(8)) == 8 else -1
    return found

class Named:
    pass

def badly_named(what):
    if what == "type":
        Named.__qualname__ = "Bad\\x00Name"  # type() refuses a NUL in __name__, not in __qualname__
        return Named()
    if what == "escape in type":
        Named.__qualname__ = "Bad\\nName"
        return Named()
    return {"ok": 1, "\\x1b[2Jkey": 2}

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
def reset_box(request: pytest.FixtureRequest) -> None:
    """A test that uses `box` starts with a reset one (no references, arrays or output of the last);
    autouse, so it must be imported wherever `box` is."""
    if "box" in request.fixturenames:
        request.getfixturevalue("box").reset()


@pytest.fixture
def stud(box: Sandbox) -> Proxy:
    return box.module("stud")
