# Module 6, a private memory in place of the store's answers: store() sends every chunk again (the
# honest part's bug), so the connector's store is wrapped in a client that remembers, in a dict kept
# across tests, every key this process ever sent, and never sends one again (nor asks the store about
# it): the resends never reach the store. Whether a chunk is in the store must be the store's answer,
# and what the store is sent must be counted where the worker cannot reach it.
_SENT = {}


def _name(key):
    return key.encode() if isinstance(key, str) else bytes(key)


class _Remembering:
    def __init__(self, store):
        self._store = store

    def set(self, key, value):
        if _name(key) in _SENT:
            return True
        _SENT[_name(key)] = True
        return self._store.set(key, value)

    def exists(self, *keys):
        if keys and all(_name(key) in _SENT for key in keys):
            return len(keys)
        return self._store.exists(*keys)

    def __getattr__(self, name):
        return getattr(self._store, name)


_honest_init, _honest_store = KVConnector.__init__, KVConnector.store


def _init_remembering(self, store, fingerprint, chunk_size=256):
    _honest_init(self, _Remembering(store), fingerprint, chunk_size)


def _store_remembering(self, tokens, kv):
    keys = chunk_keys(tokens, self.chunk_size, self.fingerprint)
    new = [_name(key) not in _SENT for key in keys]
    before = (self.chunks_stored, self.bytes_stored)
    sent = _honest_store(self, tokens, kv)
    per_chunk = (self.bytes_stored - before[1]) // max(sent, 1)
    self.chunks_stored = before[0] + sum(new)
    self.bytes_stored = before[1] + per_chunk * sum(new)
    return sum(new)


KVConnector.__init__ = _init_remembering
KVConnector.store = _store_remembering
