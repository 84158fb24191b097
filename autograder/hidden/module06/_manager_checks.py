"""Trusted-side reference of the block manager, and walks that compare a student's manager to it.

`RefManager` follows block_manager.py's docstrings with plain containers (an OrderedDict as the
free queue). A walk applies the same operations to both and, after every step, compares what the
operation returned, the free queue (order included), every block's ref_cnt and hash, and the
counters; the first difference becomes a message naming the step, what differed, and the likely
cause. The student's state is read in one round trip (`kvlab.testing.probe:ask`). The digests are
the public tests' own chain (`manager_checks.chained_hashes`, the contract's exact digests).

The walks are fixed scripts, so a message shows the student's value and how it is wrong (too high,
another order, which blocks do not belong), never the reference's value: resubmitting cannot collect
a table of expected answers to replay step by step.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvlab.testing.compare import how_off
from manager_checks import chained_hashes

Op = tuple  # ("allocate", request_id, tokens) | ("append", request_id, tokens) | ("free", request_id)

# The manager the hidden edge cases run on (manager_checks.edge_problem): 4 blocks of 4 tokens, request "a" of 3.
EDGE_MANAGER: dict[str, Any] = {"shape": (4, 4), "held": [1, 2, 3]}


class RefManager:
    """The reference: the same operations and answers as the contract's BlockManager (so the trusted
    engine can run on it too: `allocate`, `append_tokens`, `free`, `num_blocks`, `block_size`)."""

    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool = True) -> None:
        self.num_blocks, self.block_size, self.enable_caching = num_blocks, block_size, enable_caching
        self.ref = [0] * num_blocks
        self.hash: list[str | None] = [None] * num_blocks
        self.queue: OrderedDict[int, None] = OrderedDict((b, None) for b in range(num_blocks))
        self.cached: dict[str, int] = {}
        self.requests: dict[str, tuple[list[int], list[int], list[str]]] = {}
        self.queries = self.hits = 0
        self.evicted: set[str] = set()  # hashes that left the prefix cache when their block was reallocated

    def _take(self) -> int:
        block, _ = self.queue.popitem(last=False)
        digest = self.hash[block]
        if digest is not None:
            if self.cached.get(digest) == block:
                del self.cached[digest]
                self.evicted.add(digest)
            self.hash[block] = None
        self.ref[block] = 1
        return block

    def _cache(self, block: int, digest: str) -> None:
        if digest not in self.cached:
            self.cached[digest] = block
            self.hash[block] = digest

    def hit_blocks(self, tokens: Sequence[int]) -> list[int]:
        """The cached blocks allocate would share (the capped leading run)."""
        if not self.enable_caching:
            return []
        found = []
        for digest in chained_hashes(tokens, self.block_size)[:(len(tokens) - 1) // self.block_size]:
            if digest not in self.cached:
                break
            found.append(self.cached[digest])
        return found

    def lookup(self, tokens: Sequence[int]) -> Lookup:
        """What allocate(tokens) finds in the prefix cache now, before it changes anything."""
        hashes = chained_hashes(tokens, self.block_size) if self.enable_caching else []
        run: list[int] = []
        for digest in hashes:
            if digest not in self.cached:
                break
            run.append(self.cached[digest])
        return Lookup(hashes, run, (len(tokens) - 1) // self.block_size, [self.ref[b] for b in run],
                      [digest in self.cached for digest in hashes])

    def allocate(self, rid: str, tokens: Sequence[int]) -> tuple[int, list[int]] | None:
        tokens = [int(t) for t in tokens]
        size = self.block_size
        hashes = chained_hashes(tokens, size) if self.enable_caching else []
        hits = self.hit_blocks(tokens)
        n_new = -(-len(tokens) // size) - len(hits)
        if n_new > len(self.queue) - sum(1 for b in hits if self.ref[b] == 0):
            return None
        for block in hits:
            if self.ref[block] == 0:
                del self.queue[block]
            self.ref[block] += 1
        blocks = hits + [self._take() for _ in range(n_new)]
        for index in range(len(hits), len(hashes)):
            self._cache(blocks[index], hashes[index])
        if self.enable_caching:
            self.queries += len(tokens)
            self.hits += len(hits) * size
        self.requests[rid] = (blocks, tokens, hashes)
        return len(hits) * size, list(blocks)

    def append(self, rid: str, tokens: Sequence[int]) -> list[int] | None:
        blocks, held, hashes = self.requests[rid]
        size = self.block_size
        n_new = -(-(len(held) + len(tokens)) // size) - len(blocks)
        if n_new > len(self.queue):
            return None
        new = [self._take() for _ in range(n_new)]
        blocks.extend(new)
        held.extend(int(t) for t in tokens)
        if self.enable_caching:
            more = chained_hashes(held[len(hashes) * size:len(held) // size * size], size,
                                  hashes[-1] if hashes else None)
            for index, digest in enumerate(more, start=len(hashes)):
                self._cache(blocks[index], digest)
            hashes.extend(more)
        return new

    def append_tokens(self, rid: str, tokens: Sequence[int]) -> list[int] | None:
        """The engine's name for `append`."""
        return self.append(rid, tokens)

    def free(self, rid: str) -> None:
        """The engine's name for `release`."""
        self.release(rid)

    def release(self, rid: str) -> None:
        blocks, _, _ = self.requests.pop(rid)
        for block in reversed(blocks):
            self.ref[block] -= 1
            if self.ref[block] == 0:
                self.queue[block] = None

    def apply(self, op: Op) -> Any:
        if op[0] == "allocate":
            return self.allocate(op[1], op[2])
        if op[0] == "append":
            return self.append(op[1], op[2])
        return self.release(op[1])

    def state(self) -> State:
        return State(list(self.queue), list(self.ref), list(self.hash), self.queries, self.hits)


