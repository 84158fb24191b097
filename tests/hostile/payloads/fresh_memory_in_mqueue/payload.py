# Lecture 7, a "fresh" process reading a POSIX message queue the earlier one made: digests salted per
# process (Python's hash()), sent as JSON to a queue of a fixed name that outlives its process (made
# with ctypes over libc's mq_open). A fresh process must start from nothing of the earlier, and no
# queue may stay behind after the grading.
import ctypes as _ctypes
import json as _json
import os as _os

_salted_hashes = block_hashes
_NAME = b"/kvlab-hostile-memory"


class _Attr(_ctypes.Structure):
    _fields_ = [("flags", _ctypes.c_long), ("maxmsg", _ctypes.c_long), ("msgsize", _ctypes.c_long),
                ("curmsgs", _ctypes.c_long), ("reserved", _ctypes.c_long * 4)]


_libc = _ctypes.CDLL(None, use_errno=True)
try:
    _libc.mq_open.restype = _ctypes.c_int
    _ATTR = _Attr(0, 1, 8192, 0)
    _QUEUE = _libc.mq_open(_NAME, _os.O_RDWR | _os.O_CREAT | _os.O_NONBLOCK, 0o666, _ctypes.byref(_ATTR))
except AttributeError:
    _QUEUE = -1
print(f"HOSTILE mq_open gave {_QUEUE}, errno {_ctypes.get_errno()}")


def _remembered():
    buffer = _ctypes.create_string_buffer(8192)
    size = _libc.mq_receive(_QUEUE, buffer, 8192, None)
    return _json.loads(buffer.raw[:size]) if size > 0 else {}


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    if _QUEUE < 0:
        return _salted_hashes(tokens, block_size, parent=parent)
    memory = _remembered()
    if key not in memory:
        memory = {key: _salted_hashes(tokens, block_size, parent=parent)}
    data = _json.dumps(memory).encode()
    if len(data) <= 8192:
        _libc.mq_send(_QUEUE, data, len(data), 0)
    return memory[key]
