"""kvlab.specs, kvlab.costs and kvlab.tables: the figures, the analytic counts, the formatting.

The specs are checked against the reference table (../shared/reference/domain.md) and against the
published parameter counts; the analytic counts of kvlab.costs against what kvlab.counter records
when the model really runs (the reference solution's greedy_decode, kvlab.model.generate, single
forward calls), field by field. And kvlab, which students import, must not hold the answer to
lecture 2's kv_bytes_per_token or kv_cache_bytes: no callable of it computes either, and no line of
its source multiplies layers by KV heads by head size.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import numbers
import pkgutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import kvlab
import kvlab.testing
from kvlab import costs
from kvlab.counter import Counts, counting
from kvlab.demo import load_module
from kvlab.model import TINY, Config, config_like, forward, generate, init_params
from kvlab.specs import HARDWARE, MODELS
from kvlab.tables import format_table, format_value, human_bytes, human_flops, human_ratio, human_seconds

REPO = Path(__file__).resolve().parents[2]
DENSE = [name for name, spec in MODELS.items() if spec.is_dense_llama_like]


# Lecture 2's answers, as shared/spec/student-api.md defines them. Here, in a repository test that is
# never shipped, they may be written out: kvlab itself must not hold them.
def kv_bytes_per_token(n_layers: int, n_kv_heads: int, d_head: int, dtype_bytes: int = 2) -> int:
    return 2 * n_layers * n_kv_heads * d_head * dtype_bytes


def kv_cache_bytes(n_layers: int, n_kv_heads: int, d_head: int, seq_len: int, batch: int, dtype_bytes: int = 2) -> int:
    return kv_bytes_per_token(n_layers, n_kv_heads, d_head, dtype_bytes) * seq_len * batch


def config_kv_bytes_per_token(cfg: Config, dtype_bytes: int) -> int:
    """A kvlab Config's KV bytes per token, the input kvlab.costs takes."""
    return kv_bytes_per_token(cfg.n_layers, cfg.n_kv_heads, cfg.d_head, dtype_bytes)


# domain.md, "KV bytes per token": model, layers, KV heads, head size, bytes per token in BF16.
@pytest.mark.parametrize("name, layers, kv_heads, head, expected", [
    ("Qwen2.5-0.5B", 24, 2, 64, 12_288),
    ("Qwen2.5-7B", 28, 4, 128, 57_344),
    ("Qwen2.5-72B", 80, 8, 128, 327_680),
    ("Llama-3.1-8B", 32, 8, 128, 131_072),
    ("Llama-3.1-70B", 80, 8, 128, 327_680),
    ("Llama-2-70B", 80, 8, 128, 327_680),
])
def test_published_kv_bytes_per_token_match_domain_table(name: str, layers: int, kv_heads: int, head: int,
                                                         expected: int) -> None:
    spec = MODELS[name]
    shape = (spec.n_layers, spec.n_kv_heads, spec.d_head)
    assert shape == (layers, kv_heads, head), f"{name}: (layers, KV heads, head size) {shape}, domain.md says {(layers, kv_heads, head)}"
    assert spec.kv_bytes_per_token == expected, f"{name}: {spec.kv_bytes_per_token} bytes/token recorded, domain.md says {expected}"
    # The recorded figure is data; here, outside kvlab, it must agree with the shape it came from.
    assert kv_bytes_per_token(layers, kv_heads, head) == expected, f"{name}: 2 x {layers} x {kv_heads} x {head} x 2 bytes != {expected}"


def test_deepseek_v3_caches_the_mla_latent() -> None:
    spec = MODELS["DeepSeek-V3"]
    assert spec.is_mla, "DeepSeek-V3 should be marked as multi-head latent attention"
    assert (spec.kv_lora_rank, spec.qk_rope_head_dim) == (512, 64), \
        f"MLA caches kv_lora_rank 512 + rope 64 values per token per layer, got {(spec.kv_lora_rank, spec.qk_rope_head_dim)}"
    latent = spec.n_layers * (spec.kv_lora_rank + spec.qk_rope_head_dim) * 2
    assert spec.kv_bytes_per_token == latent == 70_272, \
        f"DeepSeek-V3 in BF16: 61 * 576 * 2 = 70,272 bytes/token; recorded {spec.kv_bytes_per_token}, latent {latent}"
    plain = kv_bytes_per_token(spec.n_layers, spec.n_kv_heads, spec.d_head)
    assert plain > 3.8 * 2**20, f"the plain formula should claim about 3.8 MiB per token for DeepSeek-V3, got {plain}"
    with pytest.raises(ValueError, match="DeepSeek-V3"):
        costs.generation_counts(spec, 10, 10, kv_bytes_per_token=spec.kv_bytes_per_token)


