"""Hidden tests of kv_memory.py (task kv_memory): the lab's four published models at every size of the
lab's table, generated MHA/GQA/MQA/MLA configs, the largest batch at its exact boundaries (on a config
drawn per grading run), bad input."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _memory_checks import bytes_problem, describe, expected_bytes
from kvlab.hf_configs import CONFIGS, LAB_BATCHES, LAB_SEQ_LENS
from kvlab.testing import drawn


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


def gib_cause(actual: float, expected: float) -> str:
    """The factor a kv_cache_gib answer is likely off by, named (not its value)."""
    named = {2.0: "twice the contract's: K and V counted twice?", 0.5: "half the contract's: the factor 2 for K and V?",
             2**30 / 1e9: "GB (bytes / 10**9), not GiB (bytes / 2**30)"}
    ratio = actual / expected
    return next((f" ({name})" for factor, name in named.items() if abs(ratio - factor) <= 1e-6 * factor), "")


def boundary_config() -> dict[str, Any]:
    """A GQA config drawn anew in every grading run (kvlab.testing.drawn): at its boundaries max_batch's
    arguments give a sequence's bytes away, so they must not be a published model's (a hidden answer)."""
    return generated_configs(seed=drawn(0, 2**31), n=2)[1]


@pytest.mark.task("kv_memory", points=1)
def test_the_labs_table_in_gib(student: Any) -> None:
    for model, spec in CONFIGS.items():
        for seq_len in LAB_SEQ_LENS:
            for batch in LAB_BATCHES:
                actual = student.kv_memory.kv_cache_gib(spec.as_dict(), seq_len, batch)
                expected = expected_bytes(spec.config, 2) * seq_len * batch / 2**30
                assert isinstance(actual, float), f"kv_cache_gib should return a float; got {type(actual).__name__}"
                # More or less, and the likely factor, but not the factor itself: actual / factor would be a
                # published model's byte count, a hidden answer.
                assert abs(actual - expected) <= 1e-9 * expected, (
                    f"kv_cache_gib({model}, seq_len={seq_len}, batch={batch}) returned {actual}, "
                    f"{'more' if actual > expected else 'less'} than the contract's GiB{gib_cause(actual, expected)}. "
                    "Likely cause: GiB is bytes / 2**30, unrounded, of kv_bytes_per_token * seq_len * batch")


@pytest.mark.task("kv_memory", points=1)
@pytest.mark.parametrize("seq_len", [1000, 8192])
def test_max_batch_at_its_boundaries(student: Any, seq_len: int) -> None:
    config = boundary_config()
    per_sequence = expected_bytes(config, 2) * seq_len
    weights = 987_654_321
    for batch in (0, 1, 7, 40):
        for slack, want in ((0, batch), (-1, batch - 1), (per_sequence - 1, batch)):
            gpu = weights + batch * per_sequence + slack
            if gpu < 1 or want < 0:
                continue
            actual = student.kv_memory.max_batch(dict(config), seq_len, gpu, weights)
            # Not how many fit, nor a sequence's bytes (the arguments give those away for this drawn config only).
            assert actual == want, (
                f"max_batch({describe(config)}, seq_len={seq_len}) with {gpu - weights:,} bytes beside the weights returned "
                f"{actual!r}: " + ("not an int" if type(actual) is not int else "more sequences than fit"
                                     if actual > want else "fewer sequences than fit")
                + ". Likely cause: the answer is (gpu_bytes - weight_bytes) // (bytes per token * seq_len), rounded "
                "down, never rounded up, and a sequence that exactly fits counts")
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


SMALL = {"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}
HEAD_DIM_ONE = {"num_hidden_layers": 3, "hidden_size": 8, "num_attention_heads": 8}
# (function, arguments, ValueError or the right answer, what the case is, the likely cause of a wrong answer).
EDGES = [
    ("kv_bytes_per_token", ({"hidden_size": 512},), ValueError, "num_attention_heads and num_hidden_layers missing", ""),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "num_attention_heads": 4},), ValueError,
     "hidden_size missing with no head_dim", ""),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2.0, "num_attention_heads": 4, "head_dim": 8},), ValueError,
     "float num_hidden_layers", ""),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "kv_lora_rank": 64},), ValueError, "MLA without qk_rope_head_dim", ""),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "hidden_size": 6, "num_attention_heads": 8},), ValueError,
     "hidden_size smaller than num_attention_heads and no head_dim (hidden_size // num_attention_heads is 0)", ""),
    ("kv_bytes_per_token", (SMALL, 0), ValueError, "dtype_bytes 0", ""),
    ("kv_cache_gib", (SMALL, 16, -2), ValueError, "batch -2", ""),
    ("kv_cache_gib", (SMALL, -16, 2), ValueError, "seq_len -16", ""),
    ("max_batch", (SMALL, 16, 0, 0), ValueError, "gpu_bytes 0", ""),
    ("max_batch", (SMALL, 16, 10**9, 1.5), ValueError, "float weight_bytes", ""),
    ("max_batch", (SMALL, 16, 10**9, -1), ValueError, "weight_bytes -1", ""),
    ("max_batch", (SMALL, 1.5, 10**9, 0), ValueError, "float seq_len", ""),
    ("kv_bytes_per_token", (HEAD_DIM_ONE,), expected_bytes(HEAD_DIM_ONE, 2),
     "hidden_size equal to num_attention_heads (head_dim 1)", "a head_dim of 1 is valid: only 0 is refused"),
    ("kv_cache_gib", (SMALL, 16, 3, 4), expected_bytes(SMALL, 4) * 16 * 3 / 2**30, "dtype_bytes 4",
     "dtype_bytes is passed on to kv_bytes_per_token"),
    ("max_batch", (SMALL, 16, 10**6 + 3, 0), (10**6 + 3) // (expected_bytes(SMALL, 2) * 16), "weight_bytes 0",
     "weight_bytes 0 (an int >= 0) is valid: all of gpu_bytes holds KV"),
    ("max_batch", (SMALL, 16, 10**6, 1000, 1), (10**6 - 1000) // (expected_bytes(SMALL, 1) * 16), "dtype_bytes 1",
     "dtype_bytes is passed on to kv_bytes_per_token"),
]


@pytest.mark.task("kv_memory", points=2 / len(EDGES))
@pytest.mark.parametrize(("call", "args", "want", "why", "cause"), EDGES, ids=[e[3] for e in EDGES])
def test_edge_cases(student: Any, call: str, args: tuple, want: Any, why: str, cause: str) -> None:
    try:
        result = getattr(student.kv_memory, call)(*args)
    except ValueError as error:
        if want is ValueError:
            return
        pytest.fail(f"{call} with {why} raised ValueError: {error}; it is valid input. Likely cause: {cause}",
                    pytrace=False)
    except Exception as error:  # a student's exception of any type is a finding
        pytest.fail(f"{call} with {why} should {'raise ValueError' if want is ValueError else 'return a count'}; it "
                    f"raised {type(error).__name__}: {error}", pytrace=False)
    if want is ValueError:
        pytest.fail(f"{call} with {why} should raise ValueError (see the module docstring); it returned {result!r}",
                    pytrace=False)
    close = isinstance(result, (int, float)) and not isinstance(result, bool) and abs(result - want) <= 1e-12 * abs(want)
    assert close and type(result) is type(want), (
        f"{call} with {why} returned {result!r}, "
        + (f"a {type(result).__name__}" if close else
           # A factor would give back a small count exactly: only the direction for ints.
           ("more than expected" if result > want else "less than expected") if type(want) is int
           and isinstance(result, (int, float)) else
           f"off by a factor {result / want:.4g}" if isinstance(result, (int, float)) and want else "which is wrong")
        + f". Likely cause: {cause}")
