"""Lecture 2 demo: decoding with a KV cache, run on your kv_decode.py.

    python demo.py [--submission DIR]        (in the repository: make demo A=lecture02)

DIR is the first of: --submission, $KVLAB_SUBMISSION, the current directory if it holds
kv_decode.py, else the repository's reference solution. Four tables:

(1) your cache against the two classic bugs (the prompt never written to the cache; the decode
    token fed at position 0), next to the no-cache reference `kvlab.model.generate`;
(2) FLOPs and wall time with and without a cache: measured on a small model, then Llama-3.1-8B;
(3) what the cache costs in memory: your `nbytes()` and `kv_cache_bytes`, then Llama-3.1 8B and
    70B, KV against weights, your `kv_bytes_per_token` beside the published figure;
(4) batched decoding: bytes, FLOPs and arithmetic intensity of one decode step, measured on the
    tiny model, then Llama-3.1-8B on an H100 against its roofline.

kvlab.costs does not derive KV bytes from a model's shape (that is your `kv_bytes_per_token`): the
analytic tables pass it your result, or, until you implement it, the model's published figure, with
a note under the table saying so. A function you have not implemented yet costs its table (or row)
one line, not a traceback.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

# Run as a script, only this file's folder is on sys.path: add the folder that holds kvlab/.
sys.path.insert(0, str(next(p for p in Path(__file__).resolve().parents if (p / "kvlab").is_dir())))

from kvlab.demo import Student, run, timed  # noqa: E402 - first: it sets the BLAS threads before numpy loads

import numpy as np  # noqa: E402

from kvlab import costs, counter  # noqa: E402
from kvlab.model import TINY, Config, forward, generate, init_params  # noqa: E402
from kvlab.specs import HARDWARE, MODELS, ModelSpec  # noqa: E402
from kvlab.tables import format_table, human_bytes, human_flops, human_ratio, human_seconds  # noqa: E402
from kvlab.testing.compare import LOGIT_ATOL  # noqa: E402

# Table (2)'s model: wide enough that a step is real work, small enough that recomputing 256 steps
# without a cache takes seconds in numpy. Without a cache n new tokens cost n * (prompt + (n-1)/2)
# positions, with one prompt + n - 1; the LM head and attention narrow the FLOP ratio a little.
# A 48-token prompt puts it at the lecture's ~140x for n = 256 (139x; a 16-token prompt gives 131x).
SMALL = Config(vocab=97, d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, d_head=32, d_ff=512,
               max_seq=512, name="small")
SMALL_PROMPT = 48
N_NEW = (64, 128, 256)

LLAMA_8B, LLAMA_70B = MODELS["Llama-3.1-8B"], MODELS["Llama-3.1-70B"]
H100 = HARDWARE["H100 SXM"]


def kv_per_token(student: Student, spec: ModelSpec) -> tuple[int, str | None]:
    """(KV bytes per token of `spec` in BF16, note): your `kv_bytes_per_token`, and no note.

    Until it is implemented: the spec's published figure, and a note saying so for under the table.
    """
    with student.skip(f"{spec.name} uses its published figure, {spec.kv_bytes_per_token:,} bytes/token") as attempt:
        return int(student.kv_decode.kv_bytes_per_token(spec.n_layers, spec.n_kv_heads, spec.d_head)), None
    return spec.kv_bytes_per_token, attempt.message


def cached_decode(kv: Any, params: dict[str, np.ndarray], cfg: Config, prompt: np.ndarray,
                  n_new: int, bug: str) -> tuple[np.ndarray, list[np.ndarray]]:
    """Greedy decoding with your KVCache and one classic bug, for table (1).

    bug="prompt": the prefill runs without the cache, so the decode steps attend to the new tokens
    only (each at its true position). bug="position": the prompt is cached, but every decode token
    is fed at position 0, so its query and key are rotated for the wrong place.
    """
    # Only the two bugs: this file ships to students, and without a bug this would be greedy_decode.
    if bug not in ("prompt", "position"):
        raise ValueError(f"bug must be 'prompt' or 'position', got {bug!r}")
    cache = kv.KVCache(cfg, prompt.shape[0], dtype=params["embed"].dtype)
    logits = forward(params, cfg, prompt, cache=None if bug == "prompt" else cache, last_only=True)[:, -1]
    chosen, step_logits = [], []
    for step in range(n_new):
        step_logits.append(logits)
        chosen.append(logits.argmax(axis=-1)[:, None].astype(prompt.dtype))
        if step < n_new - 1:
            pos0 = 0 if bug == "position" else prompt.shape[1] + step
            logits = forward(params, cfg, chosen[-1], cache=cache, pos0=pos0)[:, -1]
    return np.concatenate([prompt, *chosen], axis=1), step_logits


def compare(result: tuple[Any, list[Any]], reference: tuple[np.ndarray, list[np.ndarray]],
            prompt_len: int) -> list[Any]:
    """[tokens equal, largest logit difference, first step whose logits differ, first wrong token]."""
    tokens, step_logits = np.asarray(result[0]), np.stack([np.asarray(x) for x in result[1]])
    ref_tokens, ref_logits = reference[0], np.stack(reference[1])
    per_step = np.abs(step_logits - ref_logits).max(axis=(1, 2))
    off = np.flatnonzero(per_step > LOGIT_ATOL)
    wrong = np.flatnonzero((tokens != ref_tokens).any(axis=0)[prompt_len:])
    first_token = None
    if wrong.size:
        step = int(wrong[0])
        got, expected = tokens[0, prompt_len + step], ref_tokens[0, prompt_len + step]
        first_token = f"step {step}: {got} (expected {expected})"
    return [bool(np.array_equal(tokens, ref_tokens)), float(per_step.max()),
            int(off[0]) if off.size else None, first_token]


def table_bugs(student: Student) -> None:
    """(1) Your cache against the two classic bugs, beside the no-cache reference."""
    kv = student.kv_decode
    params = init_params(TINY)
    prompt = np.random.default_rng(2).integers(0, TINY.vocab, size=(1, 8))
    n_new = 16
    reference = generate(params, TINY, prompt, n_new)
    variants = (
        ("your greedy_decode", lambda: kv.greedy_decode(params, TINY, prompt, n_new)),
        ("bug: prompt never cached", lambda: cached_decode(kv, params, TINY, prompt, n_new, "prompt")),
        ("bug: decode token at position 0", lambda: cached_decode(kv, params, TINY, prompt, n_new, "position")),
    )
    rows, notes = [], []
    for label, run in variants:
        with student.skip(f"row '{label}' skipped") as attempt:
            rows.append([label, *compare(run(), reference, prompt.shape[1])])
        if attempt.skipped:
            notes.append(attempt.message)
    title = (f"(1) KV cache vs the classic bugs: {TINY.name} model, float64, prompt {prompt[0].tolist()}, "
             f"{n_new} new tokens, against kvlab.model.generate (no cache)")
    if not rows:
        print("\n".join([title, *notes]))
        return
    print(format_table(
        title, ["variant", "same tokens", "max |logit diff|", "logits differ from step", "first wrong token"],
        rows, formats=[None, None, ".2g", None, None],
        notes=notes + [f"A correct cache differs from the reference by rounding only (tests allow {LOGIT_ATOL:g}); "
                       "step 0 comes from the prefill, so a bug in the decode path shows from step 1."],
    ))


def table_flops(student: Student) -> None:
    """(2) FLOPs and wall time with and without a cache: a small model measured, then Llama-3.1-8B."""
    kv = student.kv_decode
    params = init_params(SMALL, dtype=np.float32)
    prompt = np.random.default_rng(0).integers(0, SMALL.vocab, size=(1, SMALL_PROMPT))
    rows = []
    # Your greedy_decode runs first at each length, so a stub costs nothing: the slow no-cache runs
    # only start once it has returned.
    with student.skip("table (2) small-model rows skipped", echo=True) as attempt:
        for n_new in N_NEW:
            with counter.counting() as cached:
                (tokens, _), t_cached = timed(kv.greedy_decode, params, SMALL, prompt, n_new)
            with counter.counting() as full:
                (ref_tokens, _), t_full = timed(generate, params, SMALL, prompt, n_new)
            rows.append([n_new, full.flops, cached.flops, full.flops / cached.flops, t_full, t_cached,
                         t_full / t_cached, bool(np.array_equal(np.asarray(tokens), ref_tokens))])
    if not attempt.skipped:
        print(format_table(
            f"(2a) Measured (kvlab.counter, wall clock): {SMALL.name} model (d_model {SMALL.d_model}, "
            f"{SMALL.n_layers} layers, {SMALL.n_heads} heads of {SMALL.d_head}, d_ff {SMALL.d_ff}), "
            f"float32, prompt {SMALL_PROMPT}",
            ["new tokens", "FLOPs no cache", "FLOPs cached", "FLOP ratio", "time no cache", "time cached",
             "time ratio", "same tokens"],
            rows, formats=[None, human_flops, human_flops, human_ratio, human_seconds, human_seconds,
                           human_ratio, None],
        ))
        print()
    rows = []
    per_token, note = kv_per_token(student, LLAMA_8B)
    for prompt_len, n_new in ((1000, 1000), (4000, 1000), (1000, 8000)):
        full = costs.generation_counts(LLAMA_8B, prompt_len, n_new, cache=False, kv_bytes_per_token=per_token)
        cached = costs.generation_counts(LLAMA_8B, prompt_len, n_new, cache=True, kv_bytes_per_token=per_token)
        rows.append([prompt_len, n_new, full.flops, cached.flops, full.flops / cached.flops])
    print(format_table(
        f"(2b) Analytic (kvlab.costs): {LLAMA_8B.name}, batch 1",
        ["prompt", "new tokens", "FLOPs no cache", "FLOPs cached", "ratio"],
        rows, formats=[None, None, human_flops, human_flops, human_ratio],
        notes=([note] if note else [])
        + ["Cached: prompt + n - 1 positions, linear in n. No cache: step i recomputes prompt + i "
           "positions, quadratic in n (attention cubic).",
           f"{LLAMA_8B.name}: {LLAMA_8B.source}"],
    ))


def table_memory(student: Student) -> None:
    """(3) What the cache costs in memory: yours, then Llama-3.1 8B and 70B against their weights."""
    kv = student.kv_decode
    rows, notes = [], []
    for batch, length in ((1, 1), (1, 100), (4, 37), (2, 512)):
        measured = formula = None
        with student.skip("column skipped") as attempt:
            cache = kv.KVCache(TINY, batch)
            tokens = np.random.default_rng(batch).integers(0, TINY.vocab, size=(batch, length))
            forward(init_params(TINY), TINY, tokens, cache=cache, last_only=True)
            measured = int(cache.nbytes())
        notes.append(attempt.message)
        with student.skip("column skipped") as attempt:
            formula = int(kv.kv_cache_bytes(TINY.n_layers, TINY.n_kv_heads, TINY.d_head, length, batch, 8))
        notes.append(attempt.message)
        # The contract's definition, for the last column: 2 (K and V) * L * B * length * Hkv * d * 8 bytes.
        expected = 2 * TINY.n_layers * batch * length * TINY.n_kv_heads * TINY.d_head * 8
        rows.append([batch, length, measured, formula, expected,
                     measured == formula == expected if None not in (measured, formula) else None])
    print(format_table(
        f"(3a) Your cache's size: {TINY.name} model, float64, filled by forward",
        ["batch", "length", "cache.nbytes()", "kv_cache_bytes(...)", "2*L*B*len*Hkv*d*8", "all agree"],
        rows, notes=list(dict.fromkeys(n for n in notes if n)),
    ))
    print()
    rows, notes = [], []
    for spec in (LLAMA_8B, LLAMA_70B):
        for batch, context in ((1, 8192), (32, 8192), (8, 131072)):
            kv_total = None
            with student.skip("KV column skipped") as attempt:
                kv_total = int(kv.kv_cache_bytes(spec.n_layers, spec.n_kv_heads, spec.d_head, context, batch))
            notes.append(attempt.message)
            rows.append([spec.name, batch, context, spec.weight_bytes, kv_total,
                         None if kv_total is None else kv_total / spec.weight_bytes])
    print(format_table(
        "(3b) Weights against KV (BF16), KV from your kv_cache_bytes",
        ["model", "batch", "context", "weights", "KV cache", "KV / weights"],
        rows, formats=[None, None, None, human_bytes, human_bytes, ".2f"],
        notes=list(dict.fromkeys(n for n in notes if n))
        + [f"{spec.name}: {spec.source}" for spec in (LLAMA_8B, LLAMA_70B)],
    ))
    print()
    rows, notes = [], []
    for spec in (LLAMA_8B, LLAMA_70B):
        per_token, note = kv_per_token(student, spec)
        notes.append(note)
        yours = None if note else per_token
        rows.append([spec.name, spec.weight_bytes, yours, spec.kv_bytes_per_token,
                     None if yours is None else yours == spec.kv_bytes_per_token,
                     None if not per_token else spec.weight_bytes // per_token])
    print(format_table(
        "(3c) The token count at which the KV cache outweighs the model",
        ["model", "weights", "KV/token (yours)", "KV/token (published)", "matches the published figure",
         "tokens: KV = weights"],
        rows, formats=[None, human_bytes, human_bytes, human_bytes, None, None],
        notes=[n for n in notes if n]
        + ["Published: kvlab.specs.MODELS[name].kv_bytes_per_token, BF16, from the course's reference table; "
           "sources as in (3b)."],
    ))


def table_batching(student: Student) -> None:
    """(4) Batched decoding: bytes, FLOPs and arithmetic intensity of one decode step."""
    kv = student.kv_decode
    params = init_params(TINY)
    itemsize = params["embed"].dtype.itemsize
    context = 32
    # The tiny model has no published figure: without your kv_bytes_per_token, kvlab.costs has no
    # KV bytes to predict, and only the comparison column goes.
    tiny_per_token = None
    with student.skip("column '= kvlab.costs' skipped") as per_token_attempt:
        tiny_per_token = int(kv.kv_bytes_per_token(TINY.n_layers, TINY.n_kv_heads, TINY.d_head, itemsize))
    rows = []
    with student.skip("table (4a) skipped", echo=True) as attempt:
        for batch in (1, 4, 16, 64):
            cache = kv.KVCache(TINY, batch)
            rng = np.random.default_rng(batch)
            forward(params, TINY, rng.integers(0, TINY.vocab, size=(batch, context)), cache=cache, last_only=True)
            with counter.counting() as step:
                forward(params, TINY, rng.integers(0, TINY.vocab, size=(batch, 1)), cache=cache)
            agrees = None
            if tiny_per_token is not None:
                predicted = costs.decode_step_counts(TINY, batch, context, kv_bytes_per_token=tiny_per_token,
                                                     dtype_bytes=itemsize)
                agrees = step.as_dict() == predicted.as_dict()
            rows.append([batch, step.weight_bytes, step.kv_bytes, step.flops, step.intensity, agrees])
    if not attempt.skipped:
        print(format_table(
            f"(4a) One decode step after a {context}-token prefill, measured (kvlab.counter): "
            f"{TINY.name} model, float64, your KVCache",
            ["batch", "weights read", "KV read", "FLOPs", "FLOP/byte", "= kvlab.costs"],
            rows, formats=[None, human_bytes, human_bytes, human_flops, ".2f", None],
            notes=[per_token_attempt.message
                   or f"kvlab.costs predicts the KV read from your kv_bytes_per_token(L, Hkv, d, {itemsize})."],
        ))
        print()
    context = 4096
    per_token, note = kv_per_token(student, LLAMA_8B)
    rows = []
    for batch in (1, 4, 16, 64, 256):
        step = costs.decode_step_counts(LLAMA_8B, batch, context, kv_bytes_per_token=per_token)
        bound = costs.step_bound(step, H100, tokens=batch)
        held = LLAMA_8B.weight_bytes + batch * (context + 1) * per_token
        rows.append([batch, step.weight_bytes, step.kv_bytes, step.flops, step.intensity,
                     bound.compute_seconds, bound.memory_seconds, bound.seconds, bound.tokens_per_second,
                     held <= H100.hbm_bytes])
    ceiling = costs.intensity_limit(LLAMA_8B, context, kv_bytes_per_token=per_token)
    print(format_table(
        f"(4b) One decode step of {LLAMA_8B.name} (BF16) at context {context} on {H100.name}, "
        "analytic (kvlab.costs): roofline lower bound",
        ["batch", "weights read", "KV read", "FLOPs", "FLOP/byte", "compute", "memory", "step >=",
         "tokens/s", "fits in HBM"],
        rows, formats=[None, human_bytes, human_bytes, human_flops, ".1f", human_seconds, human_seconds,
                       human_seconds, ",.0f", None],
        notes=([note] if note else [])
        + [f"Intensity ceiling (batch -> infinity, each sequence still reads its own KV): "
           f"{ceiling:.1f} FLOP/byte; {H100.name} ridge point: {H100.ridge_point:.0f} FLOP/byte "
           f"({H100.peak_flops / 1e12:.1f} TFLOP/s / {H100.hbm_bandwidth / 1e12:.2f} TB/s), so a decode "
           "step at this context stays memory-bound at any batch size.",
           f"{H100.name}: {H100.source}",
           f"HBM: {H100.hbm_bytes / 1e9:.0f} GB; 'fits' counts the weights and the batch's KV only."],
    ))


if __name__ == "__main__":
    sys.exit(run(__file__, __doc__, modules=["kv_decode"],
                 tables=[table_bugs, table_flops, table_memory, table_batching]))
