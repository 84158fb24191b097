# Every answer large, each just under the 64 MB message cap: a cache whose update returns 28 MB keys
# and values (of the right rank: a test keeps the pair while it checks it, and forward's attention
# would run over them), byte counts and a decode that answer with 60 MB arrays. Each reply crosses,
# and most tests fail on them; the grader must bound what it holds of them, the garbage that failed
# tests leave in reference cycles included.
import numpy as _np

_BIG = (60 << 20) // 8


def _update(self, layer, k, v):
    positions = (28 << 20) // (8 * k.shape[0] * k.shape[2] * k.shape[3])
    K = _np.zeros((k.shape[0], positions, k.shape[2], k.shape[3]))
    return K, K.copy()


def _nbytes(self):
    return _np.ones(_BIG)


def greedy_decode(params, cfg, prompt, n_new):
    return _np.ones(_BIG // 2), _np.ones(_BIG // 2)


def kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes=2):
    return _np.ones(_BIG)


KVCache.update = _update
KVCache.nbytes = _nbytes
