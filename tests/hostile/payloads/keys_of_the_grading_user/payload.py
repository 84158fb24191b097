# Kernel keys the worker could read or leave: its session keyring (inherited from the grader: an
# ordinary user's worker holds that user's session), its user keyring and every key /proc/keys shows
# it, described and read with keyctl. What it could reach is put into the message of every
# block_hashes call, which a failed test shows; "keyctl refused" when every call was refused.
import ctypes as _ctypes
import os as _os
import platform as _platform

_ADD_KEY, _KEYCTL = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(_platform.machine(), (-1, -1))
_DESCRIBE, _READ = 6, 11
_call = _ctypes.CDLL(None, use_errno=True).syscall
_call.restype = _ctypes.c_long
_reached, _refused = [], []


def _try(what, *args):
    result = _call(*args)
    if result < 0:
        _refused.append(f"{what}: {_os.strerror(_ctypes.get_errno())}")
    else:
        _reached.append(what)
    return result


_serials = [-3, -4, -5]  # session, user, user session
try:
    with open("/proc/keys", encoding="ascii", errors="replace") as _table:
        _serials += [int(line.split()[0], 16) for line in _table][:50]
except OSError:
    pass
for _serial in _serials:
    _buffer = _ctypes.create_string_buffer(4096)
    _try(f"describe {_serial}", _KEYCTL, _DESCRIBE, _serial, _buffer, len(_buffer))
    _try(f"read {_serial}", _KEYCTL, _READ, _serial, _buffer, len(_buffer))
_try("add a key", _ADD_KEY, b"user", b"kvlab-hostile-left-key", b"left", 4, -4)
print(f"HOSTILE keys reached: {_reached}")
_own_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    if _reached:
        raise RuntimeError(f"HOSTILE keys reached: {', '.join(_reached)[:2000]}")
    raise RuntimeError(f"HOSTILE keyctl refused ({'; '.join(sorted(set(_refused)))[:300]})")
