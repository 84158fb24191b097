"""Readable copies of what the worker imports, for a root grader whose files its worker cannot reach.

As root without bubblewrap, file permissions are the worker's only view of the filesystem, and the
worker runs as a uid that owns nothing and has no group: it reads a file only through the "other"
permission bits of the file and of every folder above it. A checkout in a private folder (root's
home, or what `mktemp -d` makes: mode 0700) keeps its `.venv` out of that uid's reach, and the
worker could not import numpy. Rather than ask the staff to move the checkout, the grader stages
the packages it needs where that uid can read them: hard links where the filesystem allows (no
data copied; the files stay the grader's, read-only to others), else a copy made read-only, in a
folder of this process's own (readable by all, writable by the grader only), made once per grader
process and removed when it exits. Under bubblewrap the same folder is bound read-only like any
other, so one plan serves both.
"""
from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
from pathlib import Path

# Staged copies of this process, by the source folder they copy.
_STAGED: dict[Path, Path] = {}
_ROOT: list[Path] = []  # the staging folder, once made


def reachable(path: Path) -> bool:
    """Whether a uid that owns nothing and has no group can read `path` (and, for a folder, list
    and enter it): every folder above it lets others enter, and `path` lets others read."""
    path = Path(os.path.realpath(path))
    try:
        for folder in reversed(path.parents):
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(path).st_mode
    except OSError:
        return False
    needed = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & needed == needed


def _root() -> Path:
    """This process's staging folder (made on first use, removed at exit)."""
    if not _ROOT:
        root = Path(tempfile.mkdtemp(prefix="kvlab-staged-"))
        os.chmod(root, 0o755)
        if not reachable(root):
            shutil.rmtree(root)
            raise OSError(f"the staging folder {root} is not reachable by other users: its temporary folder "
                          "(TMPDIR) lies in a private folder")
        atexit.register(shutil.rmtree, root, True)
        _ROOT.append(root)
    return _ROOT[0]


def _link_or_copy(source: str, target: str) -> None:
    """A hard link (same file, no data copied) where the filesystem allows, else a read-only copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
        os.chmod(target, 0o444)


def staged(folder: Path, names: tuple[str, ...]) -> Path:
    """A folder readable by all holding the entries `names` of `folder` that exist (packages such
    as numpy and numpy.libs), made once per process and folder; the staging folder's own copy of
    `folder`, to put on the worker's sys.path in its place."""
    folder = Path(os.path.realpath(folder))
    if folder not in _STAGED:
        target = _root() / str(len(_STAGED))
        target.mkdir(mode=0o755)
        for name in names:
            source = folder / name
            if source.is_dir():
                # Bytecode included: the worker would otherwise compile numpy at every start.
                shutil.copytree(source, target / name, copy_function=_link_or_copy, symlinks=True)
                for sub, _, _ in os.walk(target / name):
                    os.chmod(sub, 0o755)
            elif source.is_file():
                _link_or_copy(str(source), str(target / name))
        _STAGED[folder] = target
    return _STAGED[folder]
