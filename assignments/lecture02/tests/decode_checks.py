"""What the public and hidden lecture-2 tests share: the models, prompts, and the diagnoses.

The public tests (this folder) and the grader's hidden tests check the same rules with these
helpers, on different inputs, so a failing public test explains a bug exactly as the grader would.
Every `*_problem` function returns None when the student's values agree with what the contract
says, else the message the student sees: what differed, where, and the likely cause. Only those
messages reach the student (the grader runs with --assert=plain and never shows test source), so
they carry the whole explanation. Expected values come from `kvlab.model.generate` / `forward`
without a cache, or from the contract's formulas; never from student code.

Shapes: B batch, T0 prompt length, V vocabulary, L layers, Hkv key/value heads, d head size.

One module on purpose (over 400 lines): every check of lecture 2, whose cache and decode checks
share the models, weights, prompts and diagnoses (`CONFIGS`, `params_for`, `describe`,
`decode_problem`), under the one name the public and hidden tests import, so a student reads in one
place each rule the grader applies.
"""
from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kvlab.model import TINY, Config, config_like, forward, generate, init_params
from kvlab.testing.compare import FLOAT32_LOGIT_ATOL, LOGIT_ATOL, array_difference, shape_problem
from kvlab.testing.probe import Replies, Step, play

# The cache holds n_kv_heads heads per layer, so the three attention variants give caches of
# different shapes: multi-head (Hkv = H), grouped-query (1 < Hkv < H, TINY itself), multi-query.
CONFIGS: dict[str, Config] = {
    "MHA": config_like(TINY, n_kv_heads=TINY.n_heads, name="tiny-mha"),
    "GQA": TINY,
    "MQA": config_like(TINY, n_kv_heads=1, name="tiny-mqa"),
}

# Float64 differences above LOGIT_ATOL but below this are float32 rounding, not a logic error.
_ROUNDING_SIZED = 1e-4


@functools.lru_cache(maxsize=None)
def _master_params(config: str, dtype: str, seed: int) -> dict[str, np.ndarray]:
    return init_params(CONFIGS[config], seed=seed, dtype=np.dtype(dtype))


def params_for(config: str, dtype: Any = np.float64, seed: int = 0) -> dict[str, np.ndarray]:
    """Weights for CONFIGS[config]: fresh copies, so one test can never see another's changes."""
    master = _master_params(config, np.dtype(dtype).name, seed)
    return {name: array.copy() for name, array in master.items()}


def prompt_for(cfg: Config, batch: int, length: int, seed: int) -> np.ndarray:
    """A random prompt [batch, length] of int64 token ids."""
    return np.random.default_rng(seed).integers(0, cfg.vocab, size=(batch, length), dtype=np.int64)


def kv_chunk(cfg: Config, batch: int, length: int, seed: int, dtype: Any = np.float64) -> np.ndarray:
    """Random keys (or values) for every layer: [L, batch, length, Hkv, d]."""
    rng = np.random.default_rng(seed)
    shape = (cfg.n_layers, batch, length, cfg.n_kv_heads, cfg.d_head)
    return rng.normal(size=shape).astype(dtype)


def describe(cfg: Config) -> str:
    """A config as a student can read it in a message."""
    return f"{cfg.name} (L={cfg.n_layers}, H={cfg.n_heads}, Hkv={cfg.n_kv_heads}, d={cfg.d_head})"


def exception_from(fn: Callable[..., Any], *args: Any) -> BaseException | None:
    """The exception `fn(*args)` raises, or None. Lets a test turn a raise into a message it writes."""
    try:
        fn(*args)
    except Exception as error:  # a student's exception of any type is a finding, not a crash
        return error
    return None


# ----------------------------------------------------------------------------------------------
# KVCache


# How numpy's ValueError from writing past the end of a preallocated buffer begins: an update that
# overflows must raise the cache's own ValueError, from its check of length + T, before storing.
NUMPY_BROADCAST = "could not broadcast"

# A cache's reads, as kvlab.testing.probe.play steps.
LENGTH: Step = ("length", None)
NBYTES: Step = ("nbytes", ())


def both_ways(student: Any, make: Callable[[], Any], steps: Sequence[Step]) -> list[Replies]:
    """What new caches `make()` answer to `steps`, asked two ways: all in one step (kvlab.testing.probe.play,
    one round trip in the grader) and by direct calls, one per step as the test reads them, as
    forward and greedy_decode make them. A test checks both with the same rules: a cache must answer
    the same whoever calls it."""
    return [play(student, make, steps), Replies(make(), steps, None)]


def store_steps(keys: np.ndarray, values: np.ndarray, chunks: Sequence[int]) -> list[Step]:
    """The calls that store keys/values [L, B, S, Hkv, d] chunk by chunk as forward does, for
    kvlab.testing.probe.play: each layer's update with the chunk's T tokens, then advance(T); L + 1 steps
    per chunk, sum(chunks) == S."""
    steps: list[Step] = []
    start = 0
    for T in chunks:
        steps += [("update", (layer, keys[layer, :, start:start + T], values[layer, :, start:start + T]))
                  for layer in range(keys.shape[0])]
        steps.append(("advance", (T,)))
        start += T
    return steps


