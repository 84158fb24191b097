"""The lecture-7 hidden tests' own oracles (the trusted LRU/LFU in _eviction_checks) agree with the
hand-derived eviction scripts and the hand trace, and with brute-force oracles written here on
random operation sequences, so an expected value is never a copy of a bug."""
from __future__ import annotations

import importlib
import random
from collections.abc import Iterable
from types import ModuleType

import pytest

from autograder.assignment import load_assignment
from support.repo import REPO

LECTURE07 = load_assignment("lecture07", REPO)
HIDDEN, PUBLIC = LECTURE07.hidden_tests, LECTURE07.public_tests


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    # The hidden helpers import the public ones (eviction_checks, paged_checks), as in the grader.
    monkeypatch.syspath_prepend(str(PUBLIC))
    monkeypatch.syspath_prepend(str(HIDDEN))
    return importlib.import_module("_eviction_checks")


def test_trusted_references_follow_the_hand_tables(checks: ModuleType) -> None:
    # The hidden tests take expected eviction orders and hit ratios from ReferenceLRU/ReferenceLFU;
    # here those references replay the hand-derived scripts and the hand trace.
    scripts = [("lru", 3, checks.LRU_SCRIPT), ("lfu", 3, checks.LFU_SCRIPT),
               ("lru", 1, checks.TINY_SCRIPT), ("lfu", 1, checks.TINY_SCRIPT)]
    for policy, capacity, script in scripts:
        cache = checks.REFERENCES[policy](capacity)
        universe = {block for _, blocks, _, _, _ in script for block in blocks}
        for number, (op, blocks, want, contents, _) in enumerate(script, 1):
            got = getattr(cache, op)(blocks)
            held = {block for block in universe if block in cache}
            assert (op == "insert" or got == want) and held == contents, (
                f"Reference{policy.upper()}({capacity}) disagrees with the script at step {number} {op}({blocks}): "
                f"returned {got}, holds {sorted(held)}; the script says {want}, {sorted(contents)}"
            )
    for (capacity, policy), want in checks.HAND_HITS.items():
        got = checks.reference_hits(checks.HAND_TRACE, capacity, policy, checks.HAND_BLOCK)
        assert got == want, f"reference hits of the hand trace at capacity {capacity}, {policy}: {got}; by hand {want}"



def test_public_replay_agrees_with_the_references(checks: ModuleType) -> None:
    # The public hit_ratio tests take expected values from eviction_checks.unlimited_hits (no
    # eviction, so no answer to the eviction task); at capacity None it must equal the trusted
    # replay, each usual mistake included.
    public = importlib.import_module("eviction_checks")
    mistakes = [{}, {"cap_at_input": False}, {"insert_first": True}, {"per_request": True}]
    for trace, block_size in ((checks.HAND_TRACE, checks.HAND_BLOCK), (public.small_trace(3), 512)):
        for policy in ("lru", "lfu"):
            for mistake in mistakes:
                want = checks.reference_hits(trace, None, policy, block_size, **mistake)
                got = public.unlimited_hits(trace, None, policy, block_size, **mistake)
                assert got == want, f"unlimited_hits {got} != reference_hits {want} ({policy}, {mistake}, {len(trace)} requests)"
class ScanLRU:
    """LRU as a list in recency order, least recent first: every use is a remove and an append."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.order = capacity, []

    def use(self, block: int) -> None:
        if block in self.order:
            self.order.remove(block)
        elif len(self.order) >= self.capacity:
            self.order.pop(0)
        self.order.append(block)

    def held(self) -> set[int]:
        return set(self.order)


class ScanLFU:
    """LFU as (uses, last use) per block; eviction scans for the minimum."""

    def __init__(self, capacity: int) -> None:
        self.capacity, self.stamps, self.clock = capacity, {}, 0

    def use(self, block: int) -> None:
        self.clock += 1
        if block not in self.stamps and len(self.stamps) >= self.capacity:
            del self.stamps[min(self.stamps, key=self.stamps.__getitem__)]
        uses = self.stamps[block][0] if block in self.stamps else 0
        self.stamps[block] = (uses + 1, self.clock)

    def held(self) -> set[int]:
        return set(self.stamps)


def scan_match(oracle: ScanLRU | ScanLFU, blocks: Iterable[int]) -> int:
    n = 0
    for block in blocks:
        if block not in oracle.held():
            break
        oracle.use(block)
        n += 1
    return n


@pytest.mark.parametrize(("policy", "oracle"), [("lru", ScanLRU), ("lfu", ScanLFU)])
@pytest.mark.parametrize("seed", range(4))
def test_trusted_references_agree_with_brute_force(checks: ModuleType, policy: str, oracle: type, seed: int) -> None:
    rng = random.Random(seed)
    capacity = rng.randint(1, 8)
    reference, brute = checks.REFERENCES[policy](capacity), oracle(capacity)
    for step in range(600):
        blocks = [rng.randrange(16) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.5:
            got, want = reference.match(blocks), scan_match(brute, blocks)
            assert got == want, f"{policy} seed {seed} step {step}: match({blocks}) gave {got}, brute force {want}"
        else:
            reference.insert(blocks)
            for block in blocks:
                brute.use(block)
        held = {block for block in range(16) if block in reference}
        assert held == brute.held(), (f"{policy} seed {seed} step {step}: the reference holds {sorted(held)}, "
                                      f"brute force {sorted(brute.held())}")
