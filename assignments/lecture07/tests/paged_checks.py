"""What the public and hidden lecture-7 tests of paged_kv.py share: the model, walks, the state machines.

A *walk* is a table of (operation, expected state) rows run in order on the student's objects, as
vLLM's block-pool tests do: after every row the pool's `num_free` and the refcount of every block
are compared with the table. `allocate` may hand out any free block, so the tables name blocks
("a", "b", ...) and bind each name to whatever id the student's pool returned.

Every `*_problem` function returns None when the student's objects behave as the contract says,
else the message the student sees: what differed, where (which step, which block, expected vs got)
and the likely cause. Only those messages reach the student (the grader runs with --assert=plain).
Expected values come from the tables, from a model kept by the test, or from `kvlab.model.forward`
without a cache; never from student code.

One module on purpose (over 400 lines): every check of paged_kv.py, whose walks and state machine
judge BlockPool and PagedSequence on one pool state (`pool_state_problem`, `num_free_cause`), and the
base the other lecture-7 check modules and the hidden tests import by this name (`outcome`,
`describe_error`, `params`), so a student reads in one place what the grader asks of that file.
"""
from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kvlab.model import TINY, Config, init_params
from kvlab.testing.compare import array_difference, how_off

CFG: Config = TINY

# The state machines' pool: few blocks of two slots, so random operations run out of blocks often.
MACHINE_BLOCKS, MACHINE_BLOCK_SIZE = 5, 2

# Derandomized: the same operation sequences for every submission, so a grade never depends on luck.
# No explain phase: it would print the hidden tests' file names and line numbers to the student.
# One bug reported, not an ExceptionGroup whose message hides the sub-failures' messages.
# Fifteen steps run the five-block pool out (five allocations, the sixth refused) with room to free
# and reuse; every step more costs the shrinker, which replays a failing run hundreds of times (at
# 25 steps a catalog bug's sandboxed grading took 13 s, mostly shrinking), and 25 caught no bug of the
# catalog that 15 miss.
MACHINE_SETTINGS = settings(
    max_examples=30, stateful_step_count=15, derandomize=True, database=None, deadline=None,
    phases=(Phase.explicit, Phase.generate, Phase.shrink), report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much], print_blob=False,
)


@functools.lru_cache(maxsize=None)
def _master_params() -> dict[str, np.ndarray]:
    return init_params(CFG, seed=0)


def params() -> dict[str, np.ndarray]:
    """TINY's weights: fresh copies, so one test can never see another's changes."""
    return {name: array.copy() for name, array in _master_params().items()}


def tokens_for(length: int, seed: int) -> np.ndarray:
    """`length` random token ids [length] (int64) of TINY's vocabulary."""
    return np.random.default_rng(seed).integers(0, CFG.vocab, size=length, dtype=np.int64)


