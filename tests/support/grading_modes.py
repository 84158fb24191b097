"""The four ways a course grades student code (MODES), as the hostile campaigns reproduce them: the
environment of a grading in each mode (`mode_env`), whether this machine can grade in it
(`mode_refusal`), and, for the ordinary user's mode as root, a uid of the pool that grades from
copies of the grader it can read (`OrdinaryUser`, `ordinary_user`).
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from autograder.harness.sandbox import identity
from support.hostile_campaign import IS_ROOT, READABLE_PYTHON, SITE_PACKAGES, gradescope_env
from support.repo import REPO

# The ways a grader runs student code, each with the layers its results must name:
#   bubblewrap  root where bubblewrap works: a private filesystem view, namespaces, seccomp, Landlock;
#   landlock    root without bubblewrap, as Gradescope's Docker grades: a uid of its own, seccomp,
#               Landlock (see gradescope_env);
#   user        an ordinary user's grader (a TA's laptop): the worker runs as that user, confined by
#               seccomp and Landlock; as root the suite grades as a uid of the pool (OrdinaryUser);
#   neither     root without bubblewrap on a kernel without Landlock: a uid of its own and seccomp,
#               the results say the isolation is reduced (KVLAB_NO_LANDLOCK=1).
MODES = ("bubblewrap", "landlock", "user", "neither")
# Most cases: the two modes a course grades in (Gradescope's Docker and an instructor's root grader).
ROOT_MODES = ("bubblewrap", "landlock")
MODE_SUFFIX = {"bubblewrap": "", "landlock": ", no bubblewrap", "user": ", ordinary user",
               "neither": ", neither bubblewrap nor Landlock"}
# What each mode's results must say of the worker's isolation (a line starting so).
MODE_SAYS = {"bubblewrap": "private filesystem view (bubblewrap)", "landlock": "Landlock (ABI",
             "user": "Landlock (ABI", "neither": "reduced: no Landlock"}


def grader_site_entries() -> tuple[str, ...]:
    """The entries of site-packages that the grader imports: what the distributions of
    requirements/grader.txt, and those they require, install there (and tqdm, grade-all's progress bar)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    wanted, seen, entries = ["tqdm"], set(), set()
    for name in ("grader.txt", "student.txt"):
        for line in (REPO / "requirements" / name).read_text(encoding="utf-8").splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                wanted.append(Requirement(line).name)
    while wanted:
        name = wanted.pop()
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        try:
            distribution = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # a requirement whose marker excludes this interpreter
        entries |= {file.parts[0] for file in distribution.files or () if file.parts[0] != ".."}
        for text in distribution.requires or ():
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    return tuple(sorted(entries))


def linked_copy(folder: Path, names: tuple[str, ...], target: Path) -> Path:
    """`target` holding the entries `names` of `folder`, hard-linked where the filesystem allows
    (else copied), readable by all: the grader's packages for a uid that cannot enter `folder`."""
    def link(source: str, copy: str) -> None:
        try:
            os.link(source, copy)
        except OSError:
            shutil.copy2(source, copy)

    target.mkdir(mode=0o755)
    for name in names:
        source = folder / name
        if source.is_dir():
            shutil.copytree(source, target / name, copy_function=link, symlinks=True)
        elif source.is_file():
            link(str(source), str(target / name))
    for path, _, _ in os.walk(target):
        os.chmod(path, 0o755)
    return target


@dataclass
class OrdinaryUser:
    """The user mode as root: the grader runs as a uid of the pool (claimed, so no sandbox uses it),
    as an ordinary user's grader would run, its workers then as that uid too. It reads copies of
    the harness, the course library and the grader's packages (the checkout may lie in a folder
    only root can enter) and writes only its own folder."""

    uid: int
    folder: Path  # mode 755, root's: code/ (the harness and kvlab), work/ (the uid's own)
    site: Path  # the grader's packages, staged where that uid can read them

    @property
    def work(self) -> Path:
        return self.folder / "work"

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return {**env, "KVLAB_PYTHON": READABLE_PYTHON or sys.executable, "HOME": str(self.work),
                "TMPDIR": str(self.work / "tmp"), "PYTHONPATH": os.pathsep.join([str(self.folder / "code"), str(self.site)])}

    def give(self, path: Path) -> None:
        """Make `path` (under work/) the uid's, as an ordinary user's own files are."""
        for folder, dirs, files in os.walk(path):
            for name in [folder, *(os.path.join(folder, entry) for entry in dirs + files)]:
                os.lchown(name, self.uid, self.uid)

    def command(self, command: list[str]) -> list[str]:
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.uid}", "--clear-groups", "--", *command]


@contextlib.contextmanager
def ordinary_user() -> Iterator[OrdinaryUser | None]:
    """An OrdinaryUser as root (None when this suite already runs as an ordinary user, or no uid
    of the pool can run an interpreter here); what its uid leaves in the scratch folders is
    removed afterwards."""
    if not IS_ROOT or READABLE_PYTHON is None:
        yield None
        return
    claimed = identity.claim()
    assert claimed is not None, "as root the pool of uids must be usable"
    folder = Path(tempfile.mkdtemp(prefix="kvlab-hostile-user-"))
    try:
        folder.chmod(0o755)
        # The harness, the course library (and the traces beside it, where `make traces` put them).
        for package in ("autograder", "kvlab", "tools", "data/mooncake"):
            if (REPO / package).is_dir():
                shutil.copytree(REPO / package, folder / "code" / package)
        user = OrdinaryUser(claimed.uid, folder, linked_copy(SITE_PACKAGES, grader_site_entries(), folder / "site"))
        (user.work / "tmp").mkdir(parents=True)
        user.give(user.work)
        user.work.chmod(0o700)
        yield user
    finally:
        for path in identity.owned_entries(claimed.uid):
            shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else os.unlink(path)
        shutil.rmtree(folder, ignore_errors=True)
        claimed.release()


def mode_refusal(mode: str) -> str | None:
    """Why this machine cannot grade in `mode`, or None."""
    if not IS_ROOT:
        return None if mode == "user" else (
            "only a root grader runs the worker as a uid of its own; this suite runs as an ordinary user "
            "and grades in the user mode")
    if mode != "bubblewrap" and READABLE_PYTHON is None:
        return "no interpreter here that an unprivileged uid can run, so no grading without bubblewrap"
    return None


def mode_env(mode: str, env: dict[str, str], user: OrdinaryUser | None) -> dict[str, str]:
    """`env` for a grading in `mode` (see MODES)."""
    if mode == "bubblewrap" or (mode == "user" and user is None):
        return env
    if mode == "user":
        return user.env(env)
    return {**gradescope_env(env), **({"KVLAB_NO_LANDLOCK": "1"} if mode == "neither" else {})}
