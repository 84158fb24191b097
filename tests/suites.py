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
}
