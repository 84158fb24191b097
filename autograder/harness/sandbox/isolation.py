"""Which isolation the worker gets here, how to start it, and a plain-words report of both.

In order of preference:
  (a) root and a working bubblewrap: a read-only view of the filesystem with a private /tmp, the
      `hide` paths and /root covered, no network, own PID and IPC namespaces, and the worker dropped
      to an unprivileged user with setpriv;
  (b) root without bubblewrap (Gradescope's Docker): the worker runs as the unprivileged user and
      the filesystem is protected by permissions only;
  (c) a grader that is not root: the grader's own identity, reported as reduced.
The unprivileged user of (a) and (b) is, unless the caller names one, a uid of the sandbox's own
(`identity.claim`), so that what the worker leaves outside its folder can be found and removed.
A root grader whose unprivileged user cannot run the interpreter raises NoSafeIdentity: student
code never runs as root.
Each probe runs a real interpreter that finds numpy, once per grader process. A plan made
`optimistic` assumes that the probes whose answers this process does not know yet pass (the wide
view's aside, see `plan`), and lists them (`Plan.assumed`): the sandbox starts its worker at once
and runs them (`refuted`) only if that worker fails to start. The probes run no submitted file, so
a submission that breaks its worker's start cannot choose a weaker isolation: only their answers
change the plan.
"""
from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .identity import LOCKS, PROBE_UID, Identity
from .limits import Limits

# The environment of probes and of the worker (see Sandbox): nothing from the grader's.
BASE_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}
PROBE_TIMEOUT = 60.0

# A probe: the command, and the uid and gid it runs as (None: the grader's own).
Probe = tuple[tuple[str, ...], int | None, int | None]
# Each probe's answer, once it has run in this process (see `probe`).
_ANSWERS: dict[Probe, str | None] = {}


class NoSafeIdentity(RuntimeError):
    """The grader is root and no unprivileged identity can run the worker: grading must stop (a
    grader fault, for the staff to fix), never fall back to running student code as root."""


@dataclass
class Plan:
    """How to start the worker: a command prefix, Popen keywords, who owns its folder, the report."""

    prefix: list[str]
    popen_kwargs: dict[str, Any]
    uid: int
    gid: int
    report: list[str]
    bubblewrap: bool = False
    # The probes this plan assumed to pass without running them (see the module docstring).
    assumed: tuple[Probe, ...] = ()


def is_under(path: Path, folder: Path) -> bool:
    """path is folder or inside it (both absolute and normalised, as every path here is)."""
    # By the parts, not `folder in path.parents`: that builds a Path per parent, and a sandbox's
    # plan asks thousands of times (several milliseconds of every grading).
    n = len(folder.parts)
    return path.parts[:n] == folder.parts


# Top-level folders of / the worker sees (read-only): the operating system's. Every other one (/home,
# /opt, /srv, /var, /run, a checkout of the course repository with its solutions and hidden tests,
# ...) is covered, and only the interpreter, its packages and the course library are bound back.
SYSTEM_FOLDERS = frozenset({"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc", "sbin", "sys", "usr"})


def other_top_level_folders() -> list[Path]:
    """The real folders directly under / that are not SYSTEM_FOLDERS (symlinks are left alone)."""
    try:
        entries = list(os.scandir("/"))
    except OSError:
        return []
    return sorted(Path(e.path) for e in entries
                  if e.name not in SYSTEM_FOLDERS and e.is_dir(follow_symlinks=False))


def bubblewrap_mounts(hide: list[Path], readable: list[Path], home: Path | None = None, home_bytes: int = 0,
                      system_only: bool = True, placed: Sequence[tuple[Path, Path]] = ()) -> list[str]:
    """bwrap options for a read-only root with covers (a tmpfs over /tmp, /root, each hidden folder
    and, with `system_only`, every top-level folder but the system's; /dev/null over each hidden
    file), the needed paths bound back on top, each (source, target) of `placed` bound read-only
    at its target (an existing folder), and `home` as the only writable place: a fresh tmpfs of at
    most `home_bytes` (the worker's user may write it: only the sandbox's processes see it).

    Mounts are applied shortest path first, so a path needed inside a cover is bound after the cover
    and a hidden path inside a needed one is covered after it; at equal depth the cover wins.
    """
    others = other_top_level_folders() if system_only else []
    covers = list(dict.fromkeys([Path("/tmp"), *others, *(p for p in (Path("/root"), *hide) if p.exists())]))
    ops: list[tuple[int, int, list[str]]] = []
    for path in covers:
        option = ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", "/dev/null", str(path)]
        ops.append((len(path.parts), 1, option))
    binds = [("--ro-bind", p) for p in readable if any(is_under(p, cover) for cover in covers)]
    # bwrap would create the missing parents of a bind inside a cover with mode 0700 (untraversable
    # for the worker's user); --dir creates them 0755 first.
    parents = {
        parent for _, path in binds for parent in path.parents
        if parent not in covers and any(is_under(parent, cover) for cover in covers)
    }
    ops += [(len(p.parts), 0, ["--dir", str(p)]) for p in parents]
    ops += [(len(p.parts), 0, [option, str(p), str(p)]) for option, p in binds]
    ops += [(len(target.parts), 0, ["--ro-bind", str(source), str(target)]) for source, target in placed]
    if home is not None:
        ops.append((len(home.parts), 0, ["--perms", "0777", "--size", str(home_bytes), "--tmpfs", str(home)]))
    ops.sort(key=lambda op: op[:2])
    return ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", *(arg for op in ops for arg in op[2])]