def stored_problem(
    name: str, actual: Any, expected: np.ndarray, length: int, layer: int, all_layers: np.ndarray
) -> str | None:
    """Compare what `update(layer, ...)` returned for K (or V) with every position stored so far.

    expected [B, length+T, Hkv, d]; all_layers [L, B, length+T, Hkv, d] holds what was stored in
    every layer, to recognise one layer's data showing up in another's.
    """
    B, S = expected.shape[:2]
    T = S - length
    problem = shape_problem(name, actual, expected.shape)
    if problem:
        if isinstance(actual, np.ndarray) and actual.ndim == 4 and actual.shape[0] == B:
            got = actual.shape[1]
            if got == T and length:
                return (f"{problem}: it holds only the T={T} new positions. update must return every "
                        f"position stored in this layer, 0 .. length+T-1 = 0 .. {S - 1}, the new ones "
                        "included, not only the new tokens")
            if got == length:
                return f"{problem}: the T={T} new positions are missing; store them before returning"
            if got > S:
                return (f"{problem}: it has {got} positions, more than the {S} stored; return only "
                        f"positions 0 .. length+T-1 (slice the preallocated buffer to length+T)")
            if got == length + 1 and T > 1:
                return (f"{problem}: it holds positions 0 .. length = 0 .. {length}, as if one new token "
                        f"came in, but this update brought T={T} new tokens: return positions "
                        f"0 .. length+T-1 = 0 .. {S - 1}, [B, length+T, Hkv, d]")
            return (f"{problem}: update must return every position stored in this layer, "
                    f"0 .. length+T-1 = 0 .. {S - 1} (length {length}, T {T}), [B, length+T, Hkv, d]")
        return problem
    if actual.dtype != expected.dtype:
        return (f"{name} has dtype {actual.dtype}; expected {expected.dtype}: the cache stores and returns keys "
                "and values in its dtype: the dtype= given to the constructor, float64 by default (KVCache(cfg, "
                "batch) with no dtype=)")
    mismatch = np.argwhere(actual != expected)
    if not len(mismatch):
        return None
    row, pos = int(mismatch[0][0]), int(mismatch[0][1])
    where = f"{name} at batch row {row}, position {pos} (layer {layer}, length {length}, T {T})"
    for other in range(all_layers.shape[0]):
        if other != layer and np.array_equal(actual[row, pos], all_layers[other, row, pos]):
            return (f"{where} holds what was stored for layer {other}: the layers share storage. "
                    f"Each layer needs its own keys and values (index the storage by layer)")
    for other_row in range(B):
        if other_row != row and np.array_equal(actual[row, pos], expected[other_row, pos]):
            return (f"{where} holds batch row {other_row}'s data: the rows of the batch are mixed up; "
                    "keep the batch axis as it comes in k, v [B, T, Hkv, d]")
    if pos < length:
        return (f"{where} differs from what was stored there by an earlier update: earlier positions "
                f"were lost or overwritten. The new tokens go at positions length .. length+T-1 "
                f"({length} .. {S - 1}), after everything already stored")
    return (f"{where} is not the k/v just passed in for position {pos}: the T new tokens must be "
            f"stored at positions length .. length+T-1 ({length} .. {S - 1}) and returned there")


def returned_positions_problem(student: Any, cfg: Config, batch: int, keys: np.ndarray, values: np.ndarray,
                               chunks: Sequence[int]) -> str | None:
    """keys/values [L, batch, sum(chunks), Hkv, d] stored chunk by chunk (store_steps) in new caches,
    both ways: every update must return the pair (K, V) of every position stored so far in its layer."""
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(cfg, batch), store_steps(keys, values, chunks)):
        start = 0
        for T in chunks:
            end = start + T
            for layer in range(cfg.n_layers):
                returned = replies.next()
                if not (isinstance(returned, (tuple, list)) and len(returned) == 2):
                    return f"update(layer={layer}, k, v) should return a pair (K, V); got {type(returned).__name__}"
                for name, got, stored in (("K", returned[0], keys), ("V", returned[1], values)):
                    problem = stored_problem(f"{name} returned by update on {describe(cfg)}, batch {batch}",
                                             got, stored[layer, :, :end], start, layer, stored[:, :, :end])
                    if problem:
                        return problem
            replies.next()  # advance(T)
            start = end
    return None


def nbytes_problem(actual: Any, cfg: Config, batch: int, length: int, itemsize: int, max_seq: int, *,
                   reveal: bool = True) -> str | None:
    """nbytes() against 2 * L * B * length * Hkv * d * itemsize, naming the factor that is off.

    reveal=False (hidden checks on fixed caches) says whether the count is too large or too small and
    which factor is off, not the expected count: resubmitting cannot collect a table of them.
    """
    per_value = cfg.n_layers * batch * cfg.n_kv_heads * cfg.d_head
    expected = 2 * per_value * length * itemsize
    call = (f"nbytes() of a KVCache({cfg.name}, batch={batch}, dtype itemsize {itemsize}) holding "
            f"length={length} tokens")
    if type(actual) is not int:
        return (f"{call} returned {actual!r} of type {type(actual).__name__}; the contract asks for a "
                "plain Python int (numpy integers and floats are not; wrap the result in int(...))")
    if actual == expected:
        return None
    formula = ("2 * L * B * length * Hkv * d * itemsize"
               + (f" = 2*{cfg.n_layers}*{batch}*{length}*{cfg.n_kv_heads}*{cfg.d_head}*{itemsize} = {expected}"
                  if reveal else ""))
    causes = {
        2 * per_value * max_seq * itemsize: "it counts every preallocated position (max_seq) instead of "
                                            "the stored tokens (length)",
        per_value * length * itemsize: "the factor 2 is missing: K and V are both stored",
        2 * per_value * length: "the dtype's itemsize is missing: count bytes, not elements",
        2 * per_value * length * 8: "it assumes 8-byte float64 values; use the cache's dtype itemsize",
        2 * per_value * length * itemsize // max(batch, 1): "the batch size B is missing",
        2 * per_value * length * itemsize // cfg.n_layers: "the number of layers L is missing",
    }
    cause = causes.get(actual, "check each factor of the formula")
    if reveal:
        return f"{call} returned {actual}; expected {formula}: {cause}"
    return f"{call} returned {actual}, {'more' if actual > expected else 'less'} than {formula}: {cause}"


