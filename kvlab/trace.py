"""Request traces for the prefix-caching lecture: a synthetic Mooncake-like trace and the real ones.

A trace is a list of `Request`s in arrival order. Each request carries one id per 512-token block of
its prompt (a trailing partial block included), as in the public Mooncake traces: ids stand for
chained prefix hashes, so two requests whose first k ids agree have the same first k blocks of
tokens, and a given id is always preceded by the same chain of ids.

`make_trace` generates a trace shaped like Mooncake's tool-and-agent trace (Mooncake report, arXiv
2407.00079, and the FAST'25 release: 23,608 requests in an hour, average input 8,596 tokens and
output 182, cache hit ratio about 0.5-0.6, falling as the cache shrinks). Its generative model:

- Templates. `n_system_prompts` system prompts of 2 blocks each, and `n_templates` templates, each a
  system prompt (drawn with Zipf-like popularity, weight 1/rank**zipf) followed by 2-5 blocks of tool
  definitions of its own. Templates are whole blocks, so every request on a template shares exactly
  its ids. They make the hottest blocks and the hits that survive even a small cache.
- Sessions. Each session picks a template (Zipf-like again) and runs a number of turns (geometric,
  mean `mean_turns`). The first turn is the template plus a new message (lognormal, median 2,600
  tokens). Each follow-up turn extends the previous turn's prompt by that turn's output and a new
  message or tool result (lognormal, median 1,300 tokens): it repeats the previous prompt's full
  blocks and continues with new ids (the previous partial block is not reusable: its content grew).
  Turns are separated by lognormal gaps (median `median_gap` seconds), so session hits need a cache
  that remembers the last few minutes: recency matters, and LRU and LFU differ.
- Unique tails. Every new message, and every partial last block, is seen by no other request; those
  blocks are most of the distinct blocks and the misses of an unlimited cache.
- Outputs: lognormal, median 110 tokens, at most 4,096. Sessions start uniformly over `duration`,
  shifted so that a session's last turn still falls inside it.
Ids are renumbered 0, 1, 2, ... in order of first appearance, as in the Mooncake files.

Figures of `make_trace()` (seed 0; `trace_stats`): 23,608 requests over 60.0 minutes, average input
8,574 tokens and output 180, 190,838 distinct blocks of which 70% are seen only once, the hottest
block in 8,649 requests, the hottest 1% of blocks taking 34% of all block accesses. With an
unlimited cache (a block is a hit once any earlier request contained it) 0.55 of input tokens hit
(seeds 0-5: 0.54-0.56). Generating it takes about 0.1 s.

`load_mooncake_trace` reads the real traces (JSON lines); `mooncake_dir` says where they are.
"""
from __future__ import annotations

import itertools
import json
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

BLOCK = 512
"""Tokens per block, as in the Mooncake traces."""

# Token-size and timing constants of the generative model (described in the module docstring).
_SYSTEM_BLOCKS = 2
_TOOL_BLOCKS_MIN, _TOOL_BLOCKS_MAX = 2, 5
_FIRST_MESSAGE_MEDIAN, _FIRST_MESSAGE_SIGMA = 2600.0, 1.0
_FOLLOW_UP_MEDIAN, _FOLLOW_UP_SIGMA = 1300.0, 1.2
_OUTPUT_MEDIAN, _OUTPUT_SIGMA, _OUTPUT_MAX = 110.0, 1.0, 4096
_GAP_SIGMA = 1.0


@dataclass(frozen=True)
class Request:
    """One request of a trace.

    arrival: seconds from the start of the trace. input_len, output_len: prompt and generated tokens.
    blocks: one id per BLOCK-token block of the prompt, a trailing partial block included (so
    ceil(input_len / BLOCK) ids for the traces here); equal leading ids mean equal prefixes.
    """

    arrival: float
    input_len: int
    output_len: int
    blocks: tuple[int, ...]

    def __post_init__(self) -> None:
        # Lists arrive from JSON and from callers; a tuple keeps the request immutable and hashable.
        if not isinstance(self.blocks, tuple):
            object.__setattr__(self, "blocks", tuple(self.blocks))


def _zipf_weights(n: int, exponent: float) -> np.ndarray:
    """Probabilities proportional to 1 / rank**exponent for ranks 1 .. n, shape [n]."""
    weights = 1.0 / np.arange(1, n + 1, dtype=np.float64) ** exponent
    return weights / weights.sum()


