"""The module-6 serving engine: the course's numpy model behind a block manager with prefix caching.

The engine owns the KV memory, a pool of `num_blocks` blocks of `block_size` token slots
(`k_pool`, `v_pool`: [num_blocks, L, block_size, Hkv, d]); the block manager (the student's
`block_manager.BlockManager`, or any object with its interface) only says which block ids each
request's tokens go to. The engine talks to the manager (through its scheduler) with plain data
and few calls, because in the grader the manager lives in another process and every call is a round
trip:

- `manager.num_blocks`, `manager.block_size`: read once, when the engine is made.
- `manager.allocate(request_id, tokens) -> (num_computed, block_ids) | None`: one call to admit a
  request; None means "not enough free blocks", and the request waits.
- `manager.append_tokens(request_id, [token]) -> new_block_ids | None`: one call per decode step
  of a request, before the engine computes that token's KV; None means "no free block", and a
  request is preempted.
- `manager.free(request_id)`: one call when a request finishes, is preempted or aborted.

The engine runs the model; two modules beside it hold the rest. `kvlab.serving.scheduler` decides
which requests hold blocks (admission, preemption) and is the one caller of the manager;
`kvlab.serving.manager_contract` states what the engine relies on in each of the manager's answers
and checks it, raising `ManagerError` with a description when an answer is malformed, rather than
computing with it.

Each step (`Engine.step`): admit at most one waiting request (first come, first served: a request
that does not fit blocks the ones behind it) and prefill it, then decode one token for every running
request that had already produced one, in admission order. Prefill computes only the suffix the
manager did not report as cached: `forward` over tokens[num_computed:], counted per request with
`kvlab.counter` (`RequestState.prefill_positions`). Sampling is greedy (argmax, lowest index on a tie).

KV connector (the seam for an external KV store, LMCache-style; none is implemented here): an object
passed as `kv_connector` with
- `lookup(tokens) -> int`: how many leading tokens of `tokens` (list of int) it can load, a multiple
  of its chunk size;
- `load(tokens, n) -> ndarray [L, 2, n, Hkv, d]`: the K (index 0) and V (index 1) of the first n
  tokens, K after RoPE, as `forward`'s cache protocol stores them;
- `store(tokens, kv)`: keep kv [L, 2, len(tokens), Hkv, d] of `tokens`.
At admission the engine calls `lookup` on the prompt; when it covers more than the manager's cached
prefix, `load` fills the positions in between (the last token is always computed), and after the
prefill `store` receives the whole prompt's KV.

Functions the tests call (with the student's manager as first argument):
- `run_requests(manager, cfg, requests, ...)`: a whole scenario, plain data out.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from kvlab import counter
from kvlab.model import Config, forward, init_params
from kvlab.serving.manager_contract import ManagerError
from kvlab.serving.scheduler import RequestState, Scheduler

# The weights every engine uses unless told otherwise: the demo, the server and the tests agree.
WEIGHT_SEED = 0

# The server's model: big enough that prefilling a 2k-token prompt takes a clearly measurable time
# on a CPU (about a second in float32 on one core; attention over 2,048 positions dominates), small
# enough that a cached prompt's first token comes in tens of milliseconds. `vocab` is the course
# tokenizer's vocabulary (kvlab.serving.tokenizer.VOCAB_SIZE; a repository test checks they agree).
SERVE = Config(vocab=1024, d_model=256, n_layers=4, n_heads=4, n_kv_heads=2, d_head=64, d_ff=768,
               max_seq=4096, rope_theta=10000.0, name="kvlab-serve")


class EngineError(ValueError):
    """A request the engine cannot serve (too long for the model or for the KV pool)."""


@dataclass(frozen=True)
class Event:
    """What a step produced for one request: a new token, and the finish reason with the last one."""

    request_id: str
    token: int
    finish_reason: str | None


class _BlockTableCache:
    """`forward`'s KV-cache protocol (batch 1) over one request's block table in the engine's pool."""

    def __init__(self, engine: Engine, request: RequestState) -> None:
        self.engine, self.request = engine, request
        self.length = request.kv_length

    def _slots(self, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
        positions = np.arange(start, stop)
        size = self.engine.block_size
        return np.asarray(self.request.block_ids, dtype=np.int64)[positions // size], positions % size

    def update(self, layer: int, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        T = k.shape[1]
        blocks, offsets = self._slots(self.length, self.length + T)
        self.engine.k_pool[blocks, layer, offsets] = k[0]
        self.engine.v_pool[blocks, layer, offsets] = v[0]
        blocks, offsets = self._slots(0, self.length + T)
        return self.engine.k_pool[blocks, layer, offsets][None], self.engine.v_pool[blocks, layer, offsets][None]

    def advance(self, n: int) -> None:
        self.length += n


class Engine:
    """One model, one KV pool, one block manager; `step()` advances every request by one token.

    `params` default to `init_params(cfg, WEIGHT_SEED, dtype)`. `eos_token_id`: generation of a
    request also stops when it samples this token (finish reason "stop"; otherwise "length").
    `keep_logits`: keep each output token's logits in `RequestState.logits` (tests).

    `scheduler`: the waiting and running requests, and the count of preemptions. `requests`: every
    request added and not aborted, by id (the server removes the ones it delivered).
    Counters over every request, added to when the work is done (so a request aborted after its
    prefill still counts): `prefill_positions` (positions run through `forward` while prefilling),
    `loaded_positions` (positions filled by the KV connector).
    """

    def __init__(self, manager: Any, cfg: Config, params: dict[str, np.ndarray] | None = None, *,
                 dtype: Any = np.float64, eos_token_id: int | None = None, keep_logits: bool = False,
                 kv_connector: Any = None) -> None:
        self.cfg = cfg
        self.params = params if params is not None else init_params(cfg, WEIGHT_SEED, dtype)
        self.scheduler = Scheduler(manager)
        self.num_blocks, self.block_size = self.scheduler.num_blocks, self.scheduler.block_size
        dtype = self.params["embed"].dtype
        shape = (self.num_blocks, cfg.n_layers, self.block_size, cfg.n_kv_heads, cfg.d_head)
        self.k_pool = np.zeros(shape, dtype=dtype)
        self.v_pool = np.zeros(shape, dtype=dtype)
        self.eos_token_id, self.keep_logits, self.kv_connector = eos_token_id, keep_logits, kv_connector
        self.requests: dict[str, RequestState] = {}
        self.prefill_positions = self.loaded_positions = 0
        self._ids = itertools.count()

    def max_tokens_for(self, n_prompt: int) -> int:
        """The most tokens a request with an n_prompt-token prompt may generate: what the model's
        context (cfg.max_seq) and the whole KV pool hold."""
        return min(self.cfg.max_seq, self.num_blocks * self.block_size) - n_prompt + 1

    def add_request(self, prompt: Sequence[int], max_tokens: int, request_id: str | None = None,
                    stop_token_ids: Sequence[int] = ()) -> RequestState:
        """Queue a request (prompt: token ids, max_tokens >= 1). EngineError when it can never fit.

        Generation stops after max_tokens tokens (finish reason "length"), or after sampling
        `eos_token_id` or one of `stop_token_ids` (finish reason "stop"; that token is output too).
        """
        prompt = [int(t) for t in prompt]
        if not prompt or min(prompt) < 0 or max(prompt) >= self.cfg.vocab:
            raise EngineError(f"a prompt needs 1 or more token ids in [0, {self.cfg.vocab})")
        if max_tokens < 1:
            raise EngineError(f"max_tokens must be >= 1; got {max_tokens}")
        if max_tokens > self.max_tokens_for(len(prompt)):
            raise EngineError(
                f"a {len(prompt)}-token prompt with max_tokens {max_tokens} needs {len(prompt) + max_tokens - 1} "
                f"positions; the model holds {self.cfg.max_seq} and the KV pool {self.num_blocks * self.block_size}")
        request_id = request_id if request_id is not None else f"req-{next(self._ids)}"
        if request_id in self.requests:
            raise EngineError(f"request id {request_id!r} is in use")
        request = RequestState(request_id, prompt, int(max_tokens), tuple(int(t) for t in stop_token_ids))
        self.requests[request_id] = request
        self.scheduler.add(request)
        return request

    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished()

    def abort(self, request_id: str) -> None:
        """Drop a request wherever it is (a client went away); its blocks go back to the manager."""
        request = self.requests.pop(request_id, None)
        if request is None:
            return
        self.scheduler.abort(request)
        request.finish_reason = request.finish_reason or "abort"

    def step(self) -> list[Event]:
        """Admit at most one waiting request and prefill it; decode one token for the others."""
        events: list[Event] = []
        decoding = list(self.scheduler.running)
        admitted = self.scheduler.admit()
        if admitted is not None:
            events.append(self._emit(admitted, self._prefill(admitted)))
        for request in decoding:
            if self.scheduler.reserve_decode(request):
                events.append(self._emit(request, self._run_positions(request, [request.output[-1]])))
        return events

    def _prefill(self, request: RequestState) -> np.ndarray:
        tokens = request.tokens
        if self.kv_connector is not None:
            self._load_from_connector(request, tokens)
        with counter.counting() as counts:
            logits = self._run_positions(request, tokens[request.kv_length:])
        request.prefill_positions += counts.positions
        self.prefill_positions += counts.positions
        if self.kv_connector is not None:
            self.kv_connector.store(tokens, self._gather(request, len(tokens)))
        return logits

    def _load_from_connector(self, request: RequestState, tokens: list[int]) -> None:
        loadable = min(int(self.kv_connector.lookup(tokens)), len(tokens) - 1)
        if loadable <= request.kv_length:
            return
        loaded = self.kv_connector.load(tokens, loadable)
        if loaded is None:  # a chunk evicted or damaged since lookup: a miss, computed below
            return
        kv = np.asarray(loaded)
        want = (self.cfg.n_layers, 2, loadable, self.cfg.n_kv_heads, self.cfg.d_head)
        if kv.shape != want:
            raise ValueError(f"kv_connector.load returned shape {kv.shape}; expected {want}")
        start = request.kv_length
        positions = np.arange(start, loadable)
        blocks = np.asarray(request.block_ids, dtype=np.int64)[positions // self.block_size]
        offsets = positions % self.block_size
        for layer in range(self.cfg.n_layers):
            self.k_pool[blocks, layer, offsets] = kv[layer, 0, start:]
            self.v_pool[blocks, layer, offsets] = kv[layer, 1, start:]
        request.kv_length = loadable
        request.num_loaded = loadable - start
        self.loaded_positions += request.num_loaded

    def _gather(self, request: RequestState, n: int) -> np.ndarray:
        """The KV of the request's first n positions: [L, 2, n, Hkv, d]."""
        positions = np.arange(n)
        blocks = np.asarray(request.block_ids, dtype=np.int64)[positions // self.block_size]
        offsets = positions % self.block_size
        k = self.k_pool[blocks, :, offsets].transpose(1, 0, 2, 3)
        v = self.v_pool[blocks, :, offsets].transpose(1, 0, 2, 3)
        return np.stack([k, v], axis=1)

    def _run_positions(self, request: RequestState, tokens: list[int]) -> np.ndarray:
        """Forward `tokens` at the request's next positions; the last position's logits [V]."""
        cache = _BlockTableCache(self, request)
        logits = forward(self.params, self.cfg, np.asarray(tokens, dtype=np.int64)[None], cache=cache, last_only=True)
        request.kv_length = cache.length
        return logits[0, -1]

    def _emit(self, request: RequestState, logits: np.ndarray) -> Event:
        token = int(np.argmax(logits))
        request.output.append(token)
        if self.keep_logits:
            request.logits.append(logits)
        finish = None
        if token == self.eos_token_id or token in request.stop_token_ids:
            finish = "stop"
        elif len(request.output) >= request.max_tokens:
            finish = "length"
        if finish is not None:
            request.finish_reason = finish
            self.scheduler.finish(request)
        return Event(request.request_id, token, finish)


def run_requests(manager: Any, cfg: Config, requests: Sequence[dict[str, Any]], *, sequential: bool = False,
                 keep_logits: bool = False, seed: int = WEIGHT_SEED, max_steps: int = 100_000) -> dict[str, Any]:
    """Serve `requests` with a new Engine on `manager` (deterministic weights init_params(cfg, seed)).

    requests: dicts {"prompt": list of token ids, "max_tokens": int >= 1}. `sequential`: each request
    is queued only when the previous one finished (so a later one can hit what an earlier one
    cached); otherwise all are queued at once, in order, and share the engine step by step.
    Returns plain data, one list entry per request in order:
    {"outputs": [[token, ...]], "prefill_positions": [int], "num_cached": [int] (at the last
    admission), "preemptions": [int], "finish_reasons": [str], "logits": [[ndarray [V], ...]] (empty
    lists unless keep_logits), "steps": int}. ManagerError when the manager misbehaves visibly.
    """
    engine = Engine(manager, cfg, init_params(cfg, seed), keep_logits=keep_logits)
    queued: list[RequestState] = []
    pending = [dict(r) for r in requests]
    steps = 0
    while pending or engine.has_unfinished():
        if pending and (not sequential or not engine.has_unfinished()):
            spec = pending.pop(0)
            queued.append(engine.add_request(spec["prompt"], spec["max_tokens"], request_id=f"r{len(queued)}"))
            if not sequential:
                continue
        engine.step()
        steps += 1
        if steps > max_steps:
            raise ManagerError(f"the engine made no progress in {max_steps} steps")
    return {
        "outputs": [list(r.output) for r in queued],
        "prefill_positions": [r.prefill_positions for r in queued],
        "num_cached": [r.num_cached for r in queued],
        "preemptions": [r.preemptions for r in queued],
        "finish_reasons": [r.finish_reason for r in queued],
        "logits": [list(r.logits) for r in queued],
        "steps": steps,
    }
