"""The cost of allocate and free against the pool's size (task prefix_hits), for the public and hidden tests.

`pool_cost_problem` caches a 64-token prefix in a short pool and in a long one (BlockManager(n, 1)), then
times allocate and free of requests sharing part of the prefix plus two new tokens (the first of them a
lookup that misses), the two pools in turn. It counts CPU time, as the grader does (every process involved),
so another job on the machine does not stretch it. The rule it checks: allocate costs O(len(tokens)) and
free O(blocks freed), whatever num_blocks (a dict lookup per hash, O(1) free-queue operations, the free
block count kept as a counter), so the long pool's requests cost no more than the short pool's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

SHORT_BLOCKS = 1_000
COST_CAUSE = ("Likely cause: a step of allocate or free costs O(num_blocks): the prefix-cache lookup scanning the "
              "blocks for a hash (use a dict from hash to block), num_free_blocks walking the free queue (keep "
              "the count), or a free-queue operation that scans")


def pool_cost_problem(student: Any, long_blocks: int, n_requests: int, seed: int, margin: float) -> str | None:
    """None when the long pool's requests cost at most `margin` CPU seconds more than the short pool's; else
    what was measured and the likely cause (or what allocate answered wrongly)."""
    rng = np.random.default_rng(seed)
    prefix = [int(t) for t in rng.integers(0, 50_000, size=64)]
    managers = {}
    for n_blocks in (SHORT_BLOCKS, long_blocks):
        try:
            manager = student.block_manager.BlockManager(n_blocks, 1)
        except Exception as error:
            if type(error).__name__ != "WorkerTimeout":  # the per-call time limit; anything else is shown as raised
                raise
            return (f"BlockManager({n_blocks:,}, 1) ran past the time limit ({error}): building the pool must cost "
                    "O(num_blocks), each append to the free queue O(1). A free queue whose append checks membership "
                    "in a list, or walks the links, makes it O(num_blocks^2)")
        manager.allocate("prefix", prefix)
        manager.free("prefix")
        managers[n_blocks] = manager
    costs = dict.fromkeys(managers, 0.0)
    for index in range(n_requests):
        shared = int(rng.integers(8, 64))
        prompt = prefix[:shared] + [50_000 + 2 * index, 50_001 + 2 * index]
        request = f"r{index}"
        for n_blocks in (SHORT_BLOCKS, long_blocks) if index % 2 == 0 else (long_blocks, SHORT_BLOCKS):
            manager = managers[n_blocks]
            (answer, _), seconds = student.cpu_seconds(
                lambda manager=manager: (manager.allocate(request, prompt), manager.free(request)))
            costs[n_blocks] += seconds
            if answer is None or answer[0] != shared:
                return (f"allocate({request!r}, {shared} tokens of a cached prefix + 2 new ones) on "
                        f"BlockManager({n_blocks:,}, 1) returned {answer if answer is None else answer[0]!r} cached "
                        f"tokens; expected {shared}")
    growth = costs[long_blocks] - costs[SHORT_BLOCKS]
    if growth > margin:
        return (f"{n_requests} allocate + free pairs cost {costs[long_blocks]:.2f} s of CPU time on "
                f"{long_blocks:,} blocks and {costs[SHORT_BLOCKS]:.2f} s on {SHORT_BLOCKS:,}: {growth:.2f} s more "
                f"(at most {margin:g} s allowed): their cost must not grow with num_blocks (O(len(tokens))). "
                f"{COST_CAUSE}")
    return None
