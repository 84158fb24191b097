"""Generated call sequences over module 6's FreeBlockQueue, each call checked against its rule.

`queue_machine` builds a queue of a few KVBlocks (none, one, several; given in any order, with ids
that are not their positions; now and then one block given twice, a ValueError) and makes popleft,
remove and append calls in any order, on blocks in the queue and out of it (so every stated
ValueError comes up: popleft of an empty queue, remove of a block not in it, append of a block
already in it). After every call it reads block_ids() and num_free_blocks in one round trip and
checks them, and what the call returned or raised, against a plain list of block ids: the contract
leaves no choice (which block popleft returns, where append and remove put or take a block), so
that list is the reference, in the public and the hidden suite alike. The links
(`prev_free_block`, `next_free_block`) are the student's to use as they like: never read.
"""
from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

from kvlab.testing.conformance import Rule, Transcript, outcome_of, raised

QUEUE = "block_manager.py:FreeBlockQueue"

# Each rule's sentence, quoted exactly from the stub (tests/suites/test_conformance.py checks it is there).
QUEUE_RULES: dict[str, Rule] = {
    "queue_init": Rule(QUEUE, "`FreeBlockQueue(blocks)` holds `blocks` in the given order, the first at the head (an "
                              "empty sequence gives an empty queue: `block_ids()` is [] and `num_free_blocks` 0)."),
    "queue_twice": Rule(QUEUE, "A block given twice is a ValueError, as `append` of a block already in the queue is."),
    "queue_count": Rule(QUEUE, "`num_free_blocks` (an int attribute) is always the number of blocks in the queue."),
    "queue_unchanged": Rule(QUEUE, "a call refused with a ValueError leaves the queue as it was."),
    "queue_popleft": Rule(f"{QUEUE}.popleft", "Remove and return the head (the block to evict first). ValueError when the "
                                        "queue is empty."),
    "queue_remove": Rule(f"{QUEUE}.remove", "Take `block` out of the queue wherever it is, in O(1). ValueError if it is not "
                                      "in the queue."),
    "queue_append": Rule(f"{QUEUE}.append", "Put `block` at the tail (evicted last). ValueError if it is already in "
                                            "the queue."),
}

# Block ids that are not positions: a queue keyed by position instead of by block shows.
IDS = (7, 3, 11, 0, 5, 9)


