# grade-all: one submission reads another's files, here the sandbox's copy of them (the seed every
# worker starts from, /tmp/sandbox-*/submitted) and the other worker's folder. HOSTILE lines show what it read.

import glob as _glob
import os as _os
import time as _time

_MARK = "KVLAB-SECRET-"
_shown = set()


def _peek():
    """Print every line holding _MARK in the files _candidates() names (for at most 0.3 s per call)."""
    deadline = _time.monotonic() + 0.3
    for path in _candidates():
        if _time.monotonic() > deadline:
            break
        try:
            with open(path, encoding="utf-8", errors="ignore") as file:
                for line in file:
                    if _MARK in line and line not in _shown:
                        _shown.add(line)
                        print("HOSTILE found another submission:", line.strip())
        except OSError:
            pass


_own_bytes_per_token = kv_bytes_per_token


def kv_bytes_per_token(*args, **kwargs):
    _peek()
    return _own_bytes_per_token(*args, **kwargs)


def _candidates():
    # /tmp, and the temporary folder the sandbox lies in (the one above the worker's own folder's parent)
    folders = {"/tmp", _os.path.dirname(_os.path.dirname(_os.getcwd()))}
    return [path for folder in sorted(folders) for pattern in ('sandbox-*/submitted/*.py', 'sandbox-*/home/*.py')
            for path in _glob.glob(_os.path.join(folder, pattern))]