def forward_with_cache_problem(
    step: str, actual: Any, expected: np.ndarray, start: int, length: Any
) -> str | None:
    """Logits of one `forward(..., cache=your KVCache)` call against forward without a cache.

    expected [B, T, V] for positions start .. start+T-1; `length` is cache.length after the call.
    """
    T = expected.shape[1]
    problem = array_difference(f"the output of {step}", actual, expected)
    if problem:
        if start == 0:
            cause = ("the prompt's own keys and values do not come back right from update: it must "
                     "return the T new positions, stored at 0 .. T-1, for every layer")
        else:
            cause = (f"the positions before {start} came out right, so the cache loses or misplaces "
                     f"what it stored: update must return positions 0 .. length+T-1 with the earlier "
                     f"ones unchanged, and length must be {start} when this call starts")
        return f"{problem}. With your KVCache {cause}"
    if length != start + T:
        return (f"after {step} the cache's length is {length}; expected {start + T}: forward calls "
                f"advance({T}) once per call, and advance(n) must add n to length")
    return None


# ----------------------------------------------------------------------------------------------
# greedy_decode


def _gap(actual: Any, expected: np.ndarray) -> np.ndarray:
    """|actual - expected| elementwise; NaN or inf in `actual` counts as an infinite difference."""
    diff = np.abs(np.asarray(actual, dtype=np.float64) - expected)
    return np.where(np.isfinite(diff), diff, np.inf)


def _first_logit_divergence(
    actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], atol: float
) -> tuple[int, int, int, float] | None:
    """(step, batch row, vocab index, largest difference at that step) of the first step beyond atol."""
    for step, (got, want) in enumerate(zip(actual, expected)):
        diff = _gap(got, want)
        if diff.max() > atol:
            row, index = (int(i) for i in np.unravel_index(diff.argmax(), diff.shape))
            return step, row, index, float(diff.max())
    return None


def _all_close(actual: Sequence[np.ndarray], expected: Sequence[np.ndarray], atol: float) -> bool:
    return len(actual) == len(expected) > 0 and all(_gap(a, e).max() <= atol for a, e in zip(actual, expected))


class _CastingCache:
    """A cache that stores keys and values in `dtype` (growing by concatenation): what the prefill
    gives when a decode creates its cache in a dtype other than the params'."""

    def __init__(self, n_layers: int, dtype: np.dtype) -> None:
        self.dtype, self.length = dtype, 0
        self.k: list[np.ndarray | None] = [None] * n_layers
        self.v: list[np.ndarray | None] = [None] * n_layers

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        old_k, old_v = self.k[layer], self.v[layer]
        k, v = k.astype(self.dtype), v.astype(self.dtype)
        self.k[layer] = k if old_k is None else np.concatenate([old_k, k], axis=1)
        self.v[layer] = v if old_v is None else np.concatenate([old_v, v], axis=1)
        return self.k[layer], self.v[layer]

    def advance(self, n: int) -> None:
        self.length += n


def _cache_dtype_seen(first: np.ndarray, prompt: np.ndarray, params: dict[str, np.ndarray], cfg: Config,
                      atol: float) -> np.dtype | None:
    """The prompt's dtype if a cache storing in it (not in the params' dtype) gives step 0's logits
    `first` [B, V]: the one other dtype a decode has at hand; else None."""
    dtype = prompt.dtype
    if dtype == params["embed"].dtype:
        return None
    logits = forward(params, cfg, prompt, cache=_CastingCache(cfg.n_layers, dtype))[:, -1]
    return dtype if _gap(first, logits).max() <= atol else None


def _logits_cause(
    step: int, row: int, diff: float, actual: Sequence[np.ndarray], expected: Sequence[np.ndarray],
    new_tokens: np.ndarray, params: dict[str, np.ndarray], cfg: Config, atol: float, prompt: np.ndarray,
) -> str:
    """Why step `step` of the decode has the wrong logits (steps before it, and their tokens, agree)."""
    n = len(expected)
    if diff == np.inf:
        return ("the logits hold NaN or inf: attention probably read cache slots that were never "
                "written (np.empty memory, or positions past length+T)")
    if n >= 2 and _all_close(actual[: n - 1], expected[1:], atol):
        return ("step_logits are shifted by one: element i holds the logits computed after new token i "
                "was fed (those choose token i+1). Element i must be the logits that chose new token i: "
                "record them before feeding the token")
    if n >= 2 and _all_close(actual[1:], expected[: n - 1], atol):
        return ("step_logits are shifted by one: element i holds the logits that chose token i-1. "
                "Element i must be the logits that chose new token i")
    if diff < _ROUNDING_SIZED:
        return (f"the difference is tiny ({diff:.2g}) but far above float64 rounding: float32 "
                "arithmetic somewhere. The cache must have the params' dtype, and nothing may be "
                "cast down")
    stored_as = _cache_dtype_seen(actual[0], prompt, params, cfg, atol) if step == 0 else None
    if stored_as is not None:
        return (f"these are the logits of a cache that stores keys and values as {stored_as} (the prompt's "
                f"dtype), which truncates or rounds them: create the KVCache in the params' dtype, "
                f"dtype=params['embed'].dtype ({params['embed'].dtype} here)")
    if step == 0:
        return ("step 0's logits come from the prefill, so the prefill is wrong: run the whole prompt "
                "through forward with the new cache in one call, and take the logits of the prompt's "
                "last position")
    # Step 0 is right: see whether step `step` is what the model gives when the cache never held the
    # prompt, i.e. the new tokens so far run alone from position 0.
    alone = forward(params, cfg, new_tokens[:, :step])[:, -1]
    if _gap(actual[step], alone).max() <= atol:
        return ("the prompt never reached the cache: these are the logits of the new tokens alone, "
                "without the prompt. Prefill the prompt with the same cache you decode with "
                "(forward(params, cfg, prompt, cache=cache)), created before the prefill, and check that "
                "KVCache.update returns every stored position, not only the new ones")
    if step == 1:
        return ("the prefill is right but the first decode step is not, so the new token went in at the "
                "wrong position or did not see the prompt's keys and values: feed only the new token "
                "[B, 1] with the same cache and let forward place it at cache.length (do not pass pos0)")
    return (f"steps 0 .. {step - 1} are right, so the cache goes wrong after a few steps: check that "
            "each step feeds exactly the newest token, with the same cache, at position cache.length")


