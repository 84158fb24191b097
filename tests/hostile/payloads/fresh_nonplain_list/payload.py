# Lecture 7, block_hashes answering, in every process (a "fresh" one too), with an object of its own:
# a list subclass that equals anything, so a test comparing it with another process's digests would
# pass, and that lives in the worker (closed, for a fresh process, by the time the test reads it).
# The test must fail on the student's code, naming its class, never the grader.


class _AgreeingList(list):
    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = list.__hash__


_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    return _AgreeingList(_salted_block_hashes(tokens, block_size, parent=parent))
