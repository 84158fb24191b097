"""Who the worker runs as when the grader is root: a uid of its own, held by one sandbox at a time.

Without bubblewrap (Gradescope's Docker) file permissions are the only barrier, and what the worker
leaves where every user may write (SHARED_SCRATCH) and its System V IPC objects outlive it. Under a
shared user such as nobody they cannot be told from another program's, so they could be neither
counted nor removed: a fresh process would read what the main worker left in /tmp, and a next
submission graded on the same machine what this one left. A uid that no account and no other
sandbox uses makes everything it owns the worker's, by construction.

The uids come from POOL; a sandbox claims one with an exclusive `flock` on its file in LOCKS (a
folder only root may write), so concurrent graders on one machine never share one, and the kernel
releases the claim when the grader dies, however it dies. What a crashed grader's worker left
behind is removed by the next sandbox that claims the uid (`Resources.fresh_home`). Kernel keys,
which no namespace of bubblewrap's separates, are unlinked from the uid's keyrings whenever a
sandbox releases it (`remove_keys`; the worker's seccomp filter refuses the key calls anyway).
"""
from __future__ import annotations

import fcntl
import grp
import os
import pwd
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

# Under 65536 (the uids a container maps) and below systemd's dynamic users (61184-65519); a uid
# with an account or a group of its number is skipped.
POOL = range(60100, 61100)
# The probes of every grader run as this uid (never claimed): the answer, whether such an identity
# can run the interpreter, holds for every uid of the pool, none of which owns a file or has a group.
PROBE_UID = POOL.start - 1
LOCKS = Path("/run/kvlab-sandbox")
# Folders any user may write. Without bubblewrap, what the worker's own uid leaves there counts
# against its folder's limits and is removed with its folder (with bubblewrap it cannot write them).
SHARED_SCRATCH = ("/tmp", "/var/tmp", "/run/lock", "/dev/shm", "/dev/mqueue")
# /proc/sysvipc's tables: the file, its id column, ipcrm's option for that kind of object.
IPC_TABLES = (("shm", "shmid", "--shmem-id"), ("sem", "semid", "--semaphore-id"), ("msg", "msqid", "--queue-id"))


@dataclass
class Identity:
    """A claimed uid and the open lock file that holds the claim."""

    uid: int
    lock_fd: int

    @property
    def gid(self) -> int:
        """The worker's group: the same number, no group of the system's either (see `unused`)."""
        return self.uid

    def release(self) -> None:
        """Give the uid back to the pool (after what it owns was removed)."""
        if self.lock_fd >= 0:
            os.close(self.lock_fd)
            self.lock_fd = -1


def lock_folder() -> Path | None:
    """LOCKS, created if needed; None unless it is a folder only root can write (someone else's
    folder there could hand two graders the same uid)."""
    try:
        os.mkdir(LOCKS, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return None
    info = os.lstat(LOCKS)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != 0 or info.st_mode & 0o022:
        return None
    return LOCKS


def unused(uid: int) -> bool:
    """No account has this uid and no group this gid."""
    for lookup in (pwd.getpwuid, grp.getgrgid):
        try:
            lookup(uid)
            return False
        except KeyError:
            pass
    return True


def claim() -> Identity | None:
    """A uid of POOL that no other sandbox holds, claimed until `release()`; None when the grader
    is not root, LOCKS cannot be used or every uid is taken (the caller falls back to a shared user
    and reports it)."""
    if os.geteuid() != 0:
        return None
    folder = lock_folder()
    if folder is None:
        return None
    start = os.getpid() % len(POOL)  # concurrent graders start apart; one grader's sandboxes in turn
    for i in range(len(POOL)):
        uid = POOL[(start + i) % len(POOL)]
        if not unused(uid):
            continue
        fd = os.open(folder / str(uid), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        return Identity(uid, fd)
    return None


# Run as the uid: keyctl(KEYCTL_CLEAR, ...) of its user keyring and its user session keyring, the two
# that outlive its processes (root has no call that empties another uid's keyrings).
CLEAR_KEYS = ("import ctypes, os; call = ctypes.CDLL(None, use_errno=True).syscall; "
              "failed = [ring for ring in (-4, -5) if call(250, 7, ring) != 0]; "
              "print(*(os.strerror(ctypes.get_errno()) for _ in failed[:1]), end=''); raise SystemExit(len(failed))")


def remove_keys(uid: int, python: str, env: dict[str, str]) -> str | None:
    """Unlink every key from `uid`'s persistent keyrings (a key made readable by every uid shows in
    /proc/keys to any later process), running `python` as that uid; None, or what went wrong."""
    try:
        done = subprocess.run([python, "-I", "-S", "-c", CLEAR_KEYS], user=uid, group=uid, extra_groups=[], env=env,
                              cwd="/", stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"keyctl: {exc}"
    if done.returncode != 0:
        return f"keyctl: {(done.stdout + done.stderr).decode(errors='replace')[-300:]}"
    return None


def owned_entries(uid: int, folders: tuple[str, ...] = SHARED_SCRATCH) -> list[str]:
    """The entries directly in `folders` that belong to `uid`."""
    found = []
    for folder in folders:
        try:
            with os.scandir(folder) as listing:
                found += [entry.path for entry in listing if entry.stat(follow_symlinks=False).st_uid == uid]
        except OSError:
            continue  # a folder this machine does not have
    return found


def owned_ipc(uid: int) -> list[str]:
    """ipcrm's arguments for the System V IPC objects `uid` owns or created (in this IPC namespace:
    under bubblewrap the worker's own die with it)."""
    arguments = []
    for table, id_column, option in IPC_TABLES:
        try:
            with open(f"/proc/sysvipc/{table}", encoding="ascii") as file:
                header, *rows = [line.split() for line in file]
            columns = {name: header.index(name) for name in (id_column, "uid", "cuid")}
        except (OSError, ValueError):
            continue  # no such table here (a kernel without System V IPC), or another layout
        for row in rows:
            if str(uid) in (row[columns["uid"]], row[columns["cuid"]]):
                arguments += [option, row[columns[id_column]]]
    return arguments


def remove_ipc(uid: int, env: dict[str, str]) -> str | None:
    """Remove what `owned_ipc(uid)` lists; None, or what went wrong."""
    arguments = owned_ipc(uid)
    if not arguments:
        return None
    try:
        done = subprocess.run(["ipcrm", *arguments], stdin=subprocess.DEVNULL, capture_output=True, env=env,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"ipcrm: {exc}"
    left = owned_ipc(uid)
    return None if not left else f"IPC objects left ({' '.join(left)}): {done.stderr.decode(errors='replace')[-300:]}"
