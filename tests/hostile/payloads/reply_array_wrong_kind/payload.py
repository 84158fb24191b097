# update returns array-likes (objects with __array__, which stay in the worker as references), and
# the worker's numpy.asarray of them answers an int, a value of the wrong kind:
# the tests that read the cache's arrays fail with a message about the student's code, and grading
# goes on (no grader fault). The worker is the `self` of a frame that imports this module.
import sys as _sys


def _worker():
    frame = _sys._getframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if type(candidate).__name__ == "Worker" and isinstance(getattr(candidate, "ops", None), dict):
            return candidate
        frame = frame.f_back
    return None


class _ArrayLike:
    def __init__(self, array):
        self.array = array

    def __array__(self, dtype=None, copy=None):
        return self.array


_honest_update = KVCache.update


def _update(self, layer, k, v):
    keys, values = _honest_update(self, layer, k, v)
    return _ArrayLike(keys), _ArrayLike(values)


KVCache.update = _update
_found = _worker()
if _found is not None:
    _found.ops["array"] = lambda *args, **kwargs: 7
