"""Module 6's bug catalog: mistakes students make in kv_memory.py, block_manager.py and kv_connector.py, as edits of the
solution.

tests/suites/test_suites.py applies each one to `solutions/module06/` and checks that the tests of the tasks
listed (and only those) catch it, with a message containing `expect`. A block-manager bug usually
costs the serving task too (the engine runs the same manager), which the catalog lists where it does.

Over 400 lines on purpose: it is data, one list of mutants that the tests of the tests read whole; its
length is the catalog's size.
"""
from __future__ import annotations

from autograder.mutants import Checks, Mutant

MEMORY = "kv_memory.py"
MANAGER = "block_manager.py"
CONNECTOR = "kv_connector.py"
CONNECTOR_TASKS = ("kv_connector",)

DIGEST = "digest = hashlib.sha256(parent + values[start:start + chunk_size].tobytes()).hexdigest()"
CHECK_CRC = "    if zlib.crc32(body) != checksum:\n        return None\n"
CHECK_NAME = "if body[shape_end:shape_end + name_length] != fingerprint.encode():"
RUN_LOOP = "            if not exists:\n                break\n            run += 1\n"
NEEDED = "        needed = keys[:-(-n // self.chunk_size)]\n"
COUNT_LOADED = "            self.bytes_loaded += len(value)\n"
HITS = "        self.hits += len(needed)\n"


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

