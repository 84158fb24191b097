"""What the public and hidden lecture-7 tests of eviction and hit_ratio share: the script
interpreter, the traces, the time limit, and the diagnosis of a wrong hit ratio.

The trusted reference caches the hidden tests replay traces through are not here (they would be
an answer to the eviction task); `hit_ratio_problem` takes the replay as an argument. The public
tests pass `unlimited_hits`, the replay at capacity None, where nothing is ever evicted and both
policies reduce to "has this block been seen". Every `*_problem` function returns None when the
student's values agree, else the message the student sees.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from kvlab.trace import BLOCK, Request, make_trace
from paged_checks import describe_error, differs, outcome

# On Gradescope every call into student code ends at the worker's wall timeout, assignment.json's
# call_timeout_seconds = 10 s; the public timed tests hold a call to the same limit. The reference
# solution replays make_trace() at capacity 100,000 in about 0.2 s; an eviction that scans the cache
# (O(capacity) per miss) needs minutes.
TIME_LIMIT_SECONDS = 10
GUARD_CAPACITY = 100_000

# Traces up to this many requests are replayed with each usual mistake to name the one made.
DIAGNOSED_REQUESTS = 2_000

# Scripted calls: (operation, blocks, what match returns or None, contents afterwards, why).
Script = tuple[tuple[str, list[int], int | None, set[int], str], ...]

CLASSES = {"lru": "LRUCache", "lfu": "LFUCache"}

# (trace, capacity, policy, block_size, **mistake) -> (hit tokens, input tokens); see unlimited_hits.
Replay = Callable[..., tuple[float, int]]


def held_blocks(student: Any, cache: Any, blocks: Sequence[int]) -> list[int]:
    """The blocks of `blocks` for which `block in cache`, in order: the contract's __contains__ of
    each, asked in one step (kvlab.testing.probe:ask, one round trip when graded instead of one per block)."""
    answers = student.call("kvlab.testing.probe:ask", [(cache, "__contains__", (block,)) for block in blocks])
    return [block for block, inside in zip(blocks, answers) if inside]


def script_problem(
    student: Any, policy: str, capacity: int | None,
    steps: Sequence[tuple[str, list[int], int | None, set[int], str]], reveal: bool = True,
) -> str | None:
    """Run a scripted sequence on the student's LRUCache / LFUCache.

    Rows: (operation "match" or "insert", blocks, what match returns (None for insert), the cache's
    contents afterwards, why). After every row the return value, len(cache) and `b in cache` for
    every block of the script are compared; `why` explains the row to the student. reveal=False
    (hidden scripts): messages say how a value is off, not the expected value (paged_checks.differs).
    """
    name = f"{CLASSES[policy]}(capacity={capacity})"
    cache = getattr(student.prefix_cache, CLASSES[policy])(capacity)
    universe = sorted({block for _, blocks, _, _, _ in steps for block in blocks})
    done: list[str] = []
    held_before: set[int] = set()
    for number, (op, blocks, want_n, contents, why) in enumerate(steps, 1):
        where = f"{name}, step {number}: {op}({blocks}) after [{'; '.join(done) or 'nothing'}]"
        got, error = outcome(functools.partial(getattr(cache, op), list(blocks)))
        if error is not None:
            evicts = op == "insert" and bool(held_before - set(contents))
            victim = ("the block with the fewest uses (ties to the least recently used)" if policy == "lfu" else
                      "the least recently used block")
            return f"{where} raised {describe_error(error)}" + (
                f". This insert must evict (the cache is full): a missing block first evicts one victim, {victim}"
                if evicts else "")
        if op == "match" and got != want_n:
            return f"{where} returned {got!r}; {differs(got, want_n, reveal)}: {why}"
        held = held_blocks(student, cache, universe)
        if held != sorted(contents):
            evicted = sorted(set(contents) - set(held))
            kept = sorted(set(held) - set(contents))
            instead = f", not {', '.join(map(str, evicted))}" if reveal else ""
            detail = (f" ({', '.join(map(str, kept))} should have been evicted{instead})" if evicted and kept else "")
            expected = f"expected {sorted(contents)}" if reveal else "not what the policy leaves there"
            return f"{where}: the cache holds {held}; {expected}{detail}: {why}"
        size = len(cache)
        if size != len(contents):
            return f"{where}: len(cache) is {size!r}; {differs(size, len(contents), reveal)}, the number of blocks it holds"
        done.append(f"{op}({blocks})" + (f" -> {got}" if op == "match" else ""))
        held_before = set(contents)
    return None


@functools.lru_cache(maxsize=None)
def full_trace() -> tuple[Request, ...]:
    """make_trace() with its defaults: 23,608 requests, the shape of Mooncake's tool-and-agent trace."""
    return tuple(make_trace())


