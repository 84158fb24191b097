# Message memory: block_hashes returns 1,999,990 ints (just under the per-test bound on values), so every
# failure message that shows the value would be tens of MB, and pytest keeps each failed test's message
# for the session. The grader must bound each message and what the session holds, and stay graded.
_HUGE = list(range(1_999_990))


def block_hashes(tokens, block_size, parent=None):
    return _HUGE
