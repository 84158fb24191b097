"""The course's choices for the sandbox, in one place: `COURSE`, passed to every `Sandbox` the
grader makes (autograder/harness/run.py).

The sandbox names no course. An assignment that needs a new type to cross by value, a column
layout for long lists of it, or a library function to run in the trusted process adds it here
and nowhere else:

- `wire_types`: plain-data dataclasses of the course library that cross by value (both ways).
- `codecs`: long lists of a wire type sent as columns (a trace of 23,608 Requests in milliseconds).
- `remote`: library functions that, when code in the worker calls them, run in this process (the
  worker's copy is replaced by a stand-in before any student code runs).
- `trusted_packages`: a test's `student.call("kvlab....:function", ...)` runs this process's copy of
  the function, on proxies of the student's objects; `trusted_calls` maps names to a bounded
  variant instead.
- `worker_calls`: the few names `student.call` runs in the worker, because what they make must live
  beside the student's objects, or because they only ask the student's objects questions
  (`kvlab.testing.probe:ask`); nothing else a verdict needs may come from them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import kvlab.model
import kvlab.testing.store_loan
from autograder.harness.sandbox import BadValue, ColumnCodec, SandboxConfig, TooBig

# Bounds on one forward call run in the trusted process for student code: far above what a test
# needs (a few hundred positions of a tiny model), far below what would exhaust the grader's memory
# (Gradescope's box has 768 MB): positions B*T per call, and floats in the largest intermediate
# (activations B*T*width, attention scores B*H*T*S; 4M floats are 32 MB, and attention keeps about
# four arrays of that size at once). Without a cache S = T, so the scores grow with the square of
# the positions: 8,192 positions of a one-head model would be 512 MB each.
MAX_FORWARD_POSITIONS = 1 << 13
MAX_FORWARD_FLOATS = 1 << 22


class _BoundedCache:
    """A student's cache as forward sees it here: the same protocol, the positions it returns bounded."""

    def __init__(self, cache: Any, batch: int, queries: int, heads: int) -> None:
        self._cache, self._queries = cache, batch * queries * heads

    @property
    def length(self) -> Any:
        return self._cache.length

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> Any:
        returned = self._cache.update(layer, k, v)
        try:
            K, V = returned
        except (TypeError, ValueError):
            return returned  # forward's own check says what is wrong with it
        K, V = np.asarray(K), np.asarray(V)
        if K.ndim == 4 and self._queries * K.shape[1] > MAX_FORWARD_FLOATS:
            raise TooBig(f"cache.update(layer={layer}) returned {K.shape[1]} positions, more than the "
                         f"grader runs attention over in one call")
        return K, V

    def advance(self, n: int) -> Any:
        return self._cache.advance(n)


def bounded_forward(params: Any, cfg: Any, tokens: Any, cache: Any = None, pos0: Any = None,
                    last_only: bool = False) -> np.ndarray:
    """kvlab.model.forward, refusing (ValueError) calls too big for the grader's process to run."""
    if not isinstance(cfg, kvlab.model.Config):
        raise BadValue(f"cfg must be a kvlab.model.Config, got {type(cfg).__name__}")
    try:
        tokens = np.asarray(tokens)
    except (TypeError, ValueError) as exc:
        raise BadValue(f"tokens must be an array of token ids: {exc}") from None
    widest = max(cfg.d_model, cfg.d_ff, cfg.vocab, cfg.n_heads * cfg.d_head)
    if not isinstance(params, dict) or not all(isinstance(a, np.ndarray) for a in params.values()):
        raise BadValue("params must be a dict of numpy arrays (as init_params makes)")
    too_wide = [name for name, a in params.items() if any(n > widest for n in a.shape)]
    if too_wide:
        raise TooBig(f"params {too_wide[0]!r} has shape {params[too_wide[0]].shape}, wider than {cfg.name} allows")
    batch, length = tokens.shape if tokens.ndim == 2 else (0, 0)
    positions = batch * length
    if positions > MAX_FORWARD_POSITIONS or positions * widest > MAX_FORWARD_FLOATS:
        raise TooBig(f"forward on {tokens.shape} tokens of {cfg.name} is bigger than the grader runs in one call")
    if cache is None and batch * cfg.n_heads * length * length > MAX_FORWARD_FLOATS:
        raise TooBig(f"forward on {tokens.shape} tokens of {cfg.name} without a cache would compute "
                     f"{batch * cfg.n_heads * length * length:,} attention scores (batch x heads x positions "
                     f"x positions), more than the grader runs attention over in one call: decode with a cache")
    if cache is not None and tokens.ndim == 2:
        cache = _BoundedCache(cache, tokens.shape[0], tokens.shape[1], cfg.n_heads)
    return kvlab.model.forward(params, cfg, tokens, cache=cache, pos0=pos0, last_only=last_only)


COURSE = SandboxConfig(
    wire_types=("kvlab.model:Config", "kvlab.trace:Request"),
    codecs=(
        ColumnCodec("kvlab.trace:Request",
                    scalars=(("arrival", "<f8"), ("input_len", "<i8"), ("output_len", "<i8")),
                    ragged=(("blocks", "<i8"),)),
    ),
    # The course library's model runs in the trusted process only: when student code in the worker
    # calls kvlab.model.forward, the worker's stand-in sends the call here with the student's cache
    # as a proxy. Student code may rewrite the worker's copy of the library as it likes; the logits
    # it gets, and the operations kvlab.counter records, come from this process.
    # Module 6's store stays here too: a test lends it (kvlab.testing.store_loan.lend) and gives the
    # student's connector a StoreClient made in the worker, whose every request runs on it through
    # `serve`; the store's contents and its commands / round_trips counters live in this process only.
    remote={"kvlab.model:forward": bounded_forward,
            "kvlab.testing.store_loan:serve": kvlab.testing.store_loan.serve},
    # Every student.call runs here, on proxies of the student's objects: forward (bounded),
    # run_counted (which then counts the forward calls the student's function makes from this
    # side), paged_step (which writes the new K/V into the student's pool in place through
    # kvlab.paged.assign_into, the proxy's __assign_into__), probe.each (one round trip per call),
    # module 6's run_requests, and any other library function a test names.
    trusted_packages=("kvlab",),
    trusted_calls={"kvlab.model:forward": bounded_forward},
    # Made in the worker because the student's code holds them: module 6's StoreClient (the
    # connector's handle to a store lent from this process; it holds nothing a verdict reads) and
    # the blocks of its free-queue guards (200,000, one round trip each would dwarf what the guard
    # times; why that is safe: block_list's docstring). kvlab.testing.probe's `ask` too: one round
    # trip for a state machine's whole state, for a lecture-2 cache test's calls
    # (kvlab.testing.probe.play), or for the free-queue guards' 25 remove + append pairs at a time
    # (why that is safe: its docstring, and kvlab.testing.drills').
    worker_calls=frozenset({"kvlab.testing.store_loan:StoreClient", "kvlab.testing.drills:block_list",
                            "kvlab.testing.probe:ask"}),
)