@functools.lru_cache(maxsize=None)
def small_trace(seed: int) -> tuple[Request, ...]:
    """A cheaper synthetic trace: 1,500 requests in 5 minutes, dense enough for session hits."""
    return tuple(make_trace(seed, n_requests=1_500, duration=300.0))


def unlimited_hits(
    trace: Sequence[Request], capacity: int | None, policy: str, block_size: int = BLOCK, *,
    cap_at_input: bool = True, insert_first: bool = False, per_request: bool = False,
) -> tuple[float, int]:
    """(hit tokens, input tokens) of the contract's replay at capacity None; the keywords give the
    usual mistakes. With nothing ever evicted, a block is present once any request inserted it,
    whatever the policy.

    per_request: (sum of per-request hit fractions, number of requests) instead, whose quotient is
    the mean of per-request ratios.
    """
    assert capacity is None, "test setup: unlimited_hits replays capacity None only"
    seen: set[int] = set()
    hit = total = 0
    for request in trace:
        if insert_first:
            seen.update(request.blocks)
        n = next((i for i, block in enumerate(request.blocks) if block not in seen), len(request.blocks))
        hits = min(n * block_size, request.input_len) if cap_at_input else n * block_size
        hit += hits / request.input_len if per_request else hits
        total += 1 if per_request else request.input_len
        seen.update(request.blocks)
    return hit, total


def describe_call(label: str, capacity: int | None, policy: str, block_size: int = BLOCK) -> str:
    args = "" if block_size == BLOCK else f", block_size={block_size}"
    return f"hit_ratio({label}, capacity={capacity}, policy={policy!r}{args})"


def run_hit_ratio(
    student: Any, trace: Sequence[Request], capacity: int | None, policy: str, block_size: int = BLOCK
) -> tuple[Any, BaseException | None]:
    """The student's hit_ratio(trace, capacity, policy, block_size): (value, None) or (None, error)."""
    return outcome(functools.partial(student.prefix_cache.hit_ratio, list(trace), capacity, policy, block_size))


SLOW_CAUSE = ("Likely cause: evicting or using a block costs O(capacity), e.g. min() over every cached block's "
              "timestamp or count, list.pop(0) or list.remove on the recency order, bisect.insort into a sorted "
              "list, next(iter(d)) on a dict that blocks are deleted from: match and insert must cost "
              "O(len(blocks)) whatever the capacity. Keep the blocks in recency order (OrderedDict: move_to_end, "
              "popitem(last=False)) and, for LFU, one recency-ordered group per use count")


# The growth guard: the same sequence at capacity GROWTH_BASE_CAPACITY, where even a scan of the
# whole cache is short, is the baseline; at GUARD_CAPACITY each inserted id may cost at most
# GROWTH_PER_ID seconds more. What an id costs besides the cache (the call's round trip, the ids'
# encoding) is the same at both capacities and cancels. The reference grows by 0.15 s at most and a
# correct heap-based LFU by 0.1-0.3 s, while O(capacity) work per eviction or use grows by about 3 s
# or more even where it is a C-level memmove (list.pop(0), bisect.insort) or a dict's skip over its
# deleted entries (next(iter(d))). One pair of runs can be stretched by the machine (the heap-based
# LFU once measured 0.62 s, sandboxed beside other gradings), all of them rarely: a growth over the
# limit but under GROWTH_RECHECK_BELOW times it is measured again on fresh caches, GROWTH_PAIRS
# pairs in all, and the smallest counts. A growth past that is no machine's noise, and measuring it
# again would only cost.
GROWTH_BASE_CAPACITY = 1_000
GROWTH_PER_ID = 2.5e-6
GROWTH_PAIRS = 3
GROWTH_RECHECK_BELOW = 3


def growth_limit(n_ids: int) -> float:
    """How many CPU seconds more inserting `n_ids` ids may cost at GUARD_CAPACITY than at GROWTH_BASE_CAPACITY."""
    return n_ids * GROWTH_PER_ID


