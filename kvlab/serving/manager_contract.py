"""The block manager's contract: what the module-6 engine relies on in every answer of the manager.

The engine computes with the block ids the manager hands out, so it checks each answer before
using it and raises `ManagerError`, saying which value was wrong, rather than computing garbage.
In the grader the manager lives in another process; these checks are all the engine trusts of it.
With n the number of tokens of a request and `block_size`, `num_blocks` the manager's own:

- `manager.num_blocks`, `manager.block_size`: ints >= 1 (read once, when the engine is made).
- `manager.allocate(request_id, tokens)` returns None ("not enough free blocks": the request waits)
  or `(num_computed, block_ids)`:
  - `num_computed`, the leading tokens whose KV the manager reports as cached: an int, a multiple of
    `block_size`, in 0 .. n - 1 (the last token is always computed: the engine needs its logits);
  - `block_ids`: a list (or tuple) of ceil(n / block_size) distinct ints in 0 .. num_blocks - 1,
    the blocks of the request's tokens in position order.
  None is allowed only while another request is running: with none running, every block is free
  or cached, and a request the engine accepted always fits the pool.
- `manager.append_tokens(request_id, [token])`, before the engine computes the KV of the token at
  position p (the request holds h blocks), returns None ("no free block") or the list of new block
  ids: distinct ints in 0 .. num_blocks - 1, as many as the request now needs beyond the h it
  holds, ceil((p + 1) / block_size) - h (0 or 1).
- `manager.free(request_id)`: its answer is not read.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class ManagerError(RuntimeError):
    """The block manager returned something the engine cannot use; the message says what."""


def plain_int(value: Any, what: str) -> int:
    """`value` as an int >= 1 (`manager.num_blocks`, `manager.block_size`)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ManagerError(f"{what} should be an int >= 1; got {value!r}")
    return int(value)


def check_ids(ids: Any, what: str, num_blocks: int) -> list[int]:
    """`ids` as a list of distinct block ids in 0 .. num_blocks - 1; `what` names the answer."""
    if not isinstance(ids, (list, tuple)) or not all(
            isinstance(b, (int, np.integer)) and not isinstance(b, bool) and 0 <= b < num_blocks for b in ids):
        raise ManagerError(f"{what} should be a list of block ids in 0 .. {num_blocks - 1}; got {ids!r:.200}")
    if len(set(ids)) != len(ids):
        raise ManagerError(f"{what} holds a block id twice: {list(ids)!r:.200}")
    return [int(b) for b in ids]


def check_refusal(request_id: str, n_tokens: int, num_running: int, block_size: int, num_blocks: int) -> None:
    """A None from `allocate(request_id, <n_tokens tokens>)` with `num_running` requests running."""
    if num_running == 0:
        raise ManagerError(
            f"allocate({request_id!r}, {n_tokens} tokens) returned None with no request "
            f"running, although the prompt needs {-(-n_tokens // block_size)} of the "
            f"{num_blocks} blocks: every block should be free or cached then")


def check_allocation(answer: Any, request_id: str, n_tokens: int, block_size: int,
                     num_blocks: int) -> tuple[int, list[int]]:
    """`allocate(request_id, <n_tokens tokens>)`'s answer, not None, as (num_computed, block_ids)."""
    what = f"allocate({request_id!r}, {n_tokens} tokens)"
    if not isinstance(answer, (list, tuple)) or len(answer) != 2:
        raise ManagerError(f"{what} should return (num_computed, block_ids) or None; got {answer!r:.200}")
    num_computed, ids = answer
    if isinstance(num_computed, bool) or not isinstance(num_computed, (int, np.integer)) or not (
            0 <= num_computed < n_tokens and num_computed % block_size == 0):
        raise ManagerError(f"{what} returned num_computed {num_computed!r}; expected a multiple of the block size "
                           f"{block_size} in 0 .. {n_tokens - 1} (the last token is always computed)")
    ids = check_ids(ids, f"the block_ids of {what}", num_blocks)
    if len(ids) != -(-n_tokens // block_size):
        raise ManagerError(f"{what} returned {len(ids)} block ids; {n_tokens} tokens need "
                           f"ceil({n_tokens} / {block_size}) = {-(-n_tokens // block_size)}")
    return int(num_computed), ids


def check_new_blocks(new: Any, request_id: str, position: int, num_held: int, block_size: int,
                     num_blocks: int) -> list[int]:
    """`append_tokens(request_id, [token])`'s answer, not None, for the token at `position` of a
    request holding `num_held` blocks: the new block ids."""
    what = f"append_tokens({request_id!r}, 1 token) at position {position}"
    new = check_ids(new, f"the new blocks of {what}", num_blocks)
    want = -(-(position + 1) // block_size) - num_held
    if len(new) != want:
        raise ManagerError(f"{what} returned {len(new)} new blocks; expected {want}: the request holds "
                           f"{num_held} blocks of {block_size} for {position + 1} tokens")
    return new
