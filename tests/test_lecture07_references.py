"""The lecture-7 hidden tests' own oracles (the trusted LRU/LFU in _eviction_checks) agree with the
hand-derived eviction scripts and the hand trace, so an expected value is never a copy of a bug."""
from __future__ import annotations

import importlib

import pytest

from suites import SUITES

HIDDEN = SUITES["lecture07"].hidden


def test_trusted_references_follow_the_hand_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hidden tests take expected eviction orders and hit ratios from ReferenceLRU/ReferenceLFU;
    # here those references replay the hand-derived scripts and the hand trace.
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
