"""Generated call sequences over lecture 2's KVCache, each call checked against its rule, and the
memory formulas checked on generated arguments.

`kv_cache_machine` builds caches of every stated kind (MHA, GQA and MQA models; batch 1 and 2;
`max_seq` None, 1 and a few, given explicitly; float64 and float32 storage) and makes update / advance / nbytes calls in any order: several
updates of one layer at one length (each overwrites the positions it stores), layers skipped,
advance by 0, updates past max_seq, keys and values of the other dtype. `advance(n)` records n
tokens "now stored", so the machine advances only over positions every layer has been written at
(as forward does, which updates every layer before it advances). After every call it reads
`length` and `nbytes()` and compares what update returned with what the machine stored itself. A failure names the call, what came back, what the rule gives
and the rule's sentence (RULES, quoted from the stub), after Hypothesis has shrunk the sequence
(kvlab.testing.conformance).
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from decode_checks import CONFIGS
from kvlab.testing.conformance import Outcome, Rule, Transcript, is_plain_int, machine_settings, outcome_of, raised

CACHE = "kv_decode.py:KVCache"

# Each rule's sentence, quoted exactly from the stub named (tests/suites/test_conformance.py checks it is there).
RULES: dict[str, Rule] = {
    "max_seq": Rule(CACHE, "`max_seq=None` means `cfg.max_seq`; a number given overrides it, smaller or larger."),
    "dtype": Rule(CACHE, "Keys and values are stored in `dtype` (k, v of another dtype are converted), and `update` "
                         "returns them in that dtype."),
    "fill": Rule(CACHE, "The cache may fill to exactly `max_seq` tokens."),
    "length": Rule(CACHE, "`length` (a public int attribute) is the number of tokens stored per sequence (0 when new)."),
    "store": Rule(f"{CACHE}.update", "Store k, v [B, T, Hkv, d] at positions length .. length+T-1 of `layer`."),
    "returns": Rule(f"{CACHE}.update", "Returns the pair (K, V) for positions 0 .. length+T-1 of that layer, each "
                                       "[B, length+T, Hkv, d] in the cache's dtype."),
    "keeps_length": Rule(f"{CACHE}.update", "Does not change `length` (that is `advance`'s job, once per forward call)."),
    "past_max_seq": Rule(f"{CACHE}.update", "Raises ValueError when length+T would pass max_seq (length+T == max_seq "
                                            "is allowed)."),
    "checks_first": Rule(f"{CACHE}.update", "The cache checks length+T itself, before storing anything: numpy's error "
                                            "from writing past the end of a buffer is not that check."),
    "advance": Rule(f"{CACHE}.advance", "Record that n more tokens per sequence are now stored: length += n (n >= 0; 0 "
                                        "is allowed)."),
    "nbytes": Rule(f"{CACHE}.nbytes", "Bytes of K and V held for the stored tokens: 2 * L * B * length * Hkv * d * "
                                      "itemsize."),
    "nbytes_int": Rule(f"{CACHE}.nbytes", "`itemsize` is that of the cache's dtype; `length`, not max_seq, counts. A "
                                          "plain Python int."),
    "bytes_per_token": Rule("kv_decode.py:kv_bytes_per_token", "Bytes of K and V one token occupies across all layers: "
                                                               "2 * n_layers * n_kv_heads * d_head * dtype_bytes."),
    "bytes_plain_int": Rule("kv_decode.py:kv_bytes_per_token", "A plain Python int (not a numpy integer, not a float)."),
    "cache_bytes": Rule("kv_decode.py:kv_cache_bytes", "kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes) "
                                                       "times seq_len times batch;"),
}

# Public runs (a student's make test); the hidden suite runs more and longer sequences.
# Sized to the grading's time (lecture 2 grades in seconds): each step is two round trips when graded.
PUBLIC_SETTINGS = machine_settings(max_examples=8, steps=10)
HIDDEN_SETTINGS = machine_settings(max_examples=10, steps=12)
# Explicit max_seq values: one, a few; None is the config's. Not 0: whether a cache of no token is
# valid the stub does not say (docs/open-questions.md).
MAX_SEQS = (1, 3, 5, None)


def kv_cache_machine(student: Any) -> type[RuleBasedStateMachine]:
    """KVCache calls in any order, with the machine's own copy of what the rules say is stored."""
    module = student.kv_decode

    class KVCacheMachine(RuleBasedStateMachine):
        @initialize(config=st.sampled_from(sorted(CONFIGS)), batch=st.sampled_from([1, 2]),
                    max_seq=st.sampled_from(MAX_SEQS), dtype=st.sampled_from([None, np.float32]))
        def start(self, config: str, batch: int, max_seq: int | None, dtype: Any) -> None:
            cfg = self.cfg = CONFIGS[config]
            kwargs = {} if max_seq is None else {"max_seq": max_seq}
            kwargs |= {} if dtype is None else {"dtype": dtype}
            self.dtype = np.dtype(dtype or np.float64)
            self.limit = cfg.max_seq if max_seq is None else max_seq
            self.batch = batch
            self.cache = module.KVCache(cfg, batch, **kwargs)
            shape = (cfg.n_layers, batch, self.limit, cfg.n_kv_heads, cfg.d_head)
            self.keys, self.values = np.zeros(shape, self.dtype), np.zeros(shape, self.dtype)
            self.written = np.zeros((cfg.n_layers, self.limit), dtype=bool)
            self.length = 0
            named = ", ".join(f"{key}={'float32' if value is np.float32 else value}" for key, value in kwargs.items())
            self.log = Transcript(f"cache = KVCache({cfg.name} (L={cfg.n_layers}, Hkv={cfg.n_kv_heads}, "
                                  f"d={cfg.d_head}, max_seq={cfg.max_seq}), batch={batch}{', ' if named else ''}{named})")
            self.calls = 0
            self.observe("KVCache(...)", RULES["max_seq" if max_seq is not None else "length"])

        def observe(self, call: str, rule: Rule) -> None:
            # Asked directly, not through kvlab.testing.probe:ask: that helper runs in the student's
            # process, where a cache can tell it is the one asking and answer it alone right.
            length, nbytes = self.cache.length, self.cache.nbytes()
            self.log.check(length == self.length and is_plain_int(length), call,
                           f"afterwards length is {length!r}; the rule gives {self.length}", rule)
            cfg = self.cfg
            want = 2 * cfg.n_layers * self.batch * self.length * cfg.n_kv_heads * cfg.d_head * self.dtype.itemsize
            self.log.check(nbytes == want, call, f"afterwards nbytes() is {nbytes!r}; the rule gives {want} "
                           f"(length {self.length}, itemsize {self.dtype.itemsize})", RULES["nbytes"])
            self.log.check(is_plain_int(nbytes), call, f"afterwards nbytes() is {nbytes!r} of type "
                           f"{type(nbytes).__name__}; the rule gives a Python int", RULES["nbytes_int"])

        @rule(layer=st.integers(0, 1), T=st.integers(1, 3), other_dtype=st.booleans())
        def update(self, layer: int, T: int, other_dtype: bool) -> None:
            cfg = self.cfg
            layer %= cfg.n_layers
            self.calls += 1
            rng = np.random.default_rng(self.calls)
            given_dtype = np.float32 if (self.dtype == np.float64) == other_dtype else np.float64
            k, v = (rng.normal(size=(self.batch, T, cfg.n_kv_heads, cfg.d_head)).astype(given_dtype) for _ in range(2))
            call = f"cache.update({layer}, k, v) with k, v [{self.batch}, {T}, {cfg.n_kv_heads}, {cfg.d_head}] " \
                   f"{np.dtype(given_dtype).name}"
            got = outcome_of(functools.partial(self.cache.update, layer, k, v))
            self.log.add(call, Outcome(None, got.error))
            end = self.length + T
            if end > self.limit:
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; at length {self.length} with "
                               f"max_seq {self.limit} the rule gives ValueError", RULES["past_max_seq"])
                self.observe(call, RULES["checks_first"])
                return
            self.log.check(got.error is None, call, f"it {got.describe()}; length {self.length} + {T} is within "
                           f"max_seq {self.limit}", RULES["fill"] if end == self.limit else RULES["store"])
            self.keys[layer, :, self.length:end] = k
            self.values[layer, :, self.length:end] = v
            self.written[layer, self.length:end] = True
            pair = got.value
            self.log.check(isinstance(pair, (tuple, list)) and len(pair) == 2, call,
                           f"it returned {type(pair).__name__}; the rule gives a pair (K, V)", RULES["returns"])
            shape = (self.batch, end, cfg.n_kv_heads, cfg.d_head)
            for name, array, stored in zip("KV", pair, (self.keys, self.values)):
                self.log.check(isinstance(array, np.ndarray) and array.shape == shape, call,
                               f"its {name} is {type(array).__name__} of shape {getattr(array, 'shape', None)}; the rule "
                               f"gives an array of shape {shape}", RULES["returns"])
                self.log.check(array.dtype == self.dtype, call, f"its {name} has dtype {array.dtype}; the rule gives "
                               f"the cache's dtype {self.dtype}", RULES["dtype"])
                known = self.written[layer, :end]
                diff = array[:, known] != stored[layer, :, :end][:, known]
                if diff.any():
                    position = int(np.flatnonzero(known)[np.argwhere(diff)[0][1]])
                    fresh = position >= self.length
                    self.log.check(False, call, f"its {name} at position {position} is not the value "
                                   f"{'this call' if fresh else 'the last update of that position'} stored (positions "
                                   f"{self.length} .. {end - 1} are this call's; any earlier one was stored before)",
                                   RULES["store" if fresh else "returns"])
            self.observe(call, RULES["keeps_length"])

        @rule(n=st.integers(0, 3))
        def advance(self, n: int) -> None:
            # advance records tokens "now stored": only over positions every layer has been written at.
            stored = self.written[:, self.length:].all(axis=0)
            n = min(n, int(stored.argmin()) if not stored.all() else len(stored))
            call = f"cache.advance({n})"
            got = outcome_of(functools.partial(self.cache.advance, n))
            self.log.add(call, got)
            self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}", RULES["advance"])
            self.length += n
            self.observe(call, RULES["advance"])

    return KVCacheMachine


