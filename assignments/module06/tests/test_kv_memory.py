"""Public tests of kv_memory.py (task kv_memory). Run: make test TASK=kv_memory.

Published configs come from `kvlab.hf_configs.CONFIGS`. Qwen2.5-7B: 28 layers, 4 KV heads, no
head_dim field (3584 // 28 = 128): 2 * 28 * 4 * 128 * 2 = 57,344 bytes per token in BF16.
DeepSeek-V3 (MLA): 61 layers x (512 + 64) values x 2 bytes = 70,272 bytes per token.
"""
from __future__ import annotations

from typing import Any

import pytest

from kvlab.hf_configs import CONFIGS

QWEN_7B = CONFIGS["Qwen2.5-7B"]
GPT2_LIKE = {"num_hidden_layers": 12, "hidden_size": 768, "num_attention_heads": 12}
MQA_WITH_HEAD_DIM = {"num_hidden_layers": 4, "hidden_size": 1000, "num_attention_heads": 8,
                     "num_key_value_heads": 1, "head_dim": 96}

# (case, config, dtype_bytes, expected bytes per token, {a wrong answer: its likely cause}).
CASES = [
    ("Qwen2.5-7B (GQA, no head_dim)", QWEN_7B.as_dict(), 2, 57_344, {
        401_408: "num_attention_heads used where num_key_value_heads (4) is given: GQA caches KV heads only",
        28_672: "K and V are two vectors per KV head: a factor 2 is missing"}),
    ("DeepSeek-V3 (MLA)", CONFIGS["DeepSeek-V3"].as_dict(), 2, 70_272, {
        3_997_696: "MLA treated as per-head K and V: with kv_lora_rank present, cache kv_lora_rank + qk_rope_head_dim",
        140_544: "MLA caches ONE latent per layer and token, no separate K and V: no factor 2",
        62_464: "the decoupled RoPE key (qk_rope_head_dim) is cached beside the latent"}),
    ("an MHA config without num_key_value_heads", GPT2_LIKE, 2, 36_864, {}),
    ("an MQA config with head_dim 96 (not 1000 // 8)", MQA_WITH_HEAD_DIM, 2, 1_536, {
        2_000: "head_dim is given: use it, not hidden_size // num_attention_heads"}),
    ("Qwen2.5-7B in FP8", QWEN_7B.as_dict(), 1, 28_672, {57_344: "dtype_bytes ignored"}),
]


@pytest.mark.task("kv_memory", points=1)
@pytest.mark.parametrize(("case", "config", "dtype_bytes", "expected", "causes"), CASES, ids=[c[0] for c in CASES])
def test_bytes_per_token(student: Any, case: str, config: dict, dtype_bytes: int, expected: int,
                         causes: dict[int, str]) -> None:
    actual = student.kv_memory.kv_bytes_per_token(config, dtype_bytes)
    assert type(actual) is int, f"kv_bytes_per_token should return a plain int; got {type(actual).__name__}"
    cause = causes.get(actual, "recheck the formula in the module docstring")
    assert actual == expected, f"kv_bytes_per_token for {case}, dtype_bytes={dtype_bytes}: got {actual}, expected {expected}. Likely cause: {cause}"


@pytest.mark.task("kv_memory", points=1)
def test_cache_gib_of_qwen_7b(student: Any) -> None:
    actual = student.kv_memory.kv_cache_gib(QWEN_7B.as_dict(), 32768, 8)
    assert isinstance(actual, float), f"kv_cache_gib should return a float; got {type(actual).__name__}"
    assert actual == 14.0, (f"kv_cache_gib(Qwen2.5-7B, seq_len=32768, batch=8) should be 57344 * 32768 * 8 / 2**30 = 14.0 "
                            f"GiB; got {actual} (a GiB is 2**30 bytes, not 10**9)")


@pytest.mark.task("kv_memory", points=1)
@pytest.mark.parametrize(("gpu_bytes", "expected"), [(80 * 10**9, 275), (24 * 10**9, 37)])
def test_max_batch_of_qwen_7b(student: Any, gpu_bytes: int, expected: int) -> None:
    weights = QWEN_7B.n_params * 2
    actual = student.kv_memory.max_batch(QWEN_7B.as_dict(), 4096, gpu_bytes, weights)
    assert type(actual) is int, f"max_batch should return a plain int; got {type(actual).__name__}"
    assert actual == expected, (
        f"max_batch(Qwen2.5-7B, seq_len=4096, gpu_bytes={gpu_bytes:,}, weight_bytes={weights:,}) should be "
        f"({gpu_bytes:,} - {weights:,}) // (57344 * 4096) = {expected}; got {actual}")


