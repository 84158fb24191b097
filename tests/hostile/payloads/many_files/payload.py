# Empty files past the limit of 10,000, up to 4,000 more at every call, kept between calls: no bytes
# to speak of, but each one costs the machine an inode (kernel memory on a tmpfs) and the grader time
# to remove. On a tmpfs the third call goes over. A call stops adding files after a second of CPU
# time, half its limit: without bubblewrap the files land on the machine's disk, where creating
# 4,000 took more than the 2 s limit on a busy machine, and a call stopped by its timeout restarts
# the worker with an empty folder, so the count never reached the limit. With the second's cap the
# folder check, not the timeout, stops a later call.
import os as _os
import time as _time


def greedy_decode(params, cfg, prompt, n_new):
    _os.makedirs("many", exist_ok=True)
    start = len(_os.listdir("many"))
    began = _time.process_time()
    for i in range(start, start + 4000):
        if i % 100 == 0 and _time.process_time() - began > 1.0:
            break
        open(_os.path.join("many", str(i)), "w").close()
    raise NotImplementedError("greedy_decode (task greedy_decode)")
