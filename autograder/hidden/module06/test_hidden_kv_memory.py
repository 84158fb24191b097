"""Hidden tests of kv_memory.py (task kv_memory): the lab's four published models at every size of the
lab's table (and a config and sizes drawn off it), generated MHA/GQA/MQA/MLA configs, the largest batch at its exact boundaries (on a config
drawn per grading run), bad input."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from _memory_checks import bytes_problem, describe, expected_bytes, likely_cause
from kvlab.hf_configs import CONFIGS, LAB_BATCHES, LAB_SEQ_LENS
from kvlab.testing.draws import drawn
from memory_checks import BOOL, CHECKED_FIRST, Either, edge_problem
from kvlab.testing.conformance import run_given
from _memory_property_checks import memory_given, stated_problem


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


@pytest.mark.task("kv_memory", points=1)
def test_generated_configs(student: Any) -> None:
    for config in generated_configs(seed=6, n=25):
        problem = bytes_problem(student, describe(config), config, 2)
        assert problem is None, problem


def per_token_cause(student: Any, config: dict[str, Any], dtype_bytes: int) -> str | None:
    """When the student's kv_bytes_per_token of `config` is itself wrong, what is wrong with it; else None (the
    function under test is then at fault, not the count it builds on)."""
    try:
        actual = student.kv_memory.kv_bytes_per_token(dict(config), dtype_bytes)
    except Exception as error:  # a student's exception of any type is a finding
        return f"kv_bytes_per_token of this config raises {type(error).__name__} ({error}), though it is complete"
    if actual == expected_bytes(config, dtype_bytes):
        return None
    cause = likely_cause(config, dtype_bytes, actual,
                         probe=lambda changed: student.kv_memory.kv_bytes_per_token(dict(changed), dtype_bytes))
    return f"kv_bytes_per_token of this config is wrong itself ({cause})"


def gib_cause(actual: float, expected: float) -> str:
    """The factor a kv_cache_gib answer is likely off by, named (not its value)."""
    named = {2.0: "twice the contract's: K and V counted twice?", 0.5: "half the contract's: the factor 2 for K and V?",
             2**30 / 1e9: "GB (bytes / 10**9), not GiB (bytes / 2**30)"}
    ratio = actual / expected
    return next((f" ({name})" for factor, name in named.items() if abs(ratio - factor) <= 1e-6 * factor), "")


def boundary_config() -> dict[str, Any]:
    """A GQA config drawn per submission (kvlab.testing.draws.drawn): at its boundaries max_batch's
    arguments give a sequence's bytes away, so they must not be a published model's (a hidden answer)."""
    return generated_configs(seed=drawn(0, 2**31), n=2)[1]


def gib_calls() -> list[tuple[str, dict[str, Any], int, int]]:
    """(what the message calls the config, config, seq_len, batch): the lab's table (every published model
    at every size of kvlab.hf_configs' grid), then a config and sizes off that grid drawn per grading run,
    so that an answer right only on the table's known inputs is told apart from the rule."""
    rng = np.random.default_rng(drawn(0, 2**31))
    seq_len, batch = int(rng.integers(100, 50_000)), int(rng.integers(2, 64))
    seq_len += seq_len in LAB_SEQ_LENS  # off the grid
    batch += batch in LAB_BATCHES
    config = generated_configs(seed=drawn(0, 2**31), n=2)[1]
    return [*((model, spec.as_dict(), seq_len, batch) for model, spec in CONFIGS.items()
              for seq_len in LAB_SEQ_LENS for batch in LAB_BATCHES),
            (describe(config), config, seq_len, batch)]


@pytest.mark.task("kv_memory", points=1)
def test_the_labs_table_in_gib(student: Any) -> None:
    for name, config, seq_len, batch in gib_calls():
        actual = student.kv_memory.kv_cache_gib(dict(config), seq_len, batch)
        expected = expected_bytes(config, 2) * seq_len * batch / 2**30
        assert isinstance(actual, float), f"kv_cache_gib should return a float; got {type(actual).__name__}"
        # More or less, and the likely factor, but not the factor itself: actual / factor would be a
        # published model's byte count, a hidden answer.
        if abs(actual - expected) <= 1e-9 * expected:
            continue
        cause = (per_token_cause(student, config, 2)
                 or "GiB is bytes / 2**30, unrounded, of kv_bytes_per_token * seq_len * batch")
        pytest.fail(f"kv_cache_gib({name}, seq_len={seq_len}, batch={batch}) returned {actual}, "
                    f"{'more' if actual > expected else 'less'} than the contract's GiB"
                    f"{gib_cause(actual, expected)}. Likely cause: {cause}", pytrace=False)


