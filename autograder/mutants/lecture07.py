"""Lecture 7's bug catalog: mistakes students make in paged_kv.py and prefix_cache.py, as edits of
the solution.

tests/suites/test_suites.py applies each one to `solutions/lecture07/` and checks that the tests
of the tasks listed catch it with a message containing `expect`. `tasks` names where the bug is
graded; a BlockPool or PagedSequence bug usually costs the tasks built on them (prefix_cache,
prefill) too, which the catalog does not require.

Over 400 lines on purpose: it is data, one list of mutants that the tests of the tests read whole; its
length is the catalog's size.
"""
from __future__ import annotations

from autograder.mutants import Checks, Mutant

PAGED = "paged_kv.py"
PREFIX = "prefix_cache.py"

# Lines of the solution that several mutants edit, or that need context to occur once.
RESERVE_NEEDED = "needed = -(-(self.length + n) // size) - len(self.blocks)"
HASH_STEP = "digest = hashlib.sha256(previous + values[start:start + block_size].tobytes()).hexdigest()"
HIT_LINE = "hit += min(n * block_size, request.input_len)"

# The hidden hit_ratio tests replay full-size traces: the whole suite takes too long to run once per
# mutant, so each mutant is graded on the tests of its own tasks.
CHECKS = Checks(min_mutants=15, run_seconds=600, mutants_run_own_tasks=True)

