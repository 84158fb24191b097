# The worker ends itself on the second update of every cache: the trusted side
# restarts it, and the test's cache object is then stale (it died with that process). Every later use
# of it must fail that test with a message about the student's code, never end the grading.
import os as _os

_honest_update = KVCache.update


def _update(self, layer, k, v):
    self._hostile_updates = getattr(self, "_hostile_updates", 0) + 1
    if self._hostile_updates == 2:
        _os._exit(3)
    return _honest_update(self, layer, k, v)


KVCache.update = _update