@pytest.mark.task("kv_memory", points=1)
@pytest.mark.parametrize("seq_len", [1000, 8192])
def test_max_batch_at_its_boundaries(student: Any, seq_len: int) -> None:
    config = boundary_config()
    per_sequence = expected_bytes(config, 2) * seq_len
    # The offsets from an exact fit are drawn too, so that no argument is a sequence's bytes (or one less): a
    # submission must not be able to read the answer off gpu_bytes - weight_bytes.
    rng = np.random.default_rng(drawn(0, 2**31))
    weights = 987_654_321 + int(rng.integers(0, 10**6))
    rounding = "the answer is (gpu_bytes - weight_bytes) // (bytes per token * seq_len), rounded down, never up"
    for batch in (0, 1, 7, 40):
        below, above = int(rng.integers(1, per_sequence)), int(rng.integers(1, per_sequence))
        for slack, want in ((0, batch), (-below, batch - 1), (above, batch)):
            gpu = weights + batch * per_sequence + slack
            if gpu < 1 or want < 0:
                continue
            actual = student.kv_memory.max_batch(dict(config), seq_len, gpu, weights)
            if actual == want and type(actual) is int:
                continue
            # Not how many fit, nor a sequence's bytes (the arguments give those away for this drawn config only).
            cause = (per_token_cause(student, config, 2) or (rounding + ", and a sequence that exactly fits counts"
                                                             if slack == 0 else rounding))
            pytest.fail(
                f"max_batch({describe(config)}, seq_len={seq_len}, gpu_bytes={gpu:,}, weight_bytes={weights:,}) "
                f"returned {actual!r}: " + ("not an int" if type(actual) is not int else "more sequences than fit"
                                             if actual > want else "fewer sequences than fit") + f". Likely cause: {cause}",
                pytrace=False)
    # Weights that do not fit, short by a drawn amount: not by exactly one byte, which a submission could
    # recognize and answer 0 to without the rule.
    gpu = weights - int(rng.integers(1, weights))
    actual = student.kv_memory.max_batch(dict(config), seq_len, gpu, weights)
    assert actual == 0, (f"max_batch({describe(config)}, seq_len={seq_len}, gpu_bytes={gpu:,}, "
                         f"weight_bytes={weights:,}) should be 0: max_batch is 0 when the weights alone do not fit "
                         f"(nothing fits; an int >= 0, never negative); got {actual!r}")


@pytest.mark.task("kv_memory", points=1)
def test_max_batch_of_an_mla_model(student: Any) -> None:
    spec = CONFIGS["DeepSeek-V3"]
    gpu, weights = 8 * 141 * 10**9, spec.n_params  # eight 141 GB GPUs, FP8 weights (1 byte each)
    expected = (gpu - weights) // (expected_bytes(spec.config, 2) * 32768)
    actual = student.kv_memory.max_batch(spec.as_dict(), 32768, gpu, weights)
    if actual != expected:
        cause = (per_token_cause(student, spec.as_dict(), 2)
                 or "the answer is (gpu_bytes - weight_bytes) // (bytes per token * seq_len), rounded down")
        pytest.fail(
            f"max_batch(DeepSeek-V3, seq_len=32768, gpu_bytes={gpu:,} (8 x 141 GB), weight_bytes={weights:,} (FP8)) "
            f"returned {actual!r}, {'too many' if isinstance(actual, int) and actual > expected else 'not the right count'}"
            f". Likely cause: {cause}", pytrace=False)