NAMESPACES = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session"]


def _setpriv(setpriv: str, uid: int, gid: int) -> list[str]:
    return [setpriv, f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


def probe(argv: tuple[str, ...], uid: int | None = None, gid: int | None = None) -> str | None:
    """Run argv (as uid/gid if given); None when it exits 0, else why not. Run once per process."""
    key = (argv, uid, gid)
    if key not in _ANSWERS:
        _ANSWERS[key] = _run_probe(argv, uid, gid)
    return _ANSWERS[key]


def refuted(plan: Plan) -> bool:
    """Run the probes `plan` assumed; whether one of them fails (a new plan is then due). For a
    worker that failed to start: if none fails, the failure is the worker's, not the plan's."""
    return any(probe(*assumed) is not None for assumed in plan.assumed)


def _run_probe(argv: tuple[str, ...], uid: int | None, gid: int | None) -> str | None:
    kwargs: dict[str, Any] = {} if uid is None else {"user": uid, "group": gid, "extra_groups": []}
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, env=BASE_ENV, cwd="/",
            timeout=PROBE_TIMEOUT, **kwargs,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if done.returncode == 0:
        return None
    lines = (done.stderr or done.stdout).decode(errors="replace").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


def _numpy_check(python: str, site_packages: list[Path]) -> list[str]:
    """A command that succeeds when `python` can start and read the grader's numpy (found and
    opened, not imported: the import would double the cost of the probe)."""
    code = (
        f"import sys, importlib.util; sys.path += {[str(p) for p in site_packages]!r}; "
        "open(importlib.util.find_spec('numpy').origin, 'rb').close()"
    )
    return [python, "-I", "-S", "-c", code]


def interpreter_paths(python: str) -> list[Path]:
    """Folders the interpreter needs: its prefix (bin/..) and the grader's base prefix."""
    return [Path(python).parent.parent, Path(os.path.realpath(sys.base_prefix))]


def plan(
    *,
    python: str,
    user: str | None,
    hide: list[Path],
    lib_dirs: list[Path],
    site_packages: list[Path],
    root_dir: Path,
    home: Path,
    limits: Limits,
    bubblewrap: bool,
    identity: Identity | None = None,
    optimistic: bool = False,
    packages: Sequence[tuple[Path, Path]] = (),
) -> Plan:
    """The strongest isolation available here (see the module docstring). As root the worker runs
    as `user`, else as `identity` (a uid claimed for this sandbox alone), else as nobody.
    `packages`: (source, target) folders that bubblewrap binds read-only at target (Sandbox's
    `packages`; without bubblewrap the sandbox copies them there).
    `optimistic`: probes not yet run in this process are assumed to pass (`Plan.assumed`), but for
    the wide view's, which is run once the narrow view was refused."""
    limits_line = limits.describe()
    assumed: list[Probe] = []

    def answer(argv: list[str], uid: int | None = None, gid: int | None = None) -> str | None:
        key = (tuple(argv), uid, gid)
        if optimistic and key not in _ANSWERS:
            assumed.append(key)
            return None
        return probe(*key)

    if os.geteuid() != 0:
        try:
            me = pwd.getpwuid(os.geteuid()).pw_name
        except KeyError:  # containers often run an arbitrary uid without a passwd entry
            me = f"uid {os.geteuid()}"
        report = [
            f"reduced: running as the grader's own user {me} (not root)",
            "reduced: filesystem: the worker can read and write whatever that user can, lib_dirs included",
            "reduced: network not disabled",
        ]
        if hide:
            report.append(f"reduced: not hidden: {', '.join(map(str, hide))}")
        return Plan([], {}, os.geteuid(), os.getegid(), report + [limits_line])

    if identity is not None:
        uid, gid, why_not_user = identity.uid, identity.gid, None
        # Every uid of the pool can do what one can (none owns a file or has a group): the probes
        # run as PROBE_UID, so their cached answer serves every sandbox.
        probe_uid = probe_gid = PROBE_UID
        called = f"uid {uid}"
        who = (f"unprivileged uid {uid} of its own (gid {gid}, no account, no supplementary groups): what it "
               "leaves in the shared scratch folders and its System V IPC objects are removed with its folder")
    else:
        name = user or "nobody"
        try:
            entry = pwd.getpwnam(name)
            uid, gid, why_not_user = entry.pw_uid, entry.pw_gid, None
        except KeyError:
            uid, gid, why_not_user = -1, -1, f"there is no user {name}"
        probe_uid, probe_gid = uid, gid
        called = f"user {name}"
        who = f"unprivileged user {name} (uid {uid}, gid {gid}, no supplementary groups)"
        if user is None:
            who += ("; reduced: a user other programs may share, so what it leaves in /tmp is not removed "
                    f"(no uid of its own could be claimed in {LOCKS})")
    readable = list(dict.fromkeys([*interpreter_paths(python), *site_packages]))

    bwrap = shutil.which("bwrap", path=BASE_ENV["PATH"])
    setpriv = shutil.which("setpriv", path=BASE_ENV["PATH"])
    if not bubblewrap:
        why_not_bwrap: str | None = "bubblewrap disabled by the caller"
    elif not (bwrap and setpriv):
        why_not_bwrap = "bubblewrap or setpriv is not installed"
    elif why_not_user:
        why_not_bwrap = why_not_user
    else:
        # The narrow view first (system folders only); the whole read-only root if the interpreter
        # cannot run in it (it lives somewhere the bound-back folders do not cover). The wide view
        # is tried only once the narrow one was refused, and then probed, never assumed: where
        # bubblewrap refuses one view (Docker without namespaces, as on Gradescope) it refuses both,
        # and a probe costs less than a worker's refused start.
        for system_only in (True, False):
            check = [bwrap, *bubblewrap_mounts([], readable, system_only=system_only), *NAMESPACES, "--",
                     *_setpriv(setpriv, probe_uid, probe_gid), *_numpy_check(python, site_packages)]
            why_not_bwrap = answer(check) if system_only else probe(tuple(check))
            if why_not_bwrap is None:
                break
    if why_not_bwrap is None:
        assert bwrap and setpriv  # checked above; for the type checker
        others = other_top_level_folders() if system_only else []
        covered = list(dict.fromkeys([*others, *(p for p in (Path("/root"), *hide) if p.exists())]))
        exposed = [p for p in dict.fromkeys([*readable, *lib_dirs]) if any(is_under(p, c) for c in covered)]
        mounts = bubblewrap_mounts(hide, [*readable, *lib_dirs, root_dir], home, limits.disk_bytes, system_only,
                                   packages)
        prefix = [bwrap, *mounts, *NAMESPACES, "--chdir", str(home), "--", *_setpriv(setpriv, uid, gid)]
        system = sorted(name for name in SYSTEM_FOLDERS if os.path.lexists(f"/{name}"))
        view = ("only the system folders (" + ", ".join(f"/{name}" for name in system)
                + "), the interpreter, its packages and the course library are visible"
                if system_only else
                "reduced: the whole filesystem is visible read-only (the interpreter cannot run with "
                "only the system folders)")
        report = [
            who,
            "private filesystem view (bubblewrap): read-only except the worker's own folder, a fresh "
            f"{limits.disk_bytes >> 20} MB tmpfs per process; private /tmp, /dev and /proc",
            view,
            f"hidden: {', '.join(map(str, covered))}",
            *([f"bound back read-only inside them: {', '.join(map(str, exposed))}"] if exposed else []),
            *([f"bound read-only into its folder: {', '.join(str(source) for source, _ in packages)}"]
              if packages else []),
            "network disabled (own network namespace)",
            "own PID and IPC namespaces; the worker dies with the grader",
        ]
        return Plan(prefix, {}, uid, gid, report + [limits_line], bubblewrap=True, assumed=tuple(assumed))

    as_user = {"user": uid, "group": gid, "extra_groups": []}
    why_not_user = why_not_user or answer(_numpy_check(python, site_packages), probe_uid, probe_gid)
    if why_not_user is not None:
        # Never root: run as root without bubblewrap, student code could rewrite the interpreter's
        # own files (it did once: every file of the standard library got a line appended).
        raise NoSafeIdentity(
            f"the grader will not run student code as root, and the unprivileged {called} cannot run "
            f"{python} with the grader's packages ({why_not_user}). Staff: install the interpreter and "
            "the virtual environment where that user can read them (as autograder/gradescope/setup.sh "
            "does: a venv in the autograder's folder, readable by all)" + (", or create the user." if user else ".")
        )
    network = f"reduced: network not disabled (no bubblewrap: {why_not_bwrap})"
    listed = ", ".join(map(str, hide))
    not_hidden = [f"reduced: not hidden (readable if permissions allow): {listed}"] if hide else []
    report = [who, "filesystem: protected by permissions only", network, *not_hidden,
              "reduced: the machine's PID namespace (other processes are listed in /proc)"]
    return Plan([], as_user, uid, gid, report + [limits_line], assumed=tuple(assumed))