@pytest.mark.task("kv_memory", points=1)
def test_weights_that_do_not_fit_leave_no_batch(student: Any) -> None:
    spec = CONFIGS["Qwen2.5-72B"]
    actual = student.kv_memory.max_batch(spec.as_dict(), 2048, 24 * 10**9, spec.n_params * 2)
    assert actual == 0, f"Qwen2.5-72B's BF16 weights (145 GB) do not fit in 24 GB: max_batch should be 0; got {actual!r}"


# (function, arguments, ValueError or the right answer, what the case is). GPT2_LIKE: 36,864 bytes per token in BF16.
EDGES = [
    ("kv_bytes_per_token", ({"hidden_size": 768, "num_attention_heads": 12},), ValueError, "no num_hidden_layers"),
    ("kv_bytes_per_token", ({**GPT2_LIKE, "num_hidden_layers": True},), ValueError, "bool num_hidden_layers"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "hidden_size": 10, "num_attention_heads": 12},), ValueError,
     "hidden_size 10 < num_attention_heads 12, no head_dim"),
    ("kv_bytes_per_token", (GPT2_LIKE, -2), ValueError, "dtype_bytes -2"),
    ("kv_bytes_per_token", (GPT2_LIKE, True), ValueError, "bool dtype_bytes"),
    ("kv_cache_gib", (GPT2_LIKE, 0, 1), ValueError, "seq_len 0"),
    ("kv_cache_gib", (GPT2_LIKE, 1024, 0), ValueError, "batch 0"),
    ("kv_cache_gib", (GPT2_LIKE, 1024, 2.0), ValueError, "float batch"),
    ("max_batch", (GPT2_LIKE, 1024, 10**9, -1), ValueError, "negative weight_bytes"),
    ("max_batch", (GPT2_LIKE, 0, 10**9, 0), ValueError, "max_batch seq_len 0"),
    ("max_batch", (GPT2_LIKE, 1024, -5, 0), ValueError, "gpu_bytes -5"),
    ("max_batch", (GPT2_LIKE, 1024, 8e10, 0), ValueError, "float gpu_bytes"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "hidden_size": 12, "num_attention_heads": 12},), 96,
     "hidden_size == num_attention_heads: head_dim 1, 2 * 2 layers * 12 heads * 1 * 2 bytes"),
    ("kv_cache_gib", (GPT2_LIKE, 1024, 2, 4), 0.140625, "dtype_bytes 4: 73,728 bytes * 1024 * 2 / 2**30"),
    ("max_batch", (GPT2_LIKE, 1024, 36_864 * 1024 * 5 + 7, 0), 5, "weight_bytes 0: all of gpu_bytes holds KV"),
    ("max_batch", (GPT2_LIKE, 1024, 10**9, 0, 1), 52, "dtype_bytes 1: 10**9 // (18,432 * 1024)"),
]


@pytest.mark.task("kv_memory", points=1 / len(EDGES))
@pytest.mark.parametrize(("call", "args", "want", "why"), EDGES, ids=[e[3].split(":")[0] for e in EDGES])
def test_edge_cases(student: Any, call: str, args: tuple, want: Any, why: str) -> None:
    try:
        result = getattr(student.kv_memory, call)(*args)
    except ValueError as error:
        if want is ValueError:
            return
        pytest.fail(f"{call}{args!r} ({why}) raised ValueError: {error}; expected {want!r}", pytrace=False)
    assert want is not ValueError, (
        f"{call}{args!r} ({why}) should raise ValueError (see the module docstring); it returned {result!r}")
    assert result == want and type(result) is type(want), (
        f"{call}{args!r} ({why}) returned {result!r}; expected {want!r} (a {type(want).__name__}). Likely cause: "
        "dtype_bytes must be passed on to kv_bytes_per_token; a head_dim of 1 and a weight_bytes of 0 are valid")
