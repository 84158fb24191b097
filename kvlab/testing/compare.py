"""Comparison helpers that write the failure messages, and the tolerances of logit comparisons.

Each helper returns None when the values agree, else a message for the student that says what
differed, where, and why.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# Float64 logits from a KV-cached decode and from the no-cache reference differ only by the order
# of floating-point additions (the same dot products, blocked differently), about 1e-14 on the
# course's models. Any real bug (a missing prompt, a wrong position, a stale key) moves logits by
# 1e-3 or more. 1e-9 sits between the two with five orders of magnitude to spare on each side.
LOGIT_ATOL = 1e-9
# The same comparison in float32 (24-bit mantissa, ~1e-7 relative): summation-order differences on
# logits of a few units reach ~1e-6, while real bugs still move them by 1e-3 or more.
FLOAT32_LOGIT_ATOL = 1e-4


def how_off(got: Any, want: int) -> str | None:
    """How an int `got` unequal to `want` is off ("too high" or "too low"); None if `got` is not an int.
    Hidden checks on fixed scripts say this instead of the expected value, which would be a table to replay."""
    if isinstance(got, (int, np.integer)) and not isinstance(got, bool):
        return "too high" if got > want else "too low"
    return None


def shape_problem(name: str, actual: Any, expected_shape: Sequence[int]) -> str | None:
    """Whether `actual` is an ndarray of `expected_shape` (message otherwise)."""
    if not isinstance(actual, np.ndarray):
        return f"{name} should be a numpy array of shape {tuple(expected_shape)}; got {type(actual).__name__}"
    if actual.shape != tuple(expected_shape):
        return f"{name} has shape {actual.shape}; expected {tuple(expected_shape)}"
    return None


def array_difference(name: str, actual: Any, expected: np.ndarray, atol: float = LOGIT_ATOL) -> str | None:
    """Compare an array to the reference: shape first, then the largest difference and where."""
    problem = shape_problem(name, actual, expected.shape)
    if problem:
        return problem
    if not np.issubdtype(actual.dtype, np.number):
        return f"{name} has dtype {actual.dtype}; expected a numeric array like {expected.dtype}"
    if not np.all(np.isfinite(actual)):
        where = tuple(int(i) for i in np.argwhere(~np.isfinite(actual))[0])
        return f"{name} holds {actual[where]} at index {where}; expected {expected[where]:.6g}"
    diff = np.abs(actual.astype(np.float64) - expected)
    if diff.max() <= atol:
        return None
    where = tuple(int(i) for i in np.unravel_index(diff.argmax(), diff.shape))
    return (f"{name} differs from the reference by up to {diff.max():.3g} (tolerance {atol:g}) at index "
            f"{where}: got {actual[where]:.10g}, expected {expected[where]:.10g}")
