"""Module 6, part 1: how much KV cache a real model needs (task kv_memory).

Each function takes a Hugging Face `config.json` as a dictionary (`kvlab.hf_configs.CONFIGS[name]
.as_dict()` gives the published ones). Attention comes in two kinds:

- Multi-head, grouped-query or multi-query attention (MHA, GQA, MQA): every layer caches a key and
  a value vector of `head_dim` values for each of `num_key_value_heads` heads.
  `num_key_value_heads` absent (or None) means MHA: as many KV heads as `num_attention_heads`.
  `head_dim` absent (or None) means `hidden_size // num_attention_heads`, which must be at least 1
  (ValueError when hidden_size < num_attention_heads; hidden_size == num_attention_heads gives 1).
- Multi-head latent attention (MLA, DeepSeek-V2/V3), recognised by a `kv_lora_rank` field that is
  present and not None: every layer caches ONE compressed latent of `kv_lora_rank` values plus the
  decoupled RoPE key of `qk_rope_head_dim` values shared by all heads; there is no separate K and V,
  and `num_key_value_heads` / `head_dim` play no part.

Every count (layers, heads, sizes, lengths, batches, byte widths) must be a positive int (bool is
not an int here: True and False are refused wherever a count or weight_bytes is expected); a
required field that is missing, None, or not a positive int is a ValueError naming the field.
GiB means 2**30 bytes.

Required fields are the ones the rule reads; a field it does not read may be absent:
- `num_hidden_layers`, read by every function except `kv_values_per_token_per_layer` (one layer).
- MLA: `kv_lora_rank` and `qk_rope_head_dim`, nothing else (no heads, hidden_size or head_dim).
- MHA/GQA/MQA: `num_attention_heads`, plus `hidden_size` when `head_dim` is absent or None
  (`{"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}` is complete). When
  `num_key_value_heads` and `head_dim` are both given, `num_attention_heads` plays no part in the
  count: for a config without it, the count and a ValueError naming it are both accepted.

Order: every argument and every required field is checked before anything is computed, so a bad
one is a ValueError even where the answer would otherwise be 0 (max_batch with weights larger than
gpu_bytes). Every error here is a ValueError: when several apply (a bool seq_len and a negative
gpu_bytes), which one the message names is yours to choose.
"""
from __future__ import annotations

from typing import Any, Mapping


def _positive_int(value: Any, name: str) -> int:
    """Given: `value` if it is a positive int (not bool), else ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int; got {value!r}")
    return value


def _field(config: Mapping[str, Any], name: str) -> int:
    """Given: config[name] as a positive int; ValueError when it is missing, None or invalid."""
    if config.get(name) is None:
        raise ValueError(f"the config has no {name!r}")
    return _positive_int(config[name], f"config[{name!r}]")


def kv_values_per_token_per_layer(config: Mapping[str, Any]) -> int:
    """How many values one token caches in one layer (K and V together; MLA: the latent + RoPE key).

    MHA/GQA/MQA: 2 * num_key_value_heads * head_dim (with the defaults above).
    MLA: kv_lora_rank + qk_rope_head_dim.
    """
    if config.get("kv_lora_rank") is not None:
        latent = _field(config, "kv_lora_rank")
        rope_key = _field(config, "qk_rope_head_dim")
        return latent + rope_key
    n_heads = _field(config, "num_attention_heads")
    if config.get("num_key_value_heads") is None:
        kv_heads = n_heads
    else:
        kv_heads = _field(config, "num_key_value_heads")
    if config.get("head_dim") is None:
        hidden = _field(config, "hidden_size")
        if hidden < n_heads:
            raise ValueError(f"hidden_size {hidden} < num_attention_heads {n_heads}: head_dim would be 0")
        head_dim = hidden // n_heads
    else:
        head_dim = _field(config, "head_dim")
    return 2 * kv_heads * head_dim


def kv_bytes_per_token(config: Mapping[str, Any], dtype_bytes: int = 2) -> int:
    """Bytes of KV cache one token takes across all `num_hidden_layers` layers: a plain int.

    = num_hidden_layers * kv_values_per_token_per_layer(config) * dtype_bytes. ValueError for a
    bad config field or dtype_bytes (see the module docstring).
    Example: Qwen2.5-7B (28 layers, 4 KV heads, head_dim 3584 // 28 = 128) in BF16: 57,344.
    """
    width = _positive_int(dtype_bytes, "dtype_bytes")
    layers = _field(config, "num_hidden_layers")
    return layers * kv_values_per_token_per_layer(config) * width


def kv_cache_gib(config: Mapping[str, Any], seq_len: int, batch: int, dtype_bytes: int = 2) -> float:
    """KV cache of `batch` sequences of `seq_len` tokens, in GiB (bytes / 2**30), a float, not rounded.

    ValueError for a seq_len, batch or dtype_bytes that is not a positive int.
    """
    _positive_int(seq_len, "seq_len")
    _positive_int(batch, "batch")
    per_token = kv_bytes_per_token(config, dtype_bytes=dtype_bytes)
    return per_token * seq_len * batch / 2**30


def max_batch(config: Mapping[str, Any], seq_len: int, gpu_bytes: int, weight_bytes: int,
              dtype_bytes: int = 2) -> int:
    """The largest batch of `seq_len`-token sequences whose KV cache fits in `gpu_bytes` beside the weights.

    The memory left for KV is gpu_bytes - weight_bytes; the answer is how many whole sequences of
    kv_bytes_per_token(config, dtype_bytes) * seq_len bytes fit in it (rounded down), and 0 when the
    weights alone do not fit. An int >= 0. ValueError for a seq_len, gpu_bytes or dtype_bytes that
    is not a positive int, or a weight_bytes that is not an int >= 0 (False is not 0 here: bool is
    not an int), even when the weights alone do not fit.
    """
    _positive_int(seq_len, "seq_len")
    _positive_int(gpu_bytes, "gpu_bytes")
    if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:
        raise ValueError(f"weight_bytes must be an int >= 0; got {weight_bytes!r}")
    per_sequence = kv_bytes_per_token(config, dtype_bytes=dtype_bytes) * seq_len
    room = gpu_bytes - weight_bytes
    if room <= 0:
        return 0
    return room // per_sequence
