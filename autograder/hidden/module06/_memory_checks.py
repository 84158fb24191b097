"""Trusted-side KV-memory arithmetic for the hidden kv_memory tests, and the diagnosis of a wrong count.

`expected_bytes` is the rule of kv_memory.py's docstring; `likely_cause` recomputes the count with
each usual mistake and names the first one that reproduces the student's number.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _kv_heads(config: Mapping[str, Any]) -> int:
    value = config.get("num_key_value_heads")
    return config["num_attention_heads"] if value is None else value


def _head_dim(config: Mapping[str, Any]) -> int:
    value = config.get("head_dim")
    return config["hidden_size"] // config["num_attention_heads"] if value is None else value


def is_mla(config: Mapping[str, Any]) -> bool:
    return config.get("kv_lora_rank") is not None


def expected_bytes(config: Mapping[str, Any], dtype_bytes: int) -> int:
    """Bytes per token across all layers, by the docstring's rule."""
    if is_mla(config):
        per_layer = config["kv_lora_rank"] + config["qk_rope_head_dim"]
    else:
        per_layer = 2 * _kv_heads(config) * _head_dim(config)
    return config["num_hidden_layers"] * per_layer * dtype_bytes


def _mistakes(config: Mapping[str, Any], dtype_bytes: int) -> list[tuple[int, str]]:
    """(the count a mistake gives, the mistake) for each usual mistake."""
    layers = config["num_hidden_layers"]
    right = expected_bytes(config, dtype_bytes)
    found = [
        (right // 2, "K and V are two vectors per KV head: a factor 2 is missing" if not is_mla(config)
         else "the count is half the right one"),
        (right // dtype_bytes, "dtype_bytes is ignored (or taken as 1)"),
        (right * 2 // dtype_bytes, "dtype_bytes is ignored and taken as 2"),
        (right // layers, "num_hidden_layers is left out: bytes per token cover every layer"),
    ]
    if is_mla(config):
        found += [
            (2 * layers * _kv_heads(config) * _head_dim(config) * dtype_bytes if config.get("num_attention_heads") else -1,
             "MLA treated as per-head K and V: when kv_lora_rank is present, one latent of kv_lora_rank plus the "
             "RoPE key of qk_rope_head_dim is cached per layer, and num_key_value_heads plays no part"),
            (2 * right, "MLA caches ONE latent per layer and token, no separate K and V: no factor 2"),
            (layers * config["kv_lora_rank"] * dtype_bytes, "the decoupled RoPE key (qk_rope_head_dim) is cached beside the latent"),
        ]
    else:
        heads, dim = config["num_attention_heads"], _head_dim(config)
        found += [
            (2 * layers * heads * dim * dtype_bytes, "num_attention_heads used where num_key_value_heads is given: "
             "GQA/MQA cache only the KV heads"),
            (2 * layers * _kv_heads(config) * (config.get("hidden_size", 0) // heads) * dtype_bytes,
             "head_dim is given: use it, not hidden_size // num_attention_heads"),
        ]
    return [(value, cause) for value, cause in found if value != right]


def likely_cause(config: Mapping[str, Any], dtype_bytes: int, actual: Any) -> str:
    for value, cause in _mistakes(config, dtype_bytes):
        if actual == value:
            return cause
    return "recheck the rule in kv_memory.py's docstring (MHA/GQA/MQA defaults, MLA)"


def describe(config: Mapping[str, Any]) -> str:
    """The fields that matter, for a message."""
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "kv_lora_rank", "qk_rope_head_dim")
    return "{" + ", ".join(f"{k}: {config[k]!r}" for k in keys if k in config) + "}"


def bytes_problem(student: Any, what: str, config: Mapping[str, Any], dtype_bytes: int) -> str | None:
    """None when kv_bytes_per_token(config, dtype_bytes) is right, else a message naming the likely mistake."""
    actual = student.kv_memory.kv_bytes_per_token(dict(config), dtype_bytes)
    if type(actual) is not int:
        return f"kv_bytes_per_token should return a plain int; got {type(actual).__name__} for {what}"
    expected = expected_bytes(config, dtype_bytes)
    if actual == expected:
        return None
    return (f"kv_bytes_per_token({what}, dtype_bytes={dtype_bytes}) returned {actual:,}, which is "
            f"{'too much' if actual > expected else 'too little'}. Likely cause: {likely_cause(config, dtype_bytes, actual)}")
