"""The module-6 engine's scheduler: which requests hold KV blocks, which wait, and who gives way.

The scheduler is the engine's only caller of the block manager, and checks every answer against
the manager's contract (`kvlab.serving.manager_contract`) before using it. Its policy is vLLM's at
its simplest:

- Admission (`admit`), at most one request per engine step, first come, first served: the head of
  the waiting queue asks the manager for blocks (`allocate`); a request that does not fit waits,
  and blocks the ones behind it.
- Decode (`reserve_decode`): before each running request's next token, `append_tokens`; when no
  block is free, the most recently admitted request is preempted (`preempt`, vLLM's recompute
  preemption: its blocks are freed, it goes back to the front of the waiting queue, and is prefilled
  again from its prompt and output so far, which its own freed blocks usually still cache).
- A finished or aborted request's blocks go back to the manager (`finish`, `abort`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvlab.serving.manager_contract import check_allocation, check_new_blocks, check_refusal, plain_int


@dataclass
class RequestState:
    """One request's state in the engine.

    `tokens`: the prompt followed by the output so far. `block_ids`: the engine's copy of the
    manager's answer, position order. `kv_length`: the positions whose KV is in the pool.
    `num_cached`: the tokens the manager reported as cached at (the last) admission. `num_loaded`:
    the positions after those that the KV connector filled at (the last) admission.
    `num_cached + num_loaded` is what vLLM reports as the request's cached tokens (prefix-cache hits
    and tokens loaded through the KV connector both count). `prefill_positions`: token positions run
    through `forward` while prefilling (all admissions). `logits`: the logits that chose each output
    token, when kept.
    """

    request_id: str
    prompt: list[int]
    max_tokens: int
    stop_token_ids: tuple[int, ...] = ()
    output: list[int] = field(default_factory=list)
    block_ids: list[int] = field(default_factory=list)
    kv_length: int = 0
    num_cached: int = 0
    num_loaded: int = 0
    prefill_positions: int = 0
    preemptions: int = 0
    finish_reason: str | None = None
    logits: list[np.ndarray] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output


class Scheduler:
    """The waiting queue and the running requests (admission order) over one block manager.

    `num_blocks`, `block_size`: the manager's, read once. `preemptions`: every preemption so far.
    """

    def __init__(self, manager: Any) -> None:
        self.manager = manager
        self.num_blocks = plain_int(manager.num_blocks, "manager.num_blocks")
        self.block_size = plain_int(manager.block_size, "manager.block_size")
        self.waiting: deque[RequestState] = deque()
        self.running: list[RequestState] = []
        self.preemptions = 0

    def add(self, request: RequestState) -> None:
        self.waiting.append(request)

    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    def admit(self) -> RequestState | None:
        """The head of the waiting queue, now running with its blocks; None when none waits or it does not fit."""
        if not self.waiting:
            return None
        request = self.waiting[0]
        answer = self.manager.allocate(request.request_id, request.tokens)
        if answer is None:
            check_refusal(request.request_id, len(request.tokens), len(self.running), self.block_size,
                          self.num_blocks)
            return None
        num_computed, block_ids = check_allocation(answer, request.request_id, len(request.tokens),
                                                   self.block_size, self.num_blocks)
        request.block_ids, request.num_cached, request.kv_length = block_ids, num_computed, num_computed
        request.num_loaded = 0
        self.waiting.popleft()
        self.running.append(request)
        return request

    def reserve_decode(self, request: RequestState) -> bool:
        """Blocks for the request's newest token, preempting the newest running requests while none is free.

        False when the request is no longer running (it was preempted earlier in this step) or had
        to be preempted itself.
        """
        if request not in self.running:
            return False
        while True:
            new = self.manager.append_tokens(request.request_id, [request.output[-1]])
            if new is not None:
                request.block_ids.extend(check_new_blocks(new, request.request_id, request.kv_length,
                                                          len(request.block_ids), self.block_size,
                                                          self.num_blocks))
                return True
            victim = self.running[-1]
            self.preempt(victim)
            if victim is request:
                return False

    def preempt(self, request: RequestState) -> None:
        """Free a running request's blocks and put it back at the front of the waiting queue."""
        self.manager.free(request.request_id)
        self.running.remove(request)
        request.block_ids, request.kv_length = [], 0
        request.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(request)

    def finish(self, request: RequestState) -> None:
        """A running request produced its last token: its blocks go back to the manager."""
        self.running.remove(request)
        self.manager.free(request.request_id)

    def abort(self, request: RequestState) -> None:
        """Drop a request wherever it is; a running one's blocks go back to the manager."""
        if request in self.running:
            self.running.remove(request)
            self.manager.free(request.request_id)
        elif request in self.waiting:
            self.waiting.remove(request)