def decode_problem(
    result: Any, prompt: np.ndarray, n_new: int, expected_tokens: np.ndarray,
    expected_logits: Sequence[np.ndarray], params: dict[str, np.ndarray], cfg: Config,
    atol: float = LOGIT_ATOL,
) -> str | None:
    """A whole greedy decode against the reference `generate`.

    Checks the return structure, then names the first diverging step, its token position, batch
    row, largest difference and the likely cause.
    """
    B, T0 = prompt.shape
    call = f"greedy_decode(params, {cfg.name}, prompt [B={B}, T0={T0}], n_new={n_new})"
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return f"{call} should return a pair (tokens, step_logits); got {type(result).__name__}"
    tokens, step_logits = result
    want = (B, T0 + n_new)
    if isinstance(tokens, np.ndarray) and tokens.shape == (B, n_new) and n_new != T0 + n_new:
        return (f"{call} returned tokens of shape {tokens.shape}: only the new tokens. Return the prompt "
                f"followed by the new tokens, [B, T0+n_new] = {want}")
    problem = shape_problem(f"the tokens {call} returned", tokens, want)
    if problem:
        return problem
    if not np.issubdtype(tokens.dtype, np.integer):
        return f"the tokens {call} returned have dtype {tokens.dtype}; token ids must be integers"
    if not np.array_equal(tokens[:, :T0], prompt):
        return f"the first T0={T0} tokens {call} returned are not the prompt; return it unchanged, then the new tokens"
    try:
        count = len(step_logits)
    except TypeError:
        return f"step_logits from {call} should be a list of {n_new} arrays [B, V]; got {type(step_logits).__name__}"
    if count != n_new:
        hint = {n_new + 1: ": one more than n_new, probably the logits after the last token",
                n_new - 1: ": one fewer than n_new, probably the prefill's logits are missing"}
        return f"{call} returned {count} step logits; expected n_new = {n_new}{hint.get(count, '')}"
    for step, logits in enumerate(step_logits):
        problem = shape_problem(f"step_logits[{step}]", logits, (B, cfg.vocab))
        if problem:
            if isinstance(logits, np.ndarray) and logits.shape == (B, 1, cfg.vocab):
                problem += ": forward returns [B, T, V]; take the last position, logits[:, -1]"
            return f"{problem} ({call})"
    want_dtype = expected_logits[0].dtype if n_new else None
    if n_new and step_logits[0].dtype != want_dtype:
        return (f"step_logits from {call} have dtype {step_logits[0].dtype}; the reference gives {want_dtype} "
                f"with {params['embed'].dtype} params: create the KVCache with the params' dtype "
                "(dtype=params['embed'].dtype) and do not cast the logits")
    new, expected_new = tokens[:, T0:], expected_tokens[:, T0:]
    first_token = next((s for s in range(n_new) if not np.array_equal(new[:, s], expected_new[:, s])), None)
    first_logits = _first_logit_divergence(step_logits, expected_logits, atol)
    if first_logits is None and first_token is None:
        return None
    if first_logits is not None and (first_token is None or first_logits[0] <= first_token):
        step, row, index, diff = first_logits
        got, expected = step_logits[step][row, index], expected_logits[step][row, index]
        others = [r for r in range(B) if _gap(step_logits[step][r], expected_logits[step][r]).max() <= atol]
        rows = f" (rows {others} agree: the batch rows are handled differently)" if others else ""
        cause = _logits_cause(step, row, diff, step_logits, expected_logits, expected_new, params, cfg, atol, prompt)
        return (f"{call}: step_logits first differ from the reference at step {step} (the logits choosing "
                f"the token at position {T0 + step}), batch row {row}{rows}: largest difference {diff:.3g} "
                f"at vocab index {index} (got {got:.10g}, expected {expected:.10g}; tolerance {atol:g}). "
                f"Likely cause: {cause}")
    step = first_token
    row = int(np.flatnonzero(new[:, step] != expected_new[:, step])[0])
    logits = np.asarray(step_logits[step][row])
    chosen, best = int(new[row, step]), int(expected_new[row, step])
    where = (f"{call}: the token at position {T0 + step} (new token {step}), batch row {row}, is {chosen}; "
             f"expected {best}, while the logits of that step agree with the reference")
    top = np.flatnonzero(logits == logits.max())
    if len(top) > 1 and chosen in top:
        return (f"{where}. Tokens {top.tolist()} tie at the top logit; greedy takes the lowest index, "
                f"{int(top[0])} (np.argmax does)")
    return f"{where}. Likely cause: take argmax over the vocabulary, the last axis (axis=-1), of each row"


def decoded(student: Any, params: dict[str, np.ndarray], cfg: Config, prompt: np.ndarray, n_new: int) -> Any:
    """What the student's greedy_decode(params, cfg, prompt, n_new) returns, for tests that judge
    only that result (decode_problem). The model runs beside the student's code
    (student.run_local): in the grader a forward call would otherwise cross between processes once
    per step, and the student's cache once per operation, for nothing a result check needs. The
    tests that count forward's positions run it in the grader (run_counted)."""
    return student.run_local(student.kv_decode.greedy_decode, params, cfg, prompt, n_new)


