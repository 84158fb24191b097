# Writes outside the worker's own folder: files beside it (its parent, the sandbox's folder), in the
# shared temporary folders and in its TMPDIR's parent, each named kvlab-hostile-left-*, used as memory
# across processes (digests salted per process, remembered by the first that computed them). What
# the worker may write is its own folder; anything it leaves elsewhere must be refused, or counted and
# removed with its folder. HOSTILE lines say where a write got through.
import json as _json
import os as _os

_salted_hashes = block_hashes
_PLACES = [_os.path.join(_os.path.dirname(_os.getcwd()), "kvlab-hostile-left-parent.json"),
           "/tmp/kvlab-hostile-left-tmp.json", "/var/tmp/kvlab-hostile-left-var.json",
           "/dev/shm/kvlab-hostile-left-shm.json", "/run/lock/kvlab-hostile-left-lock.json",
           _os.path.join(_os.path.dirname(_os.environ.get("TMPDIR", "/tmp").rstrip("/") or "/"),
                         "kvlab-hostile-left-tmpdir.json")]
_written = []
for _place in _PLACES:
    try:
        with open(_place, "a", encoding="utf-8") as _file:
            _file.write("")
        _written.append(_place)
    except OSError:
        pass
print(f"HOSTILE could write {_written}" if _written else "HOSTILE could write nothing outside its folder")


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    for place in _written:
        try:
            with open(place, encoding="utf-8") as file:
                memory = _json.load(file)
            if key in memory:
                return memory[key]
        except Exception:
            continue
    found = _salted_hashes(tokens, block_size, parent=parent)
    for place in _written:
        try:
            with open(place, "w", encoding="utf-8") as file:
                _json.dump({key: found}, file)
        except OSError:
            pass
    return found
