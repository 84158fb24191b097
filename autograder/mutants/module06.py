"""Module 6's bug catalog: mistakes students make in kv_memory.py and block_manager.py, as edits of the
solution.

tests/test_suites.py applies each one to `solutions/module06/` and checks that the tests of the tasks
listed (and only those) catch it, with a message containing `expect`. A block-manager bug usually
costs the serving task too (the engine runs the same manager), which the catalog lists where it does.
"""
from __future__ import annotations

from autograder.mutants import Mutant

MEMORY = "kv_memory.py"
MANAGER = "block_manager.py"

MLA_LINE = 'return _field(config, "kv_lora_rank") + _field(config, "qk_rope_head_dim")'
TOUCH = """        for block in hits:
            if block.ref_cnt == 0:
                self.free_queue.remove(block)
            block.ref_cnt += 1
"""
COUNT = """        if self.enable_caching:
            self.prefix_cache_queries += len(tokens)
            self.prefix_cache_hits += num_computed
"""

MUTANTS = [
    # kv_memory.py
    Mutant("mla_counts_k_and_v", MEMORY, ((MLA_LINE, MLA_LINE.replace("return ", "return 2 * (") + ")"),),
           "MLA's latent counted twice, as if it were a K and a V", ("kv_memory",), "no factor 2"),
    Mutant("mla_without_rope_key", MEMORY, ((MLA_LINE, 'return _field(config, "kv_lora_rank")'),),
           "MLA caches only the latent, forgetting the decoupled RoPE key", ("kv_memory",), "RoPE key"),
    Mutant("mla_treated_as_gqa", MEMORY,
           (('if config.get("kv_lora_rank") is not None:', 'if config.get("kv_lora_rank") is not None and "num_key_value_heads" not in config:'),),
           "a config that lists num_key_value_heads is treated as GQA even with kv_lora_rank (the lab's DeepSeek-V3 mistake)",
           ("kv_memory",), "MLA treated as per-head"),
    Mutant("query_heads_for_kv", MEMORY,
           (('kv_heads = heads if config.get("num_key_value_heads") is None else _field(config, "num_key_value_heads")', "kv_heads = heads"),),
           "num_attention_heads used for the KV heads: GQA and MQA counted as MHA", ("kv_memory",), "num_key_value_heads"),
    Mutant("head_dim_field_ignored", MEMORY,
           (('if config.get("head_dim") is None:', "if True:"),),
           "head_dim always derived from hidden_size // num_attention_heads", ("kv_memory",), "head_dim is given"),
    Mutant("no_factor_two_for_k_and_v", MEMORY, (("return 2 * kv_heads * head_dim", "return kv_heads * head_dim"),),
           "only K (or only V) counted", ("kv_memory",), "factor 2 is missing"),
    Mutant("dtype_bytes_fixed", MEMORY,
           (('return _field(config, "num_hidden_layers") * kv_values_per_token_per_layer(config) * dtype_bytes',
             'return _field(config, "num_hidden_layers") * kv_values_per_token_per_layer(config) * 2'),),
           "dtype_bytes checked but never used: always BF16", ("kv_memory",), "dtype_bytes"),
    Mutant("gib_as_decimal_gb", MEMORY, (("* seq_len * batch / 2**30", "* seq_len * batch / 1e9"),),
           "GiB computed as 10**9 bytes", ("kv_memory",), "2**30"),
    Mutant("max_batch_rounds_up", MEMORY,
           (("return max(0, gpu_bytes - weight_bytes) // per_sequence", "return -(-max(0, gpu_bytes - weight_bytes) // per_sequence)"),),
           "a partial sequence counted as one more", ("kv_memory",), "rounded down"),
    Mutant("max_batch_negative", MEMORY,
           (("return max(0, gpu_bytes - weight_bytes) // per_sequence", "return (gpu_bytes - weight_bytes) // per_sequence"),),
           "weights larger than the GPU give a negative batch", ("kv_memory",), "nothing fits"),
    # FreeBlockQueue
    Mutant("queue_count_starts_at_length", MANAGER,
           (("        self.num_free_blocks = 0\n        for block in blocks:", "        self.num_free_blocks = len(blocks)\n        for block in blocks:"),),
           "the constructor sets the count and then counts every append again", ("free_queue", "prefix_hits", "eviction", "serving"),
           "num_free_blocks"),
    Mutant("popleft_takes_the_tail", MANAGER,
           (("block = self._head.next_free_block\n        assert block is not None\n        self.remove(block)",
             "block = self._tail.prev_free_block\n        assert block is not None\n        self.remove(block)"),),
           "popleft evicts the most recently freed block (MRU) instead of the least", ("free_queue", "prefix_hits", "eviction", "serving"),
           "expected the head"),
    Mutant("remove_keeps_links", MANAGER,
           (("        block.prev_free_block = block.next_free_block = None\n        self.num_free_blocks -= 1",
             "        self.num_free_blocks -= 1"),),
           "remove unlinks the block from its neighbours but leaves its own links set", ("free_queue", "prefix_hits", "eviction", "serving"),
           "clear the block's links"),
    Mutant("remove_forgets_count", MANAGER,
           (("        block.prev_free_block = block.next_free_block = None\n        self.num_free_blocks -= 1",
             "        block.prev_free_block = block.next_free_block = None"),),
           "remove (and so popleft) never decrements num_free_blocks", ("free_queue", "prefix_hits", "eviction", "serving"),
           "num_free_blocks"),
    Mutant("append_at_the_head", MANAGER,
           (("""        last = self._tail.prev_free_block
        assert last is not None
        last.next_free_block = block
        block.prev_free_block = last
        block.next_free_block = self._tail
        self._tail.prev_free_block = block""", """        first = self._head.next_free_block
        assert first is not None
        first.prev_free_block = block
        block.next_free_block = first
        block.prev_free_block = self._head
        self._head.next_free_block = block"""),),
           "freed blocks go to the head, so the most recently freed is evicted first", ("free_queue", "prefix_hits", "eviction", "serving"),
           "append adds at the tail"),
    Mutant("block_ids_tail_first", MANAGER, (("        return ids\n", "        return ids[::-1]\n"),),
           "block_ids lists the queue tail first", ("free_queue", "prefix_hits", "eviction"), "head first"),
    # block_hashes, allocate
    Mutant("hashes_not_chained", MANAGER, (("        previous = digest.encode()\n", ""),),
           "each block hashed alone, so equal blocks after different prefixes collide", ("prefix_hits", "eviction", "serving"),
           "chain"),
    Mutant("fully_cached_prompt_not_recomputed", MANAGER,
           (("for digest in hashes[:(len(tokens) - 1) // size]:", "for digest in hashes:"),),
           "a fully cached prompt reports every token cached, leaving nothing to compute", ("prefix_hits", "serving"),
           "recomputes its last block"),
    Mutant("hits_not_touched", MANAGER, ((TOUCH, "        for block in hits:\n            block.ref_cnt += 1\n"),),
           "a hit on a free cached block leaves it in the free queue, where it can be evicted while in use",
           ("prefix_hits", "eviction", "serving"), "touch"),
    Mutant("touched_hits_not_counted_as_taken", MANAGER,
           (("if n_new > self.num_free_blocks - touched_free:", "if n_new > self.num_free_blocks:"),),
           "the room check counts free cached hits as free blocks for new ones too", ("prefix_hits", "serving"),
           "count the hit blocks"),
    Mutant("counters_count_refused_admissions", MANAGER,
           ((COUNT, ""), ("        if n_new > self.num_free_blocks - touched_free:\n            return None",
                          "        if self.enable_caching:\n            self.prefix_cache_queries += len(tokens)\n"
                          "            self.prefix_cache_hits += len(hits) * size\n"
                          "        if n_new > self.num_free_blocks - touched_free:\n            return None")),
           "queries and hits are counted before the room check, so a refused admission (retried later) counts twice",
           ("prefix_hits",), "a failed one (None)"),
    Mutant("caching_off_still_hits", MANAGER,
           (("hashes = block_hashes(tokens, size) if self.enable_caching else []", "hashes = block_hashes(tokens, size)"),),
           "enable_caching=False still hashes and looks up prompts", ("prefix_hits", "serving"), "enable_caching=False"),
    Mutant("duplicate_hash_overwrites", MANAGER,
           (("        if digest not in self._cached:\n            self._cached[digest] = block\n            block.block_hash = digest\n",
             "        self._cached[digest] = block\n        block.block_hash = digest\n"),),
           "a recomputed block takes over a hash another block already caches, leaving two blocks with one hash",
           ("prefix_hits", "serving"), "stays unhashed"),
    # free, append_tokens, eviction
    Mutant("free_in_position_order", MANAGER, (("for block in reversed(blocks):", "for block in blocks:"),),
           "a finished request's blocks are freed head first, so its shared prefix is evicted before its tail",
           ("prefix_hits", "eviction"), "reverse order"),
    Mutant("eviction_keeps_the_hash", MANAGER,
           (("""        if block.block_hash is not None:
            if self._cached.get(block.block_hash) is block:
                del self._cached[block.block_hash]
            block.block_hash = None
""", ""),),
           "a reallocated block stays in the prefix cache under its old hash: a later hit reads someone else's KV",
           ("prefix_hits", "eviction", "serving"), "loses its old hash"),
    Mutant("eager_eviction_on_free", MANAGER,
           (("            if block.ref_cnt == 0:\n                self.free_queue.append(block)\n",
             "            if block.ref_cnt == 0:\n                self.free_queue.append(block)\n"
             "                if block.block_hash is not None:\n                    del self._cached[block.block_hash]\n"
             "                    block.block_hash = None\n"),),
           "a freed block leaves the prefix cache at once (lecture 7 without the cache's reference): no lazy eviction",
           ("prefix_hits", "eviction", "serving"), "keeps its hash until it is reallocated"),
    Mutant("decode_blocks_never_hashed", MANAGER,
           (("            for index, digest in enumerate(more, start=len(hashes)):\n                self._cache_block(blocks[index], digest)\n", ""),),
           "append_tokens never caches the blocks that decoding fills", ("eviction", "serving"), "when a block fills"),
    Mutant("decode_hashes_unchained", MANAGER,
           (("parent = hashes[-1] if hashes else None", "parent = None"),),
           "a block filled by decoding is hashed without its parent's hash", ("eviction", "serving"), "chained sha-256"),
    Mutant("append_needs_a_spare_block", MANAGER,
           (("        if n_new > self.num_free_blocks:\n            return None\n        new = ",
             "        if n_new >= self.num_free_blocks:\n            return None\n        new = "),),
           "append_tokens refuses when exactly enough blocks are free", ("eviction", "serving"), "must succeed"),
    Mutant("queue_starts_reversed", MANAGER,
           (("self.free_queue = FreeBlockQueue(self.blocks)", "self.free_queue = FreeBlockQueue(self.blocks[::-1])"),),
           "the free queue starts in reverse id order", ("prefix_hits", "eviction"), "free queue"),
]
