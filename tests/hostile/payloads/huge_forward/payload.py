# forward calls from student code that would make the grader's process (where forward runs) compute
# or hold far too much: huge token arrays, a config far wider than its params, a cache whose update
# returns hundreds of thousands of positions.
import numpy as _np
from kvlab.model import config_like as _config_like, forward as _forward

class _HugeCache:
    length = 0
    def update(self, layer, k, v):
        K = _np.zeros((k.shape[0], 1 << 18, k.shape[2], k.shape[3]))
        return K, K
    def advance(self, n):
        pass

def greedy_decode(params, cfg, prompt, n_new):
    said = []
    attempts = (
        lambda: _forward(params, cfg, _np.zeros((64, 4096), dtype=_np.int64)),
        lambda: _forward(params, _config_like(cfg, d_ff=1 << 24), _np.zeros((1, 3), dtype=_np.int64)),
        lambda: _forward({**params, "embed": _np.zeros((cfg.vocab, 1 << 20))}, cfg, _np.zeros((1, 3), dtype=_np.int64)),
        lambda: _forward(params, cfg, _np.zeros((1, 50), dtype=_np.int64), cache=_HugeCache()),
    )
    for attempt in attempts:
        try:
            attempt()
            said.append("it ran")
        except Exception as error:
            said.append("%s: %s" % (type(error).__name__, str(error)[:100]))
    raise NotImplementedError("greedy_decode; forward said: " + " | ".join(said))
