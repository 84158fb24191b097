# World-readable reads through /proc: the grader's environment, its open files and its memory maps
# name the folders it works in; the worker follows /proc/<pid>/fd, /proc/<pid>/environ and
# /proc/<pid>/root of every other process to read the tests and the solution. HOSTILE lines say what
# it could read.
import glob as _glob
import os as _os

_read = []
for _entry in _glob.glob("/proc/[0-9]*")[:400]:
    if _entry == f"/proc/{_os.getpid()}":
        continue
    for _name in ("environ",):
        try:
            with open(_os.path.join(_entry, _name), "rb") as _file:
                _read.append((_entry, _name, _file.read()[:200]))
        except OSError:
            pass
    try:
        for _fd in _os.listdir(_os.path.join(_entry, "fd"))[:50]:
            _target = _os.path.join(_entry, "fd", _fd)
            try:
                with open(_target, "rb") as _file:
                    _head = _file.read(3000)
                if b"def test_" in _head or b"BEGIN SOLUTION" in _head:
                    _read.append((_entry, _fd, _head))
                    print("HOSTILE through /proc", _head.decode(errors="ignore"))
            except OSError:
                pass
    except OSError:
        pass
print(f"HOSTILE read {len(_read)} things of other processes through /proc")
