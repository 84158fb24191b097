# Lecture 7, a cost guard escaped by deferring work: LRUCache's eviction scans every block (O(capacity)),
# but insert only queues its blocks, and len() answers from the queue without evicting; the
# scanning happens at the next `in` (match alone is answered after a flush too). A guard must time the calls that do the deferred work too.
_ScanningLRU = LRUCache


class LRUCache:
    def __init__(self, capacity):
        self._inner, self._pending, self._capacity = _ScanningLRU(capacity), [], capacity

    def insert(self, blocks):
        self._pending.extend(int(b) for b in blocks)

    def _flush(self):
        pending, self._pending = self._pending, []
        self._inner.insert(pending)

    def _estimate(self):
        held = len(self._inner) + len(set(self._pending))
        return held if self._capacity is None else min(held, self._capacity)

    def match(self, blocks):
        self._flush()
        return self._inner.match(blocks)

    def __contains__(self, block):
        self._flush()
        return block in self._inner

    def __len__(self):
        return self._estimate()
