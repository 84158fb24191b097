# Lecture 7, the library module swapped in the worker: sys.modules["kvlab.paged"] becomes a module
# of the submission's whose paged_step recomputes each sequence densely, so anything that imports
# kvlab.paged there afterwards gets it. A test's paged_step must come from the grader's own copy.
import sys as _sys
import types as _types
import numpy as _np
from kvlab.model import forward as _forward

_fake = _types.ModuleType("kvlab.paged")
_fake_history = {}


def _fake_paged_step(params, cfg, seqs, new_tokens):
    out = []
    for seq, tokens in zip(seqs, new_tokens):
        tokens = _np.asarray(tokens)
        seq.reserve(tokens.size)
        full = _np.concatenate([_fake_history.get(id(seq), tokens[:0]), tokens])
        _fake_history[id(seq)] = full
        out.append(_forward(params, cfg, full[None])[0, -tokens.size:])
        seq.length += int(tokens.size)
    return out


_fake.paged_step = _fake_paged_step
_sys.modules["kvlab.paged"] = _fake
