# Message memory: both byte counts return 1,999,990 ints, so each failed byte-count check would print
# megabytes; see message_huge_hashes.
_HUGE = list(range(1_999_990))


def kv_bytes_per_token(*args, **kwargs):
    return _HUGE


def kv_cache_bytes(*args, **kwargs):
    return _HUGE
