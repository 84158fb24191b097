"""How `kvlab.testing.Submission.fresh_call` sends arguments to its new process and the result back.

JSON, with bytes and numeric arrays tagged (base64 of their raw bytes) so that, for example, a chunk
that module 6's `serialize_chunk` wrote in one process can be read in another. Tuples arrive as lists.
"""
from __future__ import annotations

import base64
from typing import Any

import numpy as np

BYTES, ARRAY = "__bytes__", "__ndarray__"


def to_json(value: Any) -> Any:
    """`value` as JSON-ready data: bytes and ndarrays tagged, lists, tuples and dicts item by item."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {BYTES: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.ndarray):
        return {ARRAY: base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii"),
                "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [to_json(item) for item in value]
    if isinstance(value, dict):
        return {str(key): to_json(item) for key, item in value.items()}
    return value


def from_json(value: Any) -> Any:
    """What `to_json` made, back: bytes, writable ndarrays [shape] of their dtype, lists, dicts."""
    if isinstance(value, list):
        return [from_json(item) for item in value]
    if isinstance(value, dict):
        if BYTES in value:
            return base64.b64decode(value[BYTES])
        if ARRAY in value:
            raw = base64.b64decode(value[ARRAY])
            return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()
        return {key: from_json(item) for key, item in value.items()}
    return value
