"""Public tests of kv_bytes_per_token and kv_cache_bytes (task kv_memory). Run: make test TASK=kv_memory.

Llama-3.1-8B (config.json): 32 layers, 8 KV heads, head size 128. In BF16 (2 bytes) a token needs
2 * 32 * 8 * 128 * 2 = 131,072 bytes (128 KiB) of K and V; 8,192 tokens of one sequence need 1 GiB.
"""
from __future__ import annotations

from typing import Any

import pytest

LLAMA_8B = (32, 8, 128)


@pytest.mark.task("kv_memory", points=1)
def test_llama_8b_bytes_per_token(student: Any) -> None:
    actual = student.kv_decode.kv_bytes_per_token(*LLAMA_8B, dtype_bytes=2)
    assert type(actual) is int, f"kv_bytes_per_token should return a plain int; got {type(actual).__name__}"
    assert actual == 131_072, f"kv_bytes_per_token(32, 8, 128, dtype_bytes=2) should be 131072; got {actual}"


@pytest.mark.task("kv_memory", points=1)
def test_llama_8b_cache_of_8k_tokens(student: Any) -> None:
    actual = student.kv_decode.kv_cache_bytes(*LLAMA_8B, seq_len=8192, batch=1, dtype_bytes=2)
    assert type(actual) is int, f"kv_cache_bytes should return a plain int; got {type(actual).__name__}"
    assert actual == 2**30, f"kv_cache_bytes(32, 8, 128, seq_len=8192, batch=1) should be 2**30 = {2**30}; got {actual}"
