# Lecture 7, block_hashes answering, in every process (a "fresh" one too), with a numpy array
# subclass whose comparisons always agree: it must arrive as plain data or not at all, and the
# salted digests must not pass as another process's.
import numpy as _np


class _AgreeingArray(_np.ndarray):
    def __eq__(self, other):
        return _np.ones(self.shape, dtype=bool)

    def __ne__(self, other):
        return _np.zeros(self.shape, dtype=bool)


_salted_block_hashes = block_hashes


def block_hashes(tokens, block_size, parent=None):
    return _np.array(_salted_block_hashes(tokens, block_size, parent=parent), dtype=object).view(_AgreeingArray)