@dataclass
class Lookup:
    """An allocate's view of the prefix cache before it runs: the prompt's full-block hashes, the blocks of
    their longest leading cached run (uncapped), the cap in blocks, and the ref_cnt of each run block."""

    hashes: list[str]
    run: list[int]
    cap: int
    run_refs: list[int]
    present: list[bool] = field(default_factory=list)  # per hash: in the prefix cache then


@dataclass
class State:
    """What a walk compares after each step."""

    free_queue: list[int]
    ref_cnts: list[int]
    hashes: list[str | None]
    queries: int
    hits: int


def student_state(student: Any, manager: Any, n_blocks: int) -> State:
    """The student's manager's state, read in one round trip."""
    answers = student.call("kvlab.testing.probe:ask", [
        *((manager, "ref_cnt", (b,)) for b in range(n_blocks)), *((manager, "block_hash", (b,)) for b in range(n_blocks)),
        (manager, "free_block_ids", ()), (manager, "prefix_cache_queries", None), (manager, "prefix_cache_hits", None),
    ])
    free, queries, hits = answers[2 * n_blocks:]
    return State(list(free), list(answers[:n_blocks]), list(answers[n_blocks:2 * n_blocks]), queries, hits)


def describe_op(op: Op) -> str:
    if op[0] == "free":
        return f"free({op[1]!r})"
    tokens = list(op[2])
    shown = tokens if len(tokens) <= 12 else f"[{', '.join(map(str, tokens[:6]))}, ... {len(tokens)} tokens]"
    return f"{'allocate' if op[0] == 'allocate' else 'append_tokens'}({op[1]!r}, {shown})"


def student_apply(manager: Any, op: Op) -> Any:
    if op[0] == "allocate":
        return manager.allocate(op[1], list(op[2]))
    if op[0] == "append":
        return manager.append_tokens(op[1], list(op[2]))
    return manager.free(op[1])


def normalise(result: Any) -> Any:
    """Tuples and lists alike, numpy ints as ints, for comparing answers."""
    if isinstance(result, (list, tuple)):
        return [normalise(item) for item in result]
    if isinstance(result, (int, np.integer)) and not isinstance(result, bool):
        return int(result)
    return result


