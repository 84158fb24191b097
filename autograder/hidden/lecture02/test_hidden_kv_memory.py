"""Hidden tests of kv_bytes_per_token and kv_cache_bytes (task kv_memory) on real model configs.

The configs are fixed data, so the messages say which way a count is off and which factor is
missing, never the expected count, and every check draws part of its input from the grading's
seed, a hash of the submitted files (the per-token counts a number of layers added to the model's,
the cache sizes their sequence length and batch): neither a table collected by resubmitting nor one of published per-token figures
answers them.
"""
from __future__ import annotations

from typing import Any

import pytest

from conformance_checks import bytes_property
from kvlab.testing.conformance import run_given
from decode_checks import bytes_problem
from kvlab.testing.draws import drawn

# (layers, KV heads, head size) from each model's published config.json, and its KV bytes per
# token in BF16 (2 bytes), as tabulated in the course's reference notes. Not the public tests'
# Llama-3.1-8B: an answer copied from a public test must earn nothing here.
MODELS = {
    "Llama-2-7B": ((32, 32, 128), 524_288),
    "Llama-3.1-70B": ((80, 8, 128), 327_680),
    "Qwen2.5-0.5B": ((24, 2, 64), 12_288),
    "Qwen2.5-7B": ((28, 4, 128), 57_344),
}


@pytest.mark.task("kv_memory", points=1.8)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_bytes_per_token_on_real_models(student: Any, model: str) -> None:
    (real_layers, kv_heads, head), bf16 = MODELS[model]
    assert 2 * real_layers * kv_heads * head * 2 == bf16, f"test setup: {model} should need {bf16} bytes/token"
    # The model's KV heads and head size, with layers added: its published figure answers nothing.
    layers = real_layers + drawn(1, 40)
    for dtype_bytes in (1, 2, 4):
        expected = 2 * layers * kv_heads * head * dtype_bytes
        call = (f"kv_bytes_per_token({layers}, {kv_heads}, {head}, dtype_bytes={dtype_bytes}) ({model}'s KV heads "
                f"and head size, {layers} layers)")
        factors = {"2 (K and V are both stored)": 2, "dtype_bytes": dtype_bytes, "n_layers": layers}
        actual = student.kv_decode.kv_bytes_per_token(layers, kv_heads, head, dtype_bytes=dtype_bytes)
        problem = bytes_problem(call, actual, expected, factors, reveal=False)
        assert problem is None, problem


@pytest.mark.task("kv_memory", points=0.9)
def test_bytes_per_token_defaults_to_two_bytes(student: Any) -> None:
    (real_layers, kv_heads, head), bf16 = MODELS["Qwen2.5-7B"]
    layers = real_layers + drawn(1, 40)
    actual = student.kv_decode.kv_bytes_per_token(layers, kv_heads, head)
    call = (f"kv_bytes_per_token({layers}, {kv_heads}, {head}) (Qwen2.5-7B's KV heads and head size, {layers} layers, "
            "dtype_bytes left at its default)")
    factors = {"2 (K and V are both stored)": 2, "dtype_bytes": 2}
    problem = bytes_problem(call, actual, bf16 // real_layers * layers, factors, reveal=False)
    assert problem is None, f"{problem} (the default dtype_bytes is 2, BF16)"


@pytest.mark.task("kv_memory", points=1.35)
@pytest.mark.parametrize(("model", "dtype_bytes"), [("Llama-2-7B", 2), ("Llama-3.1-70B", 2), ("Qwen2.5-0.5B", 1),
                                                  ("Qwen2.5-7B", 4)])
def test_cache_bytes_on_real_models(student: Any, model: str, dtype_bytes: int) -> None:
    (layers, kv_heads, head), _ = MODELS[model]
    # A batch of at least 2, so that a count missing the batch factor is told apart.
    seq_len, batch = drawn(1_000, 40_000), drawn(2, 8)
    expected = 2 * layers * kv_heads * head * dtype_bytes * seq_len * batch
    call = (f"kv_cache_bytes({layers}, {kv_heads}, {head}, seq_len={seq_len}, batch={batch}, "
            f"dtype_bytes={dtype_bytes}) ({model})")
    factors = {"2 (K and V are both stored)": 2, "dtype_bytes": dtype_bytes, "seq_len": seq_len, "batch": batch}
    actual = student.kv_decode.kv_cache_bytes(layers, kv_heads, head, seq_len, batch, dtype_bytes=dtype_bytes)
    problem = bytes_problem(call, actual, expected, factors, reveal=False)
    assert problem is None, problem


@pytest.mark.task("kv_memory", points=0.9)
def test_cache_bytes_defaults_to_two_bytes(student: Any) -> None:
    (layers, kv_heads, head), bf16 = MODELS["Llama-3.1-70B"]
    seq_len, batch = drawn(1_000, 40_000), drawn(2, 8)
    actual = student.kv_decode.kv_cache_bytes(layers, kv_heads, head, seq_len, batch)
    call = (f"kv_cache_bytes({layers}, {kv_heads}, {head}, seq_len={seq_len}, batch={batch}) (Llama-3.1-70B, "
            "dtype_bytes left at its default)")
    factors = {"2 (K and V are both stored)": 2, "dtype_bytes": 2, "seq_len": seq_len, "batch": batch}
    problem = bytes_problem(call, actual, bf16 * seq_len * batch, factors, reveal=False)
    assert problem is None, f"{problem} (the default dtype_bytes is 2, BF16)"


# The formulas on generated arguments (conformance_checks.py), more of them than the public run.
@pytest.mark.task("kv_memory", points=1)
def test_generated_arguments_keep_the_formulas(student: Any) -> None:
    run_given(bytes_property(student, max_examples=30))