MUTANTS = [
    # BlockPool
    Mutant(
        "allocate_leaves_refcount_zero", PAGED, (("self._refs[block] = 1\n        return block", "return block"),),
        "allocate takes the block off the free list but never sets its refcount",
        ("block_pool",), "free block with refcount 1",
    ),
    Mutant(
        "allocate_keeps_block_on_free_list", PAGED, (("block = self._free.popleft()", "block = self._free[0]"),),
        "allocate reads the first free block without removing it, so it hands the same block out again",
        ("block_pool",), "off the free list",
    ),
    Mutant(
        "decref_never_frees", PAGED,
        (("        if self._refs[block] == 0:\n            self._free.append(block)\n", ""),),
        "a block whose refcount reaches 0 never goes back on the free list",
        ("block_pool",), "is free again",
    ),
    Mutant(
        "double_free_allowed", PAGED,
        (("        if self._refs[block] == 0:\n            raise ValueError(f\"block {block} is free\")\n"
          "        self._refs[block] -= 1\n", "        self._refs[block] -= 1\n"),),
        "decref does not check that the block is in use: a double free drives the refcount negative",
        ("block_pool",), "double free",
    ),
    Mutant(
        "incref_of_free_block_allowed", PAGED,
        (("        if self._refs[block] == 0:\n            raise ValueError(f\"block {block} is free\")\n"
          "        self._refs[block] += 1\n", "        self._refs[block] += 1\n"),),
        "incref does not check that the block is in use, reviving a free block that stays on the free list",
        ("block_pool",), "no users to add to",
    ),
    Mutant(
        "num_free_sums_refcounts", PAGED, (("return len(self._free)", "return self.n_blocks - sum(self._refs)"),),
        "num_free subtracts the sum of the refcounts, so a shared block counts once per user",
        ("block_pool",), "sum of the refcounts",
    ),
    Mutant(
        "refcount_without_id_check", PAGED,
        (("check_block_id(block, self.n_blocks)\n        return self._refs[block]", "return self._refs[block]"),),
        "refcount indexes the list directly: -1 reads the last block, n_blocks raises IndexError",
        ("block_pool",), "unknown and must raise ValueError",
    ),
    Mutant(
        "pool_sized_by_query_heads", PAGED,
        (("shape = (n_blocks, cfg.n_layers, block_size, cfg.n_kv_heads, cfg.d_head)",
          "shape = (n_blocks, cfg.n_layers, block_size, cfg.n_heads, cfg.d_head)"),),
        "the pool stores one slot per query head instead of per key/value head (grouped-query attention)",
        ("block_pool",), "[n_blocks, L, block_size, Hkv, d]",
    ),
    Mutant(
        "pool_ignores_dtype", PAGED,
        (("self.k = np.zeros(shape, dtype=dtype)", "self.k = np.zeros(shape)"),
         ("self.v = np.zeros(shape, dtype=dtype)", "self.v = np.zeros(shape)")),
        "the pool is always float64, whatever dtype it was given",
        ("block_pool",), "has dtype float64",
    ),
    # PagedSequence
    Mutant(
        "reserve_one_block_too_many", PAGED,
        ((RESERVE_NEEDED, "needed = (self.length + n) // size + 1 - len(self.blocks)"),),
        "reserve stops only when the blocks hold more than length + n (> instead of >=)",
        ("paged_sequence",), "one block too many",
    ),
    Mutant(
        "reserve_ignores_length", PAGED, ((RESERVE_NEEDED, "needed = -(-n // size) - len(self.blocks)"),),
        "reserve sizes the blocks for n tokens, forgetting the tokens already stored",
        ("paged_sequence",), "already stored",
    ),
    Mutant(
        "reserve_not_all_or_nothing", PAGED,
        (("            for block in new:\n                self.pool.decref(block)\n            raise",
          "            raise"),),
        "a reserve that runs out re-raises but keeps the blocks it allocated: they leak",
        ("paged_sequence",), "all or nothing",
    ),
    Mutant(
        "slots_count_from_length", PAGED,
        (("positions = np.arange(start, start + n)", "positions = np.arange(self.length, self.length + n)"),),
        "slots maps positions from length instead of from start",
        ("paged_sequence",), "not at start",
    ),
    Mutant(
        "slots_without_bounds_check", PAGED,
        (("if start < 0 or n < 0 or start + n > len(self.blocks) * size:", "if start < 0 or n < 0:"),),
        "slots does not check the reserved blocks: numpy raises IndexError instead of ValueError",
        ("paged_sequence",), "slots must raise ValueError",
    ),
    Mutant(
        "slots_accepts_negative_count", PAGED,
        (("if start < 0 or n < 0 or start + n > len(self.blocks) * size:",
          "if start < 0 or start + n > len(self.blocks) * size:"),),
        "slots(start, n) with a negative n returns empty arrays instead of raising ValueError",
        ("paged_sequence",), "a negative n must raise ValueError",
    ),
    Mutant(
        "sequences_share_one_block_list", PAGED,
        (("    def __init__(self, pool: BlockPool) -> None:\n        # BEGIN SOLUTION\n        self.pool = pool\n"
          "        self.blocks: list[int] = []\n",
          "    blocks: list[int] = []\n\n    def __init__(self, pool: BlockPool) -> None:\n        # BEGIN SOLUTION\n"
          "        self.pool = pool\n"),),
        "blocks is a class attribute instead of being set in __init__, so every sequence appends to one list",
        ("paged_sequence",), "expected blocks [] and length 0",
    ),
    Mutant(
        "free_keeps_length", PAGED, (("        self.blocks = []\n        self.length = 0\n", "        self.blocks = []\n"),),
        "free gives the blocks back but leaves length, so a reused sequence starts past its blocks",
        ("paged_sequence",), "free must set length = 0",
    ),
    Mutant(
        "free_forgets_decref", PAGED,
        (("        for block in reversed(self.blocks):\n            self.pool.decref(block)\n", ""),),
        "free empties the list without decref'ing: every block leaks",
        ("paged_sequence",), "free must decref every block",
    ),
    # block_hashes
    Mutant(
        "hashes_not_chained", PREFIX, (("        previous = digest.encode()\n", ""),),
        "each block is hashed alone (with the parent), so equal blocks at different places collide",
        ("block_hashes",), "not chained",
    ),
    Mutant(
        "hashes_through_python_hash", PREFIX,
        ((HASH_STEP, "digest = hashlib.sha256(str(hash(previous + values[start:start + block_size].tobytes()))"
                     ".encode()).hexdigest()"),),
        "digests go through Python's hash(), salted per process: another process gets other digests",
        ("block_hashes",), "PYTHONHASHSEED",
    ),
    Mutant(
        "partial_block_hashed", PREFIX,
        (("range(0, len(values) - block_size + 1, block_size)", "range(0, len(values), block_size)"),),
        "the trailing partial block gets a digest",
        ("block_hashes",), "partial block got a digest",
    ),
    Mutant(
        "hashes_depend_on_dtype", PREFIX, (('values = tokens.astype("<i8")', "values = tokens"),),
        "hashes the raw bytes of whatever dtype came in: an int32 array and a list differ",
        ("block_hashes",), "depend on the dtype",
    ),
    Mutant(
        "hashes_refuse_negative_ids", PREFIX,
        (('    values = tokens.astype("<i8")\n',
          '    if tokens.size and tokens.min() < 0:\n        raise ValueError("token ids must be >= 0")\n'
          '    values = tokens.astype("<i8")\n'),),
        "block_hashes refuses negative token ids, which are integers like any other",
        ("block_hashes",), "negative integers are integers",
        rule="prefix_cache.py, block_hashes: 'Negative integers are integers: they are hashed like any other value'",
    ),
    Mutant(
        "hashes_drop_the_sign", PREFIX, (('values = tokens.astype("<i8")', 'values = np.abs(tokens).astype("<i8")'),),
        "block_hashes hashes the ids' absolute values: -1 and 1 share a digest",
        ("block_hashes",), "sign included",
    ),
    Mutant(
        "parent_ignored", PREFIX, (('previous = b"" if parent is None else parent.encode()', 'previous = b""'),),
        "the parent is ignored, so a continued chain restarts from nothing",
        ("block_hashes",), "parent is ignored",
    ),
    # PrefixCache
    Mutant(
        "lookup_skips_misses", PREFIX,
        (("                break\n            found.append", "                continue\n            found.append"),),
        "lookup collects every cached hash instead of stopping at the first miss",
        ("prefix_cache",), "stops at the first miss",
    ),
    Mutant(
        "register_increfs_cached_blocks", PREFIX,
        (("            if digest not in self._blocks:\n                self.pool.incref(block)\n",
          "            self.pool.incref(block)\n            if digest not in self._blocks:\n"),),
        "register increfs every block, also those whose hash is cached already: the references leak",
        ("prefix_cache",), "skip a hash that is already cached",
    ),
    Mutant(
        "cache_len_counts_pool_blocks_in_use", PREFIX,
        (("        return len(self._blocks)\n", "        return self.pool.n_blocks - self.pool.num_free\n"),),
        "len(cache) counts every block in use in the pool, not the blocks the cache holds",
        ("prefix_cache",), "len(cache) is",
    ),
    Mutant(
        "caches_share_one_table", PREFIX,
        (("    def __init__(self, pool: BlockPool) -> None:\n        # BEGIN SOLUTION\n        self.pool = pool\n"
          "        self._blocks: dict[str, int] = {}\n",
          "    _blocks: dict[str, int] = {}\n\n    def __init__(self, pool: BlockPool) -> None:\n"
          "        # BEGIN SOLUTION\n        self.pool = pool\n"),),
        "the hash table is a class attribute instead of being made in __init__, so every PrefixCache shares it",
        ("prefix_cache",), "only register adds entries",
    ),
    Mutant(
        "clear_forgets_decref", PREFIX,
        (("        for block in self._blocks.values():\n            self.pool.decref(block)\n", ""),),
        "clear forgets the entries without giving back the cache's references",
        ("prefix_cache",), "clear must decref",
    ),
    # prefill
    Mutant(
        "prefill_copies_cached_blocks", PREFIX,
        (("    for block in shared:\n        pool.incref(block)\n    seq.blocks = list(shared)\n",
          "    seq.blocks = [pool.allocate() for _ in shared]\n"
          "    for source, copy in zip(shared, seq.blocks):\n"
          "        pool.k[copy] = pool.k[source]\n"
          "        pool.v[copy] = pool.v[source]\n"),),
        "the cached prefix is copied into new blocks instead of shared: right logits, no memory saved",
        ("prefill",), "never copied",
    ),
    Mutant(
        "prefill_shares_without_incref", PREFIX, (("    for block in shared:\n        pool.incref(block)\n", ""),),
        "shared blocks join the sequence without a reference of their own, so freeing it frees the cache's",
        ("prefill",), "increfs each cached block it shares",
    ),
    Mutant(
        "prefill_never_recomputes", PREFIX,
        (("    if len(shared) * pool.block_size == len(tokens):\n        shared = shared[:-1]\n", ""),),
        "a fully cached prompt leaves no token to compute, so paged_step gets none",
        ("prefill",), "must not use the last cached block",
    ),
    Mutant(
        "prefill_never_registers", PREFIX, (("    prefix_cache.register(hashes, seq.blocks[:len(hashes)])\n", ""),),
        "computed blocks are never registered, so no later request finds them",
        ("prefill",), "nothing was reused",
    ),
    # LRUCache, LFUCache, make_cache
    Mutant(
        "lru_match_does_not_refresh", PREFIX,
        (("            self._order.move_to_end(block)\n            n += 1\n", "            n += 1\n"),),
        "LRU's match counts the hits but does not make them most recently used",
        ("eviction",), "matched blocks must count as used now",
    ),
    Mutant(
        "lru_victim_by_scan", PREFIX,
        (
            ("self._order: OrderedDict[int, None] = OrderedDict()",
             "self._order: dict[int, int] = {}\n        self._clock = 0"),
            ("            self._order.move_to_end(block)\n            n += 1\n",
             "            self._clock += 1\n            self._order[block] = self._clock\n            n += 1\n"),
            ("                self._order.move_to_end(block)\n                continue\n",
             "                self._clock += 1\n                self._order[block] = self._clock\n                continue\n"),
            ("self._order.popitem(last=False)", "del self._order[min(self._order, key=self._order.get)]"),
            ("            self._order[block] = None\n",
             "            self._clock += 1\n            self._order[block] = self._clock\n"),
        ),
        "LRU keeps a timestamp per block and finds the victim with min() over all of them: right order, "
        "O(capacity) per eviction",
        ("eviction",), "did not finish within",
        # The guards' inserts would take minutes: stopped at 3 s, not 10, twice per mode.
        call_timeout=3.0,
    ),
    Mutant(
        "lru_victim_by_dict_iter", PREFIX,
        (
            ("self._order: OrderedDict[int, None] = OrderedDict()", "self._order: dict[int, None] = {}"),
            ("            self._order.move_to_end(block)\n            n += 1\n",
             "            self._order[block] = self._order.pop(block)\n            n += 1\n"),
            ("                self._order.move_to_end(block)\n                continue\n",
             "                self._order[block] = self._order.pop(block)\n                continue\n"),
            ("self._order.popitem(last=False)", "del self._order[next(iter(self._order))]"),
        ),
        "LRU keeps its recency order in a plain dict and takes the victim with next(iter(dict)), which skips "
        "every entry deleted from the front since the dict last resized: right order, well within the time "
        "limit, but O(capacity) per eviction",
        ("eviction",), "must not grow with the capacity",
    ),
    Mutant(
        "lru_contains_counts_as_use", PREFIX,
        (("        return block in self._order\n",
          "        if block not in self._order:\n            return False\n"
          "        self._order.move_to_end(block)\n        return True\n"),),
        "LRU's `in` moves the block to most recently used, so merely asking changes the eviction order",
        ("eviction",), "must not count as a use",
    ),
    Mutant(
        "lru_len_counter_not_decremented", PREFIX,
        (
            ("self._order: OrderedDict[int, None] = OrderedDict()",
             "self._order: OrderedDict[int, None] = OrderedDict()\n        self._size = 0"),
            ("            self._order[block] = None\n", "            self._order[block] = None\n            self._size += 1\n"),
            ("        return len(self._order)\n", "        return self._size\n"),
        ),
        "LRUCache keeps its own count of blocks, raised on every new block and never lowered on an eviction",
        ("eviction",), "the number of blocks it holds",
    ),
    Mutant(
        "lfu_len_counts_use_groups", PREFIX, (("return len(self._uses)", "return len(self._buckets)"),),
        "LFUCache's len counts the groups of blocks with one use count, not the blocks",
        ("eviction",), "the number of blocks it holds",
    ),
    Mutant(
        "lfu_contains_looks_in_use_groups", PREFIX, (("return block in self._uses", "return block in self._buckets"),),
        "LFUCache's `in` looks the block up among the use counts instead of the cached blocks",
        ("eviction",), "the cache holds",
    ),
    Mutant(
        "lfu_min_count_not_moved", PREFIX,
        (("            if self._min_uses == uses:\n                self._min_uses = uses + 1\n", ""),),
        "when the last block with the fewest uses gains a use, the fewest-uses count is not moved up",
        ("eviction",), "raised KeyError",
    ),
    Mutant(
        "lfu_match_does_not_count", PREFIX, (("            self._use(block)\n            n += 1\n", "            n += 1\n"),),
        "LFU's match counts the hits but adds no use to them",
        ("eviction",), "the matches gave",
    ),
    Mutant(
        "lfu_ties_to_most_recent", PREFIX,
        (("victim, _ = bucket.popitem(last=False)", "victim, _ = bucket.popitem(last=True)"),),
        "among the least used blocks LFU evicts the most recently used",
        ("eviction",), "the tie goes to the least recently used",
    ),
    Mutant(
        "lfu_remembers_evicted_counts", PREFIX,
        (
            ("        self._min_uses = 0\n        # END SOLUTION",
             "        self._min_uses = 0\n        self._past: dict[int, int] = {}\n        # END SOLUTION"),
            ("            del self._uses[victim]", "            self._past[victim] = self._uses.pop(victim)"),
            ("        self._uses[block] = 1\n        self._buckets.setdefault(1, OrderedDict())[block] = None\n"
             "        self._min_uses = 1",
             "        uses = self._past.pop(block, 0) + 1\n        self._uses[block] = uses\n"
             "        self._buckets.setdefault(uses, OrderedDict())[block] = None\n"
             "        self._min_uses = min(self._buckets)"),
        ),
        "LFU keeps an evicted block's use count and resumes it when the block comes back",
        ("eviction",), "count is forgotten",
    ),
    Mutant(
        "lfu_insert_of_present_block_not_counted", PREFIX,
        (("            if block in self._uses:\n                self._use(block)\n            else:",
          "            if block in self._uses:\n                continue\n            else:"),),
        "LFU's insert skips blocks already present instead of counting a use",
        ("eviction",), "counts as a use",
    ),
    Mutant(
        "make_cache_defaults_to_lru", PREFIX,
        (('        raise ValueError(f"unknown policy {policy!r}: expected \'lru\' or \'lfu\'")',
          "        return LRUCache(capacity)"),),
        "an unknown policy silently gives an LRU cache",
        ("eviction",), "the policy must be 'lru' or 'lfu'",
    ),
    # hit_ratio
    Mutant(
        "hit_ratio_ignores_capacity", PREFIX, (("cache = make_cache(capacity, policy)", "cache = make_cache(None, policy)"),),
        "the replay's cache is unlimited whatever the capacity, so nothing is ever evicted",
        ("hit_ratio",), "capacity never reached the cache",
    ),
    Mutant(
        "hit_ratio_ignores_policy", PREFIX, (("cache = make_cache(capacity, policy)", 'cache = make_cache(capacity, "lru")'),),
        "the replay always uses LRU, whatever the policy",
        ("hit_ratio",), "the other policy ran",
    ),
    Mutant(
        "hit_ratio_empty_trace_first", PREFIX,
        (("    cache = make_cache(capacity, policy)\n    hit = total = 0\n",
          "    if not trace:\n        return 0.0\n    cache = make_cache(capacity, policy)\n    hit = total = 0\n"),),
        "hit_ratio returns 0.0 for an empty trace before checking the policy and capacity",
        ("hit_ratio",), "checked first",
        rule="prefix_cache.py, hit_ratio: 'The policy and capacity are checked first'",
    ),
    Mutant(
        "hit_ratio_counts_whole_blocks", PREFIX, ((HIT_LINE, "hit += n * block_size"),),
        "a fully matched request hits its whole last block, more tokens than it has",
        ("hit_ratio",), "not capped at its input length",
    ),
    Mutant(
        "hit_ratio_inserts_before_matching", PREFIX,
        (
            ("        n = cache.match(request.blocks)\n", "        cache.insert(request.blocks)\n        n = cache.match(request.blocks)\n"),
            ("        total += request.input_len\n        cache.insert(request.blocks)\n", "        total += request.input_len\n"),
        ),
        "each request is inserted before it is matched, so it hits itself",
        ("hit_ratio",), "inserted before they are matched",
    ),
    Mutant(
        "hit_ratio_ignores_block_size", PREFIX, ((HIT_LINE, "hit += min(n * BLOCK, request.input_len)"),),
        "hit tokens are counted with the trace's 512-token BLOCK, not the block_size argument",
        ("hit_ratio",), "block_size is ignored",
    ),
    Mutant(
        "hit_ratio_mean_of_request_ratios", PREFIX,
        ((HIT_LINE + "\n        total += request.input_len",
          HIT_LINE + " / request.input_len\n        total += 1"),),
        "the ratio is the mean of per-request ratios instead of token-weighted",
        ("hit_ratio",), "a mean of per-request ratios",
    ),
    # Found by a mutation sweep (`make mutate`): behaviour changes the tests used to miss.
    Mutant(
        "hash_skips_last_token_of_block", PREFIX,
        ((HASH_STEP, HASH_STEP.replace("values[start:start + block_size]", "values[start:start + block_size - 1]")),),
        "each digest leaves out the last token of its block, so prefixes differing only there collide",
        ("block_hashes",), "do not cover every token of their block",
    ),
    Mutant(
        "hash_skips_first_token_of_block", PREFIX,
        ((HASH_STEP, HASH_STEP.replace("values[start:start + block_size]", "values[start + 1:start + block_size]")),),
        "each digest leaves out the first token of its block, so prefixes differing only there collide",
        ("block_hashes",), "do not cover every token of their block",
    ),
    Mutant(
        "prefill_keeps_references_on_out_of_blocks", PREFIX,
        (("    try:\n        logits = paged_step(params, cfg, [seq], [tokens[seq.length:]])[0]\n"
          "    except BaseException:\n"
          "        # All or nothing: give back the shared blocks' increfs and whatever reserve kept.\n"
          "        seq.free()\n        raise\n",
          "    logits = paged_step(params, cfg, [seq], [tokens[seq.length:]])[0]\n"),),
        "a prefill that runs out of blocks re-raises but keeps its increfs of the shared blocks: references "
        "nobody owns, so those blocks are never freed",
        ("prefill",), "gives back every reference it took",
    ),
    Mutant(
        "hit_ratio_of_empty_trace_divides_by_zero", PREFIX,
        (("return hit / total if total else 0.0", "return hit / total"),),
        "an empty trace (no tokens) raises ZeroDivisionError instead of returning 0.0",
        ("hit_ratio",), "has hit ratio 0.0",
    ),
    Mutant(
        "pool_refuses_one_block", PAGED,
        (("if n_blocks < 1 or block_size < 1:", "if n_blocks <= 1 or block_size < 1:"),),
        "BlockPool rejects a valid pool of one block",
        ("block_pool",), "a pool of one block is valid",
    ),
    Mutant(
        "slots_accepts_negative_start", PAGED,
        (("if start < 0 or n < 0 or start + n > len(self.blocks) * size:", "if n < 0 or start + n > len(self.blocks) * size:"),),
        "slots(-1, n) answers (numpy reads blocks[-1]) instead of raising ValueError",
        ("paged_sequence",), "a negative start must raise ValueError",
    ),
    Mutant(
        "slots_rejects_zero_positions", PAGED,
        (("if start < 0 or n < 0 or start + n > len(self.blocks) * size:", "if start < 0 or n < 1 or start + n > len(self.blocks) * size:"),),
        "slots(start, 0) raises instead of returning two empty int arrays",
        ("paged_sequence",), "must return two empty int arrays",
    ),
    Mutant(
        "slots_float_ids_when_empty", PAGED,
        (("np.asarray(self.blocks, dtype=np.int64)[positions // size]", "np.asarray(self.blocks)[positions // size]"),),
        "slots builds the ids from the block list without a dtype: float64 when the sequence holds no block",
        ("paged_sequence",), "ids are ints even for an empty sequence",
    ),
    Mutant(
        "allocate_returns_numpy_int", PAGED,
        (("block = self._free.popleft()", "block = np.int64(self._free.popleft())"),),
        "allocate hands out a numpy.int64 instead of an int id",
        ("block_pool",), "allocate hands out an int id",
    ),
    Mutant(
        "refcount_accepts_bool_id", PAGED,
        (("        check_block_id(block, self.n_blocks)\n        return self._refs[block]",
          "        if not 0 <= block < self.n_blocks:\n            raise ValueError(f\"unknown block {block}\")\n"
          "        return self._refs[block]"),),
        "refcount range-checks the id instead of calling check_block_id, so refcount(True) answers for block 1",
        ("block_pool",), "not an integer id",
    ),
    Mutant(
        "free_decrefs_oldest_first", PAGED,
        (("for block in reversed(self.blocks):", "for block in self.blocks:"),),
        "free decrefs the blocks oldest first instead of the newest first",
        ("paged_sequence",), "free decrefs every block the newest first",
    ),
    Mutant(
        "hashes_decimal_text_without_separator", PREFIX,
        ((HASH_STEP, 'digest = hashlib.sha256(previous + "".join(map(str, values[start:start + block_size].tolist()))'
                     '.encode()).hexdigest()'),),
        "tokens are hashed as decimal text without a separator, so blocks [1, 23] and [12, 3] share a digest",
        ("block_hashes",), "equal hashes must mean equal prefixes",
    ),
    Mutant(
        "prefill_steps_block_by_block", PREFIX,
        (("logits = paged_step(params, cfg, [seq], [tokens[seq.length:]])[0]",
          "logits = np.concatenate([paged_step(params, cfg, [seq], [tokens[start:start + pool.block_size]])[0]\n"
          "                                 for start in range(seq.length, len(tokens), pool.block_size)])"),),
        "prefill runs paged_step once per uncached block instead of once for all the uncached tokens",
        ("prefill",), "through `paged_step`, once",
    ),
]
