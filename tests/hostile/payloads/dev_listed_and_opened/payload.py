# /dev beyond the four files a program reads: the worker lists /dev and /dev/pts (which terminals
# the grading user has open) and opens every device it may, for reading (a new terminal through
# /dev/ptmx, the kernel log, fuse, tun). What it reached is put into the message of every
# block_hashes call, which a failed test shows.
import os as _os

_reached = []
for _folder in ("/dev", "/dev/pts", "/dev/shm"):
    try:
        _reached.append(f"listed {_folder} ({len(_os.listdir(_folder))} entries)")
    except OSError:
        pass
for _path in ("/dev/ptmx", "/dev/kmsg", "/dev/full", "/dev/fuse", "/dev/net/tun", "/dev/mem", "/dev/vda"):
    try:
        _os.close(_os.open(_path, _os.O_RDONLY | _os.O_NONBLOCK | _os.O_NOCTTY))
        _reached.append(f"opened {_path}")
    except OSError:
        pass


def block_hashes(tokens, block_size, parent=None):
    if _reached:
        raise RuntimeError(f"HOSTILE /dev reached: {', '.join(_reached)}")
    raise RuntimeError("HOSTILE /dev: only its four files")
