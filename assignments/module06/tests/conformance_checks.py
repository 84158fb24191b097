"""Generated call sequences over module 6's BlockManager, each call checked against its rule.

`manager_machine` builds managers of a few blocks (caching on and off) and makes allocate /
append_tokens / free calls in any order, with prompts that share prefixes (so hits, touches and lazy
evictions happen) and with every stated kind of bad input: empty tokens, negative ids, floats, a
2-D list, a request id already running, unknown request ids (with bad tokens too: KeyError comes
first). After every call it reads the whole state the given accessors show in one round trip
(every ref_cnt and block_hash, the free queue in order, num_free_blocks, the counters, the running
requests and their block ids) and checks it against the rules from the state before the call:

- a call that raises or returns None changes nothing, counters included;
- each block's ref_cnt is the number of running requests holding it, the free queue is exactly
  the blocks with ref_cnt 0 (each once), num_free_blocks its length;
- the counters add what a successful allocate says (nothing with caching off);
- allocate returns ceil(len / block_size) blocks, num_computed a multiple of block_size below
  len(tokens), its new blocks popped from the free queue's head in order; None only when the
  blocks it needs exceed the free ones; append_tokens takes exactly the blocks its tokens need from
  the head, and returns None exactly when more are needed than are free; free puts the blocks that
  reach 0 at the tail, last block first.

With a `reference` (the hidden suite's trusted manager) every answer and the whole state must also
equal the reference's after every call. A failure names the call, what came back, what the rule
gives and its sentence (RULES, quoted from the stub), after Hypothesis has shrunk the sequence
(kvlab.testing.conformance).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from connector_conformance_checks import CONNECTOR_RULES
from keys_property_checks import KEY_RULES
from kvlab.testing.conformance import Rule, Transcript, machine_settings, outcome_of, raised
from queue_conformance_checks import QUEUE_RULES

MANAGER = "block_manager.py:BlockManager"

# Each rule's sentence, quoted exactly from the stub named (tests/suites/test_conformance.py checks it is there).
RULES: dict[str, Rule] = {
    "accounting": Rule(MANAGER, "Every block with ref_cnt 0 is in the free queue, and only those."),
    "counters": Rule(MANAGER, "each successful `allocate` with caching on adds len(tokens) queries and its "
                              "num_computed hits."),
    "no_caching": Rule(MANAGER, "When False nothing is ever hashed, looked up or counted:"),
    "running": Rule(MANAGER, "req_to_blocks: dict, request id -> list of its KVBlocks in position order, for every "
                             "request that holds blocks (admitted by `allocate`, not yet freed), in admission order."),
    "hits": Rule(f"{MANAGER}.allocate", "With caching on, `num_computed` is block_size times the length of the longest "
                                        "leading run of the prompt's full-block hashes found in the prefix cache, capped "
                                        "at (len(tokens) - 1) // block_size blocks so that the last token is always "
                                        "computed (a fully cached prompt still recomputes its last block)."),
    "touch": Rule(f"{MANAGER}.allocate", "Those hit blocks are shared: each gets ref_cnt + 1, and one with ref_cnt 0 is "
                                         "first taken out of the free queue (\"touched\")."),
    "new_blocks": Rule(f"{MANAGER}.allocate", "The rest of the ceil(len(tokens) / block_size) blocks are new: each is "
                                              "popped from the free queue's head, and if it still holds a hash, that "
                                              "hash leaves the prefix cache first (lazy eviction); it gets ref_cnt 1."),
    "allocate_none": Rule(f"{MANAGER}.allocate", "Returns None, changing nothing (counters included), when the new "
                                                 "blocks needed exceed the free blocks that would remain after touching "
                                                 "the hits."),
    "allocate_errors": Rule(f"{MANAGER}.allocate", "ValueError for a request_id that already holds blocks, or tokens "
                                                   "that are empty or not 1-D integers >= 0; these checks come first, so "
                                                   "bad input is a ValueError even when there is no room (never None)."),
    "append": Rule(f"{MANAGER}.append_tokens", "Returns the ids of the blocks newly allocated for them, in position "
                                               "order ([] when the request's last block has room, and for tokens == "
                                               "[]: no token, no change), or None, changing nothing, when more blocks "
                                               "are needed than are free."),
    "append_hash": Rule(f"{MANAGER}.append_tokens", "With caching on, every block that these tokens make full is "
                                                    "hashed, chained on the request's previous full block, and enters "
                                                    "the prefix cache unless its hash is already there."),
    "append_errors": Rule(f"{MANAGER}.append_tokens", "KeyError for an unknown request_id, checked first (an unknown "
                                                      "request_id with bad tokens is a KeyError); then ValueError for "
                                                      "tokens that are not 1-D integers >= 0."),
    "free": Rule(f"{MANAGER}.free", "A request finished: its blocks' ref_cnt - 1, last block first; each block reaching "
                                    "0 goes to the free queue's tail, keeping its hash (it stays a possible hit)."),
    "free_errors": Rule(f"{MANAGER}.free", "KeyError for an unknown request_id."),
    "reference": Rule(MANAGER, "The prefix cache maps a block hash to the one block that holds it; a block is in it "
                               "exactly when its `block_hash` is not None."),
    # FreeBlockQueue's, KVConnector's and chunk_keys' (queue_ and connector_conformance_checks.py,
    # keys_property_checks.py), named after their contract: no name repeats one above.
    **QUEUE_RULES, **CONNECTOR_RULES, **KEY_RULES,
}

# Sized to the grading's time: each step is two round trips to the student's process when graded.
PUBLIC_SETTINGS = machine_settings(max_examples=10, steps=12)
HIDDEN_SETTINGS = machine_settings(max_examples=15, steps=15)

# Prompts share these prefixes, so later requests hit blocks earlier ones cached.
PREFIXES = ([7, 3, 9, 1], [7, 3, 9, 2, 2, 8], [5, 5, 5])
# Bad tokens, each a ValueError: empty, a negative id, a float, a 2-D list.
BAD_TOKENS = ([], [1, -1, 2], [1.5, 2.0], [[1, 2], [3, 4]])
# Which bad tokens a call sends (an index of BAD_TOKENS), or None (good ones) four times in five.
BAD_CHOICE = st.sampled_from((None, None, None, None, None, None, None, None, *range(len(BAD_TOKENS))))


# A prompt longer than any pool of the runs: no room (None), unless its call is refused first.
LONG = list(range(20, 40))


def tokens_strategy() -> st.SearchStrategy[list[int]]:
    """A prefix (or none) and a tail of small and large token ids; one time in six, LONG."""
    return st.builds(lambda prefix, tail, long: list(LONG) if long else (
                     list(PREFIXES[prefix]) if prefix < len(PREFIXES) else []) + tail,
                     st.integers(0, len(PREFIXES)),
                     st.lists(st.one_of(st.integers(0, 9), st.just(2**40)), min_size=0, max_size=3),
                     st.sampled_from([False] * 5 + [True])).filter(bool)


def manager_machine(student: Any, with_append: bool, reference: Callable[..., Any] | None = None
                    ) -> type[RuleBasedStateMachine]:
    """BlockManager calls with the manager's state checked after each (see the module docstring).
    `with_append`: append_tokens calls too (task eviction); without, allocate and free only."""
    module = student.block_manager

    class ManagerMachine(RuleBasedStateMachine):
        @initialize(n_blocks=st.sampled_from([4, 6, 8]), size=st.sampled_from([2, 3]), caching=st.booleans())
        def start(self, n_blocks: int, size: int, caching: bool) -> None:
            self.n, self.size, self.caching = n_blocks, size, caching
            keyword = "" if caching else ", enable_caching=False"
            self.manager = module.BlockManager(n_blocks, size) if caching else module.BlockManager(
                n_blocks, size, enable_caching=False)
            self.reference = reference(n_blocks, size, caching) if reference else None
            self.log = Transcript(f"manager = BlockManager({n_blocks}, {size}{keyword})")
            self.held: dict[str, int] = {}  # running request -> tokens held
            self.count = 0  # request ids handed out: r1, r2, ...
            self.state = self.read()

        def read(self) -> dict[str, Any]:
            n = self.n
            asked = [*((self.manager, "ref_cnt", (b,)) for b in range(n)), *((self.manager, "block_hash", (b,))
                                                                          for b in range(n)),
                     (self.manager, "free_block_ids", ()), (self.manager, "num_free_blocks", None),
                     (self.manager, "prefix_cache_queries", None), (self.manager, "prefix_cache_hits", None),
                     (self.manager, "running", ()), *((self.manager, "block_ids", (rid,)) for rid in self.held)]
            got = student.call("kvlab.testing.probe:ask", asked)
            return {"refs": list(got[:n]), "hashes": list(got[n:2 * n]), "free": list(got[2 * n]),
                    "num_free": got[2 * n + 1], "queries": got[2 * n + 2], "hits": got[2 * n + 3],
                    "running": list(got[2 * n + 4]),
                    "blocks": {rid: list(ids) for rid, ids in zip(self.held, got[2 * n + 5:])}}

        def check_state(self, call: str, rule: Rule) -> dict[str, Any]:
            """Read the state; check the accounting invariants (and the reference's state); keep it."""
            now = self.read()
            owners = [sum(blocks.count(b) for blocks in now["blocks"].values()) for b in range(self.n)]
            self.log.check(now["running"] == list(self.held), call, f"afterwards running() is {now['running']}; the "
                           f"rule gives {list(self.held)}", RULES["running"] if rule is RULES["accounting"] else rule)
            self.log.check(now["refs"] == owners, call, f"afterwards the ref_cnts are {now['refs']}, but the running "
                           f"requests hold the blocks {owners} times (block_ids of each)", rule)
            zero = [b for b in range(self.n) if owners[b] == 0]
            self.log.check(sorted(now["free"]) == zero and len(now["free"]) == len(zero), call,
                           f"afterwards the free queue is {now['free']}; the rule gives the blocks nobody holds, each "
                           f"once: {zero}", RULES["accounting"])
            self.log.check(now["num_free"] == len(now["free"]), call, f"afterwards num_free_blocks is "
                           f"{now['num_free']!r} with {len(now['free'])} blocks in the free queue", RULES["accounting"])
            if not self.caching:
                self.log.check(now["queries"] == now["hits"] == 0 and not any(now["hashes"]), call,
                               f"afterwards, with enable_caching=False, the counters are {now['queries']}, "
                               f"{now['hits']} and the hashes {now['hashes']}", RULES["no_caching"])
            if self.reference is not None:
                want = self.reference.state()
                for name, got_value, want_value in (("the free queue", now["free"], want.free_queue),
                                                    ("the ref_cnts", now["refs"], want.ref_cnts),
                                                    ("the block hashes", now["hashes"], want.hashes),
                                                    ("prefix_cache_queries", now["queries"], want.queries),
                                                    ("prefix_cache_hits", now["hits"], want.hits)):
                    shown = got_value if name != "the block hashes" else [h and h[:8] for h in got_value]
                    self.log.check(got_value == want_value, call, f"afterwards {name} {'are' if name[-1] == 's' else 'is'}"
                                   f" {shown}, not what the rule gives", rule)
            self.state = now
            return now

        def unchanged(self, call: str, rule: Rule) -> None:
            before = self.state
            now = self.read()
            changed = [name for name in before if before[name] != now[name]]
            self.log.check(not changed, call, f"it changed {', '.join(changed)} (before: "
                           f"{', '.join(str(before[name]) for name in changed)}; after: "
                           f"{', '.join(str(now[name]) for name in changed)})", rule)

        def pick(self, which: int, fresh: bool) -> str:
            """A running request (`which`-th, cyclically), or a new id when `fresh` or none runs."""
            if fresh or not self.held:
                self.count += 1
                return f"r{self.count}" if fresh or which % 2 else "unknown"
            return list(self.held)[which % len(self.held)]

        @rule(which=st.integers(0, 7), fresh=st.sampled_from([True, True, True, False]), tokens=tokens_strategy(),
              bad=BAD_CHOICE, as_array=st.booleans())
        def allocate(self, which: int, fresh: bool, tokens: list[int], bad: int | None, as_array: bool) -> None:
            rid = self.pick(which, fresh)
            sent: Any = BAD_TOKENS[bad] if bad is not None else np.asarray(tokens, dtype=np.int64) if as_array else tokens
            shown = f"np.array({tokens})" if as_array and bad is None else repr(sent)
            call = f"manager.allocate({rid!r}, {shown})"
            got = outcome_of(functools.partial(self.manager.allocate, rid, sent))
            self.log.add(call, got)
            if bad is not None or rid in self.held:
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; the rule gives ValueError",
                               RULES["allocate_errors"])
                self.unchanged(call, RULES["allocate_errors"])
                return
            before = self.state
            want = self.reference.allocate(rid, tokens) if self.reference is not None else ...
            total = -(-len(tokens) // self.size)
            if got.error is None and got.value is None:
                self.log.check(total > before["num_free"] and (self.reference is None or want is None), call,
                               f"it returned None with {before['num_free']} free blocks for the {total} blocks of "
                               f"{len(tokens)} tokens", RULES["allocate_none"])
                self.unchanged(call, RULES["allocate_none"])
                return
            self.log.check(got.error is None and isinstance(got.value, (tuple, list)) and len(got.value) == 2, call,
                           f"it {got.describe()}; the rule gives (num_computed, block_ids)", RULES["new_blocks"])
            computed, ids = got.value[0], list(got.value[1])
            if self.reference is not None:
                self.log.check(want is not None and [computed, ids] == [want[0], list(want[1])], call,
                               f"it returned {got.value!r}, not what the rule gives"
                               + (" (None: not enough free blocks)" if want is None else ""),
                               RULES["hits"] if want is not None and computed != want[0] else RULES["new_blocks"])
            cap = (len(tokens) - 1) // self.size * self.size
            self.log.check(len(ids) == total and isinstance(computed, (int, np.integer)) and computed % self.size == 0
                           and 0 <= computed <= cap and (self.caching or computed == 0), call,
                           f"it returned num_computed {computed!r} and {len(ids)} block ids; the rule gives {total} "
                           f"blocks and num_computed a multiple of {self.size} from 0 to {cap}", RULES["hits"])
            hits = ids[:computed // self.size]
            touched = [b for b in hits if before["refs"][b] == 0]
            remaining = [b for b in before["free"] if b not in touched]
            self.log.check(ids[len(hits):] == remaining[:total - len(hits)], call,
                           f"its new blocks are {ids[len(hits):]}; the rule pops them from the head of the free queue "
                           f"{remaining} (after touching the hits {touched})", RULES["new_blocks"])
            self.held[rid] = len(tokens)
            now = self.check_state(call, RULES["touch"])
            queries = before["queries"] + (len(tokens) if self.caching else 0)
            hit_count = before["hits"] + (computed if self.caching else 0)
            self.log.check((now["queries"], now["hits"]) == (queries, hit_count), call,
                           f"afterwards prefix_cache_queries, prefix_cache_hits are {now['queries']}, {now['hits']}; the "
                           f"rule gives {queries}, {hit_count}", RULES["counters"])

        @precondition(lambda self: with_append and self.held)
        @rule(which=st.integers(0, 7), fresh=st.sampled_from([False, False, False, True]), n=st.integers(0, 7),
              bad=BAD_CHOICE.filter(lambda bad: bad != 0))
        def append_tokens(self, which: int, fresh: bool, n: int, bad: int | None) -> None:
            rid = self.pick(which, fresh)
            tokens = BAD_TOKENS[bad] if bad is not None else [(n * 3 + i) % 10 for i in range(n)]
            call = f"manager.append_tokens({rid!r}, {tokens!r})"
            got = outcome_of(functools.partial(self.manager.append_tokens, rid, tokens))
            self.log.add(call, got)
            if rid not in self.held or bad is not None:
                error = KeyError if rid not in self.held else ValueError
                self.log.check(raised(got, error), call, f"it {got.describe()}; the rule gives {error.__name__}",
                               RULES["append_errors"])
                self.unchanged(call, RULES["append_errors"])
                return
            before = self.state
            blocks = len(before["blocks"][rid])
            need = -(-(self.held[rid] + n) // self.size) - blocks
            if self.reference is not None:
                want = self.reference.append(rid, tokens)
            if need > before["num_free"]:
                self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}; it needs {need} "
                               f"blocks and {before['num_free']} are free: the rule gives None", RULES["append"])
                self.unchanged(call, RULES["append"])
                return
            self.log.check(got.error is None and isinstance(got.value, list) and got.value == before["free"][:need],
                           call, f"it {got.describe()}; it needs {need} new blocks, which the rule takes from the head "
                           f"of the free queue {before['free']}", RULES["append"])
            if self.reference is not None:
                self.log.check(list(want) == got.value, call, f"it returned {got.value}, not what the rule gives",
                               RULES["append"])
            self.held[rid] += n
            now = self.check_state(call, RULES["append_hash"])
            self.log.check(now["blocks"][rid] == before["blocks"][rid] + got.value, call,
                           f"afterwards block_ids({rid!r}) is {now['blocks'][rid]}; the rule gives "
                           f"{before['blocks'][rid] + got.value}", RULES["append"])
            self.log.check((now["queries"], now["hits"]) == (before["queries"], before["hits"]), call,
                           "append_tokens changed the counters; only a successful allocate adds to them",
                           RULES["counters"])

        @precondition(lambda self: self.held)
        @rule(which=st.integers(0, 7), fresh=st.sampled_from([False, False, False, True]))
        def free(self, which: int, fresh: bool) -> None:
            rid = self.pick(which, fresh)
            call = f"manager.free({rid!r})"
            got = outcome_of(functools.partial(self.manager.free, rid))
            self.log.add(call, got)
            if rid not in self.held:
                self.log.check(raised(got, KeyError), call, f"it {got.describe()}; the rule gives KeyError",
                               RULES["free_errors"])
                self.unchanged(call, RULES["free_errors"])
                return
            before = self.state
            if self.reference is not None:
                self.reference.release(rid)
            self.log.check(got.error is None, call, f"it {got.describe()}", RULES["free"])
            del self.held[rid]
            now = self.check_state(call, RULES["free"])
            released = [b for b in reversed(before["blocks"][rid]) if now["refs"][b] == 0 and before["refs"][b] == 1]
            self.log.check(now["free"] == before["free"] + released, call,
                           f"afterwards the free queue is {now['free']}; the rule gives {before['free'] + released} "
                           "(the blocks reaching 0 at the tail, last block first)", RULES["free"])
            self.log.check(all(now["hashes"][b] == before["hashes"][b] for b in before["blocks"][rid]), call,
                           "free changed the hash of a freed block; freed blocks keep their hash", RULES["free"])

    return ManagerMachine
