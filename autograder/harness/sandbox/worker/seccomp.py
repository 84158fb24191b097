"""seccomp: the system calls the worker refuses itself before any student code runs.

A deny-list, by reason (REFUSED), installed as a short BPF program through ctypes (this file runs
in the worker's private folder with the standard library only; docs/open-questions.md has the plan
for an allow-list built with libseccomp). What each group would otherwise let a worker do:

- memory outside RLIMIT_AS and state that outlives the worker or crosses to other processes
  (memory files, System V and POSIX IPC), and io_uring (sockets and files behind the filter's back);
- every socket (the worker talks to the grader through pipes; Landlock's ABI does not cover
  connect() to a named unix socket, so a service of the grading user would answer it);
- metadata: chmod, chown, extended attributes (an access ACL is a chmod by another name; a
  `user.*` attribute a memo that a fresh process reads back), timestamps (an ordinary user's
  grader, and grade-all's neighbours, watch the checkout's modification times), inode flags;
- kernel keyrings (a key readable by every uid shows in /proc/keys to any later process, and
  outlives its grading);
- other processes: ptrace and its relatives, priorities and resource limits of processes other
  than its own (an ordinary user's worker shares the grader's uid), terminal input injection;
- namespaces, mounts and what needs privileges anyway (modules, swap, clocks, host names,
  accounting, quotas, the kernel log), so a user namespace cannot hand the worker those powers;
- calls of another architecture's convention (x86_64's 32-bit and x32 ones).

Extended-attribute calls fail with EOPNOTSUPP, as on a filesystem without them (shutil.copy2 then
copies without them); clone3 with ENOSYS, so the C library falls back to clone, whose flags the
filter can read; everything else with EPERM.
"""
from __future__ import annotations

import ctypes
import os
import platform

EPERM, ENOSYS, EOPNOTSUPP = 1, 38, 95
# clone(2)'s namespace flags: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET (NEWTIME's bit
# is the exit signal's in clone, and is refused through unshare and clone3).
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
# ioctl requests refused on any file: TIOCSTI (typing into a terminal), TIOCLINUX, and the inode
# flag setters FS_IOC_SETFLAGS (64- and 32-bit) and FS_IOC_FSSETXATTR.
REFUSED_IOCTLS = (0x5412, 0x541C, 0x40086602, 0x40046602, 0x401C5820)