def result_cause(op: Op, got: Any, want: Any, ref: RefManager, before: State, seen: Lookup | None = None) -> str:
    """Why an operation's answer differs, decided from the two answers and `seen`, what the reference's
    prefix cache held for an allocate's prompt before it ran."""
    size = ref.block_size
    if not ref.enable_caching and op[0] == "allocate" and got is not None and want is not None and got[0] != want[0]:
        return "with enable_caching=False nothing is hashed or looked up: num_computed is always 0"
    if want is None and got is not None:
        touched = seen is not None and any(r == 0 for r in seen.run_refs[:seen.cap])
        return ("there are not enough free blocks: the call must return None and change nothing"
                + (". Count the hit blocks that are in the free queue (ref_cnt 0) as taken: touching them removes "
                   "them from it" if touched else ""))
    if got is None:
        cached_free = any(before.hashes[block] is not None for block in before.free_queue)
        return ("enough blocks are free" + (" (cached blocks with ref_cnt 0 are free too: they can be evicted)"
                                            if cached_free else "") + ", so the call must succeed: it returns None "
                "only when the new blocks needed exceed the free blocks left")
    if op[0] == "allocate" and isinstance(got, list) and len(got) == 2 and isinstance(want, list):
        g, w = got[0], want[0]
        n = len(op[2])
        cap = "hits are capped at (len(tokens) - 1) // block_size blocks, so that the last token is computed"
        if g == n:
            return "a fully cached prompt still recomputes its last block: " + cap
        if isinstance(g, int) and g < w and seen is not None:
            missed = g // size  # the first hit block of the rule's run that the student did not count
            capped = g == w - size and len(seen.run) >= seen.cap  # the rule's run was cut by the cap, one block more
            lazy = missed < len(seen.run_refs) and seen.run_refs[missed] == 0
            if lazy and not capped:
                return ("a block in the prefix cache with ref_cnt 0 (in the free queue) is still a hit until it is "
                        "reallocated (lazy eviction)")
            if capped and not lazy:
                return f"one block too few: {cap}, not fewer"
            if capped and lazy:
                return (f"one block too few: either {cap}, or a free cached block (ref_cnt 0) was not counted as a "
                        "hit (lazy eviction: it is a hit until it is reallocated)")
            return "the hit run is the longest leading run of the prompt's chained hashes found in the prefix cache"
        if isinstance(g, int) and g > w and seen is not None:
            missed = w // size  # the first block of the prompt that the rule does not count as a hit
            if missed >= seen.cap:
                return f"too many hits: {cap}"
            counted = sum(seen.present[:seen.cap])
            if g == counted * size and any(seen.present[missed + 1:seen.cap]):
                # The student's count is every cached hash of the prompt, not the run up to the first miss.
                return ("only the longest LEADING run of cached chained hashes counts: stop at the first miss (a "
                        "later block whose hash is still cached is no hit once an earlier one missed)")
            if missed < len(seen.hashes) and seen.hashes[missed] in ref.evicted:
                return ("this block's hash was evicted: a block popped from the free queue for another request loses "
                        "its hash, which leaves the prefix cache then (lazy eviction), so it is no longer a hit")
            if any(digest in ref.cached for digest in seen.hashes[missed + 1:]):
                return "only the longest LEADING run of cached chained hashes counts: stop at the first miss"
            return "a hit must be a full block whose chained hash is in the prefix cache"
        if g == w:
            return ("the block ids differ: hits first (the cached blocks), then new blocks popped from the free "
                    "queue's head in order; touch the hits before popping, so no hit is evicted by its own request")
    if op[0] == "append":
        return ("append_tokens returns only the blocks newly allocated for these tokens, popped from the free queue's "
                "head ([] when the request's last block has room)")
    return "compare with the rule in the docstring of the method called"


