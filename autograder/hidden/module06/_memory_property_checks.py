"""Properties of module 6's kv_memory functions on generated configs, edge values included.

`memory_given` is a Hypothesis test (run with kvlab.testing.conformance.run_given) that draws a
config of each kind (MHA without num_key_value_heads, GQA, MQA with its own head_dim, MLA, fields
set to None), then now and then puts one field, or one argument, at an edge value the module
docstring names: absent, None, 0, negative, True, False, a float, a str. `expected` is the
docstring's formula and rules, computed here: ValueError for every count that is not a positive int
(a bool is not one), the MLA branch exactly when kv_lora_rank is present and not None, the defaults
of num_key_value_heads and head_dim, a derived head_dim of 0 refused; the one freedom stated (a
config with num_key_value_heads and head_dim whose num_attention_heads is missing or bad: the count
or a ValueError) is compared up to it, and so is a field present with a bad value that the rule does
not read (hidden_size beside a head_dim, heads in an MLA config): the count or a ValueError.
kv_values_per_token_per_layer, kv_bytes_per_token, kv_cache_gib and max_batch are each compared with
it, value and type (a plain int; a float for GiB).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hypothesis import given, settings, strategies as st

from kvlab.testing.conformance import machine_settings, outcome_of

MODULE = "kv_memory.py module docstring"
# Edge values of a count (each a ValueError where the count is read), and "absent".
EDGES = (0, -1, True, False, 2.5, "8", None, "absent")
FIELDS = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
          "kv_lora_rank", "qk_rope_head_dim")


class Refused(Exception):
    """The docstring gives ValueError; `free` when a count is accepted too (the stated freedom)."""

    def __init__(self, why: str, free: int | None = None) -> None:
        super().__init__(why)
        self.free = free


def positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refused(f"{name} is {value!r}: not a positive int")
    return value


def field(config: Mapping[str, Any], name: str) -> int:
    if config.get(name) is None:
        raise Refused(f"the required field {name} is missing or None")
    return positive(config[name], name)


def per_layer(config: Mapping[str, Any]) -> int:
    """The docstring's kv_values_per_token_per_layer, or Refused."""
    if config.get("kv_lora_rank") is not None:
        return field(config, "kv_lora_rank") + field(config, "qk_rope_head_dim")
    if config.get("num_key_value_heads") is not None and config.get("head_dim") is not None:
        count = 2 * field(config, "num_key_value_heads") * field(config, "head_dim")
        try:
            field(config, "num_attention_heads")
        except Refused as refused:  # checking it is the student's choice
            raise Refused(str(refused), free=count) from None
        return count
    heads = field(config, "num_attention_heads")
    kv_heads = heads if config.get("num_key_value_heads") is None else field(config, "num_key_value_heads")
    if config.get("head_dim") is None:
        head_dim = field(config, "hidden_size") // heads
        if head_dim < 1:
            raise Refused("hidden_size // num_attention_heads is 0: a derived head_dim must be at least 1")
    else:
        head_dim = field(config, "head_dim")
    return 2 * kv_heads * head_dim


