# Lecture 7, block_hashes answering with a plain dict whose keys hold a NUL, terminal escapes and
# 100,000 characters: plain data crosses by value, and its keys are names the grader prints. The
# grader must refuse such keys as the student's failure.
_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    digests = _salted_block_hashes(tokens, block_size, parent=parent)
    return {"digests\x00": digests, "\x1b[2J": 1, "k" * 100_000: 2}
