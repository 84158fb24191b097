"""Lecture 2's bug catalog: mistakes students make in kv_decode.py, as edits of the solution.

tests/suites/test_suites.py applies each one to `solutions/lecture02/` and checks that the
public and hidden tests catch it, in the tasks listed, with a message containing `expect`.
KVCache bugs usually cost greedy_decode points too: greedy_decode runs on the student's cache.
"""
from __future__ import annotations

from autograder.mutants import Checks, Mutant

FILE = "kv_decode.py"
BOTH = ("kv_cache", "greedy_decode")

# Lines of the solution that several mutants edit.
UPDATE_RETURN = "return self.k[layer, :, :end], self.v[layer, :, :end]"
LIMIT_CHECK = "if end > self.max_seq:"
DECODE_STEP = "logits = forward(params, cfg, new, cache=cache)[:, -1]"
GREEDY_CHOICE = "logits.argmax(axis=-1)"
PER_TOKEN = "return 2 * n_layers * n_kv_heads * d_head * dtype_bytes"

# The whole suite is short enough to run per mutant, which also catches points lost elsewhere.
CHECKS = Checks(min_mutants=12, run_seconds=300)

MUTANTS = [
    # KVCache
    Mutant(
        "update_returns_only_new", FILE, ((UPDATE_RETURN, "return k, v"),),
        "update returns the k, v it was given instead of every stored position, so attention never "
        "sees earlier tokens",
        BOTH, "not only the new tokens",
    ),
    Mutant(
        "update_advances_length", FILE, ((UPDATE_RETURN, "self.length = end\n        " + UPDATE_RETURN),),
        "update moves length itself, so the next layer of the same forward call writes further on",
        BOTH, "must not change length",
    ),
    Mutant(
        "advance_ignores_n", FILE, (("self.length += n", "self.length += 1"),),
        "advance counts one token per call, whatever n is (right only for one-token decode steps)",
        BOTH, "advance(n) must",
    ),
    Mutant(
        "advance_refuses_zero", FILE,
        (("self.length += n", 'if n < 1:\n            raise ValueError("advance needs n >= 1")\n        self.length += n'),),
        "advance refuses n = 0, which forward never sends but the contract allows",
        ("kv_cache",), "0 is allowed",
    ),
    Mutant(
        "update_assumes_one_token_after_prefill", FILE,
        (("self.k[layer, :, self.length:end] = k", "self.k[layer, :, self.length:end] = k[:, -1:] if self.length else k"),
         ("self.v[layer, :, self.length:end] = v", "self.v[layer, :, self.length:end] = v[:, -1:] if self.length else v")),
        "after the prefill, update keeps only the last of the T new tokens (broadcast over all T positions): "
        "right for one-token decode steps only",
        ("kv_cache",), "the T new tokens must be stored",
    ),
    Mutant(
        "limit_check_too_strict", FILE, ((LIMIT_CHECK, "if end >= self.max_seq:"),),
        "off by one: raises when the cache would be exactly full",
        ("kv_cache",), "may fill completely",
    ),
    Mutant(
        "limit_check_ignores_new_tokens", FILE, ((LIMIT_CHECK, "if self.length > self.max_seq:"),),
        "off by one the other way: checks the stored length, not length + T, so a full cache "
        "silently drops a new token",
        ("kv_cache",), "compare length + T",
    ),
    Mutant(
        "max_seq_argument_ignored", FILE,
        (("self.max_seq = cfg.max_seq if max_seq is None else max_seq", "self.max_seq = cfg.max_seq"),),
        "the constructor's max_seq is ignored; the limit is always cfg.max_seq",
        ("kv_cache",), "must override cfg.max_seq",
    ),
    Mutant(
        "max_seq_argument_capped_at_model", FILE,
        (("self.max_seq = cfg.max_seq if max_seq is None else max_seq",
          "self.max_seq = cfg.max_seq if max_seq is None else min(max_seq, cfg.max_seq)"),),
        "a max_seq argument larger than cfg.max_seq is cut down to it, so the cache cannot fill to it",
        ("kv_cache",), "overrides cfg.max_seq",
    ),
    Mutant(
        "layers_share_storage", FILE,
        (
            ("self.k[layer, :, self.length:end] = k", "self.k[0, :, self.length:end] = k"),
            ("self.v[layer, :, self.length:end] = v", "self.v[0, :, self.length:end] = v"),
            (UPDATE_RETURN, "return self.k[0, :, :end], self.v[0, :, :end]"),
        ),
        "one buffer for all layers: every layer overwrites the previous layer's keys and values",
        BOTH, "layers share storage",
    ),
    Mutant(
        "dtype_argument_ignored", FILE, (("self.dtype = np.dtype(dtype)", "self.dtype = np.dtype(np.float64)"),),
        "the cache always stores float64, whatever dtype it was given",
        BOTH, "dtype given to its constructor",
    ),
    Mutant(
        "nbytes_counts_max_seq", FILE, (("self.length * cfg.n_kv_heads", "self.max_seq * cfg.n_kv_heads"),),
        "nbytes counts the preallocated buffer (max_seq positions) instead of the stored tokens",
        ("kv_cache",), "instead of the stored tokens",
    ),
    Mutant(
        "nbytes_without_factor_2", FILE, (("return 2 * cfg.n_layers", "return cfg.n_layers"),),
        "nbytes counts K or V, not both",
        ("kv_cache",), "factor 2 is missing",
    ),
    Mutant(
        "nbytes_counts_elements", FILE, ((" * self.dtype.itemsize", ""),),
        "nbytes counts values, not bytes",
        ("kv_cache",), "itemsize is missing",
    ),
    Mutant(
        "nbytes_assumes_float64", FILE, (("self.dtype.itemsize", "8"),),
        "nbytes assumes 8-byte values (right for float64 only)",
        ("kv_cache",), "8-byte float64",
    ),
    # greedy_decode
    Mutant(
        "prompt_not_in_cache", FILE,
        (("logits = forward(params, cfg, tokens, cache=cache, last_only=True)",
          "logits = forward(params, cfg, tokens, last_only=True)"),),
        "the prefill runs without the cache, so the decode steps never see the prompt",
        ("greedy_decode",), "never reached the cache",
    ),
    Mutant(
        "decode_at_position_zero", FILE,
        ((DECODE_STEP, "logits = forward(params, cfg, new, cache=cache, pos0=0)[:, -1]"),),
        "every decode token is fed at position 0 (pos0=0) instead of at cache.length",
        ("greedy_decode",), "wrong position",
    ),
    Mutant(
        "returns_only_new_tokens", FILE,
        (("return tokens, step_logits", "return tokens[:, np.asarray(prompt).shape[1]:], step_logits"),),
        "returns the new tokens without the prompt",
        ("greedy_decode",), "only the new tokens",
    ),
    Mutant(
        "forward_after_last_token", FILE,
        (("if step < n_new - 1:\n            " + DECODE_STEP, DECODE_STEP),),
        "feeds the last token through forward too, computing logits nobody uses",
        ("greedy_decode",), "after the last token",
    ),
    Mutant(
        "step_logits_after_feeding", FILE,
        (
            ("step_logits.append(logits)\n        ", ""),
            ("if step < n_new - 1:\n            " + DECODE_STEP, DECODE_STEP + "\n        step_logits.append(logits)"),
        ),
        "records the logits after feeding each new token (those choose the next one): off by one",
        ("greedy_decode",), "shifted by one",
    ),
    Mutant(
        "float32_cache", FILE, (('dtype=params["embed"].dtype', "dtype=np.float32"),),
        "the cache is float32 whatever the params' dtype, losing precision with float64 params",
        ("greedy_decode",), "float32 arithmetic",
    ),
    Mutant(
        "cache_dtype_default", FILE, ((', dtype=params["embed"].dtype)', ")"),),
        "the cache keeps KVCache's default float64 whatever the params' dtype, doubling its memory "
        "for float32 params",
        ("greedy_decode",), "dtype",
    ),
    Mutant(
        "zero_new_tokens_not_special", FILE, (("    if n_new == 0:\n        return tokens, []\n", ""),),
        "with n_new == 0 the prompt still goes through forward, for logits nobody uses",
        ("greedy_decode",), "n_new == 0",
    ),
    Mutant(
        "ties_to_highest_index", FILE, ((GREEDY_CHOICE, 'np.argsort(logits, axis=-1, kind="stable")[:, -1]'),),
        "greedy via a stable argsort's last element: a tie goes to the highest index",
        ("greedy_decode",), "lowest index",
    ),
    Mutant(
        "argmax_over_batch_axis", FILE, ((GREEDY_CHOICE, "logits.argmax(axis=0)"),),
        "argmax over the batch axis instead of the vocabulary (crashes when appending the tokens)",
        ("greedy_decode",), "concatenation axis",
    ),
    Mutant(
        "prefill_token_by_token", FILE,
        (("    logits = forward(params, cfg, tokens, cache=cache, last_only=True)[:, -1]\n",
          "    for t in range(tokens.shape[1]):\n"
          "        logits = forward(params, cfg, tokens[:, t:t + 1], cache=cache, last_only=True)[:, -1]\n"),),
        "the prompt goes through forward one token per call: the right positions and logits, but no "
        "prefill in one call",
        ("greedy_decode",), "in one forward call",
    ),
    Mutant(
        "decode_recomputes_sequence", FILE,
        ((DECODE_STEP, "logits = forward(params, cfg, tokens, last_only=True)[:, -1]"),),
        "every decode step runs the whole sequence without the cache: right answers, quadratic work",
        ("greedy_decode",), "recomputes the whole sequence",
    ),
    # kv_bytes_per_token and kv_cache_bytes
    Mutant(
        "bytes_per_token_without_factor_2", FILE, ((PER_TOKEN, "return n_layers * n_kv_heads * d_head * dtype_bytes"),),
        "counts K or V per token, not both",
        ("kv_memory",), "factor 2 (K and V are both stored) is missing",
    ),
    Mutant(
        "cache_bytes_ignores_batch", FILE, (("* seq_len * batch", "* seq_len"),),
        "kv_cache_bytes sizes one sequence whatever the batch",
        ("kv_memory",), "factor batch is missing",
    ),
    Mutant(
        "cache_bytes_defaults_to_fp32", FILE,
        (("seq_len: int, batch: int, dtype_bytes: int = 2", "seq_len: int, batch: int, dtype_bytes: int = 4"),),
        "kv_cache_bytes's dtype_bytes defaults to 4 (FP32) instead of 2 (BF16)",
        ("kv_memory",), "default dtype_bytes is 2",
    ),
    Mutant(
        "bytes_as_numpy_integer", FILE, ((PER_TOKEN, "return np.prod([2, n_layers, n_kv_heads, d_head, dtype_bytes])"),),
        "np.prod returns a numpy integer, not the plain int the contract asks for",
        ("kv_memory",), "plain Python int",
    ),
    Mutant(
        "bytes_as_float", FILE, ((PER_TOKEN, PER_TOKEN + " * 8 / 8"),),
        "counts bits and divides by 8: the right number, as a float",
        ("kv_memory",), "of type float",
    ),
]