def queue_machine(student: Any) -> type[RuleBasedStateMachine]:
    """FreeBlockQueue calls with block_ids() and num_free_blocks checked after each (see the module docstring)."""
    module = student.block_manager

    class QueueMachine(RuleBasedStateMachine):
        @initialize(n=st.sampled_from([0, 1, 2, 4, 6]), order=st.permutations(range(len(IDS))),
                    twice=st.sampled_from([None, None, None, None, 0, 1]))
        def start(self, n: int, order: list[int], twice: int | None) -> None:
            self.ids = [IDS[i] for i in order]  # every block of the run, in the order first given
            self.blocks = {block_id: module.KVBlock(block_id) for block_id in self.ids}
            given = self.ids[:n]
            self.log = Transcript(f"blocks = {{i: KVBlock(i) for i in {self.ids}}}")
            if twice is not None and twice < n:
                doubled = [*given, given[twice]]
                call = f"queue = FreeBlockQueue([{', '.join(f'blocks[{i}]' for i in doubled)}])"
                got = outcome_of(lambda: module.FreeBlockQueue([self.blocks[i] for i in doubled]))
                self.log.add(call, got)
                self.log.check(raised(got, ValueError), call, f"it {got.describe()}; the rule gives ValueError (block "
                               f"{given[twice]} given twice)", QUEUE_RULES["queue_twice"])
                # The blocks of the refused queue may carry links: later calls use new blocks of the same ids.
                self.blocks = {block_id: module.KVBlock(block_id) for block_id in self.ids}
            call = f"queue = FreeBlockQueue([{', '.join(f'blocks[{i}]' for i in given)}])"
            got = outcome_of(lambda: module.FreeBlockQueue([self.blocks[i] for i in given]))
            self.log.add(call, got)
            self.log.check(got.error is None, call, f"it {got.describe()}", QUEUE_RULES["queue_init"])
            self.queue = got.value
            self.model = list(given)
            self.check(call, QUEUE_RULES["queue_init"])

        def read(self, call: str, extra: list[tuple[Any, str, Any]] = ()) -> list[Any]:
            """block_ids(), num_free_blocks and `extra` questions, in one round trip."""
            asked = [(self.queue, "block_ids", ()), (self.queue, "num_free_blocks", None), *extra]
            got = outcome_of(lambda: student.call("kvlab.testing.probe:ask", asked))
            self.log.check(got.error is None, call, f"afterwards reading block_ids() and num_free_blocks "
                           f"{got.describe()}", QUEUE_RULES["queue_count"])
            return list(got.value)

        def check(self, call: str, rule: Rule, extra: list[tuple[Any, str, Any]] = ()) -> list[Any]:
            """Check the queue against the model after `call`; the answers to `extra`."""
            ids, count, *more = self.read(call, list(extra))
            ids = list(ids)
            self.log.check(ids == self.model, call, f"afterwards block_ids() is {ids}; the rule gives {self.model}", rule)
            self.log.check(type(count) is int and count == len(self.model), call, f"afterwards num_free_blocks is "
                           f"{count!r} with {len(self.model)} blocks in the queue", QUEUE_RULES["queue_count"])
            return more

        def refused(self, call: str, got: Any, rule: Rule, why: str) -> None:
            self.log.check(raised(got, ValueError), call, f"it {got.describe()}; the rule gives ValueError ({why})", rule)
            self.check(call, QUEUE_RULES["queue_unchanged"])

        @rule()
        def popleft(self) -> None:
            call = "queue.popleft()"
            got = outcome_of(self.queue.popleft)
            self.log.add(call, got)
            if not self.model:
                self.refused(call, got, QUEUE_RULES["queue_popleft"], "the queue is empty")
                return
            head = self.model.pop(0)
            self.log.check(got.error is None and got.value is not None, call, f"it {got.describe()}; the rule gives "
                           f"the head, blocks[{head}]", QUEUE_RULES["queue_popleft"])
            (block_id,) = self.check(call, QUEUE_RULES["queue_popleft"], [(got.value, "block_id", None)])
            self.log.check(block_id == head, call, f"it returned a block with block_id {block_id!r}; the rule gives "
                           f"the head, blocks[{head}]", QUEUE_RULES["queue_popleft"])

        @rule(which=st.integers(0, len(IDS) - 1))
        def remove(self, which: int) -> None:
            block_id = self.ids[which]
            call = f"queue.remove(blocks[{block_id}])"
            got = outcome_of(functools.partial(self.queue.remove, self.blocks[block_id]))
            self.log.add(call, got)
            if block_id not in self.model:
                self.refused(call, got, QUEUE_RULES["queue_remove"], f"blocks[{block_id}] is not in the queue")
                return
            self.model.remove(block_id)
            self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}; the rule gives None",
                           QUEUE_RULES["queue_remove"])
            self.check(call, QUEUE_RULES["queue_remove"])

        @rule(which=st.integers(0, len(IDS) - 1))
        def append(self, which: int) -> None:
            block_id = self.ids[which]
            call = f"queue.append(blocks[{block_id}])"
            got = outcome_of(functools.partial(self.queue.append, self.blocks[block_id]))
            self.log.add(call, got)
            if block_id in self.model:
                self.refused(call, got, QUEUE_RULES["queue_append"], f"blocks[{block_id}] is already in the queue")
                return
            self.model.append(block_id)
            self.log.check(got.error is None and got.value is None, call, f"it {got.describe()}; the rule gives None",
                           QUEUE_RULES["queue_append"])
            self.check(call, QUEUE_RULES["queue_append"])

    return QueueMachine
