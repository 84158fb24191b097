# Position budget, gamed with a private model: kvlab/model.py loaded again from its file under
# another name (the worker's kvlab.model.forward is the grader's counted stand-in; this copy is
# not), every step recomputing the whole sequence with it, plus one junk counted forward call of
# exactly T0 + n_new - 1 positions so that the counts look right.
import importlib.util as _util
import sys as _sys
import numpy as _np
import kvlab.model as _counted

_spec = _util.spec_from_file_location("_private_model", _counted.__file__)
_private = _util.module_from_spec(_spec)
_sys.modules["_private_model"] = _private  # dataclasses look their module up there
_spec.loader.exec_module(_private)


def greedy_decode(params, cfg, prompt, n_new):
    tokens = _np.asarray(prompt)
    if n_new == 0:
        return tokens, []
    _counted.forward(params, cfg, _np.zeros((tokens.shape[0], tokens.shape[1] + n_new - 1), dtype=_np.int64))
    step_logits = []
    for _ in range(n_new):
        logits = _private.forward(params, _private.Config(**vars(cfg)), tokens)[:, -1]
        step_logits.append(logits)
        tokens = _np.concatenate([tokens, logits.argmax(axis=-1)[:, None].astype(tokens.dtype)], axis=1)
    return tokens, step_logits
