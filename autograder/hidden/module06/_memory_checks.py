"""Trusted-side KV-memory arithmetic for the hidden kv_memory tests, and the diagnosis of a wrong count.

`expected_bytes` is the rule of kv_memory.py's docstring; `likely_cause` recomputes the count with
each usual mistake and names the first one that reproduces the student's number. The check itself is
the public tests' (memory_checks.bytes_problem), given these two.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memory_checks import bytes_problem as shared_bytes_problem


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
        heads, dim, kv_heads = config["num_attention_heads"], _head_dim(config), _kv_heads(config)
        found += [
            (2 * layers * heads * dim * dtype_bytes, HEADS_CAUSE),
            (2 * layers * kv_heads * (config.get("hidden_size", 0) // heads) * dtype_bytes,
             "head_dim is given: use it, not hidden_size // num_attention_heads"),
        ]
        if config.get("num_key_value_heads") is None:
            found.append((2 * layers * dim * dtype_bytes, "num_key_value_heads absent (or None) means MHA: as many KV "
                          "heads as num_attention_heads, not 1"))
        if config.get("head_dim") is None:
            found.append((2 * layers * kv_heads * (config["hidden_size"] // kv_heads) * dtype_bytes, HEAD_DIM_CAUSE))
    return [(value, cause) for value, cause in found if value != right]


HEADS_CAUSE = "num_attention_heads used where num_key_value_heads is given: GQA/MQA cache only the KV heads"
HEAD_DIM_CAUSE = ("head_dim absent means hidden_size // num_attention_heads (the query heads), not "
                  "hidden_size // num_key_value_heads")


def likely_cause(config: Mapping[str, Any], dtype_bytes: int, actual: Any,
                 probe: Callable[[dict[str, Any]], Any] | None = None) -> str:
    """The usual mistake that reproduces `actual`. Two mistakes give the same count on a GQA config without
    head_dim (query heads for the KV heads; head_dim as hidden_size // num_key_value_heads): `probe`, the
    student's kv_bytes_per_token of a config, then decides, asked again with head_dim given explicitly."""
    try:
        mistakes = _mistakes(config, dtype_bytes)
    except (KeyError, TypeError, ZeroDivisionError):  # a config missing a field no mistake can be recomputed on
        mistakes = []
    causes = list(dict.fromkeys(cause for value, cause in mistakes if actual == value))
    if {HEADS_CAUSE, HEAD_DIM_CAUSE} <= set(causes) and probe is not None:
        explicit = {**config, "head_dim": config["hidden_size"] // config["num_attention_heads"]}
        try:
            fixed = probe(explicit) == expected_bytes(explicit, dtype_bytes)
        except Exception:  # a student's exception of any type: no decision from it
            fixed = None
        if fixed is not None:
            causes.remove(HEADS_CAUSE if fixed else HEAD_DIM_CAUSE)
    if causes:
        return "; or ".join(causes)
    return "recheck the rule in kv_memory.py's docstring (MHA/GQA/MQA defaults, MLA)"


def describe(config: Mapping[str, Any]) -> str:
    """The fields that matter, for a message."""
    keys = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "kv_lora_rank", "qk_rope_head_dim")
    return "{" + ", ".join(f"{k}: {config[k]!r}" for k in keys if k in config) + "}"


def bytes_problem(student: Any, what: str, config: Mapping[str, Any], dtype_bytes: int) -> str | None:
    """None when kv_bytes_per_token(config, dtype_bytes) is right, else a message naming the likely mistake."""
    return shared_bytes_problem(
        student, what, config, dtype_bytes, expected_bytes(config, dtype_bytes),
        lambda actual: likely_cause(config, dtype_bytes, actual,
                                    probe=lambda changed: student.kv_memory.kv_bytes_per_token(dict(changed), dtype_bytes)),
        reveal=False)
