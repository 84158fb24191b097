# Message memory: block_hashes returns 1,999,990 ints (just under the per-test bound on values), so every
# failure message that shows the value would be tens of MB, and pytest keeps each failed test's message
# for the session. The grader must bound each message and what the session holds, and stay graded.
# Only a process's first 24 answers are huge: held unbounded, their messages alone would be about 1 GB,
# past the grader's 768 MB; more would prove no more and cost seconds of encoding each.
_HUGE = list(range(1_999_990))
_HUGE_LEFT = [24]


def _answer(small):
    if _HUGE_LEFT[0] > 0:
        _HUGE_LEFT[0] -= 1
        return _HUGE
    return small


def block_hashes(tokens, block_size, parent=None):
    return _answer([])
