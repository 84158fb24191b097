# The grading user's terminals: every /dev/pts entry, the controlling terminal and the consoles,
# opened for reading without becoming the worker's controlling terminal; what it read (what the user
# typed) would be put into the message of every block_hashes call, which a failed test shows. A
# terminal the worker makes itself (through /dev/ptmx) is its own and not counted.
import os as _os

_opened = []
try:
    _own = _os.open("/dev/ptmx", _os.O_RDWR | _os.O_NOCTTY)
    _own_name = getattr(_os, "ptsname", lambda fd: "")(_own)  # os.ptsname: Python 3.13+
except OSError:
    _own_name = ""
try:
    _entries = [f"/dev/pts/{name}" for name in _os.listdir("/dev/pts") if name != "ptmx"]
except OSError:
    _entries = []
for _path in [*_entries, "/dev/tty", "/dev/console", "/dev/tty0", "/dev/tty1", "/dev/vcs", "/dev/vcsa"]:
    if _path == _own_name:
        continue
    try:
        _fd = _os.open(_path, _os.O_RDONLY | _os.O_NONBLOCK | _os.O_NOCTTY)
    except OSError:
        continue
    try:
        _opened.append((_path, _os.read(_fd, 4096)))
    except OSError:
        _opened.append((_path, b""))
    finally:
        _os.close(_fd)


def block_hashes(tokens, block_size, parent=None):
    if _opened:
        raise RuntimeError(f"HOSTILE terminals opened: {_opened!r}"[:3000])
    raise RuntimeError("HOSTILE terminals: none of another opened")
