"""Public tests of your BlockManager inside the course's engine (task serving). Run: make test TASK=serving.

`kvlab.serving.engine.run_requests` serves requests with your manager and reports the tokens, the
logits, and how many prompt positions went through the model (`kvlab.counter`).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kvlab.model import TINY, generate, init_params
from kvlab.serving.engine import run_requests
from kvlab.testing.compare import LOGIT_ATOL

SYSTEM = [int(t) for t in np.random.default_rng(0).integers(0, TINY.vocab, size=13)]
REQUESTS = [{"prompt": SYSTEM + [1, 2], "max_tokens": 4}, {"prompt": SYSTEM + [3], "max_tokens": 4},
            {"prompt": SYSTEM[:8], "max_tokens": 2}]


@pytest.mark.task("serving", points=1)
@pytest.mark.parametrize(("caching", "positions"), [(True, [15, 2, 4]), (False, [15, 14, 8])])
def test_prefill_positions_and_logits(student: Any, caching: bool, positions: list[int]) -> None:
    # The engine's calls on a 4-block pool: a refused admission retried, a preempted request admitted again.
    small = student.block_manager.BlockManager(4, 4, caching)
    first = small.allocate("r0", list(range(8)))
    assert first is not None and type(first[1]) is list and all(type(b) is int for b in first[1]), (
        f"allocate('r0', 8 tokens) returned {first!r:.100}: the engine reads plain data back, so block_ids must be a "
        "list of ints")
    assert small.allocate("r1", list(range(100, 112))) is None, "12 tokens need 3 blocks; 2 are free: None"
    small.free("r0")
    for step, call, cause in (
            ("allocate('r1', 12 tokens) again after it returned None and r0 was freed",
             lambda: small.allocate("r1", list(range(100, 112))),
             "a None allocate changes nothing (no request registered): the engine retries the request under its id"),
            ("allocate('r0', 9 tokens) after free('r0') (a preempted request comes back)",
             lambda: small.allocate("r0", list(range(9))),
             "free forgets the request (it leaves req_to_blocks): the engine admits it again under its id")):
        try:
            answer = call()
        except ValueError as error:
            pytest.fail(f"{step} raised ValueError: {error}. Likely cause: {cause}", pytrace=False)
        assert answer is not None, f"{step} returned None; enough blocks are free"
        if "r1" in step:
            small.free("r1")
    manager = student.block_manager.BlockManager(32, 4, caching)
    # As the grader runs it: the engine (and the counting of its forward calls) outside your code.
    got, _ = student.call("kvlab.counter:run_counted", run_requests, manager, TINY, REQUESTS, sequential=True,
                          keep_logits=True)
    assert got["prefill_positions"] == positions, (
        f"with caching {'on' if caching else 'off'} the prompts should run {positions} positions through the model "
        f"(the uncached suffix: 3 blocks of the 13-token system prompt are shared; the 8-token prompt is fully "
        f"cached, so its last block is recomputed); got {got['prefill_positions']}")
    params = init_params(TINY, 0)
    for index, request in enumerate(REQUESTS):
        _, step_logits = generate(params, TINY, np.asarray([request["prompt"]]), request["max_tokens"])
        diff = max(float(np.abs(np.asarray(a) - b[0]).max()) for a, b in zip(got["logits"][index], step_logits))
        assert diff <= LOGIT_ATOL, f"request {index}'s logits differ from the dense forward by {diff:.3g}"
    assert manager.num_free_blocks == 32, (
        f"after all requests every block is free (cached blocks with ref_cnt 0 are free too: they can be evicted); "
        f"num_free_blocks is {manager.num_free_blocks}")
