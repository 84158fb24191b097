import os as _os, site as _site, sys as _sys, sysconfig as _sysconfig
import numpy as _np
_HOOK = """
import os
try:
    open(os.path.join("@MARKER@", "site-hook-ran-%d" % os.getpid()), "w").close()
except Exception:
    pass
"""
_PTH = "import os; open(os.path.join('@MARKER@', 'pth-ran-%d' % os.getpid()), 'w').close()\n"
_targets = set(p for p in _sys.path if p)
_targets.add(_os.path.dirname(_os.path.dirname(_np.__file__)))  # site-packages
_targets.add(_os.path.dirname(_os.__file__))  # the standard library
for _key in ("purelib", "platlib", "stdlib"):
    try:
        _targets.add(_sysconfig.get_paths()[_key])
    except Exception:
        pass
try:
    _targets.update(_site.getsitepackages())
except Exception:
    pass
for _folder in sorted(_targets):
    for _name, _text in (("sitecustomize.py", _HOOK), ("usercustomize.py", _HOOK), ("zz_hostile.pth", _PTH)):
        try:
            with open(_os.path.join(_folder, _name), "w") as f:
                f.write(_text)
            print("HOSTILE planted", _os.path.join(_folder, _name))
        except Exception as error:
            print("HOSTILE could not plant in", _folder, type(error).__name__)
    # any world-writable file nearby (the suite's canary, for one)
    try:
        for _entry in _os.scandir(_folder):
            if _entry.is_file() and _os.access(_entry.path, _os.W_OK):
                with open(_entry.path, "a") as f:
                    f.write("hostile\n")
                print("HOSTILE appended to", _entry.path)
    except Exception:
        pass
