# Lecture 7, block_hashes answering with an object whose class's module and name hold terminal escape
# sequences and a newline (which would clear the staff's terminal and forge lines of its log when a
# message names the type): the grader must refuse the name as the student's failure.


class _Digests(list):
    pass


_Digests.__module__ = "\x1b[2J\x1b[H"
_Digests.__qualname__ = "Digests\nsandbox: all tests passed"
_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    return _Digests(_salted_block_hashes(tokens, block_size, parent=parent))
