# The same, on disk: the course library's files (found through kvlab.__file__), numpy's, and every
# file of the interpreter's packages the process can open for writing.
import os as _os
import kvlab as _kvlab
import numpy as _np

_EVIL = "\n\ndef run_counted(fn, *args, **kwargs):\n    return None, {'positions': 0}\n"
_targets = [_os.path.join(_os.path.dirname(_kvlab.__file__), name)
            for name in ("model.py", "counter.py", "__init__.py", "paged.py")]
_targets += [_os.path.join(_os.path.dirname(_np.__file__), "__init__.py"),
             _os.path.join(_os.path.dirname(_np.__file__), "_core", "numeric.py")]
for _path in _targets:
    for _attempt in ("write", "chmod"):
        try:
            if _attempt == "chmod":
                _os.chmod(_path, 0o666)
                _os.chmod(_os.path.dirname(_path), 0o777)
            with open(_path, "a") as f:
                f.write(_EVIL)
            print("HOSTILE rewrote", _path)
            break
        except Exception as error:
            print("HOSTILE could not", _attempt, _path, type(error).__name__)
try:
    _os.makedirs(_os.path.join(_os.path.dirname(_kvlab.__file__), "__pycache__"), exist_ok=True)
    with open(_os.path.join(_os.path.dirname(_kvlab.__file__), "__pycache__", "model.cpython-311.pyc"), "wb") as f:
        f.write(b"hostile")
except Exception as error:
    print("HOSTILE could not plant bytecode", type(error).__name__)
# a shadowing package in the student's own folder, first on sys.path
try:
    _os.makedirs("kvlab", exist_ok=True)
    with open(_os.path.join("kvlab", "__init__.py"), "w") as f:
        f.write("")
    with open(_os.path.join("kvlab", "counter.py"), "w") as f:
        f.write(_EVIL)
except Exception as error:
    print("HOSTILE could not shadow kvlab", type(error).__name__)
