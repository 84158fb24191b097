# update returns its pair as a list subclass whose __eq__ and __len__ say whatever a test hopes,
# where plain data was promised: it stays in the worker as a reference, and the
# tests that check the pair fail with a message about the student's code; grading goes on.
class _Pair(list):
    def __eq__(self, other):
        return True

    def __len__(self):
        return 2


_honest_update = KVCache.update


def _update(self, layer, k, v):
    return _Pair(_honest_update(self, layer, k, v))


KVCache.update = _update