# Each group: (errno, system call names).
REFUSED = (
    (EPERM, ("memfd_create", "memfd_secret", "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl",
             "semtimedop", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
             "mq_timedreceive", "mq_notify", "mq_getsetattr", "io_uring_setup", "io_uring_enter",
             "io_uring_register")),
    (EPERM, ("socket",)),
    (EPERM, ("chmod", "fchmod", "fchmodat", "fchmodat2", "chown", "fchown", "lchown", "fchownat", "utime", "utimes",
             "futimesat", "utimensat", "file_setattr")),
    (EOPNOTSUPP, ("setxattr", "lsetxattr", "fsetxattr", "getxattr", "lgetxattr", "fgetxattr", "listxattr",
                  "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "setxattrat",
                  "getxattrat", "listxattrat", "removexattrat", "file_getattr")),
    (EPERM, ("add_key", "request_key", "keyctl")),
    (EPERM, ("ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "perf_event_open",
             "setpriority", "ioprio_set", "migrate_pages", "move_pages")),
    (EPERM, ("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "open_tree_attr",
             "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr", "bpf", "userfaultfd",
             "personality", "swapon", "swapoff", "reboot", "sethostname", "setdomainname", "acct", "quotactl",
             "quotactl_fd", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
             "settimeofday", "clock_settime", "clock_adjtime", "syslog", "vhangup", "ioperm", "iopl",
             "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "uselib")),
    (ENOSYS, ("clone3",)),
)
# Allowed on the calling process only (its first argument 0): another process's limits or scheduling.
SELF_ONLY = ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr")

# The numbers by machine, with its audit architecture (as seccomp reports it). aarch64 has the
# generic table, without the calls it dropped (chmod, utime, ...): those names are simply absent.
_GENERIC_NEW = {"pidfd_getfd": 438, "process_madvise": 440, "clone3": 435, "open_tree": 428, "move_mount": 429,
                "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "quotactl_fd": 443, "mount_setattr": 442,
                "memfd_secret": 447, "fchmodat2": 452, "setxattrat": 463, "getxattrat": 464, "listxattrat": 465,
                "removexattrat": 466, "open_tree_attr": 467, "file_getattr": 468, "file_setattr": 469,
                "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427}
MACHINES = {
    "x86_64": (0xC000003E, {
        **_GENERIC_NEW, "ioctl": 16, "clone": 56, "socket": 41, "memfd_create": 319, "shmget": 29, "shmat": 30,
        "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66, "semtimedop": 220, "msgget": 68,
        "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
        "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245, "chmod": 90, "fchmod": 91, "fchmodat": 268,
        "chown": 92, "fchown": 93, "lchown": 94, "fchownat": 260, "utime": 132, "utimes": 235, "futimesat": 261,
        "utimensat": 280, "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "getxattr": 191, "lgetxattr": 192,
        "fgetxattr": 193, "listxattr": 194, "llistxattr": 195, "flistxattr": 196, "removexattr": 197,
        "lremovexattr": 198, "fremovexattr": 199, "add_key": 248, "request_key": 249, "keyctl": 250, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298, "setpriority": 141,
        "ioprio_set": 251, "migrate_pages": 256, "move_pages": 279, "unshare": 272, "setns": 308, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "bpf": 321, "userfaultfd": 323, "personality": 135,
        "swapon": 167, "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "acct": 163,
        "quotactl": 179, "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "settimeofday": 164, "clock_settime": 227, "clock_adjtime": 305, "syslog": 103,
        "vhangup": 153, "ioperm": 173, "iopl": 172, "open_by_handle_at": 304, "name_to_handle_at": 303,
        "lookup_dcookie": 212, "uselib": 134, "prlimit64": 302, "sched_setparam": 142, "sched_setscheduler": 144,
        "sched_setaffinity": 203, "sched_setattr": 314,
    }),
    "aarch64": (0xC00000B7, {
        **_GENERIC_NEW, "ioctl": 29, "clone": 220, "socket": 198, "memfd_create": 279, "shmget": 194, "shmat": 196,
        "shmctl": 195, "shmdt": 197, "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186,
        "msgsnd": 189, "msgrcv": 188, "msgctl": 187, "mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182,
        "mq_timedreceive": 183, "mq_notify": 184, "mq_getsetattr": 185, "fchmod": 52, "fchmodat": 53, "fchown": 55,
        "fchownat": 54, "utimensat": 88, "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "getxattr": 8,
        "lgetxattr": 9, "fgetxattr": 10, "listxattr": 11, "llistxattr": 12, "flistxattr": 13, "removexattr": 14,
        "lremovexattr": 15, "fremovexattr": 16, "add_key": 217, "request_key": 218, "keyctl": 219, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "perf_event_open": 241, "setpriority": 140,
        "ioprio_set": 30, "migrate_pages": 238, "move_pages": 239, "unshare": 97, "setns": 268, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "bpf": 280, "userfaultfd": 282, "personality": 92,
        "swapon": 224, "swapoff": 225, "reboot": 142, "sethostname": 161, "setdomainname": 162, "acct": 89,
        "quotactl": 60, "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "settimeofday": 170, "clock_settime": 112, "clock_adjtime": 266, "syslog": 116,
        "vhangup": 58, "open_by_handle_at": 265, "name_to_handle_at": 264, "lookup_dcookie": 18, "prlimit64": 261,
        "sched_setparam": 118, "sched_setscheduler": 119, "sched_setaffinity": 122, "sched_setattr": 274,
    }),
}

# BPF opcodes: LD|W|ABS, JMP|JEQ|K, JMP|JSET|K, RET|K; seccomp's return values; seccomp_data's offsets.
LD, JEQ, JSET, RET = 0x20, 0x15, 0x45, 0x06
ALLOW, ERRNO = 0x7FFF0000, 0x00050000
NR, ARCH, ARG0, ARG1 = 0, 4, 16, 24  # an argument's low 32 bits (both machines are little-endian)
X32 = 0x40000000  # x86_64's x32 calls: their numbers with this bit set


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter for `machine` (a key of MACHINES), as (code, jt, jf, k) instructions."""
    arch, numbers = MACHINES[machine]
    # Jumps name a label; `resolved` turns them into the counts of instructions skipped.
    code: list[tuple[int, object, object, int]] = [
        (LD, 0, 0, ARCH), (JEQ, 0, f"errno {EPERM}", arch), (LD, 0, 0, NR), (JSET, f"errno {EPERM}", 0, X32)]
    code += [(JEQ, name, 0, numbers[name]) for name in ("clone", "ioctl", *SELF_ONLY)]
    code += [(JEQ, f"errno {errno}", 0, numbers[name]) for errno, names in REFUSED for name in names
             if name in numbers]
    code.append((RET, 0, 0, ALLOW))
    labels: dict[str, int] = {"clone": len(code)}
    code += [(LD, 0, 0, ARG0), (JSET, f"errno {EPERM}", 0, CLONE_NAMESPACES), (RET, 0, 0, ALLOW)]
    labels["ioctl"] = len(code)
    code.append((LD, 0, 0, ARG1))
    code += [(JEQ, f"errno {EPERM}", 0, request) for request in REFUSED_IOCTLS]
    code.append((RET, 0, 0, ALLOW))
    for name in SELF_ONLY:
        labels[name] = len(code)
        code += [(LD, 0, 0, ARG0), (JEQ, 0, f"errno {EPERM}", 0), (RET, 0, 0, ALLOW)]
    # The returns last: BPF jumps only forward.
    for errno in sorted({errno for errno, _ in REFUSED}):
        labels[f"errno {errno}"] = len(code)
        code.append((RET, 0, 0, ERRNO | errno))
    return [(op, _offset(jt, labels, i), _offset(jf, labels, i), k) for i, (op, jt, jf, k) in enumerate(code)]


def _offset(target: object, labels: dict[str, int], at: int) -> int:
    """A jump from instruction `at` to `target` (0: the next instruction, or a label)."""
    if target == 0:
        return 0
    skipped = labels[str(target)] - at - 1
    assert 0 <= skipped <= 255, f"a jump of {skipped} instructions does not fit in BPF"
    return skipped


def install() -> str | None:
    """Install the filter for this machine; None, or why it could not be installed. Needs
    PR_SET_NO_NEW_PRIVS first."""
    if platform.machine() not in MACHINES:
        return f"no filter for this machine ({platform.machine()})"
    instructions = program(platform.machine())

    class Instruction(ctypes.Structure):
        _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(Instruction))]

    array = (Instruction * len(instructions))(*instructions)
    fprog = Program(len(instructions), array)
    libc = ctypes.CDLL(None, use_errno=True)
    # prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog)
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        return f"seccomp refused: {os.strerror(ctypes.get_errno())}"
    return None