def count_problem(counts: dict[str, int], T0: int, n_new: int, B: int) -> str | None:
    """Token positions that went through forward: T0 + n_new - 1, or nothing for n_new == 0; and in
    n_new calls (the prefill, the whole prompt in one call, then one call per step but the last)."""
    positions, calls = counts["positions"], counts["forward_calls"]
    call = f"greedy_decode(prompt [B={B}, T0={T0}], n_new={n_new})"
    if n_new == 0:
        if positions == 0 and calls == 0:
            return None
        return (f"{call} called forward {calls} times ({positions} token positions); with n_new == 0 it "
                "must call nothing and return (prompt, [])")
    expected = T0 + n_new - 1
    if positions == expected and calls == n_new:
        return None
    if positions == expected:
        prefill = (f": the prompt went through in pieces. Prefill the whole prompt [B, T0={T0}] in one forward "
                   "call, then feed one token per step" if calls > n_new else
                   ": some call fed more than one new token. Prefill the prompt in one forward call, then feed "
                   "one token per step")
        return (f"{call} made {calls} forward calls; expected n_new = {n_new} (the prefill, one forward call with "
                f"the whole prompt, then one call per new token but the last){prefill}")
    said = (f"{call} sent {positions} token positions through forward in {calls} calls; expected "
            f"T0 + n_new - 1 = {expected} (the prompt once, then one token per step, none after the last)")
    recompute = T0 + sum(T0 + i for i in range(1, n_new))
    if positions == expected + 1:
        return (f"{said}. One forward runs after the last token is chosen: its logits are never used, "
                "so stop once the last token is appended")
    if positions in (recompute, recompute + T0 + n_new, T0 * n_new + n_new * (n_new - 1) // 2):
        return (f"{said}. Every step recomputes the whole sequence, as the no-cache reference does: "
                "feed only the newest token, with the cache")
    if positions > expected:
        return f"{said}. Some positions go through forward more than once: feed each token exactly once"
    return f"{said}. Some tokens never go through forward"


# ----------------------------------------------------------------------------------------------
# The position budget as work: CPU time that grows linearly with n_new


# The position budget, measured as work: a decode that does not use its cache recomputes the whole
# sequence each step, T0 + i positions at step i, so its CPU time grows with n_new squared (and
# attention's part with its cube), however it computes its logits (a private copy of the model
# runs uncounted, but not untimed). A model wide enough that one position's matmuls outweigh a
# step's fixed costs, and a batch of 8 so that recomputing costs eight times as much while a cached
# step's fixed costs stay the same; few steps, so that a cached decode stays far inside a call's
# time limit. The decode runs whole in the student's process (student.cpu_seconds_local: the
# grader counts that process's CPU time alone), so the sandbox adds only a per-call cost (the
# weights and results crossing once), which lowers the cached ratio. Measured for n = 16, batch 8:
# a cached decode takes 4.2-5.7x the CPU time for 6n new tokens as for n in the grader (7-11 ms
# and 34-49 ms), 4.5-8.8x in process; a recomputing one (the model's source pasted into the
# submission) 20-31x in the grader, 22-32x in process. The limit sits 1.4x above the first and
# nearly 2x below the second.
COST_CFG = config_like(TINY, vocab=128, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_head=16, d_ff=256,
                       max_seq=512, name="tiny-wide")
COST_BATCH, COST_N_NEW, COST_FACTOR, COST_RATIO_LIMIT = 8, 16, 6, 12.0


def timed_decode(student: Any, params: dict[str, np.ndarray], seed: int, n_new: int) -> tuple[float, str | None]:
    """(CPU seconds, problem) of one greedy_decode of one-token prompts on COST_CFG, measured by the
    grader with the model run in the student's process (its forward calls counted nowhere: the
    position counts are checked on other inputs); the problem if the decode is wrong. A new prompt
    each time: an answer remembered from an earlier call costs nothing."""
    prompt = prompt_for(COST_CFG, COST_BATCH, 1, seed=seed)
    result, seconds = student.cpu_seconds_local(student.kv_decode.greedy_decode, params, COST_CFG, prompt, n_new)
    expected_tokens, expected_logits = teacher_forced(params, prompt, n_new, result)
    return seconds, decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, COST_CFG)


def teacher_forced(params: dict[str, np.ndarray], prompt: np.ndarray, n_new: int,
                   result: Any) -> tuple[np.ndarray, list[np.ndarray]]:
    """The reference decode, as decode_problem takes it, from one no-cache forward over the student's
    tokens [B, T0+n_new] (the reference `generate` would cost as much as the decode this check refuses):
    each step's logits given the tokens before it, each new token their argmax. Up to the first
    token the student got wrong this is `generate`'s answer, and decode_problem reports that first
    divergence. Tokens that are not ids of the right shape get `generate`'s answer (their problem is
    reported before any value is compared)."""
    T0 = prompt.shape[1]
    tokens = result[0] if isinstance(result, (tuple, list)) and len(result) == 2 else None
    if not (isinstance(tokens, np.ndarray) and tokens.shape == (prompt.shape[0], T0 + n_new)
            and np.issubdtype(tokens.dtype, np.integer) and np.all((0 <= tokens) & (tokens < COST_CFG.vocab))):
        return generate(params, COST_CFG, prompt, n_new)
    logits = forward(params, COST_CFG, tokens[:, :-1])
    steps = [logits[:, T0 - 1 + i] for i in range(n_new)]
    expected = np.concatenate([prompt, np.stack([step.argmax(axis=-1) for step in steps], axis=1)], axis=1)
    return expected, steps