def growth_problem(sequence: str, seconds: float, base_seconds: float, n_ids: int, pairs: int = 1) -> str | None:
    """None when `sequence` at GUARD_CAPACITY (`seconds` of CPU time) took at most n_ids * GROWTH_PER_ID
    seconds more than at GROWTH_BASE_CAPACITY (`base_seconds`), else the message; `pairs`: how many pairs
    of runs were measured, these figures being the pair that grew least."""
    limit = growth_limit(n_ids)
    if seconds - base_seconds <= limit:
        return None
    smallest = f" (the smallest growth of {pairs} measurements on fresh caches)" if pairs > 1 else ""
    return (f"{sequence} took {seconds:.2f} s of CPU time, {seconds - base_seconds:.2f} s more than the same calls "
            f"at capacity {GROWTH_BASE_CAPACITY:,} ({base_seconds:.2f} s){smallest}; the limit is {limit:.2f} s "
            f"({n_ids:,} ids x {GROWTH_PER_ID * 1e6:g} us): the cost must not grow with the capacity. {SLOW_CAUSE}")


def guarded_sequence(cache: Any, trace_blocks: list[int], probes: list[list[int]],
                     asked: list[int]) -> tuple[Any, list[Any], list[Any], Any]:
    """insert(every block), then match(probe) for each probe, `block in cache` for each asked block,
    len(cache): (insert's outcome, matches, answers, len), student exceptions kept as values.

    Every answer here depends on the whole insert, so work an insert defers to later calls is done
    inside this sequence, and timed with it."""
    inserted = outcome(lambda: cache.insert(trace_blocks))
    # Lambdas: reading cache.match itself fails once the worker was stopped (a call's time limit).
    matches = [outcome(lambda probe=probe: cache.match(probe)) for probe in probes]
    answers = [outcome(lambda block=block: block in cache) for block in asked]
    return inserted, matches, answers, outcome(lambda: len(cache))


@contextmanager
def time_limit(call: str, seconds: float = TIME_LIMIT_SECONDS) -> Iterator[None]:
    """Turn pytest-timeout's failure inside the block (a limit of `seconds`) into a message naming
    the call and the cause."""
    try:
        yield
    except pytest.fail.Exception:
        pytest.fail(f"{call} did not finish within {seconds:g} s (the reference solution takes about 0.2 s). "
                    + SLOW_CAUSE, pytrace=False)


def base_growth_problem(student: Any, name: str, trace_blocks: list[int], probes: list[list[int]], asked: list[int],
                        sequence: str, seconds: float, answered: tuple[Any, ...], wall_seconds: float) -> str | None:
    """The growth check's second half: `sequence` (guarded_sequence with these probes and asked ids) took
    `seconds` of CPU time on a `name` cache (LRUCache or LFUCache) of GUARD_CAPACITY and `answered`
    (matches, answers, len), which the caller has checked. The same calls on one of GROWTH_BASE_CAPACITY
    must have cost at most growth_problem's limit less, in at least one of the pairs measured (see
    GROWTH_PAIRS); a pair measured again must answer as the first did, so that what is timed is the work
    checked. Each run within `wall_seconds` (time_limit). None, or what an insert raised, or what a
    second run answered otherwise, or growth_problem's message for the pair that grew least."""
    limit = growth_limit(len(trace_blocks))
    pairs: list[tuple[float, float]] = []
    while True:
        (inserted, *_), base_seconds = timed_run(student, name, GROWTH_BASE_CAPACITY, trace_blocks, probes, asked,
                                                 wall_seconds)
        if inserted[1] is not None:
            return error_problem(insert_call(name, GROWTH_BASE_CAPACITY), inserted[1])
        pairs.append((seconds, base_seconds))
        seconds, base_seconds = min(pairs, key=lambda pair: pair[0] - pair[1])
        growth = seconds - base_seconds
        if growth <= limit or growth > GROWTH_RECHECK_BELOW * limit or len(pairs) == GROWTH_PAIRS:
            return growth_problem(sequence, seconds, base_seconds, len(trace_blocks), len(pairs))
        (inserted, *again), seconds = timed_run(student, name, GUARD_CAPACITY, trace_blocks, probes, asked,
                                                wall_seconds)
        if inserted[1] is not None:
            return error_problem(f"measured again, {insert_call(name, GUARD_CAPACITY)}", inserted[1])
        if tuple(again) != tuple(answered):
            return (f"measured again on a fresh cache, {sequence} answered otherwise than the first time: the same "
                    "calls on a fresh cache must give the same answers")