# kvlab's modules and its test support's (kvlab.testing ships to students too); not kvlab.serving's,
# whose server needs requirements/serving.txt to import.
KVLAB_MODULES = sorted([*(info.name for info in pkgutil.iter_modules(kvlab.__path__)),
                        *(f"testing.{info.name}" for info in pkgutil.iter_modules(kvlab.testing.__path__))])
KVLAB_SOURCES = sorted([*Path(kvlab.__file__).parent.glob("*.py"), *Path(kvlab.testing.__file__).parent.glob("*.py")])
# Each answer, with the numbers of positional arguments it can be called with (dtype_bytes left at
# its default, or given).
ANSWERS: dict[str, tuple[Callable[..., int], tuple[int, ...]]] = {
    "kv_bytes_per_token": (kv_bytes_per_token, (3, 4)),
    "kv_cache_bytes": (kv_cache_bytes, (5, 6)),
}


def _callables(module: ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    """Every function and class `module` defines, private ones too (they import just as well), and
    the methods and property getters of those classes, unbound: `self` is one more argument."""
    for name, obj in vars(module).items():
        if not callable(obj) or getattr(obj, "__module__", None) != module.__name__:
            continue
        yield name, obj
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if attr.startswith("__"):
                    continue
                if isinstance(member, property):
                    member = member.fget
                elif isinstance(member, (staticmethod, classmethod)):
                    member = getattr(obj, attr)
                if callable(member):
                    yield f"{name}.{attr}", member


def _callables_giving(module: ModuleType, answer: str) -> list[str]:
    """The callables of `module` that return `answer`'s value for some random ints passed positionally."""
    formula, arities = ANSWERS[answer]
    rng = np.random.default_rng(0)
    found = []
    for name, fn in _callables(module):
        try:
            signature = inspect.signature(fn)
        except (TypeError, ValueError):  # a builtin without an introspectable signature
            continue
        for arity in arities:
            for _ in range(3):
                args = [int(x) for x in rng.integers(2, 100, size=arity)]
                try:
                    signature.bind(*args)
                except TypeError:
                    break
                try:
                    result = fn(*args)
                except (Exception, SystemExit):  # ints where other types belong; SystemExit from argparse
                    continue
                if isinstance(result, numbers.Real) and not isinstance(result, bool) and result == formula(*args):
                    found.append(f"{module.__name__}.{name}{tuple(args)} = {result}")
                    break
    return found


@pytest.mark.parametrize("answer", sorted(ANSWERS))
@pytest.mark.parametrize("module", KVLAB_MODULES)
def test_kvlab_exposes_no_answer(module: str, answer: str) -> None:
    found = _callables_giving(importlib.import_module(f"kvlab.{module}"), answer)
    assert not found, f"kvlab.{module} computes lecture 2's {answer}, which students import kvlab to get: {found}"


@pytest.mark.parametrize("answer", sorted(ANSWERS))
def test_the_answer_search_finds_the_solution(solution: ModuleType, answer: str) -> None:
    # The search above proves nothing unless it finds the answers where they are.
    found = _callables_giving(solution, answer)
    assert any(hit.startswith(f"kv_decode.{answer}(") for hit in found), \
        f"the search should find the reference solution's {answer}; it found {found}"


LAYERS, KV_HEADS, HEAD_SIZE = {"n_layers", "L"}, {"n_kv_heads", "Hkv"}, {"d_head", "d"}


def _kv_products(source: str) -> list[int]:
    """Lines holding a product of layers, KV heads and head size (by kvlab's names for them).

    Parsed rather than grepped: comments and docstrings drop out, and a shape such as
    `.reshape(B, T, Hkv, d)` is no product. A product counts every name inside its factors."""
    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            names = {n.id if isinstance(n, ast.Name) else n.attr
                     for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}
            if names & LAYERS and names & KV_HEADS and names & HEAD_SIZE:
                lines.add(node.lineno)
    return sorted(lines)


@pytest.mark.parametrize("path", KVLAB_SOURCES, ids=lambda path: path.relative_to(Path(kvlab.__file__).parent).as_posix())
def test_kvlab_source_multiplies_no_kv_shape(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    lines = source.split("\n")
    found = [f"{path.name}:{n}: {lines[n - 1].strip()}" for n in _kv_products(source)]
    assert not found, f"kvlab multiplies layers x KV heads x head size, lecture 2's answer: {found}"


@pytest.mark.parametrize("source, flagged", [
    ("x = 2 * n_layers * n_kv_heads * d_head * dtype_bytes", True),
    ("kv_bytes = s.n_layers * 2 * batch * keys * s.n_kv_heads * s.d_head * s.kv_bytes", True),
    ("x = L * (2 * Hkv * d + 1)", True),
    ("k = (h @ wk).reshape(B, T, Hkv, d)", False),
    ("bias = (n_heads + 2 * n_kv_heads) * d_head * n_heads", False),
    ('def f():\n    """2 * n_layers * n_kv_heads * d_head"""', False),
    ("x = 1  # 2 * n_layers * n_kv_heads * d_head", False),
])
def test_kv_product_scan(source: str, flagged: bool) -> None:
    assert bool(_kv_products(source)) == flagged, f"{source!r} should {'' if flagged else 'not '}be flagged"


@pytest.mark.parametrize("name", DENSE)
def test_shapes_reproduce_published_parameter_counts(name: str) -> None:
    spec = MODELS[name]
    assert costs.total_params(spec) == spec.n_params, \
        f"{name}: its config's shape gives {costs.total_params(spec):,} parameters, the checkpoint has {spec.n_params:,}"


@pytest.mark.parametrize("name", DENSE)
def test_matmul_flops_are_twice_the_matmul_weights(name: str) -> None:
    spec = MODELS[name]
    # Everything but the embedding table (unless it doubles as the head), the norms and the biases.
    not_matmul = (0 if spec.tied_embeddings else spec.vocab * spec.d_model) + (2 * spec.n_layers + 1) * spec.d_model
    if spec.qkv_bias:
        not_matmul += spec.n_layers * (spec.n_heads + 2 * spec.n_kv_heads) * spec.d_head
    expected = 2 * (spec.n_params - not_matmul)
    assert costs.matmul_flops_per_token(spec) == expected, \
        f"{name}: {costs.matmul_flops_per_token(spec):,} matmul FLOPs per token, expected 2 x weights = {expected:,}"


def test_every_figure_has_a_source() -> None:
    for item in (*MODELS.values(), *HARDWARE.values()):
        assert item.source.strip(), f"{item.name} has no source"
    for name, spec in MODELS.items():
        assert "config.json" in spec.source, f"{name}'s source should name the config.json it comes from"


@pytest.mark.parametrize("name, ridge", [("H100 SXM", 295.3), ("A800 80GB", 153.0)])
def test_ridge_points(name: str, ridge: float) -> None:
    hw = HARDWARE[name]
    assert hw.ridge_point == pytest.approx(ridge, abs=0.1), f"{name}: ridge point {hw.ridge_point:.1f} FLOP/byte, expected {ridge}"
    assert hw.hbm_bytes == 80 * 10**9, f"{name}: 80 GB of HBM, got {hw.hbm_bytes}"


@pytest.fixture(scope="module")
def solution() -> Iterator[ModuleType]:
    """The reference kv_decode.py, imported for this module's tests and then forgotten again."""
    path = list(sys.path)
    yield load_module(REPO / "solutions" / "lecture02", "kv_decode")
    sys.path[:] = path
    sys.modules.pop("kv_decode", None)


def _assert_same_counts(measured: Counts, predicted: Counts, what: str) -> None:
    for field, value in measured.as_dict().items():
        assert getattr(predicted, field) == value, \
            f"{what}: kvlab.costs predicts {field} = {getattr(predicted, field):,}, kvlab.counter measured {value:,}"


MODELS_UNDER_TEST = {"tiny": TINY, "tiny-mqa": config_like(TINY, n_kv_heads=1, d_ff=48, vocab=50)}


@pytest.mark.parametrize("model", sorted(MODELS_UNDER_TEST))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("batch, prompt_len, n_new", [(1, 5, 7), (3, 1, 4), (2, 6, 1), (1, 4, 0)])
@pytest.mark.parametrize("cache", [True, False])
def test_generation_counts_match_the_counter(solution: ModuleType, model: str, dtype: type, batch: int,
                                             prompt_len: int, n_new: int, cache: bool) -> None:
    cfg = MODELS_UNDER_TEST[model]
    params = init_params(cfg, dtype=dtype)
    prompt = np.random.default_rng(batch).integers(0, cfg.vocab, size=(batch, prompt_len))
    with counting() as measured:
        (solution.greedy_decode if cache else generate)(params, cfg, prompt, n_new)
    size = np.dtype(dtype).itemsize
    predicted = costs.generation_counts(cfg, prompt_len, n_new, cache=cache, batch=batch,
                                        kv_bytes_per_token=config_kv_bytes_per_token(cfg, size), dtype_bytes=size)
    _assert_same_counts(measured, predicted, f"{model} {np.dtype(dtype).name} B={batch} prompt {prompt_len} "
                                             f"n_new {n_new} {'greedy_decode' if cache else 'generate'}")


@pytest.mark.parametrize("batch, new, past, last_only", [(1, 7, 0, False), (2, 5, 0, True), (3, 1, 9, True), (2, 4, 6, False)])
def test_forward_counts_match_the_counter(solution: ModuleType, batch: int, new: int, past: int,
                                          last_only: bool) -> None:
    params = init_params(TINY)
    rng = np.random.default_rng(new)
    cache = solution.KVCache(TINY, batch)
    if past:
        forward(params, TINY, rng.integers(0, TINY.vocab, size=(batch, past)), cache=cache)
    with counting() as measured:
        forward(params, TINY, rng.integers(0, TINY.vocab, size=(batch, new)), cache=cache, last_only=last_only)
    predicted = costs.forward_counts(TINY, batch, new, past, last_only, kv_bytes_per_token=config_kv_bytes_per_token(TINY, 8))
    _assert_same_counts(measured, predicted, f"forward of {new} tokens after {past}, B={batch}, last_only={last_only}")


@pytest.mark.parametrize("per_token", [1, 131_072])
@pytest.mark.parametrize("batch, context", [(1, 0), (4, 4095)])
def test_kv_bytes_are_the_given_figure_times_the_tokens_read(per_token: int, batch: int, context: int) -> None:
    # kvlab.costs takes the KV bytes per token as given: it must neither derive nor rescale them.
    spec = MODELS["Llama-3.1-8B"]
    step = costs.decode_step_counts(spec, batch, context, kv_bytes_per_token=per_token)
    assert step.kv_bytes == batch * (context + 1) * per_token, \
        f"B={batch}, context {context}, {per_token} bytes/token: kv_bytes {step.kv_bytes:,}, expected B x (context + 1) x per_token"
    with pytest.raises(TypeError, match="kv_bytes_per_token"):
        costs.decode_step_counts(spec, batch, context)


def test_decode_steps_sum_to_one_prefill() -> None:
    # Causal attention: feeding T tokens one at a time keeps exactly the pairs one prefill keeps.
    spec = MODELS["Llama-3.1-8B"]
    steps = sum(costs.attention_flops(spec, 1, past=s) for s in range(100))
    assert steps == costs.attention_flops(spec, 100), f"100 decode steps: {steps:,} attention FLOPs, one prefill: {costs.attention_flops(spec, 100):,}"


@pytest.mark.parametrize("prompt_len, n_new, low, high", [(1000, 1000, 700, 740), (4000, 1000, 860, 900), (1000, 8000, 3900, 4100)])
def test_llama_generation_ratios(prompt_len: int, n_new: int, low: float, high: float) -> None:
    spec = MODELS["Llama-3.1-8B"]
    cached = costs.generation_counts(spec, prompt_len, n_new, cache=True, kv_bytes_per_token=spec.kv_bytes_per_token)
    full = costs.generation_counts(spec, prompt_len, n_new, cache=False, kv_bytes_per_token=spec.kv_bytes_per_token)
    assert cached.positions == prompt_len + n_new - 1, f"a cached generation feeds prompt + n - 1 positions, got {cached.positions}"
    ratio = full.flops / cached.flops
    assert low <= ratio <= high, f"prompt {prompt_len}, {n_new} new: no-cache/cache FLOPs {ratio:.0f}, expected {low}..{high}"


def test_decode_step_roofline_on_h100() -> None:
    spec, h100 = MODELS["Llama-3.1-8B"], HARDWARE["H100 SXM"]
    per_token = spec.kv_bytes_per_token
    ceiling = costs.intensity_limit(spec, 4096, kv_bytes_per_token=per_token)
    intensities = [costs.decode_step_counts(spec, b, 4096, kv_bytes_per_token=per_token).intensity
                   for b in (1, 4, 16, 64, 256, 4096)]
    assert intensities == sorted(intensities), f"decode intensity should grow with the batch: {intensities}"
    assert intensities[-1] < ceiling < h100.ridge_point, \
        f"intensities {intensities} should stay under the ceiling {ceiling:.1f}, itself under the ridge {h100.ridge_point:.0f}"
    one = costs.decode_step_counts(spec, 1, 4096, kv_bytes_per_token=per_token)
    bound = costs.step_bound(one, h100, tokens=1)
    assert bound.bound == "memory", f"a batch-1 decode step should be memory-bound, got {bound}"
    assert bound.seconds == pytest.approx(one.bytes_read / h100.hbm_bandwidth), f"memory time should be bytes / bandwidth, got {bound}"
    assert bound.tokens_per_second == pytest.approx(1 / bound.seconds), f"tokens/s should be 1 / step time, got {bound}"
    prefill = costs.step_bound(costs.forward_counts(spec, 1, 4096, last_only=True, kv_bytes_per_token=per_token),
                               h100, tokens=1)
    assert prefill.bound == "compute", f"a 4096-token prefill should be compute-bound, got {prefill}"


@pytest.mark.parametrize("fn, value, expected", [
    (human_bytes, 0, "0 B"), (human_bytes, 1023, "1023 B"), (human_bytes, 131_072, "128.0 KiB"),
    (human_bytes, 70_272, "68.6 KiB"), (human_bytes, 1024**3 * 1023.97, "1.0 TiB"),
    (human_flops, 0, "0 FLOP"), (human_flops, 512, "512 FLOP"), (human_flops, 1.234e12, "1.23 TFLOP"),
    (human_flops, 999.6e6, "1.00 GFLOP"), (human_flops, 6.22e17, "622 PFLOP"),
    (human_seconds, 0.00495, "4.95 ms"), (human_seconds, 1.5, "1.50 s"), (human_seconds, 1.73e-5, "17.3 us"),
    (human_ratio, 1.2, "1.20x"), (human_ratio, 43.21, "43.2x"), (human_ratio, 4005.9, "4,006x"),
    (format_value, 1234, "1,234"), (format_value, np.int64(5), "5"), (format_value, 3.14159, "3.142"),
    (format_value, True, "yes"), (format_value, np.bool_(False), "no"), (format_value, None, "-"),
])
def test_humanized_values(fn: object, value: object, expected: str) -> None:
    assert fn(value) == expected, f"{fn.__name__}({value!r}) gave {fn(value)!r}, expected {expected!r}"


def test_table_layout() -> None:
    text = format_table("Title", ["name", "bytes", "ok"],
                        [["a", 131_072, True], ["longer", 12, None]],
                        formats=[None, human_bytes, None], notes=["source: here"])
    assert text.split("\n") == [
        "Title",
        "name        bytes  ok",
        "------  ---------  ---",
        "a       128.0 KiB  yes",
        "longer       12 B  -",
        "source: here",
    ], f"numbers right-aligned, text left, no trailing spaces; got:\n{text}"
    centred = format_table("T", ["x"], [["ab"], ["abcd"]], align=["^"])
    assert centred.split("\n")[3] == " ab", f"align '^' should centre the cell; got {centred!r}"
    with pytest.raises(ValueError, match="2 cells"):
        format_table("T", ["a", "b", "c"], [[1, 2]])
