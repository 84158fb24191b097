# Lecture 7, block_hashes answering, in every process (a "fresh" one too), with objects of its own
# inside plain data: a plain list of str subclasses that equal any digest, each living in the worker
# (closed, for a fresh process, by the time the test reads it). The test must fail on the student's
# code, naming its class, never the grader.


class _AgreeingDigest(str):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = str.__hash__


_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    return [_AgreeingDigest(digest) for digest in _salted_block_hashes(tokens, block_size, parent=parent)]
