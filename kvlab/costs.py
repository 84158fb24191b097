"""The operations `kvlab.counter` counts, analytically, for a named model or a `kvlab.model.Config`.

Every function here returns what `kvlab.counter` would record if `kvlab.model.forward` ran the same
calls on that model, field for field (a repository test runs the model under `counting()` and
compares). The definitions are `kvlab.counter`'s: 2 FLOPs per multiply-add of the matmuls and of
the attention core, for the (query, key) pairs the causal mask keeps; bytes are the weights every
call streams (all but the embedding table, plus the embedding rows it gathers) and the K and V it
attends over.

A model is either a `kvlab.specs.ModelSpec` (a dense Llama-style one: MLA and mixture-of-experts
models are refused with ValueError, their costs follow other formulas) or a `Config`. `dtype_bytes`
is the size of one weight: by default BF16 (2) for a ModelSpec, float64 (8) for a Config (kvlab's
default dtype); pass 4 for a float32 model.

KV bytes are never derived here from a model's layers and heads: that is lecture 2's exercise
(`kv_bytes_per_token` in kv_decode.py), and kvlab must not make its answer importable. Every
function whose counts include KV bytes takes `kv_bytes_per_token`, the bytes of K and V one token
occupies across all layers (the demo passes the student's `kv_bytes_per_token` result, or the
spec's published figure `ModelSpec.kv_bytes_per_token`), at the KV cache's own dtype.

Shapes and units: B batch, T tokens fed in one call, S tokens held in the cache, L layers, H query
heads, Hkv key/value heads, d head size, D d_model, F d_ff, V vocabulary; FLOP, bytes, seconds.
"""
from __future__ import annotations

from dataclasses import dataclass

from kvlab.counter import Counts
from kvlab.model import Config
from kvlab.specs import Hardware, ModelSpec

Model = ModelSpec | Config


@dataclass(frozen=True)
class _Shape:
    """What the counts depend on, read from either kind of model."""

    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    vocab: int
    layer_extra: int  # per-layer parameters outside the matmuls: 2 norm weights (+ q, k, v biases)
    tied: bool
    weight_bytes: int

    @property
    def layer_matmul(self) -> int:
        q, kv = self.n_heads * self.d_head, self.n_kv_heads * self.d_head
        return 2 * self.d_model * q + 2 * self.d_model * kv + 3 * self.d_model * self.d_ff

    @property
    def attention_per_pair(self) -> int:
        """FLOPs of one kept (query, key) pair over all layers and query heads: 2 * d for the score
        q.k and 2 * d for adding its share of v."""
        return 4 * self.n_heads * self.d_head * self.n_layers

    @property
    def head(self) -> int:
        return self.d_model * self.vocab

    @property
    def streamed(self) -> int:
        return self.n_layers * (self.layer_matmul + self.layer_extra) + self.d_model + self.head


def _shape(model: Model, dtype_bytes: int | None = None) -> _Shape:
    if isinstance(model, Config):
        size = 8 if dtype_bytes is None else dtype_bytes
        return _Shape(model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.d_head,
                      model.d_ff, model.vocab, 2 * model.d_model, False, size)
    if not model.is_dense_llama_like:
        raise ValueError(f"{model.name}: kvlab.costs models dense Llama-style decoders only "
                         "(multi-head latent attention and mixture-of-experts layers cost otherwise)")
    bias = (model.n_heads + 2 * model.n_kv_heads) * model.d_head if model.qkv_bias else 0
    return _Shape(model.n_layers, model.d_model, model.n_heads, model.n_kv_heads, model.d_head,
                  model.d_ff, model.vocab, 2 * model.d_model + bias, model.tied_embeddings,
                  model.weight_dtype_bytes if dtype_bytes is None else dtype_bytes)


def total_params(model: Model) -> int:
    """All parameters: the streamed ones plus the embedding table (counted once when tied)."""
    s = _shape(model)
    return s.streamed + (0 if s.tied else s.vocab * s.d_model)


def matmul_flops_per_token(model: Model) -> int:
    """FLOPs of one token position through every layer's matmuls and the LM head: 2 x those weights."""
    s = _shape(model)
    return 2 * (s.n_layers * s.layer_matmul + s.head)


def attention_flops(model: Model, new: int, past: int = 0, batch: int = 1) -> int:
    """FLOPs of the attention core (scores q.k and the weighted sum of v) over all layers.

    `new` query positions attend causally to `past` cached positions and to each other: a prefill
    of T tokens is `attention_flops(m, T)`, a decode step at context S (S tokens already cached,
    so S + 1 keys) is `attention_flops(m, 1, past=S)`. Each kept (query, key) pair costs
    2 * d FLOPs per query head for the score and 2 * d for the value sum.
    """
    return batch * _shape(model).attention_per_pair * (new * past + _tri(new))


def _tri(n: int) -> int:
    """1 + 2 + ... + n."""
    return n * (n + 1) // 2


def _tet(n: int) -> int:
    """tri(1) + tri(2) + ... + tri(n)."""
    return n * (n + 1) * (n + 2) // 6


