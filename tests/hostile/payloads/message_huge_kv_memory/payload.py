# Message memory in module 6: every kv_memory function returns 1,999,990 ints (just under the per-test
# bound on values), so each failed check that shows the value would print megabytes; a process's first
# 24 answers only (see message_huge_hashes).
_HUGE = list(range(1_999_990))
_HUGE_LEFT = [24]


def _answer():
    if _HUGE_LEFT[0] > 0:
        _HUGE_LEFT[0] -= 1
        return _HUGE
    return -1


def kv_bytes_per_token(*args, **kwargs):
    return _answer()


def kv_cache_gib(*args, **kwargs):
    return _answer()


def max_batch(*args, **kwargs):
    return _answer()
