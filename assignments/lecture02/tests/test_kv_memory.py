"""Public tests of kv_bytes_per_token and kv_cache_bytes (task kv_memory). Run: make test TASK=kv_memory.

Llama-3.1-8B (config.json): 32 layers, 8 KV heads, head size 128. In BF16 (2 bytes) a token needs
2 * 32 * 8 * 128 * 2 = 131,072 bytes (128 KiB) of K and V; 8,192 tokens of one sequence need 1 GiB.
The grader checks the same formulas, with the same diagnoses (decode_checks.py), on other models.
"""
from __future__ import annotations

from typing import Any

import pytest

from conformance_checks import bytes_property
from kvlab.testing.conformance import run_given
from decode_checks import bytes_problem

LLAMA_8B = (32, 8, 128)
K_AND_V = "2 (K and V are both stored)"


@pytest.mark.task("kv_memory", points=0.9)
def test_llama_8b_bytes_per_token(student: Any) -> None:
    actual = student.kv_decode.kv_bytes_per_token(*LLAMA_8B, dtype_bytes=2)
    problem = bytes_problem("kv_bytes_per_token(32, 8, 128, dtype_bytes=2) (Llama-3.1-8B)", actual, 131_072,
                            {K_AND_V: 2, "dtype_bytes": 2, "n_layers": 32})
    assert problem is None, problem


@pytest.mark.task("kv_memory", points=0.9)
def test_llama_8b_cache_of_8k_tokens(student: Any) -> None:
    actual = student.kv_decode.kv_cache_bytes(*LLAMA_8B, 8192, 1, dtype_bytes=2)
    problem = bytes_problem("kv_cache_bytes(32, 8, 128, 8192, 1, dtype_bytes=2) (Llama-3.1-8B)", actual, 2**30,
                            {K_AND_V: 2, "dtype_bytes": 2, "seq_len": 8192})
    assert problem is None, problem


@pytest.mark.task("kv_memory", points=0.9)
def test_llama_8b_cache_of_a_batch(student: Any) -> None:
    # A batch of 4 sequences of 2,048 tokens in FP8 (1 byte): 4 * 2048 * 65,536 bytes = 512 MiB.
    actual = student.kv_decode.kv_cache_bytes(*LLAMA_8B, 2048, 4, dtype_bytes=1)
    problem = bytes_problem("kv_cache_bytes(32, 8, 128, 2048, 4, dtype_bytes=1) (Llama-3.1-8B)", actual, 2**29,
                            {K_AND_V: 2, "seq_len": 2048, "batch": 4})
    assert problem is None, problem


@pytest.mark.task("kv_memory", points=0.9)
def test_dtype_bytes_defaults_to_two(student: Any) -> None:
    # dtype_bytes left out: both functions count BF16, 2 bytes per value.
    actual = student.kv_decode.kv_bytes_per_token(*LLAMA_8B)
    problem = bytes_problem("kv_bytes_per_token(32, 8, 128) (Llama-3.1-8B, dtype_bytes left at its default)", actual,
                            131_072, {K_AND_V: 2, "dtype_bytes": 2})
    assert problem is None, f"{problem} (the default dtype_bytes is 2, BF16)"
    actual = student.kv_decode.kv_cache_bytes(*LLAMA_8B, 8192, 1)
    problem = bytes_problem("kv_cache_bytes(32, 8, 128, 8192, 1) (Llama-3.1-8B, dtype_bytes left at its default)",
                            actual, 2**30, {K_AND_V: 2, "dtype_bytes": 2, "seq_len": 8192})
    assert problem is None, f"{problem} (the default dtype_bytes is 2, BF16)"


# The formulas on generated arguments: 0, small, real and past 2**63, dtype_bytes given or not.
@pytest.mark.task("kv_memory", points=1)
def test_generated_arguments_keep_the_formulas(student: Any) -> None:
    run_given(bytes_property(student, max_examples=20))