def timed_run(student: Any, name: str, capacity: int, trace_blocks: list[int], probes: list[list[int]],
              asked: list[int], wall_seconds: float) -> tuple[tuple[Any, list[Any], list[Any], Any], float]:
    """guarded_sequence on a fresh `name`(capacity), within `wall_seconds`: (its outcomes, CPU seconds)."""
    with time_limit(f"{insert_call(name, capacity)}, then the same questions", wall_seconds):
        return student.cpu_seconds(
            guarded_sequence, getattr(student.prefix_cache, name)(capacity), trace_blocks, probes, asked)


def insert_call(name: str, capacity: int) -> str:
    """How a message names the guard's insert on a `name` cache (LRUCache or LFUCache) of `capacity`."""
    return f"{name}({capacity:,}).insert(every block of make_trace())"


def error_problem(call: str, error: BaseException) -> str:
    """What a call raised; a grader's per-call timeout (sandboxed grading) gets the likely cause too."""
    slow = type(error).__name__ == "WorkerTimeout"
    return f"{call} raised {describe_error(error)}" + (f". {SLOW_CAUSE}" if slow else "")


def hit_ratio_problem(
    call: str, got: Any, error: BaseException | None, trace: Sequence[Request], capacity: int | None, policy: str,
    block_size: int = BLOCK, *, replay: Replay = unlimited_hits, reveal: bool = True,
) -> str | None:
    """The student's hit_ratio against `replay`, exactly (==): the same integers, one division.

    reveal=False (hidden checks on fixed data: the real trace, the full synthetic one) leaves the
    expected value and its counts out of the message, so that resubmitting cannot collect them;
    the message still gives the student's value and the likely cause.
    """
    empty = ("a trace with no input tokens (an empty trace) has hit ratio 0.0: return 0.0 when the total is 0 "
             "instead of dividing by it")
    if error is not None:  # no replay (seconds on a long trace) for a call that returned nothing
        return error_problem(call, error) + ("" if sum(r.input_len for r in trace) else f". {empty}")
    hit, total = replay(trace, capacity, policy, block_size)
    expected = hit / total if total else 0.0
    if got == expected and isinstance(got, float):
        return None
    if not total:
        return f"{call} returned {got!r}; {empty}"
    if isinstance(got, float) and any(got == round(expected, digits) for digits in range(1, 10)):
        return (f"{call} returned {got!r}, which looks rounded: return exactly hit / total, one division of the two "
                "integer sums, not rounded (the grader compares with ==)")
    said = (f"{call} returned {got!r}; expected {expected!r} = {hit} hit tokens / {total} input tokens" if reveal
            else f"{call} returned {got!r}, which differs from the contract's replay of this trace")
    if not isinstance(got, float):
        return f"{said}. It must be a float, hit / total"
    mistakes = {
        "a request's hit tokens are not capped at its input length: a fully matched request whose last block is "
        "partial hits min(n * block_size, input_len) tokens, not n whole blocks":
            functools.partial(replay, cap_at_input=False),
        "the request's blocks are inserted before they are matched, so every request hits itself: match first, "
        "then insert": functools.partial(replay, insert_first=True),
        "the ratio is a mean of per-request ratios; it must be token-weighted: the sum of every request's hit "
        "tokens over the sum of their input lengths": functools.partial(replay, per_request=True),
        "the other policy ran: 'lru' must give LRUCache and 'lfu' LFUCache":
            lambda t, c, p, b: replay(t, c, "lfu" if p == "lru" else "lru", b),
        f"block_size is ignored: tokens must be counted with the block_size argument ({block_size}), not BLOCK":
            lambda t, c, p, b: replay(t, c, p, BLOCK),
    }
    # Replaying long traces once per mistake would cost seconds; the short traces name the mistake.
    for cause, variant in mistakes.items() if len(trace) <= DIAGNOSED_REQUESTS else ():
        v_hit, v_total = variant(trace, capacity, policy, block_size)
        if v_total and got == v_hit / v_total:
            return f"{said}. Likely cause: {cause}"
    return (f"{said}. Likely causes: the ratio is token-weighted (sum of hits over sum of input lengths, not a mean "
            f"of per-request ratios); each request is matched, then inserted, in trace order, through one cache "
            f"made by make_cache; or the {policy.upper()} eviction differs from the contract")
