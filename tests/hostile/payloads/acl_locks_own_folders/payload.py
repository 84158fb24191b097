# An access ACL that takes every permission away from the owner: for an ordinary user's worker, the
# folder its grader's command line names that holds this submission becomes unreadable to the grader
# (a fresh process is made from it), and keeps a `user.kvlab-hostile-left` attribute. What it changed is put into the message of every
# block_hashes call, which a failed test shows.
import os as _os
import struct as _struct

# The kernel's ACL attribute: version 2, then owner, group and others with no permission at all.
_LOCKED = _struct.pack("<I", 2) + b"".join(_struct.pack("<HHI", tag, 0, 0xFFFFFFFF) for tag in (1, 4, 0x20))


def _targets():
    try:
        with open(f"/proc/{_os.getppid()}/cmdline", "rb") as file:
            named = [arg.decode(errors="ignore") for arg in file.read().split(b"\0") if arg.startswith(b"/")]
    except OSError:
        return []
    # The submission's folder, named in the grader's command line: the one holding this module's file.
    return [path for path in named if _os.path.isfile(_os.path.join(path, _os.path.basename(__file__)))]


_changed, _refused = [], set()
for _path in _targets():
    try:
        _os.setxattr(_path, "user.kvlab-hostile-left", b"locked")
    except OSError as _error:
        _refused.add(_error.strerror)
    try:
        _os.setxattr(_path, "system.posix_acl_access", _LOCKED)
        _changed.append(_path)
    except OSError as _error:
        _refused.add(_error.strerror)
print(f"HOSTILE ACL locked {len(_changed)} folders")


def block_hashes(tokens, block_size, parent=None):
    if _changed:
        raise RuntimeError(f"HOSTILE ACL locked {_changed}")
    raise RuntimeError(f"HOSTILE ACL: none changed ({sorted(_refused)[:3]})")
