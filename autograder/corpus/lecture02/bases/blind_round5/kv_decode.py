"""Lecture 2: decoding with a KV cache.

Recomputing the whole sequence at every decode step costs O(n^2) token positions for n tokens; a KV
cache stores each layer's keys and values once, so every step feeds the newest token alone through
the model and the whole generation costs O(n), paid for in memory. Implement, in this order:

1. `KVCache` (task kv_cache): the storage `kvlab.model.forward` writes to and reads from.
2. `greedy_decode` (task greedy_decode): prefill the prompt, then one token per step.
3. `kv_bytes_per_token` and `kv_cache_bytes` (task kv_memory): what the cache costs.

Shapes: B batch, T tokens in a call, S tokens stored, L layers, Hkv key/value heads, d head size,
V vocabulary. Run `make test` (all tasks) or `make test TASK=kv_cache` (one task).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from kvlab.model import Config, forward


class KVCache:
    """Keys and values of every layer for a batch of B sequences, up to `max_seq` tokens each.

    `KVCache(cfg, batch, max_seq=None, dtype=np.float64)`: `max_seq=None` means `cfg.max_seq`; a
    number given overrides it, smaller or larger. Keys and values are stored in `dtype` (k, v of
    another dtype are converted), and `update` returns them in that dtype. The cache may fill to
    exactly `max_seq` tokens. Tests call it positionally `KVCache(cfg, batch)` and with the
    keywords `max_seq=` and `dtype=`.

    `length` (a public int attribute) is the number of tokens stored per sequence (0 when new).
    `forward` calls `update(layer, k, v)` once per layer with the T new tokens' k, v
    [B, T, Hkv, d], then `advance(T)` once at the end, so all layers see the same `length` during
    one call.
    """

    def __init__(self, cfg: Config, batch: int, max_seq: int | None = None, dtype: Any = np.float64) -> None:
        limit = cfg.max_seq if max_seq is None else max_seq
        self.cfg = cfg
        self.batch = batch
        self.max_seq = int(limit)
        self.dtype = np.dtype(dtype)
        self.length = 0
        shape = (cfg.n_layers, batch, self.max_seq, cfg.n_kv_heads, cfg.d_head)
        self.keys = np.zeros(shape, dtype=self.dtype)
        self.values = np.zeros(shape, dtype=self.dtype)

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Store k, v [B, T, Hkv, d] at positions length .. length+T-1 of `layer`.

        Returns the pair (K, V) for positions 0 .. length+T-1 of that layer, each
        [B, length+T, Hkv, d] in the cache's dtype. Does not change `length` (that is `advance`'s
        job, once per forward call). Raises ValueError when length+T would pass max_seq (length+T
        == max_seq is allowed). The cache checks length+T itself, before storing anything: numpy's
        error from writing past the end of a buffer is not that check.
        """
        new_tokens = k.shape[1]
        end = self.length + new_tokens
        if end > self.max_seq:
            raise ValueError(
                f"KVCache overflow: length {self.length} + {new_tokens} new tokens > max_seq {self.max_seq}"
            )
        start = self.length
        self.keys[layer, :, start:end] = k
        self.values[layer, :, start:end] = v
        return self.keys[layer, :, :end], self.values[layer, :, :end]

    def advance(self, n: int) -> None:
        """Record that n more tokens per sequence are now stored: length += n (n >= 0; 0 is allowed)."""
        self.length += n

    def nbytes(self) -> int:
        """Bytes of K and V held for the stored tokens: 2 * L * B * length * Hkv * d * itemsize.

        `itemsize` is that of the cache's dtype; `length`, not max_seq, counts. A plain Python int.
        """
        cfg = self.cfg
        per_layer = self.batch * self.length * cfg.n_kv_heads * cfg.d_head * self.dtype.itemsize
        return int(2 * cfg.n_layers * per_layer)


def greedy_decode(
    params: dict[str, np.ndarray], cfg: Config, prompt: np.ndarray, n_new: int
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy decoding with a KV cache.

    prompt [B, T0] (integers), n_new >= 0. Prefill the whole prompt into a new KVCache (of the
    params' dtype) in one `forward` call, then feed one new token per step. Greedy: argmax, the
    lowest index winning a tie (np.argmax does that).

    Returns the pair (tokens, step_logits): tokens, an integer ndarray [B, T0+n_new], the prompt
    then the new tokens; step_logits, a list of n_new ndarrays [B, V] of the params' dtype (float32
    params give float32 logits), element i being the logits that chose new token i. Exactly
    T0 + n_new - 1 token positions go through `kvlab.model.forward` (the prompt once, then one
    token per step): no call after the last token is chosen, and no other copy of the model may
    compute them. The work grows linearly with n_new: the tests measure the CPU time (of every
    process the decode runs in) of 16 and of 96 new tokens for a batch of 8 one-token prompts. On
    your machine they allow at most 12 times as much for the second; the grader times a cached
    reference decode beside yours, and the time of 96 new tokens and the time added going from 16 to
    96 may each be at most 4 times the reference's. n_new == 0 calls nothing and returns
    (prompt, []).
    """
    prompt = np.asarray(prompt)
    if n_new == 0:
        return prompt, []
    dtype = params["embed"].dtype
    B, T0 = prompt.shape
    cache = KVCache(cfg, B, max_seq=max(cfg.max_seq, T0 + n_new), dtype=dtype)
    logits = forward(params, cfg, prompt, cache=cache, last_only=True)[:, -1]
    chosen = []
    step_logits = []
    for step in range(n_new):
        step_logits.append(logits)
        nxt = np.argmax(logits, axis=-1).astype(prompt.dtype)
        chosen.append(nxt)
        if step + 1 < n_new:
            logits = forward(params, cfg, nxt[:, None], cache=cache)[:, -1]
    tokens = np.concatenate([prompt, np.stack(chosen, axis=1)], axis=1)
    return tokens, step_logits


def kv_bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int, dtype_bytes: int = 2) -> int:
    """Bytes of K and V one token occupies across all layers: 2 * n_layers * n_kv_heads * d_head * dtype_bytes.

    A plain Python int (not a numpy integer, not a float). `dtype_bytes` defaults to 2 (BF16) and
    is passed as a keyword by the tests.
    """
    return int(2 * n_layers * n_kv_heads * d_head * dtype_bytes)


def kv_cache_bytes(
    n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int, dtype_bytes: int = 2
) -> int:
    """Bytes of a KV cache holding seq_len tokens for each of batch sequences (a plain int).

    kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes) times seq_len times batch; `seq_len` and
    `batch` come positionally, `dtype_bytes` (default 2) as a keyword.
    """
    return int(kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes=dtype_bytes) * seq_len * batch)
