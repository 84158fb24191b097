# Memory outside the address-space limit: anonymous memory files (memfd_create), 16 MB each (the
# per-file limit), written and kept open, up to 1 GB: none of it is mapped, so RLIMIT_AS never sees
# it, and a 768 MB grading ran out (the worker, first in line for the OOM killer, died at every
# call). The worker's seccomp filter refuses memfd_create.
import os as _os

_HOARD = []


def greedy_decode(params, cfg, prompt, n_new):
    chunk = b"x" * (1 << 20)
    try:
        for _ in range(64):
            fd = _os.memfd_create("hostile")
            _HOARD.append(fd)
            for _ in range(16):
                _os.write(fd, chunk)
    except OSError as error:
        print("HOSTILE memfd stopped:", type(error).__name__)
    raise NotImplementedError("greedy_decode (task greedy_decode)")