# The memory formulas' arguments: 0 and small values, real models' and sizes that pass 2**31 and 2**63.
SIZES = st.one_of(st.integers(0, 4), st.integers(1, 200_000), st.integers(2**31, 2**70))


def bytes_problem(student: Any, n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int,
                  dtype_bytes: int | None) -> str | None:
    """kv_bytes_per_token and kv_cache_bytes on one set of arguments against the stated formulas."""
    module = student.kv_decode
    keyword = {} if dtype_bytes is None else {"dtype_bytes": dtype_bytes}
    per_token = 2 * n_layers * n_kv_heads * d_head * (2 if dtype_bytes is None else dtype_bytes)
    for call, run, want, rule in (
        (f"kv_bytes_per_token({n_layers}, {n_kv_heads}, {d_head}{', dtype_bytes=%d' % dtype_bytes if keyword else ''})",
         functools.partial(module.kv_bytes_per_token, n_layers, n_kv_heads, d_head, **keyword), per_token,
         RULES["bytes_per_token"]),
        (f"kv_cache_bytes({n_layers}, {n_kv_heads}, {d_head}, {seq_len}, {batch}"
         f"{', dtype_bytes=%d' % dtype_bytes if keyword else ''})",
         functools.partial(module.kv_cache_bytes, n_layers, n_kv_heads, d_head, seq_len, batch, **keyword),
         per_token * seq_len * batch, RULES["cache_bytes"]),
    ):
        got = outcome_of(run)
        if got.error is not None or got.value != want:
            return Transcript(call).fail(call, f"it {got.describe()}; the rule gives {want}", rule)
        if not is_plain_int(got.value):
            return Transcript(call).fail(call, f"it returned {got.value!r} of type {type(got.value).__name__}; the rule "
                                         "gives a Python int", RULES["bytes_plain_int"])
    return None


def bytes_property(student: Any, max_examples: int) -> Any:
    """A Hypothesis test of `bytes_problem` over SIZES and dtype_bytes None (the default), 0, 1, 2, 4."""
    @PUBLIC_SETTINGS.__class__(PUBLIC_SETTINGS, max_examples=max_examples)
    @given(SIZES, SIZES, SIZES, SIZES, SIZES, st.sampled_from([None, 0, 1, 2, 4]))
    def check(n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int, dtype_bytes: int | None) -> None:
        problem = bytes_problem(student, n_layers, n_kv_heads, d_head, seq_len, batch, dtype_bytes)
        assert problem is None, problem

    return check
