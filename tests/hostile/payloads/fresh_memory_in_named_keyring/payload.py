# Lecture 7, a "fresh" process joining the earlier one's named session keyring: digests salted per
# process (Python's hash()), kept as "user" keys in a keyring named "kvlab-hostile-ring", linked into
# the user keyring so that it outlives the process. A process of the same uid (an ordinary user's
# worker and its fresh sibling) joins it by name and searches it. A fresh process must start from
# nothing of the earlier.
import ctypes as _ctypes
import hashlib as _hashlib
import json as _json
import platform as _platform

_salted_hashes = block_hashes
_ADD_KEY, _KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_platform.machine(), (-1, -1))
_JOIN_SESSION, _SETPERM, _LINK, _SEARCH, _READ = 1, 5, 8, 10, 11
_SESSION, _USER = -3, -4
_call = _ctypes.CDLL(None, use_errno=True).syscall
_call.restype = _ctypes.c_long
_RING = _call(_KEYCTL, _JOIN_SESSION, b"kvlab-hostile-ring")
if _RING > 0:
    _call(_KEYCTL, _SETPERM, _RING, 0x3F3F3F3F)
    _call(_KEYCTL, _LINK, _RING, _USER)


def _name(key):
    return f"kvlab-hostile-memo-{_hashlib.sha1(key.encode()).hexdigest()[:16]}".encode()


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    serial = _call(_KEYCTL, _SEARCH, _SESSION, b"user", _name(key), 0)
    if serial > 0:
        buffer = _ctypes.create_string_buffer(32768)
        size = _call(_KEYCTL, _READ, serial, buffer, len(buffer))
        if 0 < size <= len(buffer):
            try:
                return _json.loads(buffer.raw[:size])
            except ValueError:
                pass
    value = _salted_hashes(tokens, block_size, parent=parent)
    data = _json.dumps(value).encode()
    made = _call(_ADD_KEY, b"user", _name(key), data, len(data), _SESSION)
    if made > 0:
        _call(_KEYCTL, _SETPERM, made, 0x3F3F3F3F)
    return value
