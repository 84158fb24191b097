# Every answer large, each just under the 64 MB message cap: a cache whose update returns 30 MB keys
# and values (a test keeps the pair while it checks them, and the next pair arrives meanwhile), a
# greedy_decode and an nbytes that return 60 MB arrays, and objects whose conversion to an array
# does too. Each reply crosses; the grader must bound what it holds of them at once.
import numpy as _np

_BIG = (60 << 20) // 8


class _Heavy:
    def __array__(self, dtype=None, copy=None):
        return _np.ones(_BIG)

    def __len__(self):
        return _BIG


_honest_update = KVCache.update


def _update(self, layer, k, v):
    K, V = _honest_update(self, layer, k, v)
    pad = _np.zeros((30 << 20) // 8)
    return (K, pad, _Heavy()), (V, pad, _Heavy())


def _nbytes(self):
    return _np.ones(_BIG)


def greedy_decode(params, cfg, prompt, n_new):
    return _Heavy()


KVCache.update = _update
KVCache.nbytes = _nbytes
