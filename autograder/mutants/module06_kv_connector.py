"""Module 6's bug catalog for kv_connector.py (task kv_connector): mistakes students make with chunk keys,
chunk (de)serialization and the connector, as edits of solutions/module06/kv_connector.py.

To be merged into module06's catalog (autograder/mutants/module06.py): `MUTANTS` here is a plain list
of the same `Mutant` records.
"""
from __future__ import annotations

from autograder.mutants import Mutant

FILE = "kv_connector.py"
TASKS = ("kv_connector",)

DIGEST = "digest = hashlib.sha256(parent + values[start:start + chunk_size].tobytes()).hexdigest()"
CHECK_CRC = "    if zlib.crc32(body) != checksum:\n        return None\n"
CHECK_NAME = "if body[shape_end:shape_end + name_length] != fingerprint.encode():"
RUN_LOOP = ("            if not self.backend.exists(key):\n                break\n            run += 1\n")

MUTANTS = [
    Mutant(
        "keys_use_python_hash", FILE,
        ((DIGEST, "digest = format(hash((parent, values[start:start + chunk_size].tobytes())) % 2**256, '064x')"),),
        "the digest is Python's hash(), salted per process (LMCache's default): keys differ between engines",
        TASKS, "different keys in different processes",
    ),
    Mutant(
        "keys_not_chained", FILE, (("        parent = key.encode()\n", ""),),
        "each key covers its own chunk only, so equal chunks at different places share a key",
        TASKS, "not chained",
    ),
    Mutant(
        "keys_for_partial_chunk", FILE,
        (("range(0, len(values) - chunk_size + 1, chunk_size)", "range(0, len(values), chunk_size)"),),
        "a trailing partial chunk gets a key too",
        TASKS, "partial chunk",
    ),
    Mutant(
        "keys_depend_on_dtype", FILE, (('    values = values.astype("<i8")\n', ""),),
        "the tokens' bytes are hashed in their own dtype, so an int32 array and a list give other keys",
        TASKS, "integer dtype",
    ),
    Mutant(
        "keys_without_fingerprint", FILE, (('key = f"{fingerprint}:{digest}"', "key = digest"),),
        "the key is the digest alone: two models share keys",
        TASKS, "fingerprint",
    ),
    Mutant(
        "no_checksum_check", FILE, ((CHECK_CRC, ""),),
        "the checksum is written but never checked on read: a damaged payload comes back as wrong values",
        TASKS, "no checksum",
    ),
    Mutant(
        "fingerprint_not_checked", FILE, ((CHECK_NAME, "if False:"),),
        "the fingerprint in the header is never compared: another model's KV loads",
        TASKS, "fingerprint in the header must be compared",
    ),
    Mutant(
        "fingerprint_prefix_match", FILE,
        ((CHECK_NAME, "if not fingerprint.encode().startswith(body[shape_end:shape_end + name_length]):"),),
        "the fingerprints are compared as a prefix: a chunk of model 'm' loads for model 'm2'",
        TASKS, "compare the fingerprints whole",
    ),
    Mutant(
        "short_data_raises", FILE,
        (("    if len(data) < FIXED.size + CHECKSUM.size:\n        return None\n", ""),),
        "data shorter than a checksum is not refused first: unpacking it raises instead of a miss",
        TASKS, "must never raise",
    ),
    Mutant(
        "serialize_upcasts_to_float64", FILE,
        (('dtype = kv.dtype.newbyteorder("<")', 'dtype = np.dtype("<f8") if kv.dtype.kind == "f" else kv.dtype'),),
        "every chunk is written as float64: a float32 chunk comes back float64 (and twice the bytes)",
        TASKS, "dtype float64; expected float32",
    ),
    Mutant(
        "payload_in_fortran_order", FILE,
        (("payload = np.ascontiguousarray(kv, dtype=dtype).tobytes()", 'payload = kv.astype(dtype).tobytes(order="F")'),),
        "the payload is written in Fortran order and read in C order: the values come back scrambled",
        TASKS, "element order",
    ),
    Mutant(
        "payload_pickled", FILE,
        (("import hashlib\n", "import hashlib\nimport pickle\n"),
         ("payload = np.ascontiguousarray(kv, dtype=dtype).tobytes()",
          "payload = pickle.dumps(np.ascontiguousarray(kv, dtype=dtype))"),
         ("    if int(np.prod(shape, dtype=object)) * dtype.itemsize != payload_length:\n        return None\n", ""),
         ("return np.frombuffer(body, dtype=dtype, offset=shape_end + name_length).reshape(shape).copy()",
          "return pickle.loads(body[shape_end + name_length:])")),
        "the payload is a pickle inside a checked header: reading it runs whatever code the bytes name",
        TASKS, "look like a pickle",
    ),
    Mutant(
        "lookup_skips_missing_chunks", FILE,
        ((RUN_LOOP, "            if self.backend.exists(key):\n                run += 1\n"),),
        "lookup counts every stored chunk instead of the run from the start: a missing middle chunk is skipped",
        TASKS, "missing middle chunk must end the run",
    ),
    Mutant(
        "lookup_returns_chunks", FILE, (("        return run * self.chunk_size\n", "        return run\n"),),
        "lookup returns the number of chunks, not of tokens",
        TASKS, "lookup counts chunks; it returns tokens",
    ),
    Mutant(
        "misses_not_counted", FILE, (("        self.misses += len(keys) - run\n", ""),),
        "lookup never counts the chunks it did not find",
        TASKS, "connector.misses",
    ),
    Mutant(
        "load_skips_missing_chunk", FILE,
        (("            chunk = None if value is None else deserialize_chunk(value, self.fingerprint)\n",
          "            if value is None:\n                continue\n"
          "            chunk = deserialize_chunk(value, self.fingerprint)\n"),),
        "load leaves out a chunk evicted since lookup and returns the others, glued together",
        TASKS, "missing chunk must not be skipped",
    ),
    Mutant(
        "load_accepts_any_shape", FILE,
        (("if chunk is None or chunk.ndim != 5 or chunk.shape[1:3] != (2, self.chunk_size):", "if chunk is None:"),
         ("            if chunks and (chunk.shape != chunks[0].shape or chunk.dtype != chunks[0].dtype):\n"
          "                return None\n", "")),
        "load does not check the chunks' shapes: a chunk of another size is glued in",
        TASKS, "wrong shape must be refused",
    ),
    Mutant(
        "load_requires_multiple_of_chunk", FILE,
        (("not 1 <= n <= len(keys) * self.chunk_size:", "n % self.chunk_size or not 1 <= n <= len(keys) * self.chunk_size:"),),
        "load refuses an n that is not a multiple of chunk_size, which an engine asks for when the whole prompt is "
        "stored (it recomputes the last token)",
        TASKS, "need not be a multiple of chunk_size",
    ),
    Mutant(
        "load_floors_chunks", FILE,
        (("values = self.backend.mget(keys[:-(-n // self.chunk_size)])", "values = self.backend.mget(keys[:n // self.chunk_size])"),),
        "load reads n // chunk_size chunks, one short when n is not a multiple of chunk_size",
        TASKS, "ceil(n / chunk_size)",
    ),
    Mutant(
        "hits_count_tokens", FILE, (("        self.hits += len(chunks)\n", "        self.hits += n\n"),),
        "hits counts tokens loaded instead of chunks",
        TASKS, "connector.hits",
    ),
    Mutant(
        "bytes_loaded_counts_arrays", FILE,
        (("        self.bytes_loaded += sum(len(value) for value in values if value is not None)\n", ""),
         ("        self.hits += len(chunks)\n", "        self.hits += len(chunks)\n"
          "        self.bytes_loaded += sum(chunk.nbytes for chunk in chunks)\n")),
        "bytes_loaded counts the arrays' bytes, not the bytes received (headers and checksums left out)",
        TASKS, "connector.bytes_loaded",
    ),
    Mutant(
        "store_resends_stored_chunks", FILE,
        (("            if self.backend.exists(key):\n                continue\n", ""),),
        "store sends every chunk again, even those already in the store",
        TASKS, "chunk already in the store is sent again",
    ),
    Mutant(
        "store_always_chunk_zero", FILE,
        (("kv[:, :, i * self.chunk_size:(i + 1) * self.chunk_size]", "kv[:, :, :self.chunk_size]"),),
        "store writes chunk 0's KV under every key",
        TASKS, "wrong slice",
    ),
    Mutant(
        "store_attribute_hides_method", FILE,
        (("        self.backend = store\n", "        self.store = store\n"),
         ("            if not self.backend.exists(key):", "            if not self.store.exists(key):"),
         ("values = self.backend.mget(", "values = self.store.mget("),
         ("            if self.backend.exists(key):", "            if self.store.exists(key):"),
         ("            self.backend.set(key, data)", "            self.store.set(key, data)")),
        "__init__ keeps the store as self.store, which hides the method store",
        TASKS, "hides the method",
    ),
]