def measure_work(student: Any) -> str | None:
    """Whether greedy_decode's work grows linearly with n_new (see COST_CFG); the message if not.

    Against the trusted decode when one is registered (the grader: `use_trusted_decode`), else
    against the decode's own time for n new tokens (a student's `make test`)."""
    if _TRUSTED:
        return measure_against_trusted(student, _TRUSTED[0])
    params = init_params(COST_CFG, seed=7)
    n, k = COST_N_NEW, COST_FACTOR
    ratios: list[float] = []
    # A second try only when the first looks superlinear: one unlucky pause must not cost the points.
    # Each try is judged on its own runs, timed one right after the other: the machine's speed drifts
    # (a process's first decodes ran at about half the CPU time of its later ones here), and a short
    # run from a fast moment beside a long one from a slow moment made an honest decode look 14.5x.
    # So the long run is bracketed by two short ones and compared with their mean, which cancels a
    # drift that is steady over the three (in-process gradings of the reference still reached 13.6x
    # against one short run, about once in twenty, in a slow hour).
    for attempt in range(2):
        times = []
        for index, size in enumerate((n, k * n, n)):
            try:
                seconds, problem = timed_decode(student, params, 700 + 3 * attempt + index, size)
            except Exception as error:  # a student's exception, or the grader's per-call timeout
                return f"greedy_decode of {size} new tokens on {describe(COST_CFG)} raised {type(error).__name__}: {error}"
            if problem:
                return problem
            times.append(seconds)
        ratios.append(times[1] / max((times[0] + times[2]) / 2, 1e-6))
        if ratios[-1] <= COST_RATIO_LIMIT:
            return None
        if ratios[-1] > 2 * COST_RATIO_LIMIT:
            break  # far past what an honest decode ever measured (13.6x): a retry would only cost time
    ratio = min(ratios)
    return (
        f"greedy_decode of {k * n} new tokens took {ratio:.1f} times the CPU time of {n} new tokens on "
        f"{describe(COST_CFG)}; with the cache the work per step stays nearly constant, so {k} times the tokens "
        f"costs about {k} times the time (the limit is {COST_RATIO_LIMIT:g}x). Likely cause: {RECOMPUTES}"
    )


RECOMPUTES = ("each step recomputes the whole sequence (with kvlab.model.forward or any other copy of the model) "
              "instead of feeding only the newest token to forward with the cache")

# The grader's check (measure_against_trusted). A self-ratio, cost(6n) / cost(n), is what a decode can
# pad: spinning each call up to a floor of CPU time makes a recomputing decode's short and long runs
# cost alike. So the decode is compared with a trusted cached decode, timed in the grader's own
# process (which the student's code cannot slow down or speed up) on the same params, sizes and
# batch, each of its runs right after the student's of the same size. Two quantities, each against
# the trusted decode's: the growth, cost(6n) - cost(n) (a constant added to every call cancels, and
# so does the sandbox's cost per call), and the cost of the long run itself (padding only adds time,
# so a recomputing decode's 6n run costs at least its recomputation, however its short runs are
# padded up to look alike). Measured in the grader for n = 16, batch 8, on a loaded 2-core machine:
# the trusted growth 30-60 ms; an honest decode's growth and long run 0.8-1.6x the trusted ones; a
# recomputing one (the model pasted into the submission, padded or not) 10-20x in both or, padded to
# a floor, growth near 0 and long run 10-20x. Both limits sit near the geometric middle.
COST_GROWTH_LIMIT, COST_LONG_LIMIT = 4.0, 4.0
# The trusted decode's growth used is at least this (seconds): a reading disturbed to near 0 must not
# make every decode look too slow.
_TRUSTED_FLOOR = 5e-3

# The trusted cached decode, registered by the grader's hidden tests as they are collected (they hold
# one; the public tests, shipped to students, do not). Empty in a student's `make test`.
_TRUSTED: list[Callable[..., Any]] = []


def use_trusted_decode(decode: Callable[..., Any]) -> None:
    """Judge the position budget against `decode(params, cfg, prompt, n_new)`, a correct cached decode
    run in this process, from now on (see measure_against_trusted)."""
    _TRUSTED[:] = [decode]


def _process_cpu_seconds() -> float:
    """CPU seconds this process has used, every thread, user and system (getrusage, as the grader
    reads its own)."""
    import resource  # Unix only: imported where only the grader calls it

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def trusted_seconds(decode: Callable[..., Any], params: dict[str, np.ndarray], seed: int, n_new: int) -> float:
    """CPU seconds, in this process, of the trusted `decode` of one-token prompts on COST_CFG, batch
    COST_BATCH (as timed_decode runs the student's)."""
    prompt = prompt_for(COST_CFG, COST_BATCH, 1, seed=seed)
    started = _process_cpu_seconds()
    decode(params, COST_CFG, prompt, n_new)
    return _process_cpu_seconds() - started


def measure_against_trusted(student: Any, decode: Callable[..., Any]) -> str | None:
    """Whether greedy_decode's growth, cost(6n) - cost(n), and its cost for 6n new tokens stay within
    COST_GROWTH_LIMIT and COST_LONG_LIMIT times the trusted `decode`'s, timed in this grading; the
    message if not. cost(n) is the mean of the runs of n new tokens before and after the long one."""
    params = init_params(COST_CFG, seed=7)
    n, k = COST_N_NEW, COST_FACTOR
    decode(params, COST_CFG, prompt_for(COST_CFG, COST_BATCH, 1, seed=699), n)  # its first run is slower
    tries: list[tuple[float, float, float, float]] = []
    # A second try only when the first fails (one unlucky pause must not cost the points); none when
    # it is far past both limits.
    for attempt in range(2):
        mine, theirs = [], []
        for index, size in enumerate((n, k * n, n)):
            try:
                seconds, problem = timed_decode(student, params, 700 + 3 * attempt + index, size)
            except Exception as error:  # a student's exception, or the grader's per-call timeout
                return (f"greedy_decode of {size} new tokens on {describe(COST_CFG)} raised "
                        f"{type(error).__name__}: {error}")
            if problem:
                return problem
            mine.append(seconds)
            theirs.append(trusted_seconds(decode, params, 900 + 3 * attempt + index, size))
        growth, trusted_growth = mine[1] - (mine[0] + mine[2]) / 2, theirs[1] - (theirs[0] + theirs[2]) / 2
        tries.append((growth, max(trusted_growth, _TRUSTED_FLOOR), mine[1], max(theirs[1], _TRUSTED_FLOOR)))
        growth_ratio, long_ratio = tries[-1][0] / tries[-1][1], tries[-1][2] / tries[-1][3]
        if growth_ratio <= COST_GROWTH_LIMIT and long_ratio <= COST_LONG_LIMIT:
            return None
        if growth_ratio > 2 * COST_GROWTH_LIMIT or long_ratio > 2 * COST_LONG_LIMIT:
            break
    growth, trusted_growth, long, trusted_long = min(tries, key=lambda t: max(t[0] / t[1], t[2] / t[3]))
    return (f"greedy_decode of {k * n} new tokens on {describe(COST_CFG)}, batch {COST_BATCH}, took {long:.3f} s of "
            f"CPU time, {long / trusted_long:.1f} times a cached decode timed beside it ({trusted_long:.3f} s); going "
            f"from {n} to {k * n} new tokens added {growth:.3f} s, {growth / trusted_growth:.1f} times what it adds to "
            f"the cached decode ({trusted_growth:.3f} s). The limits are {COST_LONG_LIMIT:g}x and "
            f"{COST_GROWTH_LIMIT:g}x: with the cache each step's work stays nearly constant, so the work grows "
            f"linearly with n_new, whatever a call's fixed costs. Likely cause: {RECOMPUTES}")


