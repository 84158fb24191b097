# Lecture 7, a library function replaced in the worker: kvlab.paged.paged_step swapped for a dense
# version that keeps each sequence's tokens and recomputes them with forward, never using the
# student's (wrong) slots. A test's student.call("kvlab.paged:paged_step", ...) must not reach it.
import kvlab.paged as _paged
import numpy as _np
from kvlab.model import forward as _forward

_history = {}


def _dense_paged_step(params, cfg, seqs, new_tokens):
    out = []
    for seq, tokens in zip(seqs, new_tokens):
        tokens = _np.asarray(tokens)
        seq.reserve(tokens.size)
        full = _np.concatenate([_history.get(id(seq), tokens[:0]), tokens])
        _history[id(seq)] = full
        out.append(_forward(params, cfg, full[None])[0, -tokens.size:])
        seq.length += int(tokens.size)
    return out


_paged.paged_step = _dense_paged_step
