"""The lecture-7 hidden tests' own oracles (the trusted LRU/LFU in _eviction_checks) agree with the
hand-derived eviction scripts and the hand trace, so an expected value is never a copy of a bug."""
from __future__ import annotations

import importlib

import pytest

from suites import SUITES

HIDDEN = SUITES["lecture07"].hidden
PUBLIC = SUITES["lecture07"].public


def test_trusted_references_follow_the_hand_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hidden tests take expected eviction orders and hit ratios from ReferenceLRU/ReferenceLFU;
    # here those references replay the hand-derived scripts and the hand trace.
    # The hidden helpers import the public ones (eviction_checks, paged_checks), as in the grader.
    monkeypatch.syspath_prepend(str(PUBLIC))
    monkeypatch.syspath_prepend(str(HIDDEN))
    checks = importlib.import_module("_eviction_checks")
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



def test_public_replay_agrees_with_the_references(monkeypatch: pytest.MonkeyPatch) -> None:
    # The public hit_ratio tests take expected values from eviction_checks.unlimited_hits (no
    # eviction, so no answer to the eviction task); at capacity None it must equal the trusted
    # replay, each usual mistake included.
    monkeypatch.syspath_prepend(str(PUBLIC))
    monkeypatch.syspath_prepend(str(HIDDEN))
    checks = importlib.import_module("_eviction_checks")
    public = importlib.import_module("eviction_checks")
    mistakes = [{}, {"cap_at_input": False}, {"insert_first": True}, {"per_request": True}]
    for trace, block_size in ((checks.HAND_TRACE, checks.HAND_BLOCK), (public.small_trace(3), 512)):
        for policy in ("lru", "lfu"):
            for mistake in mistakes:
                want = checks.reference_hits(trace, None, policy, block_size, **mistake)
                got = public.unlimited_hits(trace, None, policy, block_size, **mistake)
                assert got == want, f"unlimited_hits {got} != reference_hits {want} ({policy}, {mistake}, {len(trace)} requests)"