# One measure per grading, shared by every position-budget test (it takes about a second).
_WORK: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def work_problem(student: Any) -> str | None:
    """measure_work(student), measured by the first position-budget test that asks."""
    if student not in _WORK:
        _WORK[student] = measure_work(student)
    return _WORK[student]


# ----------------------------------------------------------------------------------------------
# kv_bytes_per_token and kv_cache_bytes


def bytes_problem(call: str, actual: Any, expected: int, factors: dict[str, int], *, reveal: bool = True) -> str | None:
    """A byte count against the contract's formula; `factors` names each factor (to spot a missing one).

    reveal=False (hidden checks on real models) says whether the count is too large or too small and
    which factor is missing, not the expected count: resubmitting cannot collect a table of them.
    """
    if type(actual) is not int:
        return (f"{call} returned {actual!r} of type {type(actual).__name__}; the contract asks for a "
                "plain Python int (not a numpy integer or a float: use int arithmetic, or wrap in int(...))")
    if actual == expected:
        return None
    missing = [name for name, value in factors.items() if value != 1 and actual * value == expected]
    cause = f": the factor {' or '.join(missing)} is missing" if missing else ""
    if reveal:
        return f"{call} returned {actual}; expected {expected}{cause}"
    return (f"{call} returned {actual}, {'more' if actual > expected else 'less'} than the contract's product "
            f"2 x n_layers x n_kv_heads x head_dim x dtype_bytes{' x seq_len x batch' if 'batch' in factors else ''}"
            f"{cause}")


def tied_params(seeds: range) -> tuple[dict[str, np.ndarray], np.ndarray, int, int]:
    """GQA params whose lm_head has two equal columns, `low` < `high`, tying at the top of step 0.

    Returns (params, prompt [2, 3], low, high) for the first prompt seed in `seeds` whose step-0
    winner in row 0 is not token 0 (there must be a lower index): the reference picks `high` with
    the original weights; after copying column `high` into column `low` both logits are the
    maximum, exactly.
    """
    cfg, params = CONFIGS["GQA"], params_for("GQA")
    for seed in seeds:
        prompt = prompt_for(cfg, 2, 3, seed=seed)
        high = int(generate(params, cfg, prompt, 1)[1][0][0].argmax())
        if high > 0:
            break
    low = high // 2
    params["lm_head"][:, low] = params["lm_head"][:, high]
    return params, prompt, low, high


def limit_problem(made: str, error: BaseException | None, size: int, T: int, start: int, ignored: bool) -> str | None:
    """An update of T tokens at length `start` that passes max_seq=`size` must raise ValueError.

    `ignored`: the max_seq given to the constructor differs from cfg.max_seq, so a cache that
    ignores the argument would not raise here.
    """
    if isinstance(error, ValueError) and NUMPY_BROADCAST not in str(error):
        return None
    if isinstance(error, ValueError):
        # numpy's error from writing T positions into the fewer left in a preallocated buffer: the
        # cache's own check did not fire (it compared length alone, or nothing, with max_seq).
        return (f"{made}: update with T={T} token(s) at length {start} raised numpy's own ValueError ({error}), "
                f"not the cache's check: length + T = {start + T} passes max_seq={size}, so update must raise "
                "its ValueError before it stores anything. Compare length + T (not length alone) with max_seq")
    said = f"raised {type(error).__name__}: {error}" if error else "did not raise ValueError"
    hint = ": compare length + T (not length alone) with max_seq" if start else ""
    override = (f" (the max_seq argument must override cfg.max_seq; a cache that ignores it has room here)"
                if ignored and error is None else "")
    return (f"{made}: update with T={T} token(s) at length {start} {said}; length + T = {start + T} passes "
            f"max_seq={size}, which must raise ValueError{hint}{override}")


def fill_problem(made: str, error: BaseException | None, size: int, T: int, start: int, *,
                 model_max_seq: int | None = None) -> str | None:
    """Storing up to exactly max_seq=`size` tokens must not raise.

    `model_max_seq`: cfg.max_seq, when the constructor's max_seq=`size` may be larger than it (a cache
    that sizes its storage or its limit by cfg.max_seq then has too little room; the message says so).
    """
    if error is None:
        return None
    override = (f" The max_seq={size} given to the constructor overrides cfg.max_seq={model_max_seq}, larger or "
                "smaller: size the storage and the limit by it"
                if model_max_seq is not None and model_max_seq < size else "")
    return (f"{made}: storing {T} tokens at length {start} (up to exactly max_seq={size}) raised "
            f"{type(error).__name__}: {error}. The cache may fill completely: raise only when "
            f"length + T > max_seq.{override}")


def filling_problem(student: Any, cfg: Config, batch: int, max_seq: int | None, size: int, keys: np.ndarray,
                    values: np.ndarray, chunks: Sequence[int]) -> str | None:
    """keys/values [L, batch, size, Hkv, d] stored chunk by chunk, both ways, in new caches made with
    max_seq=`max_seq` (limit `size`; sum(chunks) == size): none of it may raise (fill_problem)."""
    made = f"KVCache(cfg with max_seq={cfg.max_seq}, batch={batch}, max_seq={max_seq})"
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(cfg, batch, max_seq=max_seq),
                             store_steps(keys, values, chunks)):
        start = 0
        for T in chunks:
            error = exception_from(replies.take, cfg.n_layers + 1)
            problem = fill_problem(made, error, size, T, start,
                                   model_max_seq=None if max_seq is None else cfg.max_seq)
            if problem:
                return problem
            start += T
    return None


