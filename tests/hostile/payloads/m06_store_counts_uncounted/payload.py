# Module 6, the store's methods replaced in the worker: lookup GETs every chunk (the honest part's
# bug), and while it runs, the store's `pipeline`, `get` and `_run` (the worker's MemoryStore and
# MemoryPipeline classes, and the very object the connector was given) run their commands straight
# on the store's data without counting them, when that data is in this process. The commands a test
# reads must be counted where the worker cannot reach them.
import kvlab.kvstore as _kvstore

_quiet = [0]
_counted_run = _kvstore.MemoryStore._run


def _run_uncounted(self, batch):
    data_here = hasattr(self, "_lock") and hasattr(self, "_do_get")
    if not _quiet[0] or not data_here:
        return _counted_run(self, batch) if data_here else type(self)._run(self, batch)
    with self._lock:
        return [getattr(self, f"_do_{name}")(*args) for name, args in batch]


class _QuietPipeline:
    def __init__(self, store):
        self._store, self._queued = store, []

    def get(self, key):
        self._queued.append(key)
        return self

    def exists(self, key):
        self._queued.append(key)
        return self

    def execute(self, raise_on_error=True):
        keys, self._queued = self._queued, []
        lock, read = getattr(self._store, "_lock", None), getattr(self._store, "_do_get", None)
        if lock is None or read is None:  # no data here: the plain pipeline, counted
            pipe = self._store.__class__.pipeline(self._store, transaction=False)
            for key in keys:
                pipe.get(key)
            return pipe.execute()
        with lock:
            return [read(_kvstore.encode(key)) for key in keys]


_kvstore.MemoryStore._run = _run_uncounted
_honest_lookup = KVConnector.lookup


def _lookup_uncounted(self, tokens):
    backend = self.backend
    _quiet[0] += 1
    try:
        try:
            backend.pipeline = lambda transaction=True, shard_hint=None: _QuietPipeline(backend)
        except Exception:
            pass
        return _honest_lookup(self, tokens)
    finally:
        _quiet[0] -= 1
        try:
            del backend.pipeline
        except Exception:
            pass


KVConnector.lookup = _lookup_uncounted