def _counts(s: _Shape, batch: int, kv_bytes_per_token: int, calls: int, positions: int, outputs: int,
            pairs: int, keys: int) -> Counts:
    """Counts of `calls` forward calls from sums over those calls: `positions` (sum of T), `outputs`
    (positions through the LM head), `pairs` (kept (query, key) pairs per layer and head), `keys`
    (sum of S: every layer reads the K and V of S tokens, so a call reads S tokens' worth of KV)."""
    return Counts(
        forward_calls=calls,
        positions=positions,
        matmul_flops=2 * batch * (positions * s.n_layers * s.layer_matmul + outputs * s.head),
        attention_flops=batch * s.attention_per_pair * pairs,
        weight_bytes=(calls * s.streamed + batch * positions * s.d_model) * s.weight_bytes,
        kv_bytes=batch * keys * kv_bytes_per_token,
    )


def forward_counts(model: Model, batch: int, new: int, past: int = 0, last_only: bool = False, *,
                   kv_bytes_per_token: int, dtype_bytes: int | None = None) -> Counts:
    """One `forward` call on tokens [batch, new] with `past` tokens already in the cache (0: no
    cache, or an empty one). With `last_only` only the last position goes through the LM head.
    `kv_bytes_per_token`: bytes of K and V one token occupies across all layers (see the module
    docstring); the call reads past + new tokens' worth per sequence."""
    s = _shape(model, dtype_bytes)
    return _counts(s, batch, kv_bytes_per_token, calls=1, positions=new, outputs=1 if last_only else new,
                   pairs=new * past + _tri(new), keys=past + new)


def decode_step_counts(model: Model, batch: int, context: int, *, kv_bytes_per_token: int,
                       dtype_bytes: int | None = None) -> Counts:
    """One batched decode step: one new token per sequence, `context` tokens already cached each.

    It streams every weight once for the whole batch (`weight_bytes` barely grows with B) but reads
    each sequence's own KV (`kv_bytes` = B * (context + 1) * kv_bytes_per_token, the bytes of K and
    V one token occupies across all layers).
    """
    return forward_counts(model, batch, 1, past=context, last_only=True, kv_bytes_per_token=kv_bytes_per_token,
                          dtype_bytes=dtype_bytes)


def generation_counts(model: Model, prompt: int, n_new: int, cache: bool = True, batch: int = 1, *,
                      kv_bytes_per_token: int, dtype_bytes: int | None = None) -> Counts:
    """Greedy generation of `n_new` tokens after a prompt of `prompt` tokens, for `batch` sequences.

    cache=True is `greedy_decode` (lecture 2): the prompt in one call, then one token per call, no
    call after the last token: prompt + n_new - 1 positions, linear in the length. cache=False is
    `kvlab.model.generate`: every step recomputes the whole sequence so far (prompt + i tokens at
    step i): the positions, and so the matmul FLOPs, grow quadratically with n_new, the attention
    FLOPs cubically. `kv_bytes_per_token`: bytes of K and V one token occupies across all layers.
    """
    if prompt < 1 or n_new < 0:
        raise ValueError(f"need prompt >= 1 and n_new >= 0; got prompt={prompt}, n_new={n_new}")
    s = _shape(model, dtype_bytes)
    if n_new == 0:
        return Counts()
    last = prompt + n_new - 1  # tokens in the longest call's attention window
    if cache:
        # Attention pairs sum to those of one prefill of `last` tokens; steps read S = past + 1 keys.
        return _counts(s, batch, kv_bytes_per_token, calls=n_new, positions=last, outputs=n_new,
                       pairs=_tri(last), keys=prompt + _tri(last) - _tri(prompt))
    positions = _tri(last) - _tri(prompt - 1)  # prompt + (prompt + 1) + ... + last
    return _counts(s, batch, kv_bytes_per_token, calls=n_new, positions=positions, outputs=n_new,
                   pairs=_tet(last) - _tet(prompt - 1), keys=positions)


def intensity_limit(model: Model, context: int, *, kv_bytes_per_token: int,
                    dtype_bytes: int | None = None) -> float:
    """The decode step's arithmetic intensity (FLOP/byte) as the batch grows without bound.

    The streamed weights are shared by the batch, so per sequence only its FLOPs and its own bytes
    remain: its KV (context + 1 tokens of `kv_bytes_per_token` each) and its embedding row.
    Batching cannot push a decode step's intensity past this ceiling.
    """
    s = _shape(model, dtype_bytes)
    one = decode_step_counts(model, 1, context, kv_bytes_per_token=kv_bytes_per_token, dtype_bytes=dtype_bytes)
    return one.flops / (one.bytes_read - s.streamed * s.weight_bytes)


@dataclass(frozen=True)
class StepBound:
    """Roofline lower bound of one step: it cannot beat its FLOPs at peak nor its bytes at full bandwidth."""

    compute_seconds: float
    memory_seconds: float
    tokens: int

    @property
    def seconds(self) -> float:
        return max(self.compute_seconds, self.memory_seconds)

    @property
    def bound(self) -> str:
        """"compute" or "memory": whichever time sets the bound."""
        return "compute" if self.compute_seconds >= self.memory_seconds else "memory"

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds


def step_bound(counts: Counts, hardware: Hardware, tokens: int) -> StepBound:
    """Lower-bound time of a step with `counts` on `hardware`, producing `tokens` tokens (B for decode)."""
    return StepBound(counts.flops / hardware.peak_flops, counts.bytes_read / hardware.hbm_bandwidth, tokens)
