# Lecture 7, a "fresh" process reading a memo the earlier one left in an extended attribute: digests
# salted per process (Python's hash()), kept compressed in a `user.*` attribute of every folder above
# its own and above its sys.path entries, and of every path its grader's command line names: an
# ordinary user's worker owns those (its grader's files are its own), and Landlock does not cover
# metadata. The fresh process reads the attribute back. A fresh process must start from nothing of
# the earlier.
import hashlib as _hashlib
import json as _json
import os as _os
import sys as _sys
import zlib as _zlib

_salted_hashes = block_hashes


def _places():
    found = []
    for start in [_os.getcwd(), *_sys.path]:
        path = _os.path.dirname(_os.path.abspath(start))
        while path not in ("/", ""):
            found.append(path)
            path = _os.path.dirname(path)
    try:
        with open(f"/proc/{_os.getppid()}/cmdline", "rb") as file:
            found += [arg.decode(errors="ignore") for arg in file.read().split(b"\0") if arg.startswith(b"/")]
    except OSError:
        pass
    return [path for path in dict.fromkeys(found) if _os.path.exists(path)]


_PLACES = _places()


def _attribute(key):
    return f"user.kvlab-hostile-{_hashlib.sha1(key.encode()).hexdigest()[:16]}"


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    for place in _PLACES:
        try:
            return _json.loads(_zlib.decompress(_os.getxattr(place, _attribute(key))))
        except (OSError, ValueError, _zlib.error):
            pass
    value = _salted_hashes(tokens, block_size, parent=parent)
    memo = _zlib.compress(_json.dumps(value).encode())
    for place in _PLACES:
        try:
            _os.setxattr(place, _attribute(key), memo)
        except OSError:
            pass
    return value
