"""Generated call sequences over lecture 7's stateful contracts, each call checked against its rule.

`pool_machine` (BlockPool, with PagedSequences on it), `prefix_machine` (PrefixCache on a pool) and
`eviction_machine` (LRUCache / LFUCache) draw every argument from the whole domain the stubs state:
block ids that are negative, past the end, bools, floats, None and numpy integers; reserves of 0;
slots with a negative start or n, n == 0 and past the reserved blocks; hash lists that are empty,
repeated or partly cached; block lists that are empty, repeated, tuples, numpy integers. After every
call a machine reads every observable the contract defines in one round trip (every refcount,
num_free, each sequence's blocks and length, each hash's lookup, len, `b in cache`) and compares it
with what the rule gives from what it read before: a call that raises changes nothing, refcounts
and the free count add up, cached hashes hold their references. A failure names the call, what came
back, what the rule gives and the rule's sentence (RULES, quoted from the stubs), after Hypothesis
has shrunk the sequence (kvlab.testing.conformance).

Freedoms the contract leaves, compared up to: `allocate` may hand out any free block (the machine
binds whatever id comes back, after checking it was free); LRU/LFU recency and use counts cannot be
read, so the public machine checks what follows from membership alone (the hidden suite adds a
trusted reference for the rest, through `eviction_machine`'s `reference`).

One module on purpose (over 400 lines): the three machines share one rule table, the argument
domains and the way they read state, and a student reads in one place what the generated runs ask
of both files.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from kvlab.testing.conformance import Outcome, Rule, Transcript, is_plain_int, machine_settings, outcome_of, raised
from paged_checks import CFG, params, tokens_for

POOL = "paged_kv.py:BlockPool"
SEQ = "paged_kv.py:PagedSequence"
PREFIX = "prefix_cache.py:PrefixCache"
LRU = "prefix_cache.py:LRUCache"
HASHES = "prefix_cache.py:block_hashes"

# Each rule's sentence, quoted exactly from the stub named (tests/suites/test_conformance.py checks it is there).
RULES: dict[str, Rule] = {
    "allocate": Rule(POOL, "`allocate()` hands out any free block (an int id) with refcount 1; `decref` to 0 frees "
                           "it again, and it can be allocated again."),
    "out_of_blocks": Rule(f"{POOL}.allocate", "OutOfBlocks when none is free."),
    "int_ids": Rule(POOL, "Block ids are the ints 0 .. n_blocks-1 (Python `int`s, not numpy integers, even where the "
                          "pool keeps its refcounts in an array)."),
    "bad_id": Rule(POOL, "`incref`/`decref` raise ValueError for an unknown id (negative or >= n_blocks) or a free "
                         "block; `refcount` raises ValueError for an unknown id and is 0 for a free block."),
    "unknown_id": Rule(POOL, "An unknown id is anything `check_block_id` refuses (True and 1.0 included)."),
    "new_pool": Rule(POOL, "A new pool's blocks are all free, and each pool has its own blocks and refcounts (a call "
                           "on one pool changes no other)."),
    "raise_changes_nothing": Rule(POOL, "A call that raises changes nothing."),
    "incref": Rule(f"{POOL}.incref", "One more user of an in-use block."),
    "decref": Rule(f"{POOL}.decref", "One user fewer; at refcount 0 the block is free again."),
    "num_free": Rule(f"{POOL}.num_free", "How many blocks are free."),
    "reserve": Rule(f"{SEQ}.reserve", "Allocate blocks until len(blocks) * block_size >= length + n (n >= 0; it never "
                                      "frees)."),
    "reserve_all_or_nothing": Rule(f"{SEQ}.reserve", "All or nothing: if the pool runs out, release the blocks this "
                                                     "call allocated and re-raise OutOfBlocks, leaving the sequence as "
                                                     "it was."),
    "slots": Rule(SEQ, "Position p lives in block `blocks[p // block_size]` at offset `p % block_size`."),
    "slots_empty": Rule(f"{SEQ}.slots", "A pair of integer ndarrays of shape (n,): slots(start, 0) returns two empty "
                                        "int arrays (dtype int, even when the sequence holds no block)."),
    "slots_range": Rule(f"{SEQ}.slots", "ValueError for a negative start or n, and for a position beyond the reserved "
                                        "blocks (start + n > len(blocks) * block_size)."),
    "free": Rule(f"{SEQ}.free", "Decref every block (the newest first), then blocks = [] and length = 0."),
    "hash_format": Rule(HASHES, "One lowercase hex SHA-256 digest (64 characters) per full block of `tokens` (1-D "
                                "integers)."),
    "hash_list": Rule(HASHES, "Returns a `list` of str (empty when there is no full block)."),
    "hash_chain": Rule(HASHES, "Digest i covers `parent` and every token of blocks 0 .. i, each token of a block "
                               "included (the first and the last), so it names the whole prefix."),
    "hash_partial": Rule(HASHES, "A trailing partial block gets no digest."),
    "hash_values": Rule(HASHES, "The digests depend only on the integer values (a list, tuple or ndarray of any "
                                "integer dtype gives the same digests) and are the same in every process (so no "
                                "Python `hash()`, whose seed changes per process)."),
    "hash_continue": Rule(HASHES, "Continuing a chain: block_hashes(a + b, n) == block_hashes(a, n) + block_hashes(b, "
                                  "n, parent=block_hashes(a, n)[-1]) when len(a) is a non-zero multiple of n."),
    "hash_negative": Rule(HASHES, "Negative integers are integers: they are hashed like any other value (a digest "
                                  "depends on the sign: -1 and 1 give different digests), never refused."),
    "lookup": Rule(f"{PREFIX}.lookup", "The blocks (a list of int ids) of the longest leading run of `hashes` that is "
                                       "cached."),
    "lookup_unchanged": Rule(f"{PREFIX}.lookup", "It stops at the first hash that is not cached. Refcounts unchanged."),
    "register": Rule(f"{PREFIX}.register", "Cache each (hash, block) pair whose hash is not cached yet, and incref its "
                                           "block."),
    "clear": Rule(f"{PREFIX}.clear", "Drop every entry and decref its block."),
    "cache_len": Rule(f"{PREFIX}.__len__", "Number of cached blocks."),
    "match": Rule(LRU, "`match(blocks)`: the number of leading blocks present; each of those counts as used now."),
    "insert": Rule(LRU, "`insert(blocks)`: in order, a present block counts as used now; a missing one is added (first "
                        "evicting the least recently used block when the cache is full) and counts as used now."),
    "asks_only": Rule(LRU, "`match` returns an int; `b in cache` only asks (it is not a use); `len(cache)` counts the "
                           "blocks held."),
    "capacity": Rule(LRU, "Block ids kept by least-recent use, at most `capacity` of them (None: unlimited)."),
    "lfu": Rule("prefix_cache.py:LFUCache", "Evicts the block with the fewest uses, ties going to the least recently "
                                            "used; an evicted block's count is forgotten (it starts again at 1 if it "
                                            "comes back)."),
}

# The machines' pool: few blocks of two slots, so random calls run out of blocks and reuse them often;
# and the other pool beside it, of another size.
N_BLOCKS, BLOCK_SIZE, OTHER_BLOCKS = 5, 2, 2
# Public runs (a student's make test); the hidden suite runs more and longer sequences.
# Sized to the grading's time: each step is two round trips to the student's process when graded.
PUBLIC_SETTINGS = machine_settings(max_examples=12, steps=15)
HIDDEN_SETTINGS = machine_settings(max_examples=15, steps=20)
# The eviction machines' capacities, one machine each: the smallest, a few, and unlimited; and their
# runs, shorter than the others' (four machines per policy).
CAPACITIES = (1, 2, 3, None)
EVICTION_PUBLIC_SETTINGS = machine_settings(max_examples=4, steps=10)
EVICTION_HIDDEN_SETTINGS = machine_settings(max_examples=6, steps=12)


def block_arguments(n_blocks: int, numpy_known: bool = True) -> st.SearchStrategy[Any]:
    """Every kind of block argument the stub speaks of: ids in and out of range, bools, floats, None, numpy
    integers (known ids among them only when `numpy_known`; else only unknown ones)."""
    numpy_ids = st.integers(-1, n_blocks) if numpy_known else st.sampled_from([-1, n_blocks])
    return st.one_of(
        st.integers(-2, n_blocks + 1),
        st.sampled_from([True, False, 1.0, 0.0, None]),
        numpy_ids.map(np.int64),
        numpy_ids.map(np.int32),
    )


def known_id(value: Any, n_blocks: int) -> bool:
    """Whether `check_block_id` (the stub's) accepts `value`: an integer, not a bool, 0 .. n_blocks-1."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and 0 <= value < n_blocks


def ask(student: Any, questions: list[tuple[Any, str, tuple[Any, ...] | None]]) -> list[Any]:
    """Every observable at once (kvlab.testing.probe:ask: one round trip when graded)."""
    return student.call("kvlab.testing.probe:ask", questions)


def pool_machine(student: Any, with_sequences: bool) -> type[RuleBasedStateMachine]:
    """BlockPool calls (and PagedSequence calls when `with_sequences`) with every kind of argument.

    The machine keeps the refcounts the rules give (`refs`; `held` is the references the machine
    took itself, the only ones it drops) and each sequence's blocks and length; after every call it
    reads every refcount, num_free and each sequence's blocks and length, and compares. Another pool,
    made first and holding one block, must keep its own refcounts all along.
    """
    n_blocks, size = N_BLOCKS, BLOCK_SIZE
    module = student.paged_kv
    weights = params() if with_sequences else None

    class PoolMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            # Another pool, made first and holding one block: the machine's pool starts with every
            # block free all the same, and no call on it changes the other.
            self.other = module.BlockPool(CFG, OTHER_BLOCKS, size)
            self.log = Transcript(f"other = BlockPool(TINY, n_blocks={OTHER_BLOCKS}, block_size={size})")
            got = outcome_of(self.other.allocate)
            self.log.add("other.allocate()", got)
            self.log.check(got.error is None and known_id(got.value, OTHER_BLOCKS), "other.allocate()",
                           f"it {got.describe()} on a new pool of {OTHER_BLOCKS} free blocks", RULES["allocate"])
            self.other_refs = [int(block == got.value) for block in range(OTHER_BLOCKS)]
            self.pool = module.BlockPool(CFG, n_blocks, size)
            self.refs = [0] * n_blocks
            self.held = [0] * n_blocks
            self.seqs: list[tuple[Any, list[int], list[int]]] = []  # (student's, blocks, [length])
            self.log.add(f"pool = BlockPool(TINY, n_blocks={n_blocks}, block_size={size})")
            self.observe("BlockPool(...)", RULES["new_pool"])

        def questions(self) -> list[tuple[Any, str, tuple[Any, ...] | None]]:
            asked = [(self.pool, "refcount", (block,)) for block in range(n_blocks)] + [(self.pool, "num_free", None)]
            for seq, _, _ in self.seqs:
                asked += [(seq, "blocks", None), (seq, "length", None)]
            return asked + [(self.other, "refcount", (block,)) for block in range(OTHER_BLOCKS)]

        def observe(self, call: str, rule: Rule) -> None:
            """Every observable against what `rule` gives (the machine's refs, blocks and lengths)."""
            answers = ask(student, self.questions())
            counts, free = answers[:n_blocks], answers[n_blocks]
            others = answers[-OTHER_BLOCKS:]
            self.log.check(others == self.other_refs, call, f"afterwards the other pool's refcounts are {others!r}; "
                           f"the rule gives {self.other_refs} (the other pool's own)", RULES["new_pool"])
            for block, got in enumerate(counts):
                self.log.check(got == self.refs[block] and is_plain_int(got), call,
                               f"afterwards refcount({block}) is {got!r}; the rule gives {self.refs[block]}", rule)
            want = self.refs.count(0)
            self.log.check(free == want and is_plain_int(free), call,
                           f"afterwards num_free is {free!r}; the rule gives {want} (the blocks with refcount 0)", rule)
            for index, (_, blocks, length) in enumerate(self.seqs):
                got_blocks, got_length = answers[n_blocks + 1 + 2 * index: n_blocks + 3 + 2 * index]
                self.log.check(list(got_blocks) == blocks and got_length == length[0], call,
                               f"afterwards s{index}.blocks is {list(got_blocks)!r} and s{index}.length {got_length!r}"
                               f"; the rule gives {blocks} and {length[0]}", rule)

        def refused(self, call: str, got: Outcome, expected: type[BaseException], rule: Rule) -> None:
            self.log.check(raised(got, expected), call, f"it {got.describe()}; the rule gives {expected.__name__}", rule)
            self.observe(call, RULES["raise_changes_nothing"])

        @rule()
        def allocate(self) -> None:
            got = outcome_of(self.pool.allocate)
            self.log.add("pool.allocate()", got)
            free = [block for block in range(n_blocks) if not self.refs[block]]
            if not free:
                self.refused("pool.allocate()", got, module.OutOfBlocks, RULES["out_of_blocks"])
                return
            block = got.value
            self.log.check(got.error is None, "pool.allocate()", f"it {got.describe()} with free blocks {free}",
                           RULES["allocate"])
            # The contract's freedom: any free block.
            self.log.check(known_id(block, n_blocks) and self.refs[block] == 0, "pool.allocate()",
                           f"it returned {block!r}; the rule gives one of the free blocks {free}", RULES["allocate"])
            self.log.check(is_plain_int(block), "pool.allocate()",
                           f"it returned {block!r} of type {type(block).__name__}; the rule gives a Python int",
                           RULES["int_ids"])
            self.refs[block] = 1
            self.held[block] += 1
            self.observe("pool.allocate()", RULES["allocate"])

        def by_id(self, method: str, block: Any, effect: Callable[[int, Outcome], None], rule_key: str) -> None:
            call = f"pool.{method}({block!r})"
            got = outcome_of(functools.partial(getattr(self.pool, method), block))
            self.log.add(call, got)
            if not known_id(block, n_blocks):
                self.refused(call, got, ValueError, RULES["unknown_id" if isinstance(block, (bool, float)) or block is None
                                                          else "bad_id"])
            elif method != "refcount" and self.refs[int(block)] == 0:
                self.refused(call, got, ValueError, RULES["bad_id"])
            else:
                self.log.check(got.error is None, call, f"it {got.describe()}; block {int(block)} has refcount "
                               f"{self.refs[int(block)]}", RULES[rule_key])
                effect(int(block), got)
                self.observe(call, RULES[rule_key])

        @rule(block=block_arguments(n_blocks))
        def incref(self, block: Any) -> None:
            def effect(b: int, _: Outcome) -> None:
                self.refs[b] += 1
                self.held[b] += 1
            self.by_id("incref", block, effect, "incref")

        # No known numpy id for decref: a pool that puts the id it is given back on its free list hands a
        # numpy integer out again; docs/open-questions.md asks whether the stub should say so.
        @rule(block=block_arguments(n_blocks, numpy_known=False))
        def decref(self, block: Any) -> None:
            # Only references the machine took itself are dropped: a sequence's blocks stay its own.
            if known_id(block, n_blocks) and self.refs[int(block)] and not self.held[int(block)]:
                return

            def effect(b: int, _: Outcome) -> None:
                self.refs[b] -= 1
                self.held[b] -= 1
            self.by_id("decref", block, effect, "decref")

        @rule(block=block_arguments(n_blocks))
        def refcount(self, block: Any) -> None:
            call = f"pool.refcount({block!r})"

            def effect(b: int, got: Outcome) -> None:
                self.log.check(got.value == self.refs[b] and is_plain_int(got.value), call,
                               f"it returned {got.value!r}; the rule gives {self.refs[b]}", RULES["bad_id"])
            self.by_id("refcount", block, effect, "bad_id")

    if not with_sequences:
        return PoolMachine

    class SequenceMachine(PoolMachine):
        @precondition(lambda self: len(self.seqs) < 3)
        @rule()
        def new_sequence(self) -> None:
            self.seqs.append((module.PagedSequence(self.pool), [], [0]))
            self.log.add(f"s{len(self.seqs) - 1} = PagedSequence(pool)")
            self.observe(f"s{len(self.seqs) - 1} = PagedSequence(pool)", RULES["reserve"])

        def grow(self, index: int, n: int, step: bool) -> None:
            seq, blocks, length = self.seqs[index % len(self.seqs)]
            name = f"s{index % len(self.seqs)}"
            if step:
                call = f"paged_step(params, TINY, [{name}], [{n} tokens])"
                got = outcome_of(functools.partial(student.call, "kvlab.paged:paged_step", weights, CFG, [seq],
                                                   [tokens_for(n, seed=n)]))
            else:
                call = f"{name}.reserve({n})"
                got = outcome_of(functools.partial(seq.reserve, n))
            self.log.add(call, Outcome(None, got.error))
            need = max(0, -(-(length[0] + n) // size) - len(blocks))
            if need > self.refs.count(0):
                self.refused(call, got, module.OutOfBlocks, RULES["reserve_all_or_nothing"])
                return
            self.log.check(got.error is None, call, f"it {got.describe()}; {name} needs {need} of the "
                           f"{self.refs.count(0)} free blocks", RULES["reserve"])
            after = list(ask(student, [(seq, "blocks", None)])[0])
            new = after[len(blocks):]
            self.log.check(after[:len(blocks)] == blocks and len(new) == need and len(set(new)) == need
                           and all(known_id(b, n_blocks) and not self.refs[b] for b in new), call,
                           f"afterwards {name}.blocks is {after}; the rule gives {blocks} followed by {need} newly "
                           "allocated free blocks", RULES["reserve"])
            for block in new:
                self.refs[block] = 1
            blocks.extend(new)
            length[0] += n if step else 0
            self.observe(call, RULES["reserve"])

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), n=st.integers(0, 7))
        def reserve(self, index: int, n: int) -> None:
            self.grow(index, n, step=False)

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), n=st.integers(1, 3))
        def step(self, index: int, n: int) -> None:
            self.grow(index, n, step=True)

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2))
        def free(self, index: int) -> None:
            seq, blocks, length = self.seqs[index % len(self.seqs)]
            call = f"s{index % len(self.seqs)}.free()"
            got = outcome_of(seq.free)
            self.log.add(call, got)
            self.log.check(got.error is None, call, f"it {got.describe()}", RULES["free"])
            for block in blocks:
                self.refs[block] -= 1
            blocks.clear()
            length[0] = 0
            self.observe(call, RULES["free"])

        @precondition(lambda self: self.seqs)
        @rule(index=st.integers(0, 2), start=st.integers(-2, 12), n=st.integers(-2, 6))
        def slots(self, index: int, start: int, n: int) -> None:
            seq, blocks, _ = self.seqs[index % len(self.seqs)]
            call = f"s{index % len(self.seqs)}.slots({start}, {n})"
            got = outcome_of(functools.partial(seq.slots, start, n))
            self.log.add(call, Outcome(None, got.error))
            if start < 0 or n < 0 or start + n > len(blocks) * size:
                self.refused(call, got, ValueError, RULES["slots_range"])
                return
            self.log.check(got.error is None and isinstance(got.value, (tuple, list)) and len(got.value) == 2, call,
                           f"it {got.describe()}; the rule gives a pair (block ids, offsets)", RULES["slots_empty"])
            wanted = range(start, start + n)  # position p: block blocks[p // size], offset p % size
            want = (np.array([blocks[p // size] for p in wanted], dtype=np.int64), np.array([p % size for p in wanted],
                                                                                           dtype=np.int64))
            for name, array, expected in zip(("block ids", "offsets"), got.value, want):
                array = np.asarray(array)
                self.log.check(array.shape == (n,) and np.issubdtype(array.dtype, np.integer), call,
                               f"its {name} are {array!r} (shape {array.shape}, dtype {array.dtype}); the rule gives an "
                               f"int array of shape ({n},)", RULES["slots_empty"])
                self.log.check(np.array_equal(array, expected), call,
                               f"its {name} are {array.tolist()}; the rule gives {expected.tolist()} for blocks {blocks}",
                               RULES["slots"])
            self.observe(call, RULES["slots"])

    return SequenceMachine


def digest(i: int) -> str:
    """A stand-in block hash (any str is a key to PrefixCache): 64 hex characters."""
    return f"{i:064x}"


def prefix_machine(student: Any) -> type[RuleBasedStateMachine]:
    """PrefixCache calls on a pool whose blocks the machine allocates and lets go of.

    Hashes come from a few digests, so register meets cached and repeated hashes and lookup meets
    empty, partly cached and repeated lists. After every call it reads lookup([h]) of every digest,
    len(cache), every refcount and num_free, and compares with the rules.
    """
    n_blocks, hashes = 6, [digest(i) for i in range(5)]
    paged, prefix = student.paged_kv, student.prefix_cache
    hash_lists = st.lists(st.integers(0, len(hashes) - 1), max_size=5)

    class PrefixMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            self.pool = paged.BlockPool(CFG, n_blocks, BLOCK_SIZE)
            self.cache = prefix.PrefixCache(self.pool)
            self.refs = [0] * n_blocks
            self.held: list[int] = []  # the machine's own references, one entry each
            self.cached: dict[int, int] = {}  # digest index -> block
            self.log = Transcript(f"pool = BlockPool(TINY, n_blocks={n_blocks}, block_size={BLOCK_SIZE}); "
                                  f"cache = PrefixCache(pool); h<i> = f'{{i:064x}}'")

        def observe(self, call: str, rule: Rule) -> None:
            asked = ([(self.cache, "lookup", ([h],)) for h in hashes] + [(self.cache, "__len__", ())]
                     + [(self.pool, "refcount", (b,)) for b in range(n_blocks)] + [(self.pool, "num_free", None)])
            answers = ask(student, asked)
            for i, got in enumerate(answers[:len(hashes)]):
                want = [self.cached[i]] if i in self.cached else []
                self.log.check(list(got) == want, call, f"afterwards cache.lookup([h{i}]) returns {list(got)!r}; the rule "
                               f"gives {want}", rule)
            length = answers[len(hashes)]
            self.log.check(length == len(self.cached), call,
                           f"afterwards len(cache) is {length!r}; the rule gives {len(self.cached)}", rule)
            counts = answers[len(hashes) + 1: len(hashes) + 1 + n_blocks]
            for block, got in enumerate(counts):
                self.log.check(got == self.refs[block], call, f"afterwards pool.refcount({block}) is {got!r}; the rule "
                               f"gives {self.refs[block]} (the cache holds one reference per cached block)", rule)

        @precondition(lambda self: 0 in self.refs)
        @rule()
        def allocate(self) -> None:
            block = self.pool.allocate()
            self.log.add("pool.allocate()", Outcome(block))
            self.refs[block] += 1
            self.held.append(block)

        @precondition(lambda self: self.held)
        @rule(which=st.integers(0, 10))
        def release(self, which: int) -> None:
            block = self.held.pop(which % len(self.held))
            self.pool.decref(block)
            self.log.add(f"pool.decref({block})")
            self.refs[block] -= 1
            self.observe(f"pool.decref({block})", RULES["register"])

        @precondition(lambda self: any(self.refs))
        @rule(keys=hash_lists, picks=st.lists(st.integers(0, 10), min_size=5, max_size=5),
              as_tuple=st.booleans())
        def register(self, keys: list[int], picks: list[int], as_tuple: bool) -> None:
            in_use = [b for b in range(n_blocks) if self.refs[b]]
            blocks = [in_use[p % len(in_use)] for p in picks[:len(keys)]]
            sent = [hashes[k] for k in keys]
            args = (tuple(sent), tuple(blocks)) if as_tuple else (sent, blocks)
            call = f"cache.register({[f'h{k}' for k in keys]}, {blocks})"
            got = outcome_of(functools.partial(self.cache.register, *args))
            self.log.add(call, got)
            self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}", RULES["register"])
            for key, block in zip(keys, blocks):
                if key not in self.cached:
                    self.cached[key] = block
                    self.refs[block] += 1
            self.observe(call, RULES["register"])

        @rule(keys=hash_lists)
        def lookup(self, keys: list[int]) -> None:
            call = f"cache.lookup({[f'h{k}' for k in keys]})"
            got = outcome_of(functools.partial(self.cache.lookup, [hashes[k] for k in keys]))
            self.log.add(call, got)
            want: list[int] = []
            for key in keys:
                if key not in self.cached:
                    break
                want.append(self.cached[key])
            self.log.check(got.error is None and isinstance(got.value, list) and got.value == want, call,
                           f"it {got.describe()}; the rule gives {want}", RULES["lookup"])
            self.log.check(all(is_plain_int(b) for b in got.value), call,
                           f"it returned {got.value!r}; the rule gives a list of int ids", RULES["lookup"])
            self.observe(call, RULES["lookup_unchanged"])

        @rule()
        def clear(self) -> None:
            got = outcome_of(self.cache.clear)
            self.log.add("cache.clear()", got)
            self.log.check(got.error is None, "cache.clear()", f"it {got.describe()}", RULES["clear"])
            for block in self.cached.values():
                self.refs[block] -= 1
            self.cached.clear()
            self.observe("cache.clear()", RULES["clear"])

    return PrefixMachine


def eviction_machine(student: Any, policy: str, capacity: int | None,
                     reference: Callable[[int | None], Any] | None = None) -> type[RuleBasedStateMachine]:
    """LRUCache / LFUCache calls at `capacity` with block lists that are empty, repeated, tuples or
    numpy integers.

    After every call it reads `b in cache` for every block of the universe and len(cache). Without
    a `reference` it checks what the rules give from membership alone: match counts the leading
    present blocks and changes no membership; insert adds exactly the missing blocks it is given,
    keeps at most `capacity`, evicts only when full, and leaves its last block present (LRU: its
    last `capacity` distinct blocks). With one (the hidden suite's trusted cache) every answer
    must equal the reference's.
    """
    universe = list(range(5))
    cls = {"lru": "LRUCache", "lfu": "LFUCache"}[policy]
    ids = st.one_of(st.sampled_from(universe), st.sampled_from(universe).map(np.int64))
    block_lists = st.lists(ids, max_size=4)
    evicts = RULES["insert"] if policy == "lru" else RULES["lfu"]

    class EvictionMachine(RuleBasedStateMachine):
        @initialize()
        def start(self) -> None:
            self.capacity = capacity
            self.cache = getattr(student.prefix_cache, cls)(capacity)
            self.reference = reference(capacity) if reference else None
            self.held: set[int] = set()
            self.log = Transcript(f"cache = {cls}(capacity={capacity})")

        def observe(self, call: str, want: set[int], rule: Rule) -> None:
            answers = ask(student, [(self.cache, "__contains__", (b,)) for b in universe] + [(self.cache, "__len__", ())])
            held = {b for b, inside in zip(universe, answers) if inside}
            self.log.check(held == want, call, f"afterwards the cache holds {sorted(held)}; the rule gives {sorted(want)}",
                           rule)
            self.log.check(answers[-1] == len(want), call,
                           f"afterwards len(cache) is {answers[-1]!r}; it holds {len(want)} blocks", RULES["asks_only"])
            self.held = held

        @rule(blocks=block_lists, as_tuple=st.booleans())
        def match(self, blocks: list[Any], as_tuple: bool) -> None:
            sent = tuple(blocks) if as_tuple else blocks
            call = f"cache.match({sent!r})"
            got = outcome_of(functools.partial(self.cache.match, sent))
            self.log.add(call, got)
            want = 0
            for block in blocks:
                if block not in self.held:
                    break
                want += 1
            if self.reference is not None:
                self.reference.match([int(b) for b in blocks])
            self.log.check(got.error is None and is_plain_int(got.value) and got.value == want, call,
                           f"it {got.describe()}; the rule gives {want}, an int", RULES["match"])
            self.observe(call, set(self.held) if self.reference is None else set(filter(self.reference.__contains__,
                                                                                       universe)), RULES["asks_only"])

        @rule(blocks=block_lists, as_tuple=st.booleans())
        def insert(self, blocks: list[Any], as_tuple: bool) -> None:
            sent = tuple(blocks) if as_tuple else blocks
            call = f"cache.insert({sent!r})"
            got = outcome_of(functools.partial(self.cache.insert, sent))
            self.log.add(call, got)
            self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}; the rule gives None",
                           RULES["insert"])
            if self.reference is not None:
                self.reference.insert([int(b) for b in blocks])
                self.observe(call, set(filter(self.reference.__contains__, universe)), evicts)
                return
            before = set(self.held)
            answers = ask(student, [(self.cache, "__contains__", (b,)) for b in universe])
            held = {b for b, inside in zip(universe, answers) if inside}
            given = {int(b) for b in blocks}
            self.log.check(held <= before | given, call, f"afterwards the cache holds {sorted(held - before - given)}, "
                           "blocks neither held before nor inserted", RULES["insert"])
            self.log.check(self.capacity is None or len(held) <= self.capacity, call,
                           f"afterwards the cache holds {len(held)} blocks, more than its capacity {self.capacity}",
                           RULES["capacity"])
            if self.capacity is None or len(before | given) <= self.capacity:
                self.log.check(held == before | given, call, f"afterwards the cache holds {sorted(held)}; with room "
                               f"for every block nothing is evicted: the rule gives {sorted(before | given)}",
                               RULES["insert"])
            if blocks:
                recent = list(dict.fromkeys(int(b) for b in reversed(blocks)))
                kept = recent[:self.capacity] if policy == "lru" and self.capacity is not None else recent[:1]
                if policy == "lru" and self.capacity is None:
                    kept = recent
                self.log.check(set(kept) <= held, call, f"afterwards {sorted(set(kept) - held)} is not held; the "
                               "blocks just inserted are the most recently used", RULES["insert"])
            self.observe(call, held, RULES["insert"])

    return EvictionMachine