def expected(name: str, config: Mapping[str, Any], args: tuple[Any, ...]) -> Any:
    """What `name`(config, *args) gives by the docstring, or raises Refused."""
    def bytes_per_token(dtype_bytes: Any) -> int:
        checked = positive(dtype_bytes, "dtype_bytes")
        layers = field(config, "num_hidden_layers")
        try:
            return layers * per_layer(config) * checked
        except Refused as refused:
            raise Refused(str(refused), None if refused.free is None else layers * refused.free * checked) from None

    def scaled(make: Callable[[int], Any]) -> Any:
        try:
            return make(bytes_per_token(args[-1]))
        except Refused as refused:
            raise Refused(str(refused), None if refused.free is None else make(refused.free)) from None

    if name == "kv_values_per_token_per_layer":
        return per_layer(config)
    if name == "kv_bytes_per_token":
        return bytes_per_token(args[0])
    if name == "kv_cache_gib":
        seq_len, batch = positive(args[0], "seq_len"), positive(args[1], "batch")
        return scaled(lambda per_token: per_token * seq_len * batch / 2**30)
    seq_len, gpu_bytes, weight_bytes = positive(args[0], "seq_len"), positive(args[1], "gpu_bytes"), args[2]
    if isinstance(weight_bytes, bool) or not isinstance(weight_bytes, int) or weight_bytes < 0:
        raise Refused(f"weight_bytes is {weight_bytes!r}: not an int >= 0")
    return scaled(lambda per_token: max(0, gpu_bytes - weight_bytes) // (per_token * seq_len))


@st.composite
def configs(draw: Any) -> dict[str, Any]:
    """A config of a drawn kind; one time in two, one field at an edge value."""
    heads = draw(st.sampled_from([1, 2, 4, 8, 12]))
    config: dict[str, Any] = {"num_hidden_layers": draw(st.integers(1, 80)), "num_attention_heads": heads,
                              "hidden_size": heads * draw(st.sampled_from([1, 16, 64, 128]))}
    kind = draw(st.sampled_from(["mha", "gqa", "mqa", "mla", "none"]))
    if kind == "gqa":
        config["num_key_value_heads"] = max(1, heads // draw(st.sampled_from([1, 2, 4])))
    elif kind == "mqa":
        config.update(num_key_value_heads=1, head_dim=draw(st.sampled_from([1, 48, 96])))
    elif kind == "mla":
        config.update(kv_lora_rank=draw(st.sampled_from([1, 256, 512])), qk_rope_head_dim=draw(st.sampled_from([1, 64])))
    elif kind == "none":
        config.update(num_key_value_heads=None, head_dim=None, kv_lora_rank=None)
    if draw(st.booleans()):
        name, edge = draw(st.sampled_from(FIELDS)), draw(st.sampled_from(EDGES))
        if edge == "absent":
            config.pop(name, None)
        else:
            config[name] = edge
    return config


def memory_problem(module: Any, name: str, config: dict[str, Any], args: tuple[Any, ...]) -> str | None:
    """None if module.name(config, *args) is what the docstring gives; else the message (which, as every
    hidden message, never gives the expected value)."""
    call = f"{name}({config!r}{''.join(f', {arg!r}' for arg in args)})"
    got = outcome_of(lambda: getattr(module, name)(config, *args))
    try:
        want, free, why = expected(name, config, args), None, ""
    except Refused as refused:
        want, free, why = ValueError, refused.free, str(refused)
    if got.error is not None:
        if isinstance(got.error, ValueError) and (want is ValueError or any(
                value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1)
                for value in config.values())):
            return None  # a present field the rule does not read: checking it is the student's choice
        gives = "the docstring gives ValueError" if want is ValueError else "the docstring gives a count"
        return (f"{call} {got.describe()}; {gives}. The rule ({MODULE}): every count must be a "
                "positive int, required fields are the ones the rule reads")
    if want is ValueError:
        if free is not None and got.value == free and type(got.value) is type(free):
            return None
        return (f"{call} returned {got.value!r}; the docstring gives ValueError ({why}). The rule ({MODULE}): \"a "
                "required field that is missing, None, or not a positive int is a ValueError naming the field.\"")
    if got.value != want or type(got.value) is not type(want):
        gives = f"another value (a {type(want).__name__})"
        return (f"{call} returned {got.value!r} ({type(got.value).__name__}); the docstring's formula gives {gives}. "
                f"The rule: {MODULE} and {name}'s docstring")
    return None


def stated_problem(student: Any, stated: Sequence[tuple[dict[str, Any], int]]) -> str | None:
    """None if kv_bytes_per_token keeps the rules on the `stated` (config, dtype_bytes) pairs; else the first
    message."""
    return next(filter(None, (memory_problem(student.kv_memory, "kv_bytes_per_token", config, (dtype_bytes,))
                              for config, dtype_bytes in stated)), None)


def memory_given(student: Any, examples: int) -> Callable[[], None]:
    """A Hypothesis test of the kv_memory functions on `examples` draws (see the module docstring)."""
    module = student.kv_memory
    counts = st.sampled_from([1, 2, 7, 4096, 0, -3, True, 2.0])

    @settings(machine_settings(max_examples=examples, steps=1))
    @given(config=configs(), dtype_bytes=st.sampled_from([1, 2, 4, 2, 2, 0, -1, True, 2.0]), seq_len=counts,
           batch=counts, gpu=st.sampled_from([10**9, 8 * 10**10, 1, 0, -5, True, 1e9]),
           weights=st.sampled_from([0, 10**6, 2 * 10**9, -1, False, 1.5]))
    def properties(config: dict[str, Any], dtype_bytes: Any, seq_len: Any, batch: Any, gpu: Any, weights: Any) -> None:
        for name, args in (("kv_values_per_token_per_layer", ()), ("kv_bytes_per_token", (dtype_bytes,)),
                           ("kv_cache_gib", (seq_len, batch, dtype_bytes)),
                           ("max_batch", (seq_len, gpu, weights, dtype_bytes))):
            problem = memory_problem(module, name, config, args)
            assert problem is None, problem

    return properties
