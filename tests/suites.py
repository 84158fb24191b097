"""Each assignment's test suite as the repository's tests of the tests see it (see suite_support.Suite)."""
from __future__ import annotations

from suite_support import Suite

SUITES = {
    "lecture02": Suite(
        assignment="lecture02",
        # Every function and method of the contract's kv_decode.py: the catalog must break each of them.
        contract={"kv_decode.py": frozenset({
            "KVCache.__init__", "KVCache.update", "KVCache.advance", "KVCache.nbytes",
            "greedy_decode", "kv_bytes_per_token", "kv_cache_bytes",
        })},
        min_mutants=12,
        # No lecture-2 test uses hypothesis; skipping its plugin's import saves half a second per run.
        pytest_args=("-p", "no:hypothesispytest", "--timeout=60"),
        run_timeout=300,
        # The whole suite is short enough to run per mutant, which also catches points lost elsewhere.
        mutants_run_own_tasks=False,
    ),
    "lecture07": Suite(
        assignment="lecture07",
        # Every function and method of the contract's paged_kv.py and prefix_cache.py that the catalog
        # must break, by file.
        contract={
            "paged_kv.py": frozenset({
                "BlockPool.__init__", "BlockPool.allocate", "BlockPool.incref", "BlockPool.decref", "BlockPool.refcount",
                "BlockPool.num_free", "PagedSequence.reserve", "PagedSequence.slots", "PagedSequence.free",
            }),
            "prefix_cache.py": frozenset({
                "block_hashes", "PrefixCache.lookup", "PrefixCache.register", "PrefixCache.clear", "PrefixCache.__len__",
                "prefill", "LRUCache.match", "LRUCache.insert", "LRUCache.__contains__", "LFUCache.match",
                "LFUCache.insert", "make_cache", "hit_ratio",
            }),
        },
        min_mutants=15,
        # The hidden hit_ratio tests replay full-size traces; the hypothesis plugin stays (the hidden
        # paged tests use hypothesis).
        pytest_args=("--timeout=120",),
        run_timeout=600,
        # The whole suite takes too long to run once per mutant.
        mutants_run_own_tasks=True,
    ),
    "module06": Suite(
        assignment="module06",
        # Every function and method of kv_memory.py and block_manager.py that the catalog must break.
        contract={
            "kv_memory.py": frozenset({
                "kv_values_per_token_per_layer", "kv_bytes_per_token", "kv_cache_gib", "max_batch",
            }),
            "block_manager.py": frozenset({
                "FreeBlockQueue.__init__", "FreeBlockQueue.popleft", "FreeBlockQueue.remove", "FreeBlockQueue.append",
                "FreeBlockQueue.block_ids", "block_hashes", "BlockManager.__init__", "BlockManager.allocate",
                "BlockManager.append_tokens", "BlockManager.free", "BlockManager._take_free_block",
                "BlockManager._cache_block",
            }),
            "kv_connector.py": frozenset({
                "chunk_keys", "serialize_chunk", "deserialize_chunk", "KVConnector.__init__", "KVConnector.lookup",
                "KVConnector.load", "KVConnector.store",
            }),
        },
        min_mutants=20,
        # The serving tests' state machine uses hypothesis; the cost guards need room on a busy machine.
        pytest_args=("--timeout=180",),
        run_timeout=600,
        # A manager bug fails the serving task too; each mutant runs its own tasks' files only.
        mutants_run_own_tasks=True,
    ),
}
