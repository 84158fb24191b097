# Writes that would run in every later Python: a .pth file (its import lines run at every start of an
# interpreter) in every folder of sys.path and in every site folder of the interpreter and of the user,
# named kvlab-hostile-left-*.pth and holding only a comment. Each must be refused. HOSTILE lines say
# where one got through.
import os as _os
import site as _site
import sys as _sys
import sysconfig as _sysconfig

_LEFT = "kvlab-hostile-" + "left"
_HERE = _os.path.abspath(_os.getcwd())
# The payloads' own test runs them unconfined, limited to a folder of its own through this variable; a
# worker's environment is empty, so in a grading the payload aims at the whole machine.
_SCOPE = _os.environ.get("KVLAB_HOSTILE_SCOPE", "/")
_folders = {*_sys.path, *_site.getsitepackages(), _site.getusersitepackages(),
            *(_sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib"))}
_planted = []
for _folder in sorted(f for f in _folders if f and _os.path.isabs(f) and f.startswith(_SCOPE) and not f.startswith(_HERE)):
    try:
        with open(_os.path.join(_folder, f"{_LEFT}-hook.pth"), "w", encoding="utf-8") as _file:
            _file.write("# a line that could have been `import anything`\n")
        _planted.append(_folder)
    except OSError:
        pass
print(f"HOSTILE planted .pth files in {_planted}" if _planted else "HOSTILE could plant no .pth file")