SMALL = {"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8}
HEAD_DIM_ONE = {"num_hidden_layers": 3, "hidden_size": 8, "num_attention_heads": 8}
PER_LAYER_ONLY = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2}
MLA_ONLY = {"num_hidden_layers": 3, "kv_lora_rank": 128, "qk_rope_head_dim": 32}
NO_QUERY_HEADS = {"num_hidden_layers": 2, "num_key_value_heads": 2, "head_dim": 16}
# (function, arguments, ValueError, the right answer or Either, what the case is, the rule it checks).
EDGES = [
    ("kv_bytes_per_token", ({"hidden_size": 512},), ValueError, "num_attention_heads and num_hidden_layers missing",
     "a required field that is missing is a ValueError naming it"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "num_attention_heads": 4},), ValueError,
     "hidden_size missing with no head_dim", "hidden_size is required when head_dim is absent"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2.0, "num_attention_heads": 4, "head_dim": 8},), ValueError,
     "float num_hidden_layers", "every count must be a positive int"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "kv_lora_rank": 64},), ValueError, "MLA without qk_rope_head_dim",
     "MLA requires kv_lora_rank and qk_rope_head_dim"),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "hidden_size": 6, "num_attention_heads": 8},), ValueError,
     "hidden_size smaller than num_attention_heads and no head_dim (hidden_size // num_attention_heads is 0)",
     "a derived head_dim must be at least 1"),
    ("kv_bytes_per_token", (SMALL, 0), ValueError, "dtype_bytes 0", "every count must be a positive int"),
    ("kv_cache_gib", (SMALL, 16, -2), ValueError, "batch -2", "every count must be a positive int"),
    ("kv_cache_gib", (SMALL, -16, 2), ValueError, "seq_len -16", "every count must be a positive int"),
    ("kv_cache_gib", (SMALL, 16, True), ValueError, "batch True", BOOL),
    ("max_batch", (SMALL, 16, 0, 0), ValueError, "gpu_bytes 0", "every count must be a positive int"),
    ("max_batch", (SMALL, 16, -1, 0), ValueError, "gpu_bytes -1", "every count must be a positive int"),
    ("kv_cache_gib", (SMALL, 0, 2), ValueError, "seq_len 0", "every count must be a positive int"),
    ("kv_cache_gib", (SMALL, 16, 2.0), ValueError, "float batch", "every count must be a positive int"),
    ("kv_bytes_per_token", (SMALL, True), ValueError, "dtype_bytes True", BOOL),
    ("kv_bytes_per_token", ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8, "num_key_value_heads": 0},),
     ValueError, "num_key_value_heads 0", "every count must be a positive int"),
    ("max_batch", (SMALL, 16, 10**9, 1.5), ValueError, "float weight_bytes", "weight_bytes must be an int >= 0"),
    ("max_batch", (SMALL, 16, 10**9, -1), ValueError, "weight_bytes -1", "weight_bytes must be an int >= 0"),
    ("max_batch", (SMALL, 1.5, 10**9, 0), ValueError, "float seq_len", "every count must be a positive int"),
    ("max_batch", (SMALL, True, 10**9, 0), ValueError, "seq_len True", BOOL),
    ("max_batch", (SMALL, 16, True, 0), ValueError, "gpu_bytes True", BOOL),
    ("max_batch", (SMALL, 16, 10**9, False), ValueError, "weight_bytes False", BOOL + ": False is not a weight_bytes of 0"),
    ("max_batch", (SMALL, 16, 10**9, 0, True), ValueError, "dtype_bytes True", BOOL),
    ("max_batch", (SMALL, True, -5, 0), ValueError, "seq_len True and gpu_bytes -5", BOOL + ", and -5 is not positive"),
    ("max_batch", ({"hidden_size": 512}, 16, 1000, 10**9), ValueError,
     "an incomplete config with weights larger than the GPU", CHECKED_FIRST),
    ("max_batch", (SMALL, 16, 1000, 10**9, 0), ValueError, "dtype_bytes 0 with weights larger than the GPU",
     CHECKED_FIRST),
    ("kv_bytes_per_token", (HEAD_DIM_ONE,), expected_bytes(HEAD_DIM_ONE, 2),
     "hidden_size equal to num_attention_heads (head_dim 1)", "a head_dim of 1 is valid: only 0 is refused"),
    ("kv_values_per_token_per_layer", (PER_LAYER_ONLY,), 2 * 2 * (64 // 4), "a config without num_hidden_layers",
     "kv_values_per_token_per_layer counts one layer: num_hidden_layers is not required there"),
    ("kv_bytes_per_token", (MLA_ONLY,), expected_bytes(MLA_ONLY, 2), "an MLA config with no heads, hidden_size or head_dim",
     "MLA reads only num_hidden_layers, kv_lora_rank and qk_rope_head_dim: no other field is required"),
    ("kv_bytes_per_token", (NO_QUERY_HEADS,), Either(expected_bytes(NO_QUERY_HEADS, 2)),
     "num_key_value_heads and head_dim given, num_attention_heads absent",
     "either a ValueError naming num_attention_heads or the count 2 * num_hidden_layers * num_key_value_heads * "
     "head_dim * dtype_bytes"),
    ("kv_cache_gib", (SMALL, 16, 3, 4), expected_bytes(SMALL, 4) * 16 * 3 / 2**30, "dtype_bytes 4",
     "dtype_bytes is passed on to kv_bytes_per_token"),
    ("max_batch", (SMALL, 16, 10**6 + 3, 0), (10**6 + 3) // (expected_bytes(SMALL, 2) * 16), "weight_bytes 0",
     "weight_bytes 0 (an int >= 0) is valid: all of gpu_bytes holds KV"),
    ("max_batch", (SMALL, 16, 10**6, 1000, 1), (10**6 - 1000) // (expected_bytes(SMALL, 1) * 16), "dtype_bytes 1",
     "dtype_bytes is passed on to kv_bytes_per_token"),
]