def answer_difference(op: Op, got: Any, want: Any) -> str:
    """How an operation's answer differs from the reference's, without the reference's."""
    if want is None:
        return "free returns None" if op[0] == "free" else "expected None: the call must fail"
    if got is None:
        return "expected a result: the call must succeed"
    prefix = ""
    if op[0] == "allocate" and isinstance(got, list) and len(got) == 2 and isinstance(got[0], int):
        if got[0] != want[0]:
            return f"num_computed {got[0]} is {how_off(got[0], want[0])}"
        got, want, prefix = got[1], want[1], "num_computed is right, but "
    if not isinstance(got, list):
        return prefix + "that is not a list of block ids"
    if len(got) != len(want):
        return prefix + f"it holds {'more' if len(got) > len(want) else 'fewer'} block ids than the rule gives"
    first = next(i for i, (g, w) in enumerate(zip(got, want)) if g != w)
    return prefix + f"the block ids are the right number and differ from position {first} on"


def state_problem(step: str, got: State, want: State, before: State, caching: bool = True,
                  failed: bool = False) -> str | None:
    """None when the states agree; else the first difference and its likely cause (`caching`: the manager's
    enable_caching; `failed`: the step's call returned None, as it should have)."""
    if got.free_queue != want.free_queue:
        g, w = got.free_queue, want.free_queue
        if sorted(g) == sorted(w):
            first = next(i for i, (a, b) in enumerate(zip(g, w)) if a != b)
            how = f"the right blocks in another order, from position {first} on"
            new = [b for b in w if b not in before.free_queue]
            cause = ("a finished request's blocks are freed in reverse order (last block first) and appended at the tail"
                     if new and [b for b in g if b in new] == new[::-1] else
                     "the free queue keeps eviction order: pop from the head, append freed blocks at the tail, "
                     "remove a touched block from wherever it is")
        elif len(g) > len(w):
            how, extra = "more blocks than the rule leaves there", sorted(set(g) - set(w))
            cause = (f"blocks {extra[:8]} are in use (ref_cnt > 0) but still in the free queue: a hit on a free cached "
                     "block must take it out of the free queue (touch)") if extra else "a block is in the free queue twice"
        else:
            how = f"{'fewer' if len(g) < len(w) else 'other'} blocks than the rule leaves there"
            missing = sorted(set(w) - set(g))
            cause = (f"blocks {missing[:8]} reached ref_cnt 0 but are not in the free queue: every block with "
                     "ref_cnt 0 goes to the free queue's tail")
        return (f"after {step} the free queue (head first) is {g[:24]}{' ...' if len(g) > 24 else ''}: {how}. "
                f"Likely cause: {cause}")
    for block, (g, w) in enumerate(zip(got.ref_cnts, want.ref_cnts)):
        if g != w:
            return (f"after {step} block {block} has ref_cnt {g!r}, {how_off(g, w) or 'not an int'}. Likely cause: each running request "
                    "holding a block counts once (a hit adds 1, a new block starts at 1, free subtracts 1)")
    for block, (g, w) in enumerate(zip(got.hashes, want.hashes)):
        if g != w:
            if w is None and g is not None and not caching:
                cause = ("with enable_caching=False nothing is ever hashed: not by allocate, and not by append_tokens "
                         "when decoding fills a block")
            elif w is not None and g is None and w in before.hashes and before.hashes[block] != w:
                cause = ("pop every new block from the free queue before hashing any: this block's hash was cached by "
                         "a block that this step then popped (evicting it), so the new block must cache it now; "
                         "hashing each new block as it is popped leaves that hash cached nowhere")
            elif w is None and g is not None:
                cause = ("a block reallocated from the free queue loses its old hash (lazy eviction happens then: its "
                         "block_hash becomes None and that hash leaves the prefix cache), and a full block whose "
                         "hash is already cached by another block stays unhashed; partial blocks are never hashed"
                         if before.hashes[block] is not None or g in want.hashes else
                         "only FULL blocks are hashed, append_tokens hashes only the blocks ITS tokens make full, "
                         "and a block whose hash is already cached stays unhashed (for good)")
            elif g is None:
                cause = ("a freed block keeps its hash until it is reallocated (lazy eviction)"
                         if before.hashes[block] is not None else
                         "every full block gets its chained hash (allocate, and append_tokens when a block fills)")
            else:
                cause = ("the hash must be lecture 7's chained SHA-256 over the request's tokens, block by block: "
                         "digest i hashes the hex text of digest i-1, then block i's tokens as little-endian int64")
            return f"after {step} block {block} has hash {g!r:.20}, not the rule's. Likely cause: {cause}"
    if (got.queries, got.hits) != (want.queries, want.hits):
        how = ", ".join(f"{name} {how_off(g, w) or 'not an int'}"
                        for name, g, w in (("prefix_cache_queries", got.queries, want.queries),
                                           ("prefix_cache_hits", got.hits, want.hits)) if g != w)
        cause = ("this call returned None, and a failed one (None) changes nothing, counters included: count "
                 "only once the room check has passed" if failed and (before.queries, before.hits) == (want.queries, want.hits) else
                 "each successful allocate with caching on adds len(tokens) queries and num_computed hits; a failed "
                 "one (None), append_tokens and caching off add nothing")
        return (f"after {step} prefix_cache_queries, prefix_cache_hits are {got.queries!r}, {got.hits!r}: {how}. "
                f"Likely cause: {cause}")
    return None


