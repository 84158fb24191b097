"""Hidden tests of kv_memory.py (task kv_memory): the lab's four published models at every size of the
lab's table, generated MHA/GQA/MQA/MLA configs, the largest batch at its exact boundaries, bad input."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _memory_checks import bytes_problem, describe, expected_bytes
from kvlab.hf_configs import CONFIGS, LAB_BATCHES, LAB_SEQ_LENS


def generated_configs(seed: int, n: int) -> list[dict[str, Any]]:
    """Configs of every attention kind, with and without the optional fields."""
    rng = np.random.default_rng(seed)
    configs = []
    for index in range(n):
        heads = int(rng.choice([4, 8, 12, 16, 32]))
        config: dict[str, Any] = {"num_hidden_layers": int(rng.integers(1, 90)),
                                  "hidden_size": heads * int(rng.choice([32, 64, 80, 128])),
                                  "num_attention_heads": heads}
        kind = index % 5
        if kind == 1:  # GQA
            config["num_key_value_heads"] = heads // int(rng.choice([2, 4]))
        elif kind == 2:  # MQA with an explicit head_dim unlike hidden_size // heads
            config.update(num_key_value_heads=1, head_dim=int(rng.choice([48, 96, 160])))
        elif kind == 3:  # MLA, num_key_value_heads present and to be ignored
            config.update(num_key_value_heads=heads, kv_lora_rank=int(rng.choice([256, 512])),
                          qk_rope_head_dim=int(rng.choice([32, 64])))
        elif kind == 4:  # explicit None: the same as absent
            config.update(num_key_value_heads=None, head_dim=None, kv_lora_rank=None)
        configs.append(config)
    return configs


@pytest.mark.task("kv_memory", points=0.5)
@pytest.mark.parametrize("model", sorted(CONFIGS))
def test_published_models(student: Any, model: str) -> None:
    for dtype_bytes in (1, 2, 4):
        problem = bytes_problem(student, f"the published {model} config", CONFIGS[model].config, dtype_bytes)
        assert problem is None, problem


@pytest.mark.task("kv_memory", points=2)
def test_generated_configs(student: Any) -> None:
    for config in generated_configs(seed=6, n=25):
        problem = bytes_problem(student, describe(config), config, 2)
        assert problem is None, problem


@pytest.mark.task("kv_memory", points=1)
def test_the_labs_table_in_gib(student: Any) -> None:
    for model, spec in CONFIGS.items():
        for seq_len in LAB_SEQ_LENS:
            for batch in LAB_BATCHES:
                actual = student.kv_memory.kv_cache_gib(spec.as_dict(), seq_len, batch)
                expected = expected_bytes(spec.config, 2) * seq_len * batch / 2**30
                assert isinstance(actual, float), f"kv_cache_gib should return a float; got {type(actual).__name__}"
                assert abs(actual - expected) <= 1e-9 * expected, (
                    f"kv_cache_gib({model}, seq_len={seq_len}, batch={batch}) returned {actual}, off by a factor "
                    f"{actual / expected:.4g}. Likely cause: GiB is bytes / 2**30, unrounded, of "
                    "kv_bytes_per_token * seq_len * batch")


@pytest.mark.task("kv_memory", points=1)
@pytest.mark.parametrize("seq_len", [1000, 8192])
def test_max_batch_at_its_boundaries(student: Any, seq_len: int) -> None:
    config = CONFIGS["Qwen2.5-0.5B"].config
    per_sequence = expected_bytes(config, 2) * seq_len
    weights = 987_654_321
    for batch in (0, 1, 7, 40):
        for slack, want in ((0, batch), (-1, batch - 1), (per_sequence - 1, batch)):
            gpu = weights + batch * per_sequence + slack
            if gpu < 1 or want < 0:
                continue
            actual = student.kv_memory.max_batch(dict(config), seq_len, gpu, weights)
            assert actual == want, (
                f"max_batch(Qwen2.5-0.5B, seq_len={seq_len}) with {gpu - weights:,} bytes beside the weights "
                f"(room for {want} whole sequences of {per_sequence:,} bytes) returned {actual!r}. Likely cause: "
                "the answer is (gpu_bytes - weight_bytes) // (bytes per token * seq_len), rounded down, never "
                "rounded up, and a sequence that exactly fits counts")
    actual = student.kv_memory.max_batch(dict(config), seq_len, weights - 1, weights)
    assert actual == 0, f"max_batch with weights larger than the GPU should be 0 (nothing fits); got {actual!r}"


@pytest.mark.task("kv_memory", points=1)
def test_max_batch_of_an_mla_model(student: Any) -> None:
    spec = CONFIGS["DeepSeek-V3"]
    gpu, weights = 8 * 141 * 10**9, spec.n_params  # eight 141 GB GPUs, FP8 weights (1 byte each)
    expected = (gpu - weights) // (expected_bytes(spec.config, 2) * 32768)
    actual = student.kv_memory.max_batch(spec.as_dict(), 32768, gpu, weights)
    assert actual == expected, (
        f"max_batch(DeepSeek-V3, seq_len=32768, 8 x 141 GB, FP8 weights) returned {actual!r}, "
        f"{'too many' if isinstance(actual, int) and actual > expected else 'not the right count'}. Likely cause: "
        "kv_bytes_per_token of an MLA config (see test_published_models)")


BAD = [
    ("kv_bytes_per_token", ({"hidden_size": 512},), "num_attention_heads and num_hidden_layers missing"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "num_attention_heads": 4},), "hidden_size missing with no head_dim"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2.0, "num_attention_heads": 4, "head_dim": 8},), "float num_hidden_layers"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "kv_lora_rank": 64},), "MLA without qk_rope_head_dim"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}, 0), "dtype_bytes 0"),
    ("kv_cache_gib", ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}, 16, -2), "batch -2"),
    ("max_batch", ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}, 16, 0, 0), "gpu_bytes 0"),
    ("max_batch", ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}, 16, 10**9, 1.5), "float weight_bytes"),
]


@pytest.mark.task("kv_memory", points=0.25)
@pytest.mark.parametrize(("call", "args", "why"), BAD, ids=[b[2] for b in BAD])
def test_bad_input(student: Any, call: str, args: tuple, why: str) -> None:
    try:
        result = getattr(student.kv_memory, call)(*args)
    except ValueError:
        return
    except Exception as error:  # a student's exception of any type is a finding
        pytest.fail(f"{call} with {why} should raise ValueError; it raised {type(error).__name__}: {error}")
    pytest.fail(f"{call} with {why} should raise ValueError; it returned {result!r}")
