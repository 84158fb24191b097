"""Properties of module 6's chunk_keys on generated token lists, chunk sizes and fingerprints.

`keys_given` is a Hypothesis test (run with kvlab.testing.conformance.run_given) that draws a token
list (values from 0 to 2**31 - 1, repeated chunks included), a chunk_size from 1 to 5, a fingerprint,
and one form of the tokens (list, tuple, or an integer array of any dtype that holds the values), and
checks what chunk_keys' docstring states:

- len(tokens) // chunk_size keys, each the fingerprint, ":" and 64 lowercase hex digits;
- the chain, exactly, up to the two freedoms the docstring leaves (compared up to them): the text
  that stands for key i-1 (the whole key or its digest alone) and the fixed width and byte order of
  the token ids (1, 2, 4 or 8 bytes, signed or not, little- or big-endian: whichever gives digest 0);
- the same keys for every form of the same values, and for the first chunks of a longer prompt;
- another fingerprint: every key differs, digest 0 does not;
- ValueError for a chunk_size that is not an int >= 1 (0, negatives, True, False, 2.0, "4", None),
  a fingerprint that is not a non-empty str, float tokens and 2-D tokens.

The contract leaves no more choice than those two, so the public and the hidden suite check the same
properties (the hidden one on more draws); a failure quotes the docstring's sentence.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings, strategies as st

from kvlab.testing.conformance import Outcome, Rule, machine_settings, outcome_of, raised, short

KEYS = "kv_connector.py:chunk_keys"
KEY_RULES: dict[str, Rule] = {
    "keys_count": Rule(KEYS, "A trailing partial chunk gets no key, so len(result) == len(tokens) // chunk_size."),
    "keys_form": Rule(KEYS, "Key i is `fingerprint + \":\" + digest_i`, digest_i a lowercase hex SHA-256 digest (64 "
                       "characters) chained as in lecture 7:"),
    "keys_chain": Rule(KEYS, "digest_i is the SHA-256 of the UTF-8 text that stands for key i-1 (the whole key, as the "
                        "reference hashes it, or digest_{i-1} alone: the tests accept either) followed by the token "
                        "ids of chunk i written as fixed-width integers (one width and byte order of your choice);"),
    "keys_values": Rule(KEYS, "Keys depend only on the integer values (not on the sequence type or integer dtype)"),
    "keys_fingerprint": Rule(KEYS, "another fingerprint changes every key (each starts with it) but not digest_0."),
    "keys_errors": Rule(KEYS, "ValueError for tokens that are not 1-D integers, a chunk_size < 1 or a fingerprint that is "
                         "not a non-empty str, and for a chunk_size that is not an int (True, 2.0, \"4\")."),
}

# The fixed widths and byte orders a student may write token ids in (numpy dtype strings).
WIDTHS = ("<i8", ">i8", "<u8", ">u8", "<i4", ">i4", "<u4", ">u4", "<i2", ">i2", "<u2", ">u2", "i1", "u1")
BAD_CHUNK_SIZES = (0, -1, -4, True, False, 2.0, "4", None)
BAD_FINGERPRINTS = ("", None, b"model")
FINGERPRINTS = ("m", "model-a/s0/float16", "Qwen/Qwen2.5-7B:rev 1")


def fail(call: str, problem: str, rule: Rule) -> str:
    return f"{call}: {problem}.\nThe rule ({rule.where}): \"{rule.sentence}\""


def chain_width(keys: list[str], tokens: list[int], chunk: int, fingerprint: str) -> str | None:
    """A width (WIDTHS) and parent text under which every key follows the chain, or None."""
    digests = [key[len(fingerprint) + 1:] for key in keys]
    for width in WIDTHS:
        info = np.iinfo(np.dtype(width))
        if tokens[:len(keys) * chunk] and not info.min <= min(tokens[:len(keys) * chunk]) <= max(
                tokens[:len(keys) * chunk]) <= info.max:
            continue
        chunks = [np.asarray(tokens[i * chunk:(i + 1) * chunk], dtype=width).tobytes() for i in range(len(keys))]
        for whole in (True, False):
            parent, fits = b"", True
            for key, digest, data in zip(keys, digests, chunks):
                if hashlib.sha256(parent + data).hexdigest() != digest:
                    fits = False
                    break
                parent = (key if whole else digest).encode()
            if fits:
                return width
    return None


def keys_problem(chunk_keys: Callable[..., Any], tokens: list[int], chunk: int, fingerprint: str, form: str,
                 other: str) -> str | None:
    """None if chunk_keys keeps every property above on these arguments; else the message."""
    call = f"chunk_keys({short(tokens, 80)}, {chunk}, {fingerprint!r})"
    got = outcome_of(lambda: chunk_keys(tokens, chunk, fingerprint))
    if got.error is not None or not isinstance(got.value, list):
        return fail(call, f"it {got.describe()}; the rule gives a list of {len(tokens) // chunk} keys",
                    KEY_RULES["keys_form"])
    keys = got.value
    if len(keys) != len(tokens) // chunk:
        return fail(call, f"it returned {len(keys)} keys for {len(tokens)} tokens in chunks of {chunk}",
                    KEY_RULES["keys_count"])
    for index, key in enumerate(keys):
        digest = key[len(fingerprint) + 1:] if isinstance(key, str) and key.startswith(fingerprint + ":") else ""
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
            return fail(call, f"key {index} is {short(key, 100)}", KEY_RULES["keys_form"])
    if chain_width(keys, tokens, chunk, fingerprint) is None:
        return fail(call, "its digests are not the chain for any fixed width and byte order of the token ids (1, 2, 4 "
                          "or 8 bytes), with the whole key i-1 or digest i-1 before chunk i (nothing before chunk 0)",
                    KEY_RULES["keys_chain"])
    forms = {"a tuple": tuple(tokens), form: np.asarray(tokens, dtype=form) if form != "list" else list(tokens),
             "its first full chunks": list(tokens[:len(keys) // 2 * chunk])}
    for label, value in forms.items():
        again = outcome_of(lambda value=value: chunk_keys(value, chunk, fingerprint))
        want = keys[:len(keys) // 2] if label == "its first full chunks" else keys
        if again.error is not None or again.value != want:
            return fail(f"chunk_keys(<the same values as {label}>, {chunk}, {fingerprint!r})",
                        f"it {again.describe()}; the keys of the list are {short(want, 150)}", KEY_RULES["keys_values"])
    theirs = outcome_of(lambda: chunk_keys(tokens, chunk, other))
    if theirs.error is not None or not isinstance(theirs.value, list) or len(theirs.value) != len(keys):
        return fail(f"chunk_keys(<the same tokens>, {chunk}, {other!r})", f"it {theirs.describe()}",
                    KEY_RULES["keys_fingerprint"])
    if keys and (any(a == b for a, b in zip(keys, theirs.value))
                 or theirs.value[0][len(other) + 1:] != keys[0][len(fingerprint) + 1:]):
        return fail(f"chunk_keys(<the same tokens>, {chunk}, {other!r})", f"its keys {short(theirs.value, 150)} against "
                    f"{short(keys, 150)} for {fingerprint!r}", KEY_RULES["keys_fingerprint"])
    return None


def errors_problem(chunk_keys: Callable[..., Any], tokens: list[int], bad_chunk: Any, bad_fingerprint: Any
                   ) -> str | None:
    """None if every stated ValueError of chunk_keys is raised; else the message."""
    for args in ((tokens, bad_chunk, "m"), (tokens, 2, bad_fingerprint), ([t + 0.5 for t in tokens] or [0.5], 1, "m"),
                 (np.asarray(tokens * 2 or [1, 2], dtype=np.int64).reshape(2, -1), 1, "m")):
        got: Outcome = outcome_of(lambda args=args: chunk_keys(*args))
        if not raised(got, ValueError):
            shown = ", ".join(short(arg, 60) for arg in args)
            return fail(f"chunk_keys({shown})", f"it {got.describe()}; the rule gives ValueError", KEY_RULES["keys_errors"])
    return None


def every_error_problem(student: Any) -> str | None:
    """errors_problem for every bad chunk_size and fingerprint at once, on one token list: every run
    checks them all, whatever its draws."""
    chunk_keys = student.kv_connector.chunk_keys
    return next(filter(None, (errors_problem(chunk_keys, [3, 1, 4, 1, 5], chunk, fingerprint) for chunk, fingerprint
                              in zip(BAD_CHUNK_SIZES, BAD_FINGERPRINTS * 3))), None)


def keys_given(student: Any, examples: int) -> Callable[[], None]:
    """A Hypothesis test of chunk_keys' properties on `examples` draws (see the module docstring)."""
    chunk_keys = student.kv_connector.chunk_keys
    base = machine_settings(max_examples=examples, steps=1)

    @settings(base)
    @given(values=st.lists(st.one_of(st.integers(0, 200), st.integers(0, 2**31 - 1)), min_size=0, max_size=14),
           repeat=st.booleans(), chunk=st.integers(1, 5), fingerprint=st.sampled_from(FINGERPRINTS),
           form=st.sampled_from(["list", "int64", "int32", ">i4", "uint64"]), bad_chunk=st.sampled_from(BAD_CHUNK_SIZES),
           bad_fingerprint=st.sampled_from(BAD_FINGERPRINTS))
    def properties(values: list[int], repeat: bool, chunk: int, fingerprint: str, form: str, bad_chunk: Any,
                   bad_fingerprint: Any) -> None:
        tokens = values[:chunk] * 3 + values if repeat else values
        other = fingerprint + "2"
        problem = keys_problem(chunk_keys, tokens, chunk, fingerprint, form, other) or errors_problem(
            chunk_keys, tokens, bad_chunk, bad_fingerprint)
        assert problem is None, problem

    return properties