def _segment_cumsum(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Running sums of `values` restarting at each segment start (segments given by starts, lengths)."""
    total = np.cumsum(values)
    before = total[starts] - values[starts]
    return total - np.repeat(before, lengths)


def make_trace(
    seed: int = 0,
    *,
    n_requests: int = 23_608,
    duration: float = 3600.0,
    n_system_prompts: int = 12,
    n_templates: int = 50,
    zipf: float = 1.2,
    mean_turns: float = 1.5,
    median_gap: float = 180.0,
) -> list[Request]:
    """A deterministic synthetic trace shaped like Mooncake's tool-and-agent trace.

    Returns `n_requests` Requests sorted by arrival, all arrivals in [0, duration) seconds. The
    generative model and the figures of the defaults are in the module docstring. `seed` seeds a
    numpy Generator: the same arguments give the same trace.
    """
    if n_requests < 1:
        raise ValueError(f"n_requests must be >= 1, got {n_requests}")
    if not duration > 0:
        raise ValueError(f"duration must be > 0 seconds, got {duration}")
    if n_system_prompts < 1 or n_templates < 1:
        raise ValueError(f"need at least one system prompt and one template, got "
                         f"n_system_prompts={n_system_prompts}, n_templates={n_templates}")
    if not zipf >= 0:
        raise ValueError(f"zipf must be >= 0, got {zipf}")
    if not mean_turns >= 1:
        raise ValueError(f"mean_turns must be >= 1, got {mean_turns}")
    if not median_gap > 0:
        raise ValueError(f"median_gap must be > 0 seconds, got {median_gap}")
    rng = np.random.default_rng(seed)

    next_id = 0
    system_prompts = []
    for _ in range(n_system_prompts):
        system_prompts.append(tuple(range(next_id, next_id + _SYSTEM_BLOCKS)))
        next_id += _SYSTEM_BLOCKS
    template_system = rng.choice(n_system_prompts, n_templates, p=_zipf_weights(n_system_prompts, zipf))
    tool_blocks = rng.integers(_TOOL_BLOCKS_MIN, _TOOL_BLOCKS_MAX + 1, n_templates)
    templates = []
    for system, n_tool in zip(template_system.tolist(), tool_blocks.tolist()):
        templates.append(system_prompts[system] + tuple(range(next_id, next_id + n_tool)))
        next_id += n_tool
    template_tokens = np.array([len(t) * BLOCK for t in templates], dtype=np.int64)

    # n_requests draws always suffice (each session has >= 1 turn); the last session is cut so
    # that the total is exactly n_requests.
    turns = rng.geometric(1.0 / mean_turns, n_requests)
    ends = np.cumsum(turns)
    n_sessions = int(np.searchsorted(ends, n_requests)) + 1
    turns = turns[:n_sessions].copy()
    turns[-1] -= ends[n_sessions - 1] - n_requests
    starts = np.cumsum(turns) - turns
    session = np.repeat(np.arange(n_sessions), turns)
    is_first = np.zeros(n_requests, dtype=bool)
    is_first[starts] = True
    session_template = rng.choice(n_templates, n_sessions, p=_zipf_weights(n_templates, zipf))

    first_message = rng.lognormal(math.log(_FIRST_MESSAGE_MEDIAN), _FIRST_MESSAGE_SIGMA, n_requests)
    follow_up = rng.lognormal(math.log(_FOLLOW_UP_MEDIAN), _FOLLOW_UP_SIGMA, n_requests)
    new_tokens = np.ceil(np.where(is_first, first_message, follow_up)).astype(np.int64)
    output = np.ceil(rng.lognormal(math.log(_OUTPUT_MEDIAN), _OUTPUT_SIGMA, n_requests))
    output = np.minimum(output, _OUTPUT_MAX).astype(np.int64)
    previous_output = np.concatenate(([0], output[:-1]))
    growth = new_tokens + np.where(is_first, template_tokens[session_template[session]], previous_output)
    input_len = _segment_cumsum(growth, starts, turns)

    gap = np.where(is_first, 0.0, rng.lognormal(math.log(median_gap), _GAP_SIGMA, n_requests))
    offset = _segment_cumsum(gap, starts, turns)
    span = offset[starts + turns - 1]
    # A session longer than the whole trace is compressed to fit; the rest keep their gaps.
    squeeze = np.minimum(1.0, 0.999 * duration / np.maximum(span, 1e-9))
    session_start = rng.random(n_sessions) * (duration - span * squeeze)
    arrival = session_start[session] + offset * squeeze[session]

    # Block ids in session order: a follow-up turn repeats the previous turn's full blocks.
    blocks: list[tuple[int, ...]] = []
    lengths = input_len.tolist()
    template_of = session_template[session].tolist()
    for i, first in enumerate(is_first.tolist()):
        prefix = templates[template_of[i]] if first else blocks[-1][: lengths[i - 1] // BLOCK]
        n_new = -(-lengths[i] // BLOCK) - len(prefix)
        blocks.append(prefix + tuple(range(next_id, next_id + n_new)))
        next_id += n_new

    order = np.argsort(arrival, kind="stable").tolist()
    ordered = [blocks[i] for i in order]
    sizes = [len(b) for b in ordered]
    flat = np.fromiter(itertools.chain.from_iterable(ordered), dtype=np.int64, count=sum(sizes))
    _, first_seen, inverse = np.unique(flat, return_index=True, return_inverse=True)
    rank = np.empty(len(first_seen), dtype=np.int64)
    rank[np.argsort(first_seen)] = np.arange(len(first_seen))
    renumbered = rank[inverse.reshape(-1)].tolist()

    arrivals, outputs = arrival.tolist(), output.tolist()
    trace = []
    lo = 0
    for i, size in zip(order, sizes):
        trace.append(Request(arrivals[i], lengths[i], outputs[i], tuple(renumbered[lo : lo + size])))
        lo += size
    return trace


_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def _parse_record(record: Any, where: str) -> Request:
    """One Mooncake JSON record -> Request; ValueError prefixed with `where` (file and line)."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [name for name in _FIELDS if name not in record]
    if missing:
        raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
    timestamp, input_len, output_len, hash_ids = (record[name] for name in _FIELDS)
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) or not math.isfinite(timestamp):
        raise ValueError(f"{where}: timestamp must be a finite number of milliseconds, got {timestamp!r}")
    for name, value in (("input_length", input_len), ("output_length", output_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{where}: {name} must be a non-negative integer, got {value!r}")
    if not isinstance(hash_ids, list) or not all(type(h) is int for h in hash_ids):
        raise ValueError(f"{where}: hash_ids must be a list of integers")
    if len(hash_ids) != -(-input_len // BLOCK):
        raise ValueError(f"{where}: {len(hash_ids)} hash_ids for input_length {input_len}, expected "
                         f"ceil({input_len} / {BLOCK}) = {-(-input_len // BLOCK)}")
    return Request(timestamp / 1000.0, input_len, output_len, tuple(hash_ids))


def load_mooncake_trace(path: str | os.PathLike[str]) -> list[Request]:
    """Read a Mooncake trace (JSON lines) into Requests, in file order.

    Each line holds `timestamp` (ms from the start; becomes `arrival` in seconds), `input_length`,
    `output_length` and `hash_ids` (ceil(input_length / 512) block ids). Blank lines are skipped.
    Raises ValueError naming the file and line for a malformed line or a missing field.
    """
    path = Path(path)
    trace = []
    with path.open(encoding="utf-8") as lines:
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}, line {lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{where}: not valid JSON ({err.msg})") from None
            trace.append(_parse_record(record, where))
    return trace


MOONCAKE_SOURCE = ("github.com/kvcache-ai/Mooncake, folder FAST25-release/traces/ at commit "
                   "3cca71daccf2a7afb8fe3f0295358f70e3a69fdb (Apache-2.0)")
"""Where the real traces are published (the FAST'25 release of the Mooncake paper)."""


def mooncake_dir() -> Path:
    """The folder holding the real Mooncake traces (it may not exist).

    The environment variable KVLAB_MOONCAKE_DIR when set and non-empty, else `data/mooncake` in the
    folder holding the `kvlab` package (the repository or a student bundle), where `make traces`
    puts them (see `MOONCAKE_SOURCE`).
    """
    configured = os.environ.get("KVLAB_MOONCAKE_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parent.parent / "data" / "mooncake"


def trace_stats(trace: Sequence[Request]) -> dict[str, float]:
    """Summary figures of a non-empty trace, for demos.

    Keys: requests; minutes (first to last arrival); avg_input, avg_output (tokens per request);
    distinct_blocks; once_share (fraction of distinct blocks that appear in exactly one request);
    hottest_block_accesses (requests that contain the most frequent block); top1pct_share (fraction
    of all block accesses, summed over every request's `blocks`, that go to the most frequent 1% of
    distinct blocks, at least one block).
    """
    if not trace:
        raise ValueError("trace_stats needs a non-empty trace")
    total = sum(len(r.blocks) for r in trace)
    flat = np.fromiter(itertools.chain.from_iterable(r.blocks for r in trace), dtype=np.int64, count=total)
    counts = np.sort(np.unique(flat, return_counts=True)[1])[::-1]
    arrivals = [r.arrival for r in trace]
    top = max(1, len(counts) // 100)
    return {
        "requests": len(trace),
        "minutes": (max(arrivals) - min(arrivals)) / 60.0,
        "avg_input": sum(r.input_len for r in trace) / len(trace),
        "avg_output": sum(r.output_len for r in trace) / len(trace),
        "distinct_blocks": int(len(counts)),
        "once_share": float(np.mean(counts == 1)) if len(counts) else 0.0,
        "hottest_block_accesses": int(counts[0]) if len(counts) else 0,
        "top1pct_share": float(counts[:top].sum() / total) if total else 0.0,
    }