def wrong_cause(student: Any, call: str, args: tuple, rule: str) -> str:
    """Why a count is wrong: the per-token count it builds on when that is wrong itself, else the case's rule."""
    config = args[0]
    if call in ("kv_cache_gib", "max_batch"):
        dtype_bytes = args[3] if call == "kv_cache_gib" and len(args) > 3 else args[4] if len(args) > 4 else 2
        return per_token_cause(student, config, dtype_bytes) or rule
    return rule


# 32 cases: 2 / 32 points each, exact in results.json's six decimals (2 / 27 summed to 1.999998).
@pytest.mark.task("kv_memory", points=2 / len(EDGES))
@pytest.mark.parametrize(("call", "args", "want", "why", "rule"), EDGES, ids=[e[3] for e in EDGES])
def test_edge_cases(student: Any, call: str, args: tuple, want: Any, why: str, rule: str) -> None:
    problem = edge_problem(student, call, args, want, why, rule, lambda: wrong_cause(student, call, args, rule),
                           reveal=False)
    assert problem is None, problem


# Checked before the generated configs on every run: a field present with 0 or False is read (only absent
# or None is a default), and a plain MLA config that lists num_key_value_heads, which the generated configs
# reach on some draws only.
HIDDEN_STATED = (({"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 4, "hidden_size": 64,
                   "kv_lora_rank": 128, "qk_rope_head_dim": 16}, 2),
                 ({"num_hidden_layers": 3, "num_attention_heads": 8, "head_dim": 16, "num_key_value_heads": 0}, 4),
                 ({"num_hidden_layers": 5, "num_attention_heads": 2, "head_dim": 32, "num_key_value_heads": False}, 1),
                 ({"num_hidden_layers": 3, "num_attention_heads": 8, "hidden_size": 64, "head_dim": 0}, 4),
                 ({"num_hidden_layers": 7, "kv_lora_rank": 0, "qk_rope_head_dim": 32}, 1),
                 ({"num_hidden_layers": 3, "num_attention_heads": 2, "hidden_size": 48, "kv_lora_rank": None}, 4))


# Generated configs with edge values (_memory_property_checks.py: hidden, as its formula is the answer): the
# docstring's rules leave one freedom, compared up to it, so they are the reference here.
@pytest.mark.task("kv_memory", points=1)
def test_generated_configs_keep_the_rules(student: Any) -> None:
    problem = stated_problem(student, HIDDEN_STATED)
    assert problem is None, problem
    run_given(memory_given(student, examples=25))
