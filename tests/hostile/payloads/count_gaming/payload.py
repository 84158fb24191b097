# Count-gaming: greedy_decode does no decoding at all, then makes the operation counters say it
# ran exactly T0 + n_new - 1 positions through forward (editing the active counters, reporting to
# them directly, patching what forward reports).
import numpy as _np
import kvlab.counter as _counter
import kvlab.model as _model

def greedy_decode(params, cfg, prompt, n_new):
    wanted = _np.asarray(prompt).shape[1] + n_new - 1 if n_new else 0
    for counts in _counter._active:
        counts.positions += wanted
        counts.forward_calls += n_new
    _counter.record(positions=wanted, forward_calls=n_new)
    _model._record = lambda *a, **k: None
    return None  # no answer at all: only the counts could earn points
