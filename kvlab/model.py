"""A small Llama-style decoder in numpy: the model every lecture runs.

Architecture (as in Llama 2/3): token embedding, then per layer
    x += Attention(RMSNorm(x))    grouped-query attention with rotary position embeddings
    x += SwiGLU(RMSNorm(x))       W_down(silu(W_gate h) * W_up h)
then a final RMSNorm and an untied LM head.

RoPE pairing convention: the "rotate half" convention of Hugging Face's Llama and GPT-NeoX, where
dimension i of a head is rotated together with dimension i + d/2 (not interleaved pairs 2i, 2i+1),
at angle pos * rope_theta ** (-2i / d) for i in 0 .. d/2-1.

Shapes: B batch, T tokens in this call, S tokens stored, L layers, H query heads, Hkv key/value
heads, d head size, D d_model, F d_ff, V vocabulary.

The KV-cache protocol (`forward(..., cache=...)`) is the one in the student contract: for each layer
in order `K, V = cache.update(layer, k, v)` with k (after RoPE) and v of shape [B, T, Hkv, d], the
T queries attend to K, V [B, S, Hkv, d] causally (query t sees key positions 0 .. S-T+t), and after
the last layer `cache.advance(T)` is called once.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvlab import counter


@dataclass(frozen=True)
class Config:
    """Model hyperparameters. `n_heads` must be a multiple of `n_kv_heads`; `d_head` even (RoPE)."""

    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    d_head: int
    d_ff: int
    max_seq: int
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    name: str = "custom"

    def __post_init__(self) -> None:
        sizes = ("vocab", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_head", "d_ff", "max_seq")
        for field in sizes:
            value = getattr(self, field)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"Config.{field} must be a positive int, got {value!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})"
            )
        if self.d_head % 2:
            raise ValueError(f"d_head must be even for RoPE, got {self.d_head}")


# A few layers and grouped-query attention (2 query heads per KV head): small enough that the
# no-cache reference runs hundreds of steps in a second, large enough to make every bug visible.
TINY = Config(
    vocab=97, d_model=32, n_layers=3, n_heads=4, n_kv_heads=2, d_head=8, d_ff=64, max_seq=512,
    name="tiny",
)


def config_like(cfg: Config, **changes: Any) -> Config:
    """A copy of `cfg` with `changes` applied (e.g. `config_like(TINY, n_kv_heads=1)` for MQA)."""
    return dataclasses.replace(cfg, **changes)


def init_params(cfg: Config, seed: int = 0, dtype: Any = np.float64) -> dict[str, np.ndarray]:
    """Deterministic random weights for `cfg`, as a flat dict of arrays of `dtype`.

    Keys: "embed" [V, D]; for each layer l, "layers.{l}.attn_norm" [D], ".wq" [D, H*d],
    ".wk" [D, Hkv*d], ".wv" [D, Hkv*d], ".wo" [H*d, D], ".mlp_norm" [D], ".w_gate" [D, F],
    ".w_up" [D, F], ".w_down" [F, D]; "final_norm" [D]; "lm_head" [D, V].
    Weights are drawn in float64 and then cast, so every dtype sees the same model.
    """
    rng = np.random.default_rng(seed)
    D, F, V = cfg.d_model, cfg.d_ff, cfg.vocab
    q_dim, kv_dim = cfg.n_heads * cfg.d_head, cfg.n_kv_heads * cfg.d_head

    def dense(n_in: int, n_out: int) -> np.ndarray:
        return rng.normal(0.0, n_in**-0.5, size=(n_in, n_out))

    def norm() -> np.ndarray:
        return 1.0 + 0.1 * rng.normal(size=D)

    params = {"embed": rng.normal(0.0, 1.0, size=(V, D))}
    for layer in range(cfg.n_layers):
        p = f"layers.{layer}."
        params[p + "attn_norm"] = norm()
        params[p + "wq"] = dense(D, q_dim)
        params[p + "wk"] = dense(D, kv_dim)
        params[p + "wv"] = dense(D, kv_dim)
        params[p + "wo"] = dense(q_dim, D)
        params[p + "mlp_norm"] = norm()
        params[p + "w_gate"] = dense(D, F)
        params[p + "w_up"] = dense(D, F)
        params[p + "w_down"] = dense(F, D)
    params["final_norm"] = norm()
    # Logits of a few units: spread enough that greedy decoding does not collapse to one token.
    params["lm_head"] = 3.0 * dense(D, V)
    return {name: value.astype(dtype) for name, value in params.items()}


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """x [..., D] scaled to unit root-mean-square, times weight [D]."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rope(x: np.ndarray, positions: np.ndarray, theta: float) -> np.ndarray:
    """Rotate x [B, T, heads, d] at positions [T] (rotate-half pairing, see the module docstring)."""
    d = x.shape[-1]
    inv_freq = theta ** (-np.arange(0, d, 2, dtype=np.float64) / d)
    angles = np.outer(positions, inv_freq)  # [T, d/2]
    cos = np.cos(angles).astype(x.dtype)[None, :, None, :]
    sin = np.sin(angles).astype(x.dtype)[None, :, None, :]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def attention(q: np.ndarray, K: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Causal grouped-query attention of the T newest positions.

    q [B, T, H, d] attends to K, V [B, S, Hkv, d] (S >= T, the T queries being the last T of the S
    positions): query t sees keys 0 .. S-T+t. Returns [B, T, H, d].
    """
    B, T, H, d = q.shape
    S, Hkv = K.shape[1], K.shape[2]
    group = H // Hkv
    # Batched matmuls over [B, Hkv, group] rather than einsum: the same products, ~10x faster.
    qg = q.reshape(B, T, Hkv, group, d).transpose(0, 2, 3, 1, 4)  # [B, Hkv, G, T, d]
    keys = K.transpose(0, 2, 3, 1)[:, :, None]  # [B, Hkv, 1, d, S]
    values = V.transpose(0, 2, 1, 3)[:, :, None]  # [B, Hkv, 1, S, d]
    # math.sqrt, not np.sqrt: a numpy float64 scalar would promote float32 activations to float64.
    scores = (qg @ keys) / math.sqrt(d)  # [B, Hkv, G, T, S]
    visible = np.arange(S)[None, :] <= (S - T + np.arange(T))[:, None]  # [T, S]
    scores = np.where(visible, scores, -np.inf)
    scores -= scores.max(axis=-1, keepdims=True)
    weights = np.exp(scores)
    weights /= weights.sum(axis=-1, keepdims=True)
    out = (weights @ values).transpose(0, 3, 1, 2, 4)  # [B, T, Hkv, G, d]
    return out.reshape(B, T, H, d)


def _check_tokens(cfg: Config, tokens: Any) -> np.ndarray:
    tokens = np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"tokens must be an integer array [B, T]; got {tokens.dtype} {tokens.shape}")
    if tokens.size == 0:
        raise ValueError(f"tokens must hold at least one token per sequence; got shape {tokens.shape}")
    if tokens.min() < 0 or tokens.max() >= cfg.vocab:
        raise ValueError(f"token ids must lie in [0, {cfg.vocab}); got {tokens.min()}..{tokens.max()}")
    return tokens


def _check_kv(cfg: Config, layer: int, kv: Any, B: int, T: int) -> tuple[np.ndarray, np.ndarray]:
    """Validate what `cache.update` returned, so a student sees a clear message, not a numpy error."""
    try:
        K, V = kv
    except (TypeError, ValueError):
        raise TypeError(f"cache.update(layer={layer}, k, v) must return (K, V); got {type(kv).__name__}")
    K, V = np.asarray(K), np.asarray(V)
    want = f"[B={B}, S, Hkv={cfg.n_kv_heads}, d={cfg.d_head}] with S >= T={T}"
    for name, arr in (("K", K), ("V", V)):
        ok = arr.ndim == 4 and arr.shape[0] == B and arr.shape[2:] == (cfg.n_kv_heads, cfg.d_head)
        if not ok or arr.shape[1] < T:
            raise ValueError(f"cache.update(layer={layer}) returned {name} of shape {arr.shape}; expected {want}")
    if K.shape != V.shape:
        raise ValueError(f"cache.update(layer={layer}) returned K {K.shape} and V {V.shape} of different shapes")
    return K, V


def forward(
    params: dict[str, np.ndarray],
    cfg: Config,
    tokens: Any,
    cache: Any = None,
    pos0: int | None = None,
    last_only: bool = False,
) -> np.ndarray:
    """Logits for tokens [B, T]: [B, T, V], or [B, 1, V] for the last position with `last_only`.

    Without a cache the tokens sit at positions pos0 .. pos0+T-1 (pos0 defaults to 0) and attend
    causally among themselves. With a cache pos0 defaults to `cache.length`, and attention runs over
    what `cache.update` returns (see the module docstring for the protocol).
    """
    tokens = _check_tokens(cfg, tokens)
    B, T = tokens.shape
    if pos0 is None:
        pos0 = cache.length if cache is not None else 0
    positions = np.arange(pos0, pos0 + T)
    H, Hkv, d = cfg.n_heads, cfg.n_kv_heads, cfg.d_head
    x = params["embed"][tokens]
    kv_read = 0
    attention_pairs = 0
    for layer in range(cfg.n_layers):
        p = f"layers.{layer}."
        h = rms_norm(x, params[p + "attn_norm"], cfg.norm_eps)
        q = rope((h @ params[p + "wq"]).reshape(B, T, H, d), positions, cfg.rope_theta)
        k = rope((h @ params[p + "wk"]).reshape(B, T, Hkv, d), positions, cfg.rope_theta)
        v = (h @ params[p + "wv"]).reshape(B, T, Hkv, d)
        if cache is None:
            K, V = k, v
        else:
            K, V = _check_kv(cfg, layer, cache.update(layer, k, v), B, T)
        S = K.shape[1]
        kv_read += K.nbytes + V.nbytes
        attention_pairs += T * (S - T) + T * (T + 1) // 2
        x = x + attention(q, K, V).reshape(B, T, H * d) @ params[p + "wo"]
        h = rms_norm(x, params[p + "mlp_norm"], cfg.norm_eps)
        x = x + (silu(h @ params[p + "w_gate"]) * (h @ params[p + "w_up"])) @ params[p + "w_down"]
    if cache is not None:
        cache.advance(T)
    if last_only:
        x = x[:, -1:]
    logits = rms_norm(x, params["final_norm"], cfg.norm_eps) @ params["lm_head"]
    _record(params, cfg, B, T, x.shape[1], attention_pairs, kv_read)
    return logits


def _record(params: dict[str, np.ndarray], cfg: Config, B: int, T: int, T_out: int,
            attention_pairs: int, kv_read: int) -> None:
    """Report one forward call to `kvlab.counter` (see there for what counts as useful)."""
    layer_weights = sum(params[f"layers.0.{n}"].size for n in ("wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"))
    head = params["lm_head"].size
    itemsize = params["embed"].dtype.itemsize
    weight_elements = sum(a.size for name, a in params.items() if name != "embed") + B * T * cfg.d_model
    counter.record(
        forward_calls=1,
        positions=T,
        matmul_flops=2 * B * (T * cfg.n_layers * layer_weights + T_out * head),
        attention_flops=4 * B * cfg.n_heads * cfg.d_head * attention_pairs,
        weight_bytes=weight_elements * itemsize,
        kv_bytes=kv_read,
    )


def generate(
    params: dict[str, np.ndarray], cfg: Config, prompt: Any, n_new: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The reference: greedy decoding with no cache, recomputing the whole sequence at every step.

    prompt [B, T0] -> (tokens [B, T0+n_new], step_logits: n_new arrays [B, V]), element i being the
    logits that chose new token i (argmax; the lowest index wins a tie).
    """
    tokens = _check_tokens(cfg, prompt)
    step_logits = []
    for _ in range(n_new):
        logits = forward(params, cfg, tokens, last_only=True)[:, -1]
        step_logits.append(logits)
        tokens = np.concatenate([tokens, logits.argmax(axis=-1)[:, None].astype(tokens.dtype)], axis=1)
    return tokens, step_logits
