# A 3,000-deep chain of folders in the worker's own folder, made at the first call of each worker
# process: a recursive rmtree fails on it (RecursionError), and its full path is longer than the
# kernel accepts. Made through folder descriptors, so the worker's current folder stays where it was.
# Once per process, not at every call: under Landlock each open walks the rule set up the path, so a
# chain's walk costs time quadratic in its depth (0.4 s of CPU here), which would only spend the
# grading's time budget and measure the machine's load.
import os as _os

_chain_made = False


def greedy_decode(params, cfg, prompt, n_new):
    global _chain_made
    if not _chain_made:
        _chain_made = True
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
