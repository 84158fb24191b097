# Filling the disk: files of 1 MB (under the per-file limit, which bounds each file and not their
# total) in the worker's own folder, until something stops it.
import os as _os


def greedy_decode(params, cfg, prompt, n_new):
    chunk = b"x" * (1 << 20)
    try:
        for i in range(400):
            with open("hostile-fill-%d-%d" % (n_new, i), "wb") as f:
                f.write(chunk)
    except OSError as error:
        print("HOSTILE could not fill its folder:", type(error).__name__)
    raise NotImplementedError("greedy_decode (task greedy_decode)")