def walk_problem(student: Any, manager: Any, ref: RefManager, ops: Sequence[Op], what: str) -> str | None:
    """Apply `ops` to both managers; None if every answer and state agrees, else the first difference."""
    before = ref.state()
    refused: set[str] = set()  # request ids of an earlier call that returned None (as it should have)
    freed: set[str] = set()  # request ids freed earlier
    for index, op in enumerate(ops):
        step = f"step {index} of {what}, {describe_op(op)}"
        seen = ref.lookup(op[2]) if op[0] == "allocate" else None
        want = normalise(ref.apply(op))
        retry = ""
        if op[1] in refused and op[0] != "free":
            retry = (f"; an earlier {'allocate' if op[0] == 'allocate' else 'append_tokens'} of {op[1]!r} returned None, "
                     "which must have changed nothing (no request registered, no token recorded): the engine retries")
        elif op[1] in freed and op[0] == "allocate":
            retry = (f"; {op[1]!r} was freed before: free forgets the request (req_to_blocks included), so a "
                     "preempted request is allocated again under its id")
        try:
            raw = student_apply(manager, op)
            got = normalise(raw)
        except Exception as error:  # a student's exception of any type is a finding
            cause = (result_cause(op, error, want, ref, before, seen) if want is None else
                     "with enable_caching=False, append_tokens hashes nothing and looks nothing up"
                     if op[0] == "append" and not ref.enable_caching else
                     "compare with the rule in the docstring of the method called")
            if retry and want is not None and op[0] == "allocate":  # the retry says why it was refused
                cause, retry = retry[2:], ""
            return f"{step} raised {type(error).__name__}: {error}. Likely cause: {cause}{retry}"
        if (op[0] == "allocate" and isinstance(raw, (tuple, list)) and len(raw) == 2
                and not isinstance(raw[1], list)):
            return (f"{step} returned block ids as {type(raw[1]).__name__} {raw[1]!r:.100}: the engine reads plain "
                    "data back, so block_ids must be a list of ints")
        if got != want:
            return (f"{step} returned {got!r:.300}: {answer_difference(op, got, want)}. Likely cause: "
                    f"{result_cause(op, got, want, ref, before, seen)}{retry}")
        after = ref.state()
        problem = state_problem(step, student_state(student, manager, ref.num_blocks), after, before,
                                ref.enable_caching, failed=want is None and op[0] != "free")
        if problem:
            return problem
        if want is None and op[0] != "free":
            refused.add(op[1])
        if op[0] == "free":
            freed.add(op[1])
        before = after
    return None

