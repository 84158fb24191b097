# Writes into the grader's files: a line appended to every module of the course library the worker
# imports, and to every file other processes' command lines name (the grader's scripts, its tests root,
# the results file), and a file left in every folder they name. Appended code would run in later
# gradings; an appended or new file among the grader's is a changed grader. Each must be refused, or the
# grading must end as the grader's fault instead of a score. HOSTILE lines say what got through.
import glob as _glob
import os as _os

import kvlab as _kvlab

_HERE = _os.path.abspath(_os.getcwd())
# The payloads' own test runs them unconfined, limited to a folder of its own through this variable; a
# worker's environment is empty, so in a grading the payload aims at the whole machine.
_SCOPE = _os.environ.get("KVLAB_HOSTILE_SCOPE", "/")
_LEFT = "kvlab-hostile-" + "left"
_named = set(_glob.glob(_os.path.join(_os.path.dirname(_kvlab.__file__), "*.py")))
for _proc in _glob.glob("/proc/[0-9]*")[:500]:
    try:
        with open(f"{_proc}/cmdline", "rb") as _file:
            _named.update(a.decode(errors="ignore") for a in _file.read().split(b"\0") if a.startswith(b"/"))
    except OSError:
        pass
_wrote = []
for _path in sorted(p for p in _named if p.startswith(_SCOPE) and not p.startswith(_HERE)):
    try:
        if _os.path.isfile(_path):
            with open(_path, "a", encoding="utf-8") as _file:
                _file.write(f"\n# {_LEFT}: appended by a submission\n")
            _wrote.append(_path)
        elif _os.path.isdir(_path):
            with open(_os.path.join(_path, f"{_LEFT}-named.py"), "w", encoding="utf-8") as _file:
                _file.write("# left by a submission\n")
            _wrote.append(_path)
    except OSError:
        pass
print(f"HOSTILE wrote into {_wrote}" if _wrote else "HOSTILE could write none of the grader's files")
