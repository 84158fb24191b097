# Lecture 7, block_hashes answering with an object whose class name holds a NUL character (a class's
# __qualname__ may, where type() refuses one in __name__): the grader must tell the student that the
# name is not text it accepts, never fail itself creating a proxy type of that name.


class _Digests(list):
    pass


_Digests.__qualname__ = "Digests\x00evil"
_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    return _Digests(_salted_block_hashes(tokens, block_size, parent=parent))
