"""Landlock: the worker confines its own filesystem and network access, without root or namespaces.

Runs in the worker (untrusted side), before any student code: Linux 5.13 and later let an
unprivileged process restrict itself and its future children, also inside Docker where the three
system calls are allowed (Gradescope's containers, where bubblewrap cannot start). The worker may
then read the interpreter, its packages, the course library, the submitted files and the system's
folders, and write only its own folder (and /dev/null). Where the kernel's ABI has them, TCP bind
and connect are refused (ABI 4) and abstract unix sockets and signals are scoped to the worker's
own processes (ABI 6: no other grading's worker, nor the grader, can be reached that way).

Three system calls through ctypes (no binding library: this file runs in the worker's
private folder, with the standard library only). Their numbers are the same on x86_64
and aarch64 (the generic syscall table).
"""
from __future__ import annotations

import ctypes
import os
import platform

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1  # flag: landlock_create_ruleset returns the ABI version
RULE_PATH_BENEATH = 1

# Filesystem rights, by the ABI that introduced them.
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
FS_RIGHTS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1, 9: (1 << 17) - 1}
READ = EXECUTE | READ_FILE | READ_DIR
# The rights a rule on a file (not a folder) may hold: execute, write, read, truncate (ABI 3), ioctl (ABI 5).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | 1 << 14 | 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

# System folders the interpreter and numpy read (shared libraries, locale, /proc/self, the CPU's
# description in /sys); never /tmp, /home, /root, /var, /run, /opt or wherever a checkout lies.
SYSTEM_FOLDERS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys")
# The device files a worker reads (/dev/null it also writes); not /dev itself, whose terminals,
# kernel log and the like are none of a worker's business.
DEVICES = ("/dev/zero", "/dev/urandom", "/dev/random")
MACHINES = ("x86_64", "aarch64")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)) in the kernel's header: 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def abi_version() -> int | str:
    """The kernel's Landlock ABI version, or why there is none (a string)."""
    if platform.machine() not in MACHINES:
        return f"no Landlock system call numbers for this machine ({platform.machine()})"
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    version = libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if version < 1:
        return f"Landlock unavailable here ({os.strerror(ctypes.get_errno())})"
    return int(version)


def restrict(readable: list[str], writable: list[str]) -> tuple[int, list[str]] | str:
    """Confine this process (and its future children) to reading `readable`, SYSTEM_FOLDERS and
    DEVICES and writing `writable` (and /dev/null); TCP and scoping as the ABI allows. Returns (ABI version,
    what is enforced, in words), or why nothing was enforced. Needs PR_SET_NO_NEW_PRIVS first."""
    abi = abi_version()
    if isinstance(abi, str):
        return abi
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    fs = FS_RIGHTS_BY_ABI[max(k for k in FS_RIGHTS_BY_ABI if k <= abi)]
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    # The structure's size tells the kernel which fields it knows: 8 bytes up to ABI 3, 16 to 5.
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return f"Landlock refused a ruleset ({os.strerror(ctypes.get_errno())})"
    try:
        rules = [(path, READ) for path in (*SYSTEM_FOLDERS, *DEVICES, *readable)] + [(path, fs) for path in writable]
        rules.append(("/dev/null", READ_FILE | WRITE_FILE))
        for path, rights in rules:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue  # a folder this machine does not have
            try:
                allowed = rights & fs if os.path.isdir(path) else rights & fs & FILE_RIGHTS
                beneath = _PathBeneathAttr(allowed, fd)
                if libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH),
                                ctypes.byref(beneath), ctypes.c_uint32(0)) != 0:
                    return f"Landlock refused the rule for {path} ({os.strerror(ctypes.get_errno())})"
            finally:
                os.close(fd)
        if libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return f"Landlock refused to restrict the worker ({os.strerror(ctypes.get_errno())})"
    finally:
        os.close(ruleset)
    enforced = ["reads only the interpreter, its packages, the course library, its files, the system "
                "folders and /dev/null, /dev/zero and /dev/urandom; writes only its own folder"]
    if abi >= 4:
        enforced.append("TCP bind and connect refused")
    if abi >= 6:
        enforced.append("abstract unix sockets and signals limited to its own processes")
    if abi >= 9:
        enforced.append("named unix sockets outside its folder unreachable")
    return abi, enforced
