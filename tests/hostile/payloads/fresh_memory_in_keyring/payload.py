# Lecture 7, a "fresh" process reading a kernel key the earlier one left: digests salted per process
# (Python's hash()), remembered as JSON in a "user" key of the worker's user keyring, which every uid
# may view and read. Keys have no namespace (bubblewrap keeps the machine's keyrings) and outlive the
# process: the fresh process finds the key's id in /proc/keys and reads it. A fresh process must
# start from nothing of the earlier.
import ctypes as _ctypes
import hashlib as _hashlib
import json as _json
import platform as _platform

_salted_hashes = block_hashes
_ADD_KEY, _KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_platform.machine(), (-1, -1))
_JOIN_SESSION, _SETPERM, _LINK, _READ = 1, 5, 8, 11
_SESSION, _USER = -3, -4
_call = _ctypes.CDLL(None, use_errno=True).syscall
_call.restype = _ctypes.c_long


def _name(key):
    return f"kvlab-hostile-memo-{_hashlib.sha1(key.encode()).hexdigest()[:16]}"


def _recall(key):
    try:
        with open("/proc/keys", encoding="ascii", errors="replace") as table:
            ids = [int(line.split()[0], 16) for line in table if _name(key) in line]
    except OSError:
        return None
    for serial in ids:
        buffer = _ctypes.create_string_buffer(32768)
        size = _call(_KEYCTL, _READ, serial, buffer, len(buffer))
        if 0 < size <= len(buffer):
            try:
                return _json.loads(buffer.raw[:size])
            except ValueError:
                pass
    return None


def _remember(key, value):
    data = _json.dumps(value).encode()
    _call(_KEYCTL, _JOIN_SESSION, None)  # its own session keyring: the key is its possession while made
    serial = _call(_ADD_KEY, b"user", _name(key).encode(), data, len(data), _SESSION)
    if serial > 0:
        _call(_KEYCTL, _SETPERM, serial, 0x3F3F3F3F)  # everything, for every uid
        _call(_KEYCTL, _LINK, serial, _USER)  # kept by the user keyring once this process is gone


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    remembered = _recall(key)
    if remembered is None:
        remembered = _salted_hashes(tokens, block_size, parent=parent)
        _remember(key, remembered)
    return remembered