# A manager bug fails the serving task too; the whole suite is too long to run once per mutant.
CHECKS = Checks(min_mutants=20, run_seconds=600, mutants_run_own_tasks=True)

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
    Mutant("head_dim_from_kv_heads", MEMORY,
           (('head_dim = _field(config, "hidden_size") // heads', 'head_dim = _field(config, "hidden_size") // kv_heads'),),
           "an absent head_dim derived from the KV heads: on a GQA config the same count as using the query heads",
           ("kv_memory",), "not hidden_size // num_key_value_heads"),
    Mutant("absent_kv_heads_taken_as_one", MEMORY,
           (('kv_heads = heads if config.get("num_key_value_heads") is None', 'kv_heads = 1 if config.get("num_key_value_heads") is None'),),
           "an absent num_key_value_heads read as MQA (1) instead of MHA", ("kv_memory",),
           "as many KV heads as num_attention_heads"),
    Mutant("counts_accept_bool", MEMORY,
           (("    if isinstance(value, bool) or not isinstance(value, int) or value < 1:\n",
             "    if not isinstance(value, int) or value < 1:\n"),),
           "True is taken as the count 1 (bool is an int subclass)", ("kv_memory",), "bool is not an int"),
    Mutant("max_batch_accepts_bool_weights", MEMORY,
           (("if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:",
             "if not isinstance(weight_bytes, int) or weight_bytes < 0:"),),
           "max_batch takes weight_bytes=False as 0 bytes of weights", ("kv_memory",), "bool is not an int"),
    Mutant("max_batch_zero_before_checks", MEMORY,
           (("    per_sequence = kv_bytes_per_token(config, dtype_bytes) * seq_len\n",
             "    if gpu_bytes <= weight_bytes:\n        return 0\n"
             "    per_sequence = kv_bytes_per_token(config, dtype_bytes) * seq_len\n"),),
           "max_batch answers 0 when the weights do not fit before checking the config and dtype_bytes",
           ("kv_memory",), "checked before anything is computed"),
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
    Mutant("remove_scans_the_queue", MANAGER,
           (("        if before is None or after is None:\n",
             "        if before is None or after is None or block.block_id not in self.block_ids():\n"),),
           "remove checks membership by scanning the queue: O(n) per remove", ("free_queue", "eviction"),
           "remove is not O(1)",
           # The pool guard's calls would each run to the 10 s limit: stopped at 1 s (the reference's
           # take 0.25-0.5 s), in both modes. The free-queue guards stop soon after their own limits.
           call_timeout=1.0),
    Mutant("remove_walks_from_the_tail", MANAGER,
           (("        before, after = block.prev_free_block, block.next_free_block\n"
             "        if before is None or after is None:\n",
             "        node = self._tail.prev_free_block\n        while node is not None and node is not block:\n"
             "            node = node.prev_free_block\n"
             "        before, after = block.prev_free_block, block.next_free_block\n"
             "        if node is None or before is None or after is None:\n"),),
           "remove walks the links from the tail to check that the block is in the queue: O(n) per remove "
           "(and per popleft), however cheap each step", ("free_queue", "eviction"),
           "remove is not O(1)",
           # As remove_scans_the_queue: the pool guard's calls would each run to the 10 s limit.
           call_timeout=1.0,
        rule="block_manager.py: 'a hit on a block that is in the queue takes it out of the middle, in O(1)'",
    ),
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
    Mutant("cached_free_blocks_not_counted", MANAGER,
           (("        return self.free_queue.num_free_blocks\n",
             "        return sum(1 for block in self.blocks if block.ref_cnt == 0 and block.block_hash is None)\n"),),
           "num_free_blocks leaves out cached blocks with ref_cnt 0, so admissions and appends that could evict them are refused",
           ("prefix_hits", "eviction", "serving"), "cached blocks with ref_cnt 0 are free too"),
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
    Mutant("block_hashes_hash_the_given_dtype", MANAGER,
           (('    values = tokens.astype("<i8")\n    digests: list[str] = []\n', '    values = tokens\n    digests: list[str] = []\n'),),
           "block_hashes hashes the tokens' bytes in the dtype they came in: an int32 array gives other digests",
           ("prefix_hits",), "int64",
           rule="block_manager.py, block_hashes: 'The digests depend only on the integer values (list, tuple or ndarray of any integer dtype)'"),
    Mutant("append_room_check_before_validation", MANAGER,
           (("        tokens = check_tokens(tokens)\n        blocks, held, hashes = self.req_to_blocks[request_id], ",
             "        blocks, held, hashes = self.req_to_blocks[request_id], "),
            ("            return None\n        new = [self._take_free_block() for _ in range(n_new)]\n        blocks.extend(new)\n"
             "        held.extend(tokens)\n",
             "            return None\n        tokens = check_tokens(tokens)\n        new = [self._take_free_block() for _ in range(n_new)]\n"
             "        blocks.extend(new)\n        held.extend(tokens)\n")),
           "append_tokens checks for room before it validates the tokens: bad tokens with no block free give None",
           ("eviction",), "never None",
           rule="block_manager.py, append_tokens: 'Both come before the room check: bad input raises even when no block is free'"),
    Mutant("pops_and_hashes_interleaved", MANAGER,
           (("""        blocks = hits + [self._take_free_block() for _ in range(n_new)]
        for index in range(len(hits), len(hashes)):
            self._cache_block(blocks[index], hashes[index])
""", """        blocks = list(hits)
        for index in range(len(hits), len(hits) + n_new):
            blocks.append(self._take_free_block())
            if index < len(hashes):
                self._cache_block(blocks[index], hashes[index])
"""),),
           "allocate hashes each new block as it pops it: a hash still cached by a block that a later pop evicts is "
           "then cached nowhere", ("prefix_hits",), "pop every new block",
        rule="block_manager.py, allocate: 'Pop every new block before hashing any'",
    ),
    Mutant("hits_capped_one_block_short", MANAGER,
           (("for digest in hashes[:(len(tokens) - 1) // size]:", "for digest in hashes[:len(tokens) // size - 1]:"),),
           "the hit cap is len(tokens) // block_size - 1 blocks: one block short unless the prompt fills its last block",
           ("prefix_hits",), "one block too few"),
    Mutant("block_hashes_refuses_negative_ids", MANAGER,
           (('    values = tokens.astype("<i8")\n    digests: list[str] = []\n',
             '    if tokens.size and tokens.min() < 0:\n        raise ValueError("negative token ids")\n'
             '    values = tokens.astype("<i8")\n    digests: list[str] = []\n'),),
           "block_hashes refuses negative token ids, as allocate does", ("prefix_hits",), "negative",
        rule="block_manager.py, block_hashes: 'Negative integers are integers: block_hashes hashes them like any other value'",
    ),
    Mutant("caching_off_hashes_decode_blocks", MANAGER,
           (("        if self.enable_caching:\n            full = len(held) // size\n",
             "        if True:\n            full = len(held) // size\n"),),
           "with enable_caching=False, append_tokens still hashes the blocks decoding fills", ("prefix_hits",),
           "enable_caching=False"),
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
    Mutant("eviction_keeps_the_cache_entry", MANAGER,
           (("            if self._cached.get(block.block_hash) is block:\n                del self._cached[block.block_hash]\n", ""),),
           "a reallocated block's hash is cleared on the block but stays in the prefix cache's map: a later prompt hits "
           "a block now holding other tokens", ("eviction",), "hash was evicted"),
    Mutant("append_checks_tokens_first", MANAGER,
           (("""        if request_id not in self.req_to_blocks:
            raise KeyError(f"unknown request {request_id!r}")
        tokens = check_tokens(tokens)
""", """        tokens = check_tokens(tokens)
        if request_id not in self.req_to_blocks:
            raise KeyError(f"unknown request {request_id!r}")
"""),),
           "append_tokens checks the tokens before the request id: an unknown id with bad tokens is a ValueError",
           ("eviction",), "checked first"),
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
    Mutant("append_rehashes_every_block", MANAGER,
           (("""            more = block_hashes(held[len(hashes) * size:full * size], size, parent)
            for index, digest in enumerate(more, start=len(hashes)):
                self._cache_block(blocks[index], digest)
            hashes.extend(more)
""", """            for index, digest in enumerate(block_hashes(held[:full * size], size)):
                self._cache_block(blocks[index], digest)
"""),),
           "append_tokens hashes every full block of the request again, so a block left unhashed (its hash was "
           "cached by another block) gets hashed once that other block is evicted", ("eviction",), "ITS tokens make full"),
    Mutant("queue_starts_reversed", MANAGER,
           (("self.free_queue = FreeBlockQueue(self.blocks)", "self.free_queue = FreeBlockQueue(self.blocks[::-1])"),),
           "the free queue starts in reverse id order", ("prefix_hits", "eviction"), "free queue"),
    Mutant(
        "chain_carries_raw_digest", MANAGER, (("        previous = digest.encode()\n", "        previous = bytes.fromhex(digest)\n"),),
        "the chain carries the previous digest as its 32 raw bytes, not its hex text: other digests than "
        "lecture 7's from block 1 on",
        ("prefix_hits", "eviction"), "digest 0's hex text",
    ),
    # kv_connector.py
    Mutant(
        "keys_use_python_hash", CONNECTOR,
        ((DIGEST, "digest = format(hash((parent, values[start:start + chunk_size].tobytes())) % 2**256, '064x')"),),
        "the digest is Python's hash(), salted per process (LMCache's default): keys differ between engines",
        CONNECTOR_TASKS, "different keys in different processes",
    ),
    Mutant(
        "keys_not_chained", CONNECTOR, (("        parent = key.encode()\n", ""),),
        "each key covers its own chunk only, so equal chunks at different places share a key",
        CONNECTOR_TASKS, "not chained",
    ),
    Mutant(
        "fingerprint_in_digest_zero", CONNECTOR, (('    parent = b""\n', "    parent = fingerprint.encode()\n"),),
        "the fingerprint is hashed into digest 0, which covers chunk 0's token ids only",
        CONNECTOR_TASKS, "digest 0 covers chunk 0's token ids only",
    ),
    Mutant(
        "keys_for_partial_chunk", CONNECTOR,
        (("range(0, len(values) - chunk_size + 1, chunk_size)", "range(0, len(values), chunk_size)"),),
        "a trailing partial chunk gets a key too",
        CONNECTOR_TASKS, "partial chunk",
    ),
    Mutant(
        "keys_depend_on_dtype", CONNECTOR, (('    values = values.astype("<i8")\n', ""),),
        "the tokens' bytes are hashed in their own dtype, so an int32 array and a list give other keys",
        CONNECTOR_TASKS, "integer dtype",
    ),
    Mutant(
        "keys_without_fingerprint", CONNECTOR, (('key = f"{fingerprint}:{digest}"', "key = digest"),),
        "the key is the digest alone: two models share keys",
        CONNECTOR_TASKS, "fingerprint",
    ),
    Mutant(
        "chunk_kept_in_memory", CONNECTOR,
        (("    return body + CHECKSUM.pack(zlib.crc32(body))\n",
          "    ticket = b\"KVLT\" + hashlib.sha256(body).digest()\n"
          "    globals().setdefault(\"KEPT\", {})[ticket, fingerprint] = np.array(kv, dtype=dtype)\n"
          "    return ticket\n"),
         ("    data = bytes(data)\n",
          "    data = bytes(data)\n"
          "    kept = globals().get(\"KEPT\", {}).get((data, fingerprint))\n"
          "    if kept is not None:\n"
          "        return kept.copy()\n")),
        "serialize_chunk keeps the array in the process's memory and writes only a ticket naming it: "
        "another engine reading the store finds nothing it can load",
        CONNECTOR_TASKS, "another process",
    ),
    Mutant(
        "connector_sends_tickets", CONNECTOR,
        (("            self.backend.set(key, data)\n",
          "            data = b\"KVLT\" + hashlib.sha256(data).digest()\n"
          "            KVConnector.kept = {**getattr(KVConnector, \"kept\", {}), data: kv[:, :, i * self.chunk_size:(i + 1) * self.chunk_size].copy()}\n"
          "            self.backend.set(key, data)\n"),
         ("            chunk = deserialize_chunk(value, self.fingerprint)\n",
          "            kept = getattr(KVConnector, \"kept\", {}).get(value)\n"
          "            chunk = kept.copy() if kept is not None else deserialize_chunk(value, self.fingerprint)\n")),
        "the connector keeps each chunk in the process's memory and sends the store only a ticket naming it (the "
        "serializer is right): another engine, in another process, finds nothing it can load",
        CONNECTOR_TASKS, "another engine, in another process",
    ),
    Mutant(
        "no_checksum_check", CONNECTOR, ((CHECK_CRC, ""),),
        "the checksum is written but never checked on read: a damaged payload comes back as wrong values",
        CONNECTOR_TASKS, "no checksum",
    ),
    Mutant(
        "fingerprint_not_checked", CONNECTOR, ((CHECK_NAME, "if False:"),),
        "the fingerprint in the header is never compared: another model's KV loads",
        CONNECTOR_TASKS, "fingerprint in the header must be compared",
    ),
    Mutant(
        "fingerprint_prefix_match", CONNECTOR,
        ((CHECK_NAME, "if not fingerprint.encode().startswith(body[shape_end:shape_end + name_length]):"),),
        "the fingerprints are compared as a prefix: a chunk of model 'm' loads for model 'm2'",
        CONNECTOR_TASKS, "compare the fingerprints whole",
    ),
    Mutant(
        "short_data_raises", CONNECTOR,
        (("    if len(data) < FIXED.size + CHECKSUM.size:\n        return None\n", ""),),
        "data shorter than a checksum is not refused first: unpacking it raises instead of a miss",
        CONNECTOR_TASKS, "must never raise",
    ),
    Mutant(
        "serialize_upcasts_to_float64", CONNECTOR,
        (('dtype = kv.dtype.newbyteorder("<")', 'dtype = np.dtype("<f8") if kv.dtype.kind == "f" else kv.dtype'),),
        "every chunk is written as float64: a float32 chunk comes back float64 (and twice the bytes)",
        CONNECTOR_TASKS, "dtype float64; expected float32",
    ),
    Mutant(
        "header_trusted_under_valid_checksum", CONNECTOR,
        (("    if magic != MAGIC or version != VERSION or code not in DTYPES:", "    if code not in DTYPES:"),),
        "deserialize_chunk trusts any data whose checksum matches: an unknown marker or version is read as a chunk",
        CONNECTOR_TASKS, "valid checksum proves only",
    ),
    Mutant(
        "payload_in_fortran_order", CONNECTOR,
        (("payload = np.ascontiguousarray(kv, dtype=dtype).tobytes()", 'payload = kv.astype(dtype).tobytes(order="F")'),),
        "the payload is written in Fortran order and read in C order: the values come back scrambled",
        CONNECTOR_TASKS, "element order",
    ),
    Mutant(
        "payload_pickled", CONNECTOR,
        (("import hashlib\n", "import hashlib\nimport pickle\n"),
         ("payload = np.ascontiguousarray(kv, dtype=dtype).tobytes()",
          "payload = pickle.dumps(np.ascontiguousarray(kv, dtype=dtype))"),
         ("    if int(np.prod(shape, dtype=object)) * dtype.itemsize != payload_length:\n        return None\n", ""),
         ("return np.frombuffer(body, dtype=dtype, offset=shape_end + name_length).reshape(shape)",
          "return pickle.loads(body[shape_end + name_length:])")),
        "the payload is a pickle inside a checked header: reading it runs whatever code the bytes name",
        CONNECTOR_TASKS, "look like a pickle",
    ),
    Mutant(
        "lookup_skips_missing_chunks", CONNECTOR,
        ((RUN_LOOP, "            if exists:\n                run += 1\n"),),
        "lookup counts every stored chunk instead of the run from the start: a missing middle chunk is skipped",
        CONNECTOR_TASKS, "missing middle chunk must end the run",
    ),
    Mutant(
        "lookup_returns_chunks", CONNECTOR, (("        return run * self.chunk_size\n", "        return run\n"),),
        "lookup returns the number of chunks, not of tokens",
        CONNECTOR_TASKS, "lookup counts chunks; it returns tokens",
    ),
    Mutant(
        "misses_not_counted", CONNECTOR, (("        self.misses += len(keys) - run\n", ""),),
        "lookup never counts the chunks it did not find",
        CONNECTOR_TASKS, "connector.misses",
    ),
    Mutant(
        "load_skips_missing_chunk", CONNECTOR,
        (("            if value is None:\n                return None\n            self.bytes_loaded",
          "            if value is None:\n                continue\n            self.bytes_loaded"),),
        "load leaves out a chunk evicted since lookup and returns the others, glued together",
        CONNECTOR_TASKS, "missing chunk must not be skipped",
    ),
    Mutant(
        "load_accepts_any_shape", CONNECTOR,
        (("if chunk is None or chunk.ndim != 5 or chunk.shape[1:3] != (2, self.chunk_size):", "if chunk is None:"),
         ("            elif chunk.shape[0] != kv.shape[0] or chunk.shape[3:] != kv.shape[3:] or chunk.dtype != kv.dtype:\n"
          "                return None\n", "")),
        "load does not check the chunks' shapes: a chunk of another size is glued in",
        CONNECTOR_TASKS, "wrong shape must be refused",
    ),
    Mutant(
        "load_requires_multiple_of_chunk", CONNECTOR,
        (("not 1 <= n <= len(keys) * self.chunk_size:", "n % self.chunk_size or not 1 <= n <= len(keys) * self.chunk_size:"),),
        "load refuses an n that is not a multiple of chunk_size, which an engine asks for when the whole prompt is "
        "stored (it recomputes the last token)",
        CONNECTOR_TASKS, "need not be a multiple of chunk_size",
    ),
    Mutant(
        "load_floors_chunks", CONNECTOR,
        ((NEEDED, "        needed = keys[:n // self.chunk_size]\n"),),
        "load reads n // chunk_size chunks, one short when n is not a multiple of chunk_size",
        CONNECTOR_TASKS, "ceil(n / chunk_size)",
    ),
    Mutant(
        "hits_count_tokens", CONNECTOR, ((HITS, "        self.hits += n\n"),),
        "hits counts tokens loaded instead of chunks",
        CONNECTOR_TASKS, "connector.hits",
    ),
    Mutant(
        "bytes_loaded_counts_arrays", CONNECTOR,
        ((COUNT_LOADED, ""), (HITS, HITS + "        self.bytes_loaded += kv.nbytes\n")),
        "bytes_loaded counts the arrays' bytes, not the bytes received (headers and checksums left out)",
        CONNECTOR_TASKS, "connector.bytes_loaded",
    ),
    Mutant(
        "bytes_loaded_on_success_only", CONNECTOR,
        (("        kv = None\n", "        kv, received = None, 0\n"), (COUNT_LOADED, "            received += len(value)\n"),
         (HITS, HITS + "        self.bytes_loaded += received\n")),
        "bytes_loaded grows only when load succeeds, though a failed load received its values too",
        CONNECTOR_TASKS, "in both cases",
    ),
    Mutant(
        "load_reads_every_chunk", CONNECTOR, ((NEEDED, "        needed = keys\n"),),
        "load reads every full chunk of the prompt, not only the ceil(n / chunk_size) that cover tokens 0 .. n-1",
        CONNECTOR_TASKS, "each at most once",
        rule="kv_connector.py, load: 'Reads only those chunks, each at most once'",
    ),
    Mutant(
        "lookup_reads_values", CONNECTOR, (("            checks.exists(key)\n", "            checks.get(key)\n"),),
        "lookup GETs each chunk to see whether it is there: it moves the values and refreshes the store's LRU order",
        CONNECTOR_TASKS, "reads no values",
        rule="kv_connector.py, lookup: 'Reads no values: only `exists`'",
    ),
    Mutant(
        "store_resends_stored_chunks", CONNECTOR,
        (("            if self.backend.exists(key):\n                continue\n", ""),),
        "store sends every chunk again, even those already in the store",
        CONNECTOR_TASKS, "chunk already in the store is sent again",
    ),
    Mutant(
        "store_always_chunk_zero", CONNECTOR,
        (("kv[:, :, i * self.chunk_size:(i + 1) * self.chunk_size]", "kv[:, :, :self.chunk_size]"),),
        "store writes chunk 0's KV under every key",
        CONNECTOR_TASKS, "wrong slice",
    ),
    Mutant(
        "store_attribute_hides_method", CONNECTOR,
        (("        self.backend = store\n", "        self.store = store\n"),
         ("checks = self.backend.pipeline(", "checks = self.store.pipeline("),
         ("value = self.backend.get(key)", "value = self.store.get(key)"),
         ("            if self.backend.exists(key):", "            if self.store.exists(key):"),
         ("            self.backend.set(key, data)", "            self.store.set(key, data)")),
        "__init__ keeps the store as self.store, which hides the method store",
        CONNECTOR_TASKS, "hides the method",
    ),
]
