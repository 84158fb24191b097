"""What the public and hidden tests of kv_memory.py share: a bytes-per-token count checked, and one
edge case run, each against the expected value and the likely cause the test passes.

The public tests pass hand-derived counts and messages that show them (`reveal=True`); the hidden
tests pass counts computed from the docstring's rule, and their messages say only how a value is
off (`reveal=False`). Every `*_problem` function returns None when the student's value is right,
else the message the student sees.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

BOOL = "bool is not an int here (the module docstring)"
CHECKED_FIRST = ("every argument and required field is checked before anything is computed: a ValueError even "
                 "where the answer would otherwise be 0")
# Relative tolerance of a float answer (kv_cache_gib): the rule's division, in another order.
GIB_RTOL = 1e-12


class Either:
    """The count `value`, or a ValueError: both are accepted (the docstring says so)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __repr__(self) -> str:
        return f"{self.value} or ValueError"


def rule(config: Mapping[str, Any]) -> str:
    """The docstring's rule for this kind of config, in words."""
    if config.get("kv_lora_rank", None) is not None:  # MLA (not the solution's text)
        return "MLA (kv_lora_rank present): num_hidden_layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes"
    return ("2 * num_hidden_layers * num_key_value_heads (absent or None: num_attention_heads) * head_dim (absent "
            "or None: hidden_size // num_attention_heads) * dtype_bytes")


def bytes_problem(student: Any, what: str, config: Mapping[str, Any], dtype_bytes: int, expected: int,
                  cause_of: Callable[[Any], str], reveal: bool) -> str | None:
    """None when kv_bytes_per_token(config, dtype_bytes) is `expected`; else a message naming the likely
    mistake, `cause_of(the student's count)`, with the expected count when `reveal`."""
    call = f"kv_bytes_per_token({what}, dtype_bytes={dtype_bytes})"
    try:
        actual = student.kv_memory.kv_bytes_per_token(dict(config), dtype_bytes)
    except Exception as error:  # a student's exception of any type is a finding
        return (f"{call} raised {type(error).__name__}: {error}; every field it reads is present and a positive "
                f"int (a None field is the same as an absent one), so it must return the count. The rule: {rule(config)}")
    if type(actual) is not int:
        return f"kv_bytes_per_token should return a plain int; got {type(actual).__name__} for {what}"
    if actual == expected:
        return None
    how = f"expected {expected:,}" if reveal else f"which is {'too much' if actual > expected else 'too little'}"
    return f"{call} returned {actual:,}, {how}. Likely cause: {cause_of(actual)}"


def shown(call: str, args: tuple) -> str:
    """The call with its arguments, as the student would write it."""
    return f"{call}({', '.join(map(repr, args))})"


def edge_problem(student: Any, call: str, args: tuple, want: Any, why: str, rule: str,
                 wrong_cause: Callable[[], str], reveal: bool) -> str | None:
    """None when kv_memory.`call`(*args) raises ValueError (`want` ValueError), returns `want` (a count, of
    its type), or either (`want` an Either); else what it did, with `rule` (the docstring's rule the case
    checks) or, for a wrong count, `wrong_cause()`. The expected value is shown only when `reveal`."""
    where = f"{shown(call, args)} ({why})"
    try:
        result = getattr(student.kv_memory, call)(*args)
    except ValueError as error:
        if want is ValueError or isinstance(want, Either):
            return None
        return (f"{where} raised ValueError: {error}; " + (f"expected {want!r}" if reveal else "it is valid input")
                + f". Likely cause: {rule}")
    except Exception as error:  # a student's exception of any type is a finding
        return (f"{where} should {'raise ValueError' if want is ValueError else 'return a count'}; it "
                f"raised {type(error).__name__}: {error}. The rule: {rule}")
    if want is ValueError:
        return f"{where} should raise ValueError; it returned {result!r}. The rule: {rule}"
    if isinstance(want, Either):
        want = want.value
    close = (isinstance(result, (int, float)) and not isinstance(result, bool)
             and abs(result - want) <= GIB_RTOL * abs(want))
    if close and type(result) is type(want):
        return None
    if reveal:
        how = f"expected {want!r} (a {type(want).__name__})"
    else:
        how = (f"a {type(result).__name__}, not a {type(want).__name__}" if close else
               # A factor would give back a small count exactly: only the direction for ints.
               ("more than expected" if result > want else "less than expected") if type(want) is int
               and isinstance(result, (int, float)) else
               f"off by a factor {result / want:.4g}" if isinstance(result, (int, float)) and want else "which is wrong")
    return f"{where} returned {result!r}, {how}. Likely cause: {wrong_cause() if not close else 'the type the docstring gives'}"