def outcome(call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """(result, None) or (None, the exception): lets a test turn a raise into a message it writes."""
    try:
        return call(), None
    except Exception as error:  # a student's exception of any type is a finding, not a crash
        return None, error


def describe_error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


def raise_problem(what: str, call: Callable[[], Any], expected: type, cause: str) -> str | None:
    """None if `call()` raises `expected`; else what happened instead and the rule it breaks."""
    result, error = outcome(call)
    if error is None:
        return f"{what} should raise {expected.__name__}; it returned {result!r}. {cause}"
    if not isinstance(error, expected):
        return f"{what} should raise {expected.__name__}; it raised {describe_error(error)}. {cause}"
    return None


def is_block_id(value: Any, n_blocks: int) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < n_blocks


def differs(got: Any, want: Any, reveal: bool) -> str:
    """What follows a walk's wrong value: "expected <want>" in a public walk; in a hidden one
    (reveal=False) only how `got` is off. Hidden walks are fixed scripts: a message that printed the
    expected value at each step would hand out a table to replay."""
    return f"expected {want}" if reveal else how_off(got, want) or "not what the rule gives"


def num_free_cause(got: int, expected_refs: dict[int, int], n_blocks: int, action: str, raised: bool) -> str:
    """Why num_free is `got` when the refcounts are right (they are checked first)."""
    free = n_blocks - sum(1 for r in expected_refs.values() if r)
    if raised:
        return f"{action} raised as it should but changed the pool first: a call that raises must change nothing"
    if action == "allocate" and got > free:
        return ("allocate must take the block it hands out off the free list (num_free drops by one); a block left "
                "there can be handed out a second time")
    if action in ("decref", "free", "drop") and got < free:
        return "a block whose refcount reaches 0 is free again: it must count in num_free and be available to allocate"
    if got == n_blocks - sum(expected_refs.values()) != free:
        return ("num_free equals n_blocks minus the sum of the refcounts; it must count free blocks "
                "(refcount 0): a block with refcount 2 is still one block in use")
    return "num_free must be the number of blocks whose refcount is 0"


REFCOUNT_CAUSES = {
    "allocate": "allocate must hand out a free block with refcount 1 and leave every other block as it was",
    "seq": "a new PagedSequence holds no blocks: its constructor must not allocate",
    "incref": "incref(b) must add exactly one to b's refcount",
    "decref": "decref(b) must subtract exactly one from b's refcount; at 0 the block is free (refcount 0)",
    "reserve": "reserve must allocate exactly the blocks it needs (each with refcount 1) and touch no other block",
    "step": ("paged_step calls seq.reserve(T) and nothing else of the pool: reserve must allocate exactly the "
             "blocks it needs (each with refcount 1) and touch no other block"),
    "free": "free must decref every block of the sequence exactly once",
    "hold": "incref(b) must add exactly one to b's refcount",
    "drop": "decref(b) must subtract exactly one from b's refcount; at 0 the block is free (refcount 0)",
    "release": "decref(b) must subtract exactly one from b's refcount; at 0 the block is free (refcount 0)",
    "register": ("register must incref the block of each hash it newly caches, once, and skip a hash that is "
                 "already cached (no new entry, no incref)"),
    "lookup": "lookup only reads the cache: it must not change any refcount (prefill increfs what it shares)",
    "clear": "clear must decref every cached block exactly once (the cache's own reference) and forget them",
}


def pool_state_problem(
    pool: Any, where: str, action: str, raised: bool, expected_refs: dict[int, int], num_free: int,
    n_blocks: int, labels: dict[int, str], reveal: bool = True,
) -> str | None:
    """Every block's refcount (expected_refs, 0 when absent), then num_free, against the pool (`reveal`: see differs)."""
    for block in range(n_blocks):
        want = expected_refs.get(block, 0)
        got, error = outcome(functools.partial(pool.refcount, block))
        if error is not None:
            state = ("a free block: refcount is 0 for a free block (it raises ValueError only for an unknown id)"
                     if want == 0 else "a block in use: refcount raises ValueError only for an unknown id")
            return f"{where}: refcount({block}) raised {describe_error(error)}; block {block} is {state}"
        if got != want:
            label = f" (block {labels[block]})" if block in labels else ""
            if raised:
                cause = f"{action} raised as it should, but a call that raises must change nothing"
                if action in ("reserve", "step"):
                    cause = ("reserve is all or nothing: when the pool runs out mid-reserve it must give back "
                             "(decref) every block this call allocated, then re-raise OutOfBlocks")
            elif block not in expected_refs:
                cause = f"block {block} should be free: {REFCOUNT_CAUSES[action]}"
            else:
                cause = REFCOUNT_CAUSES[action]
            return f"{where}: refcount({block}){label} is {got!r}; {differs(got, want, reveal)}. Likely cause: {cause}"
    got_free = pool.num_free
    if got_free != num_free:
        cause = num_free_cause(got_free, expected_refs, n_blocks, action, raised)
        return f"{where}: num_free is {got_free!r}; {differs(got_free, num_free, reveal)}. Likely cause: {cause}"
    return None


def pool_walk_problem(
    student: Any, steps: Sequence[tuple[str, dict[str, int], int]], n_blocks: int, block_size: int,
    reveal: bool = True,
) -> str | None:
    """Walk `steps` on a new BlockPool: rows (operation, refcount of every named block, num_free).

    Operations: "allocate a" (binds the name a to the block returned), "incref a", "decref a", and
    any of them followed by " -> OutOfBlocks" or " -> ValueError" when the call must raise. A block
    absent from a row's refcounts must be free (refcount 0). reveal=False (hidden walks): messages
    say how a value is off, not the expected value.
    """
    pool = student.paged_kv.BlockPool(CFG, n_blocks, block_size)
    errors = {"OutOfBlocks": student.paged_kv.OutOfBlocks, "ValueError": ValueError}
    ids: dict[str, int] = {}
    in_use: dict[int, int] = {}
    done: list[str] = []
    for number, (op, refs, num_free) in enumerate(steps, 1):
        head, _, raises = op.partition(" -> ")
        action, _, name = head.partition(" ")
        where = (f"pool walk step {number}, `{op}`, on BlockPool(n_blocks={n_blocks}) after "
                 f"[{'; '.join(done) or 'nothing'}]")
        if action == "allocate" and not raises:
            block, error = outcome(pool.allocate)
            if error is not None:
                return f"{where}: allocate() raised {describe_error(error)} though {n_blocks - len(in_use)} blocks are free"
            if not is_block_id(block, n_blocks):
                return f"{where}: allocate() returned {block!r}; expected a block id, an int in 0 .. {n_blocks - 1}"
            if type(block) is not int:
                return (f"{where}: allocate() returned {block!r} of type {type(block).__name__}; allocate hands out "
                        "an int id (a Python int, e.g. int(block), not a numpy integer)")
            if block in in_use:
                return (f"{where}: allocate() returned block {block}, which is in use (refcount {in_use[block]}); "
                        "allocate must hand out a free block (refcount 0) only")
            ids[name] = int(block)
            done.append(f"{head} = block {block}")
        else:
            call = pool.allocate if action == "allocate" else functools.partial(getattr(pool, action), ids[name])
            subject = f"{action}({ids[name]})" if name else f"{action}()"
            if raises:
                state = "a free block" if action != "allocate" else "a pool with no free block"
                cause = {
                    "allocate": "allocate must raise OutOfBlocks (the class in paged_kv.py) when no block is free",
                    "incref": "a free block has no users to add to: incref must raise ValueError",
                    "decref": "decref of a free block is a double free: it must raise ValueError",
                }[action]
                problem = raise_problem(f"{where}: {subject} on {state}", call, errors[raises], cause)
                if problem:
                    return problem
            else:
                _, error = outcome(call)
                if error is not None:
                    return f"{where}: {subject} raised {describe_error(error)} though block {ids[name]} is in use"
            done.append(head + (" (raised)" if raises else ""))
        in_use = {ids[n]: rc for n, rc in refs.items() if rc}
        labels = {ids[n]: n for n in refs}
        problem = pool_state_problem(pool, where, action, bool(raises), in_use, num_free, n_blocks, labels, reveal)
        if problem:
            return problem
    return None


def sequence_walk_problem(
    student: Any,
    steps: Sequence[tuple[str, dict[str, tuple[int, list[int]]], dict[str, int], int]],
    n_blocks: int, block_size: int, reveal: bool = True,
) -> str | None:
    """Walk `steps` on PagedSequences of a new BlockPool.

    Rows: (operation, {sequence: (length, refcount of each of its blocks)}, {held block: refcount},
    num_free). Operations: "seq s" (a new PagedSequence named s), "reserve s 5", "step s 3"
    (kvlab.paged.paged_step with 3 new tokens), "free s", "hold s 1 as h" (pool.incref(s.blocks[1]),
    naming that block h), "drop h" (pool.decref of it); " -> OutOfBlocks" when the call must raise,
    changing nothing. A block in no sequence and not held must be free. reveal=False (hidden walks):
    messages say how a value is off, not the expected value.
    """
    pool = student.paged_kv.BlockPool(CFG, n_blocks, block_size)
    weights = params()
    seqs: dict[str, Any] = {}
    seen: dict[str, list[int]] = {}
    held: dict[str, int] = {}
    done: list[str] = []
    for number, (op, want_seqs, want_held, num_free) in enumerate(steps, 1):
        head, _, raises = op.partition(" -> ")
        words = head.split()
        action = words[0]
        where = (f"sequence walk step {number}, `{op}`, on BlockPool(n_blocks={n_blocks}, block_size={block_size}) "
                 f"after [{'; '.join(done) or 'nothing'}]")
        if action == "seq":
            seqs[words[1]] = student.paged_kv.PagedSequence(pool)
            seen[words[1]] = []
        elif action in ("reserve", "step"):
            seq, n = seqs[words[1]], int(words[2])
            if action == "reserve":
                call = functools.partial(seq.reserve, n)
            else:
                call = functools.partial(student.call, "kvlab.paged:paged_step", weights, CFG, [seq],
                                         [tokens_for(n, seed=number)])
            subject = f"{words[1]}.reserve({n})" if action == "reserve" else f"paged_step with {n} new tokens for {words[1]}"
            if raises:
                problem = raise_problem(
                    f"{where}: {subject} with {num_free} free blocks", call, student.paged_kv.OutOfBlocks,
                    "when the pool runs out, reserve must re-raise the pool's OutOfBlocks",
                )
                if problem:
                    return problem
            else:
                _, error = outcome(call)
                if error is not None:
                    cause = step_error_cause(seq, n, block_size, reveal) if action == "step" else None
                    return f"{where}: {subject} raised {describe_error(error)}" + (f". Likely cause: {cause}" if cause else "")
        elif action == "free":
            _, error = outcome(seqs[words[1]].free)
            if error is not None:
                return f"{where}: {words[1]}.free() raised {describe_error(error)}"
        elif action == "hold":
            held[words[4]] = seen[words[1]][int(words[2])]
            pool.incref(held[words[4]])
        elif action == "drop":
            pool.decref(held[words[1]])
        done.append(head + (" (raised)" if raises else ""))
        expected_refs: dict[int, int] = {}
        labels: dict[int, str] = {}
        for name, (length, refcounts) in want_seqs.items():
            problem = sequence_problem(seqs[name], name, where, action, bool(raises) and name == words[1],
                                       seen[name], length, len(refcounts), block_size, reveal)
            if problem:
                return problem
            seen[name] = list(seqs[name].blocks)
            for index, (block, refcount) in enumerate(zip(seen[name], refcounts)):
                if block in labels:
                    return (f"{where}: block {block} is {labels[block]} and also {name}.blocks[{index}]; two "
                            "sequences never share a block here: reserve must allocate fresh blocks")
                expected_refs[block], labels[block] = refcount, f"{name}.blocks[{index}]"
        for name, refcount in want_held.items():
            expected_refs[held[name]] = refcount
            labels.setdefault(held[name], f"held block {name}")
        expected_refs = {block: rc for block, rc in expected_refs.items() if rc}
        problem = pool_state_problem(pool, where, action, bool(raises), expected_refs, num_free, n_blocks, labels,
                                     reveal)
        if problem:
            return problem
    return None


def step_error_cause(seq: Any, n: int, block_size: int, reveal: bool = True) -> str | None:
    """Why paged_step with `n` new tokens raised on `seq`, from the calls it makes: reserve(n), then
    slots(length, n) and slots(0, length + n) (kvlab/paged.py); None when those look right.
    reveal=False (hidden walks): no expected slot values in the answer."""
    blocks, length = list(seq.blocks), seq.length
    if len(blocks) * block_size < length + n:
        return (f"after reserve({n}) the sequence holds {len(blocks)} blocks of {block_size} for length {length} + "
                f"{n} tokens: reserve allocates until len(blocks) * block_size >= length + n")
    for start, count in ((length, n), (0, length + n)):
        what = f"slots({start}, {count}) with blocks = {blocks} (block_size {block_size}, length {length})"
        result, error = outcome(functools.partial(seq.slots, start, count))
        if error is not None:
            return (f"{what}, which paged_step calls, raised {describe_error(error)}, though positions {start} .. "
                    f"{start + count - 1} lie within the {len(blocks) * block_size} reserved slots: slots raises "
                    "ValueError only for a position beyond the reserved blocks (start + n > len(blocks) * block_size)")
        problem = slots_problem(what, result, blocks, start, count, block_size, length)
        if problem and not reveal and "expected [" in problem:
            problem = (f"{what} returns other slots than those of positions {start} .. {start + count - 1}: position "
                       "p lives in blocks[p // block_size] at offset p % block_size")
        if problem:
            return f"paged_step calls {problem}"
    return None


def sequence_problem(
    seq: Any, name: str, where: str, action: str, raised: bool, before: list[int], length: int,
    n_blocks: int, block_size: int, reveal: bool = True,
) -> str | None:
    """One sequence's `blocks` and `length` against the walk's expectations (`reveal`: see differs)."""
    blocks, got_length = list(seq.blocks), seq.length
    if raised and blocks != before:
        return (f"{where}: {name}.blocks is {blocks}; expected it unchanged, {before}. reserve is all or "
                "nothing: when the pool runs out mid-reserve, decref the blocks this call allocated, leave "
                "blocks as it was and re-raise OutOfBlocks")
    if len(blocks) != n_blocks:
        if action == "free":
            cause = "free must decref every block and set blocks = []"
        elif action == "seq":
            cause = "a new PagedSequence holds no block (blocks is [] when new): its constructor must not allocate"
        elif len(blocks) == n_blocks + 1:
            enough = f", so {n_blocks * block_size} slots in {n_blocks} blocks of {block_size} are enough" if reveal else ""
            cause = f"one block too many: reserve allocates until len(blocks) * block_size >= length + n{enough} (>=, not >)"
        else:
            cause = (f"reserve must allocate until len(blocks) * block_size >= length + n, counting the tokens "
                     f"already stored (length) and the blocks already held; block_size is {block_size}")
        return (f"{where}: {name} holds {len(blocks)} blocks {blocks}; {differs(len(blocks), n_blocks, reveal)}. "
                f"Likely cause: {cause}")
    if got_length != length:
        cause = {
            "free": "free must set length = 0, so the sequence can be reused from position 0",
            "reserve": "reserve only makes room: it must not change length (paged_step sets it)",
        }.get(action, "paged_step sets seq.length += T; nothing else may change length")
        return f"{where}: {name}.length is {got_length!r}; {differs(got_length, length, reveal)}. Likely cause: {cause}"
    return None


def slots_problem(
    what: str, result: Any, blocks: list[int], start: int, n: int, block_size: int, length: int
) -> str | None:
    """`slots(start, n)` of a sequence holding `blocks`: block ids and offsets of start .. start+n-1."""
    asked = range(start, start + n)
    want_blocks = [blocks[p // block_size] for p in asked]
    want_offsets = [p % block_size for p in asked]
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return f"{what} should return a pair (block ids, offsets); got {type(result).__name__}"
    for name, got, want in (("block ids", result[0], want_blocks), ("offsets", result[1], want_offsets)):
        got = np.asarray(got)
        if got.shape != (n,) or not np.issubdtype(got.dtype, np.integer):
            return (f"{what} returned {name} of shape {got.shape} and dtype {got.dtype}; expected an int array of "
                    f"shape ({n},): slots(start, n) covers the n positions start .. start+n-1")
        if got.tolist() != want:
            wrong = int(np.flatnonzero(got != np.asarray(want))[0])
            shifted = [blocks[p // block_size] for p in range(length, length + n)] if name == "block ids" else \
                [p % block_size for p in range(length, length + n)]
            if length != start and got.tolist() == shifted:
                cause = f"the positions start at length ({length}), not at start ({start}): slots(start, n) covers start .. start+n-1"
            else:
                cause = (f"position p lives in blocks[p // block_size] at offset p % block_size "
                         f"(block_size {block_size}, blocks {blocks})")
            return (f"{what}: {name} {got.tolist()}; expected {want} (first difference at position "
                    f"{start + wrong}). Likely cause: {cause}")
    return None


def one_block_pool(student: Any, block_size: int, *dtype: Any) -> Any:
    """BlockPool(CFG, 1, block_size, *dtype), failing the test with a message if it raises."""
    pool, error = outcome(functools.partial(student.paged_kv.BlockPool, CFG, 1, block_size, *dtype))
    if error is not None:
        pytest.fail(f"BlockPool(TINY, n_blocks=1, block_size={block_size}) raised {describe_error(error)}: a pool of "
                    "one block is valid (any n_blocks >= 1 and block_size >= 1)", pytrace=False)
    return pool


def unknown_block_problem(pool: Any, n_blocks: int, method: str, block: Any, refused_bool: bool) -> str | None:
    """`pool.<method>(block)` with `block` not an id of `pool` (a BlockPool of `n_blocks` blocks, ids
    0 .. n_blocks - 1) must raise ValueError. `refused_bool`: the bool the message names as refused
    though it equals an id."""
    why = (f"block ids are the ints 0 .. {n_blocks - 1}: any other id is unknown and must raise ValueError "
           "(a negative id must not index from the end of a list)")
    if not isinstance(block, int) or isinstance(block, bool):
        why = (f"{block!r} is a {type(block).__name__}, not an integer id (bool is refused though {refused_bool} == "
               f"{int(refused_bool)}): an unknown id, so it must raise ValueError; check_block_id, given in "
               "paged_kv.py, says so")
    return raise_problem(f"{method}({block!r}) on BlockPool(n_blocks={n_blocks})",
                         functools.partial(getattr(pool, method), block), ValueError, why)


def pool_arrays_problem(call: str, pool: Any, n_blocks: int, block_size: int, dtype: Any) -> str | None:
    """The k and v of `pool` (made by `call`): arrays [n_blocks, L, block_size, Hkv, d] of `dtype`."""
    shape = (n_blocks, CFG.n_layers, block_size, CFG.n_kv_heads, CFG.d_head)
    for name in ("k", "v"):
        array = getattr(pool, name)
        if not (isinstance(array, np.ndarray) and array.shape == shape):
            return (f"{call}.{name} should be an array [n_blocks, L, block_size, Hkv, d] = {shape}; got "
                    f"{getattr(array, 'shape', type(array).__name__)}")
        if array.dtype != dtype:
            return f"{call}.{name} has dtype {array.dtype}; expected {np.dtype(dtype)}"
    return None


def slots_edge_problem(what: str, seq: Any, blocks: list[int]) -> str | None:
    """The edges of `slots` on `what` (a sequence holding `blocks`): slots(-1, 1) and slots(0, -1)
    raise ValueError, and slots(start, 0) returns two empty int arrays, at start 0 and at the end of
    the blocks."""
    size = seq.pool.block_size
    for call, because in (((-1, 1), "position -1 does not exist: a negative start must raise ValueError (it must "
                                     "not index from the end of blocks)"),
                          ((0, -1), "a negative count asks for no position that exists: a negative n must raise "
                                    "ValueError (it must not return empty arrays)")):
        problem = raise_problem(f"slots{call} on {what}", functools.partial(seq.slots, *call), ValueError, because)
        if problem:
            return problem
    for start in sorted({0, len(blocks) * size}):
        result, error = outcome(functools.partial(seq.slots, start, 0))
        call = f"slots({start}, 0) on {what}"
        if error is not None:
            return (f"{call} raised {describe_error(error)}; slots(start, 0) must return two empty int arrays "
                    "(no position is asked for, so none is out of range)")
        if not isinstance(result, (tuple, list)) or len(result) != 2:
            return f"{call} should return a pair (block ids, offsets); got {type(result).__name__}"
        for name, got in zip(("block ids", "offsets"), result):
            got = np.asarray(got)
            if got.shape != (0,) or not np.issubdtype(got.dtype, np.integer):
                return (f"{call} returned {name} of shape {got.shape} and dtype {got.dtype}; expected an empty int "
                        "array, shape (0,): ids are ints even for an empty sequence (an array made from an empty "
                        "list is float64 unless it is given an integer dtype)")
    return None


def free_order_problem(student: Any, n_held: int, block_size: int) -> str | None:
    """Whether `free` decrefs the newest block first: a sequence holding `n_held` blocks whose newest
    block the test has already freed (pool.decref) is freed. Newest first, its first decref raises
    ValueError (a free block) before any other block is touched; a free that decrefs older blocks
    first changes their refcounts before it gets there. A free that raises nothing (it skips or
    catches the failing decref) shows no order, and passes."""
    pool = student.paged_kv.BlockPool(CFG, n_held + 2, block_size)
    seq = student.paged_kv.PagedSequence(pool)
    seq.reserve(n_held * block_size)
    blocks = list(seq.blocks)
    pool.decref(blocks[-1])
    _, error = outcome(seq.free)
    if not isinstance(error, ValueError):
        return None
    older = {block: pool.refcount(block) for block in blocks[:-1]}
    touched = [block for block, refcount in older.items() if refcount != 1]
    if not touched:
        return None
    return (f"free() of a sequence holding blocks {blocks} (block_size {block_size}), whose newest block {blocks[-1]} "
            f"the test had already decref'd, raised ValueError only after changing the refcounts of older blocks "
            f"{touched} (now {[older[b] for b in touched]}, were 1): free decrefs every block the newest first "
            "(reversed(blocks)), so the newest block's decref comes before any other")


@dataclass
class _ModelSequence:
    """The test's model of one student PagedSequence."""

    student: Any
    blocks: list[int] = field(default_factory=list)
    length: int = 0


def pool_machine(student: Any, with_sequences: bool) -> type[RuleBasedStateMachine]:
    """A state machine over random operations on one student BlockPool (and PagedSequences on it).

    The test keeps a model (every block's refcount, each sequence's blocks and length) and after
    every operation checks the student's pool against it: num_free, every refcount, and num_free +
    blocks in use == n_blocks. `decref` only ever drops references the test took itself (by
    allocate or incref), so a sequence's blocks stay valid until its free().
    """
    n_blocks, size = MACHINE_BLOCKS, MACHINE_BLOCK_SIZE
    weights = params()
    out_of_blocks = student.paged_kv.OutOfBlocks

    class PoolMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.pool = student.paged_kv.BlockPool(CFG, n_blocks, size)
            self.refs = [0] * n_blocks
            self.held = [0] * n_blocks
            self.seqs: list[_ModelSequence] = []
            self.log: list[str] = []
            self.action = "allocate"

        def report(self, problem: str) -> str:
            return (f"{problem}. Operations so far on BlockPool(n_blocks={n_blocks}, block_size={size}): "
                    f"{'; '.join(self.log) or 'none'}")

        def expect_error(self, what: str, call: Callable[[], Any], expected: type, cause: str) -> None:
            self.action = what
            self.log.append(f"{what} -> {expected.__name__}")
            problem = raise_problem(what, call, expected, cause)
            assert problem is None, self.report(problem)

        def succeed(self, what: str, call: Callable[[], Any]) -> Any:
            result, error = outcome(call)
            self.action = what
            # Only block ids are worth logging; logits and slot arrays would drown the message.
            self.log.append(f"{what} -> {result!r}" if isinstance(result, (int, np.integer)) else what)
            assert error is None, self.report(f"{what} raised {describe_error(error) if error else ''}")
            return result

        @property
        def kind(self) -> str:
            """The last operation as num_free_cause names it: allocate, incref, decref or free."""
            return next((k for k in ("free", "decref", "incref") if k in self.action), "allocate")

        def invalid(self, block: int) -> str | None:
            if not 0 <= block < n_blocks:
                return "an unknown block id"
            return "a free block" if self.refs[block] == 0 else None

        @rule()
        def allocate(self) -> None:
            free = self.refs.count(0)
            if not free:
                self.expect_error("allocate()", self.pool.allocate, out_of_blocks,
                                  "allocate must raise OutOfBlocks when every block is in use")
                return
            block = self.succeed("allocate()", self.pool.allocate)
            assert is_block_id(block, n_blocks) and self.refs[int(block)] == 0, self.report(
                f"allocate() returned {block!r}; expected one of the {free} free blocks "
                f"{[b for b in range(n_blocks) if not self.refs[b]]}"
            )
            self.refs[block] = 1
            self.held[block] += 1

        @rule(block=st.integers(-1, MACHINE_BLOCKS))
        def incref(self, block: int) -> None:
            invalid = self.invalid(block)
            if invalid:
                self.expect_error(f"incref({block})", functools.partial(self.pool.incref, block), ValueError,
                                  f"incref of {invalid} must raise ValueError")
                return
            self.succeed(f"incref({block})", functools.partial(self.pool.incref, block))
            self.refs[block] += 1
            self.held[block] += 1

        @rule(block=st.integers(-1, MACHINE_BLOCKS))
        def decref(self, block: int) -> None:
            invalid = self.invalid(block)
            if invalid:
                self.expect_error(f"decref({block})", functools.partial(self.pool.decref, block), ValueError,
                                  f"decref of {invalid} must raise ValueError (a double free or a bad id)")
                return
            if not self.held[block]:
                return
            self.succeed(f"decref({block})", functools.partial(self.pool.decref, block))
            self.refs[block] -= 1
            self.held[block] -= 1

        def questions(self) -> list[tuple[Any, str, tuple[int, ...] | None]]:
            """What the invariant reads: every refcount, then num_free (sequences add theirs)."""
            return [*((self.pool, "refcount", (block,)) for block in range(n_blocks)), (self.pool, "num_free", None)]

        @invariant()
        def matches_model(self) -> None:
            # The whole state in one call (one round trip when graded), checked in order.
            answers = student.call("kvlab.testing.probe:ask", self.questions())
            self.check_pool(answers[:n_blocks], answers[n_blocks])
            self.check_sequences(answers[n_blocks + 1:])

        def check_sequences(self, answers: list[Any]) -> None:
            """Sequences' blocks and lengths, two answers each (SequenceMachine)."""

        def check_pool(self, counts: list[Any], got_free: Any) -> None:
            for block, got in enumerate(counts):
                assert got == self.refs[block], self.report(
                    f"refcount({block}) is {got!r}; expected {self.refs[block]}. Likely cause: allocate sets 1, "
                    "incref adds 1, decref subtracts 1, free() decrefs each block of the sequence once, reserve "
                    "allocates only the blocks it needs, and a call that raises changes nothing"
                )
            in_use = n_blocks - self.refs.count(0)
            assert got_free == n_blocks - in_use, self.report(
                f"num_free is {got_free!r} with {in_use} blocks in use; expected num_free + in use == n_blocks = "
                f"{n_blocks}. Likely cause: {num_free_cause(got_free, dict(enumerate(self.refs)), n_blocks, self.kind, False)}"
            )

    if not with_sequences:
        return PoolMachine

    class SequenceMachine(PoolMachine):
        @precondition(lambda self: len(self.seqs) < 3)
        @rule()
        def new_sequence(self) -> None:
            self.seqs.append(_ModelSequence(student.paged_kv.PagedSequence(self.pool)))
            self.log.append(f"s{len(self.seqs) - 1} = PagedSequence(pool)")

        def grow(self, index: int, n: int, step: bool) -> None:
            seq = self.seqs[index % len(self.seqs)]
            name = f"s{index % len(self.seqs)}"
            if step:
                what = f"paged_step({name}, {n} tokens)"
                call = functools.partial(student.call, "kvlab.paged:paged_step", weights, CFG, [seq.student],
                                         [tokens_for(n, seed=len(self.log))])
            else:
                what = f"{name}.reserve({n})"
                call = functools.partial(seq.student.reserve, n)
            need = max(0, -(-(seq.length + n) // size) - len(seq.blocks))
            if need > self.refs.count(0):
                self.expect_error(what, call, out_of_blocks,
                                  f"{name} (length {seq.length}, {len(seq.blocks)} blocks) needs {need} more blocks "
                                  f"and only {self.refs.count(0)} are free: reserve must release what it allocated "
                                  "and re-raise OutOfBlocks")
                return
            self.succeed(what, call)
            blocks = list(seq.student.blocks)
            new = blocks[len(seq.blocks):]
            assert blocks[:len(seq.blocks)] == seq.blocks and len(new) == need, self.report(
                f"after {what} {name}.blocks is {blocks}; expected {seq.blocks} followed by {need} new blocks: "
                f"reserve allocates until len(blocks) * block_size >= length + n = {seq.length} + {n}"
            )
            assert len(set(new)) == len(new) and all(is_block_id(b, n_blocks) and not self.refs[b] for b in new), (
                self.report(f"after {what} the new blocks {new} are not distinct free blocks")
            )
            for block in new:
                self.refs[block] = 1
            seq.blocks = blocks
            seq.length += n if step else 0

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), n=st.integers(0, 7))
        def reserve(self, index: int, n: int) -> None:
            self.grow(index, n, step=False)

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), n=st.integers(1, 4))
        def step(self, index: int, n: int) -> None:
            self.grow(index, n, step=True)

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2))
        def free(self, index: int) -> None:
            seq = self.seqs[index % len(self.seqs)]
            self.succeed(f"s{index % len(self.seqs)}.free()", seq.student.free)
            for block in seq.blocks:
                self.refs[block] -= 1
            seq.blocks, seq.length = [], 0

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), start=st.integers(0, 11), n=st.integers(1, 5))
        def slots(self, index: int, start: int, n: int) -> None:
            seq = self.seqs[index % len(self.seqs)]
            what = f"s{index % len(self.seqs)}.slots({start}, {n})"
            call = functools.partial(seq.student.slots, start, n)
            if start + n > len(seq.blocks) * size:
                self.expect_error(what, call, ValueError,
                                  f"positions {start} .. {start + n - 1} are beyond the {len(seq.blocks)} reserved "
                                  f"blocks ({len(seq.blocks) * size} slots): slots must raise ValueError")
                return
            problem = slots_problem(what, self.succeed(what, call), seq.blocks, start, n, size, seq.length)
            assert problem is None, self.report(problem)

        def questions(self) -> list[tuple[Any, str, tuple[int, ...] | None]]:
            return [*super().questions(),
                    *((seq.student, name, None) for seq in self.seqs for name in ("blocks", "length"))]

        def check_sequences(self, answers: list[Any]) -> None:
            for index, seq in enumerate(self.seqs):
                blocks, length = list(answers[2 * index]), answers[2 * index + 1]
                assert blocks == seq.blocks and length == seq.length, self.report(
                    f"s{index} has blocks {blocks} and length {length!r}; expected blocks {seq.blocks} and length "
                    f"{seq.length}. Likely cause: reserve appends the blocks it allocates, paged_step adds T to "
                    "length, free() sets blocks = [] and length = 0, and a call that raises changes nothing"
                )

    return SequenceMachine


def paged_logits_problem(what: str, got: Any, expected: np.ndarray, decode_step: int | None) -> str | None:
    """Logits from paged_step against `forward` without a cache; decode_step None for the prefill."""
    problem = array_difference(what, got, expected)
    if problem is None:
        return None
    if decode_step is None:
        cause = ("the prompt's keys and values do not come back from the pool as written: slots(start, n) must map "
                 "position p to (blocks[p // block_size], p % block_size), with reserve holding enough blocks")
    else:
        cause = (f"the prefill was right but decode step {decode_step} is not, so tokens stored after the prefill "
                 "land in the wrong slots: slots(start, n) must cover start .. start+n-1 (not 0 .. n-1 or from "
                 "length), and reserve must count the tokens already stored")
    return f"{problem}. Likely cause: {cause}"