def past_limit_problem(student: Any, cfg: Config, batch: int, max_seq: int | None, size: int, keys: np.ndarray,
                       values: np.ndarray) -> str | None:
    """keys/values [L, batch, S > size, Hkv, d]: storing all S tokens in a new cache made with
    max_seq=`max_seq` (limit `size`) must raise ValueError, and so must one token after filling
    caches to exactly `size`, both ways (limit_problem)."""
    made = f"KVCache(cfg with max_seq={cfg.max_seq}, batch={batch}, max_seq={max_seq})"
    ignored = max_seq is not None and max_seq != cfg.max_seq
    fresh = student.kv_decode.KVCache(cfg, batch, max_seq=max_seq)
    error = exception_from(fresh.update, 0, keys[0], values[0])
    problem = limit_problem(made, error, size, keys.shape[2], 0, ignored)
    if problem:
        return problem
    for replies in both_ways(student, lambda: student.kv_decode.KVCache(cfg, batch, max_seq=max_seq),
                             store_steps(keys[:, :, :size], values[:, :, :size], (size,))):
        replies.take(cfg.n_layers + 1)
        error = exception_from(replies.target.update, 0, keys[0, :, size:size + 1], values[0, :, size:size + 1])
        problem = limit_problem(made, error, size, 1, size, ignored)
        if problem:
            return problem
    return None


def float32_decode_problem(student: Any, config: str, batch: int, length: int, seed: int, n_new: int) -> str | None:
    """greedy_decode with float32 params against the float32 reference, to FLOAT32_LOGIT_ATOL."""
    cfg, params = CONFIGS[config], params_for(config, dtype=np.float32)
    prompt = prompt_for(cfg, batch, length, seed=seed)
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    top2 = np.sort(np.stack(expected_logits), axis=-1)[..., -2:]
    assert np.min(top2[..., 1] - top2[..., 0]) > 100 * FLOAT32_LOGIT_ATOL, (
        "test setup: the float32 reference has a near tie, so float32 rounding could pick either token"
    )
    result = decoded(student, params, cfg, prompt, n_new)
    problem = decode_problem(
        result, prompt, n_new, expected_tokens, expected_logits, params, cfg, atol=FLOAT32_LOGIT_ATOL
    )
    return None if problem is None else f"with float32 params: {problem}"


def dtype_switch_problem(student: Any, config: str, batch: int, length: int, seed: int, n_new: int) -> str | None:
    """greedy_decode of one prompt with float64 params, then float32, then float64 again (one model,
    one batch size), each against its own dtype's reference: every call prefills a new KVCache of
    its params' dtype, so no call decodes in the dtype of the one before."""
    cfg = CONFIGS[config]
    prompt = prompt_for(cfg, batch, length, seed=seed)
    before = None
    for dtype, atol in ((np.float64, LOGIT_ATOL), (np.float32, FLOAT32_LOGIT_ATOL), (np.float64, LOGIT_ATOL)):
        params = params_for(config, dtype=dtype)
        expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
        result = decoded(student, params, cfg, prompt, n_new)
        problem = decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, cfg, atol=atol)
        name = np.dtype(dtype).name
        if problem is not None:
            if before is None:
                return f"with {name} params: {problem}"
            return (f"with {name} params, right after the same decode with {before} params: {problem}. Each call "
                    "must prefill into a new KVCache of its own params' dtype: a cache kept from an earlier call and "
                    "reused keeps that call's dtype")
        before = name
    return None


def tie_problem(student: Any, seeds: range, n_new: int) -> str | None:
    """greedy_decode where two tokens tie exactly at the top of step 0 (tied_params): the lower wins."""
    cfg = CONFIGS["GQA"]
    params, prompt, low, high = tied_params(seeds)
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    first = expected_logits[0][0]
    assert low < high and first[low] == first[high] == first.max() and expected_tokens[0, 3] == low, (
        f"test setup: tokens {low} and {high} should tie exactly at the top of step 0"
    )
    result = decoded(student, params, cfg, prompt, n_new)
    return decode_problem(result, prompt, n_new, expected_tokens, expected_logits, params, cfg)


def positions_once_problem(student: Any, config: str, batch: int, prompt_len: int, n_new: int,
                           seed: int) -> str | None:
    """greedy_decode of a [batch, prompt_len] prompt on CONFIGS[config], counted: each position
    through forward once (count_problem), the reference's tokens and logits (decode_problem), and
    work that grows linearly with n_new (work_problem)."""
    cfg, params = CONFIGS[config], params_for(config)
    prompt = prompt_for(cfg, batch, prompt_len, seed=seed)
    result, counts = student.call(
        "kvlab.counter:run_counted", student.kv_decode.greedy_decode, params, cfg, prompt, n_new
    )
    expected_tokens, expected_logits = generate(params, cfg, prompt, n_new)
    return count_problem(counts, prompt_len, n_new, batch) or decode_problem(
        result, prompt, n_new, expected_tokens, expected_logits, params, cfg
    ) or work_problem(student)


def zero_new_problem(student: Any, config: str, batch: int, prompt_len: int, seed: int) -> str | None:
    """greedy_decode(..., n_new=0) of a [batch, prompt_len] prompt: the prompt back, and no forward call."""
    cfg, params = CONFIGS[config], params_for(config)
    prompt = prompt_for(cfg, batch, prompt_len, seed=seed)
    result, counts = student.call("kvlab.counter:run_counted", student.kv_decode.greedy_decode, params, cfg, prompt, 0)
    return decode_problem(result, prompt, 0, prompt, [], params, cfg) or count_problem(counts, prompt_len, 0, batch)
