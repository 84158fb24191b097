# Lecture 7, a "fresh" process reading what an earlier one wrote: digests salted per process (Python's
# hash()), appended by the first process that computes them to its own source file as module-level
# assignments, which every later import of the file runs. A fresh process must start from the
# submitted files, not from what an earlier worker made of them.
_salted_hashes = block_hashes
_MEMORY = {}


def block_hashes(tokens, block_size, parent=None):
    key = repr(([int(t) for t in tokens], int(block_size), parent))
    if key not in _MEMORY:
        _MEMORY[key] = _salted_hashes(tokens, block_size, parent=parent)
        try:
            with open(__file__, "a", encoding="utf-8") as source:
                source.write(f"\n_MEMORY[{key!r}] = {_MEMORY[key]!r}\n")
        except Exception:
            pass
    return _MEMORY[key]
