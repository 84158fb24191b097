# Empty files past the limit of 10,000, 4,000 more at every call, kept between calls: no bytes to
# speak of, but each one costs the machine an inode (kernel memory on a tmpfs) and the grader time to
# remove. The third call goes over. (Creating 4,000 files costs at most about a second of CPU time
# even on a slow disk, well within a call's limit, so the folder check, not the timeout, stops it.)
import os as _os


def greedy_decode(params, cfg, prompt, n_new):
    _os.makedirs("many", exist_ok=True)
    start = len(_os.listdir("many"))
    for i in range(start, start + 4000):
        open(_os.path.join("many", str(i)), "w").close()
    raise NotImplementedError("greedy_decode (task greedy_decode)")
