"""What crosses between the grader and the worker: values by value, the student's objects as proxies,
arrays handed back by number instead of their bytes.

The sandbox's other tests: test_sandbox.py (its life: start, close, measurement),
test_sandbox_isolation.py, test_sandbox_failures.py; their student module and fixtures:
tests/support/sandboxes.py.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from autograder.harness.backends import SandboxBackend
from autograder.harness.sandbox import BadValue, Proxy, Sandbox, StudentException, codec, kept
from autograder.harness.sandbox.worker import protocol
# Fixtures, imported by name: pytest finds them in this module's namespace (box needs folders; reset_box is autouse).
from support.sandboxes import box, folders, reset_box, stud
from kvlab import model


# ----- values ---------------------------------------------------------------------------------------

VALUES = [
    None, True, False, 0, -(2**70), 1.5, -0.0, float("inf"), "", "héllo", b"\x00\xff",
    [1, [2, (3, 4)]], (1, "a"), {"a": [1, 2], "b": {"c": None}},
    np.arange(6, dtype=np.int16).reshape(2, 3), np.zeros((0, 3)), np.asfortranarray(np.ones((2, 3))),
    np.array(3.5), np.array([1 + 2j], dtype=np.complex64), np.array([True, False]),
    np.float32(1.5), np.int64(-3), np.uint8(255), np.bool_(True),
    np.float32, np.bool_, np.dtype("float16"), np.dtype(">i4"),
]


def same(a: object, b: object) -> bool:
    """Equal values of exactly the same types (arrays: dtype, shape, values)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or a != a and b != b)
    if isinstance(a, np.generic):
        return a.dtype == b.dtype and a == b
    return a == b


@pytest.mark.parametrize("value", VALUES, ids=lambda v: getattr(v, "__name__", type(v).__name__))
def test_values_round_trip(stud: Proxy, value: object) -> None:
    back = stud.echo(value)
    assert same(back, value), f"sent {value!r} ({type(value).__name__}), got {back!r} ({type(back).__name__})"


def test_nan_and_config_round_trip(stud: Proxy) -> None:
    model = pytest.importorskip("kvlab.model", reason="kvlab.model is not written yet")
    assert math.isnan(stud.echo(float("nan"))), "nan must survive the trip"
    assert stud.kind(model.TINY) == "Config", "a Config must arrive in the worker as a Config"
    back = stud.echo(model.TINY)
    assert type(back) is model.Config and back == model.TINY, f"Config came back as {back!r}"


def test_request_round_trip(stud: Proxy) -> None:
    trace = pytest.importorskip("kvlab.trace", reason="kvlab.trace is not written yet")
    request = trace.Request(arrival=0.5, input_len=700, output_len=10, blocks=(1, 2))
    back = stud.echo(request)
    assert type(back) is trace.Request and back == request, f"Request came back as {back!r}"


def test_array_subclass_comes_back_as_ndarray(stud: Proxy) -> None:
    result = stud.matrix()
    assert type(result) is np.ndarray, f"an ndarray subclass must arrive as a plain ndarray, got {type(result)}"


def test_object_array_from_student_is_refused(stud: Proxy) -> None:
    with pytest.raises(TypeError, match="dtype object") as info:
        stud.object_array()
    assert isinstance(info.value, StudentException), "the refusal must be reported as the student's problem"


@pytest.mark.parametrize(
    "value",
    [
        np.array([1, "a"], dtype=object), lambda x: x, len, object(), {1: "non-str key"},
        np.floating, np.dtype(object),
    ],
    ids=["object-array", "lambda", "builtin", "object", "int-key", "abstract-type", "object-dtype"],
)
def test_trusted_values_that_cannot_cross(stud: Proxy, value: object) -> None:
    with pytest.raises(TypeError, match="cannot"):
        stud.echo(value)


def test_exception_class_cannot_go_back(stud: Proxy) -> None:
    with pytest.raises(TypeError, match="exception class"):
        stud.echo(stud.OutOfBlocks)


# ----- proxies --------------------------------------------------------------------------------------

def test_student_object_is_a_proxy(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(3)
    assert isinstance(b, Proxy), f"a student object must come back as a proxy, got {type(b)}"
    assert (type(b).__name__, type(b).__module__) == ("Box", "stud"), (
        f"a proxy's class must be named after the student's (messages name type(value)), got {type(b)!r}")
    assert type(stud.Box(4)) is type(b), "the proxies of one student class must share their class"
    assert len(b) == 3, "len() must reach the student's __len__"
    assert 2 in b and 5 not in b, "`in` must reach the student's __contains__"
    assert b[1] == 1 and b[-1] == 2, "indexing must reach the student's __getitem__"
    assert list(b) == [0, 1, 2], "iteration must reach the student's __iter__"
    assert b.n == 3 and b.double() == 6, "attributes and methods must be round trips"
    assert repr(b) == "Box(3)" and str(b) == "Box(3)", f"repr/str must be the student's, got {repr(b)!r}"
    assert bool(b) is True, "bool() must reach the student's object (here through __len__)"
    b.n = 5
    assert len(b) == 5, "an attribute write must reach the student's object"
    assert stud.box_double(b) == 10, "a proxy argument must arrive as the worker object it names"
    assert box.call("libpkg:apply_double", b) == 10, "a library call must get the student's object"


def test_a_method_asked_again_is_one_round_trip(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(3)
    assert b.double() == 6, "the first call of a method: its lookup, then the call"
    before = box.requests
    assert b.double() == 6, "the method called again must give the same result"
    assert box.requests - before == 1, f"a method called again took {box.requests - before} round trips, not 1"
    b.rebind()  # an attribute of the instance now shadows the class's method
    assert b.double() == "rebound", "the method is looked up again at every call: the instance's attribute wins"
    b.n = 4
    other = stud.Box(5)
    assert other.double() == 10 and stud.Box(2).n == 2, "another object of the class must not share the shortcut"


@pytest.mark.parametrize("use", ["==", "!=", "bool", "len", "iter", "asarray", "int"])
def test_a_method_used_as_a_value_fails_closed(stud: Proxy, use: str) -> None:
    """Only the worker says an attribute is a method; whatever it says, the shortcut never lets a
    method compare, convert or iterate as if it were a value the test expected."""
    b = stud.Box(3)
    b.double()
    method = b.double
    uses = {"==": lambda: method == 6, "!=": lambda: method != 6, "bool": lambda: bool(method),
            "len": lambda: len(method), "iter": lambda: list(method), "asarray": lambda: np.asarray(method),
            "int": lambda: int(method)}
    with pytest.raises(BadValue, match="is a method of your class"):
        uses[use]()


def test_a_function_of_a_module_is_named_after_its_first_lookup(stud: Proxy, box: Sandbox) -> None:
    """The worker says `stud.later` is a function: from then on `stud.later(...)` is one round trip
    (the worker looks the name up at each use), in later tests and workers too; the name arrives in
    the worker as the function; a plain value of the module still crosses by value at each read."""
    stud.later  # the lookup, once
    for when in ("after its lookup", "after a reset", "after a restart"):
        before = box.requests
        assert stud.later() == "a function", f"the named function must be called {when}"
        assert box.requests - before == 1, f"a call of a named function {when} took {box.requests - before} round trips"
        (box.reset if when == "after its lookup" else box.restart)()
    assert stud.kind(stud.later) == "function", "a named function passed as an argument must arrive as the function"
    assert stud.count() == 1 and stud.CALLS == 1 and stud.CALLS == 1, "a module's int must come by value"
    stud.rebind_later()  # the name now holds an int: it is looked up at the use, and calling it fails
    with pytest.raises(TypeError, match="not callable"):
        stud.later()


def test_a_reset_sends_nothing_when_the_worker_holds_nothing(stud: Proxy, box: Sandbox) -> None:
    """The worker numbers an object only to send it here, and keeps what was sent by number: with
    neither since the last reset, its table is empty and the reset skips the round trip."""
    stud.echo  # its first lookup hands out a reference to the function; later uses name it
    box.reset()
    assert stud.echo([1, "two"]) == [1, "two"], "plain data both ways"
    before = box.requests
    box.reset()
    assert box.requests == before, "a reset after plain data only must not cross"
    b = stud.Box(2)  # a reference: the worker numbered the object
    for holds in ("a reference", "an array sent by number"):
        before = box.requests
        box.reset()
        assert box.requests == before + 1, f"a reset after the worker got {holds} must cross"
        assert stud.echo(np.zeros(1000)).shape == (1000,), "8 kB: sent by number"
    with pytest.raises(ReferenceError):
        len(b)


# ----- arrays handed back by number ------------------------------------------------------------------

@pytest.fixture
def echoed(box: Sandbox, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the worker handed back by number instead of its bytes in this test: "array", "dict" or
    the wire type's class name, one per number (a dict's arrays each after it)."""
    kinds: list[str] = []
    real = kept.Sent.value

    def spy(self: kept.Sent, number: object) -> object:
        value = real(self, number)
        kinds.append({np.ndarray: "array", dict: "dict"}.get(type(value), type(value).__name__))
        return value

    monkeypatch.setattr(kept.Sent, "value", spy)
    return kinds


def test_arrays_passed_back_unchanged_cross_as_their_number(stud: Proxy, echoed: list[str]) -> None:
    arrays = [np.arange(4096.0).reshape(64, 64), np.ones(1000, dtype=np.float32), np.zeros(3)]
    back = stud.echo(arrays)
    assert len(back) == 3 and all(b.dtype == a.dtype and np.array_equal(b, a) for a, b in zip(arrays, back)), (
        "the arrays came back changed")
    assert echoed == ["array", "array"], (f"the two arrays of at least {protocol.ECHO_MIN_BYTES} bytes must come "
                                          f"back as their numbers, the small one as bytes; came back by number: {echoed}")
    back[0][0, 0] = -1.0
    assert arrays[0][0, 0] == 0.0 and stud.echo(arrays)[0][0, 0] == 0.0, (
        "an array handed back by number must be a new array, as one decoded from its bytes is")


def test_a_dict_of_arrays_passed_back_unchanged_crosses_as_one_number(stud: Proxy, echoed: list[str]) -> None:
    params = {"w": np.arange(4096.0).reshape(64, 64), "b": np.ones(1000, dtype=np.float32), "small": np.zeros(3)}
    back = stud.echo(params)
    assert list(back) == list(params), f"the dict came back with keys {list(back)}"
    for name, array in params.items():
        assert back[name].dtype == array.dtype and np.array_equal(back[name], array), f"{name} came back changed"
    assert echoed == ["dict", "array", "array", "array"], (
        f"the dict must come back as one number, its arrays (the small one too) with it; came back: {echoed}")
    back["small"][0] = 5.0
    assert back["small"].flags.writeable and stud.echo(params)["small"][0] == 0.0, (
        "the arrays of a dict handed back by number must be new writable arrays, as decoded ones are")


@pytest.mark.parametrize("change", ["add_key", "drop_key", "move_key", "replace_item", "write_item"])
def test_a_dict_changed_in_the_worker_crosses_by_its_items(stud: Proxy, echoed: list[str], change: str) -> None:
    params = {"w": np.arange(4096.0).reshape(64, 64), "small": np.zeros(3)}
    expected = {k: v.copy() for k, v in params.items()}
    if change == "add_key":
        expected["extra"] = np.zeros(3)
    elif change == "drop_key":
        del expected["w"]
    elif change == "move_key":
        expected["w"] = expected.pop("w")
    elif change == "write_item":
        expected["w"][0, 0] += 1
    back = stud.changed(params, change)
    assert list(back) == list(expected) and all(np.array_equal(back[k], v) for k, v in expected.items()), (
        f"{change}: the dict must come back as it is in the worker, got keys {list(back)}")
    assert "dict" not in echoed, f"{change}: a changed dict came back by number, so as the grader sent it"


def test_a_frozen_wire_type_passed_back_unchanged_is_the_value_sent(stud: Proxy, echoed: list[str]) -> None:
    assert stud.echo(model.TINY) is model.TINY and echoed == ["Config"], (
        f"a Config handed back unchanged must cross as its number, as the very value sent; came back: {echoed}")
    poked = stud.changed(model.TINY, "poke_field")
    assert poked.vocab == model.TINY.vocab + 1 and echoed == ["Config"], (
        "a Config changed in the worker (object.__setattr__) must cross by value, with the change")


def test_remote_functions_get_the_sent_arrays_read_only(stud: Proxy, box: Sandbox,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The weights a worker's forward sends back by number reach the trusted forward as the kept
    arrays themselves (no copy per decode step), read-only, so it cannot change them either."""
    params, tokens = model.init_params(model.TINY, seed=1), np.array([[1, 2, 3]])
    seen: list[bool] = []
    real = model.forward

    def spy(weights: dict[str, np.ndarray], *args: object, **kwargs: object) -> np.ndarray:
        kept_arrays = [id(a) for a in box.objects.sent.arrays.values()]
        seen.extend(id(a) in kept_arrays and not a.flags.writeable for a in weights.values())
        return real(weights, *args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    got = stud.logits(params, model.TINY, tokens)
    assert np.array_equal(got, real(params, model.TINY, tokens)), "the forward run for the worker gave other logits"
    assert seen and all(seen), f"{seen.count(False)} of the {len(seen)} weights reached forward as copies"


def _in_library_local(box: Sandbox, function: Any, *args: Any) -> Any:
    with box.library_local():
        return function(*args)


@pytest.mark.parametrize("local", [
    _in_library_local,
    # What the lecture-2 decode tests use (decode_checks.decoded): the grader's student.run_local.
    lambda box, function, *args: SandboxBackend(box).run_local(function, *args),
], ids=["library_local", "run_local"])
def test_library_local_runs_the_remote_functions_in_the_worker(stud: Proxy, box: Sandbox, local: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside `library_local` the worker's forward is its own copy (no callback, nothing run here);
    outside, and after the block, it calls back again."""
    params, tokens = model.init_params(model.TINY, seed=1), np.array([[1, 2, 3]])
    expected, ran_here = model.forward(params, model.TINY, tokens), []
    real = model.forward
    monkeypatch.setattr(model, "forward", lambda *args, **kwargs: ran_here.append(1) or real(*args, **kwargs))
    got = local(box, stud.logits, params, model.TINY, tokens)
    assert np.array_equal(got, expected) and not ran_here, (
        f"inside library_local the forward ran here {len(ran_here)} time(s); it must run in the worker")
    assert np.array_equal(stud.logits(params, model.TINY, tokens), expected) and ran_here == [1], (
        "after library_local the worker's forward must call back to this process again")


def test_an_array_changed_here_after_it_was_sent_comes_back_as_sent(stud: Proxy, echoed: list[str]) -> None:
    # The request carries a view of the grader's array; what a number names must be a copy of it.
    sent = np.arange(1024.0)
    box = stud.Box(sent)
    sent[:] = -1.0
    back = box.n
    assert echoed and np.array_equal(back, np.arange(1024.0)), "the worker's array is the one that was sent"
    assert back.flags.writeable, "an array handed back by number is writable, as one decoded from bytes is"


@pytest.mark.parametrize("change", ["bump", "reshaped"])
def test_arrays_changed_in_the_worker_cross_as_bytes(stud: Proxy, echoed: list[str], change: str) -> None:
    sent = np.arange(2048.0).reshape(32, 64)
    back = getattr(stud, change)(sent)
    expected = {"bump": np.concatenate([[1.0], np.arange(1.0, 2048.0)]).reshape(32, 64),
                "reshaped": np.arange(2048.0)}[change]
    assert back.shape == expected.shape and np.array_equal(back, expected), (
        f"{change}: the array changed in the worker must come back as it is there, got shape {back.shape}")
    assert not echoed, f"{change}: a changed array came back by number {echoed}, so as the grader sent it"


@pytest.mark.parametrize(("values", "as_one_array"), [
    (list(range(-40, 60)), True), ([2 ** 62] * 64, True), (list(range(63)), False), ([True] * 64, False),
    ([1] * 63 + [2 ** 70], False), ([1] * 63 + [1.5], False),
], ids=["ints", "large-ints", "short", "bools", "beyond-int64", "a-float"])
def test_long_lists_of_ints_come_back_as_one_array(stud: Proxy, monkeypatch: pytest.MonkeyPatch, values: list[object],
                                                   as_one_array: bool) -> None:
    """The worker sends a list of at least INT_LIST_MIN ints as one int64 array (a block table, not a
    tree node per id); anything else in the list, or a shorter one, crosses item by item, exactly."""
    tags: list[str] = []
    real = codec.Decoder.decode

    def spy(self: codec.Decoder, tree: object, depth: int = 0) -> object:
        tags.append(tree[0] if isinstance(tree, list) and tree else "?")  # type: ignore[index]
        return real(self, tree, depth)

    echo = stud.echo  # its reference crosses now, not with the reply below
    monkeypatch.setattr(codec.Decoder, "decode", spy)
    back = echo(values)
    assert back == values and [type(v) for v in back] == [type(v) for v in values], (
        "the list came back with other values or types")
    assert (tags == ["J"]) == as_one_array, f"the reply crossed as {tags[:3]}..., one array expected: {as_one_array}"


def test_numbers_name_nothing_after_a_reset(box: Sandbox, stud: Proxy) -> None:
    stud.echo(np.zeros(4096))
    assert box.objects.sent.arrays, "the array just sent must be kept while the test lasts"
    box.reset()
    assert not box.objects.sent.arrays, "a reset (a new test) must forget the arrays sent before it"


def test_always_equal_object_equals_nothing_trusted(stud: Proxy) -> None:
    sneaky = stud.AlwaysEqual()
    assert isinstance(sneaky, Proxy), "an object with a custom __eq__ must stay a reference"
    for other in (1, None, "x", [1], np.zeros(1)):
        assert not (sneaky == other), f"a student __eq__ must not make a proxy equal to {other!r}"
    assert sneaky == sneaky, "a proxy equals itself"


def test_stale_proxy_after_reset(stud: Proxy, box: Sandbox) -> None:
    b = stud.Box(2)
    box.reset()
    with pytest.raises(ReferenceError):
        len(b)
    assert stud.count() >= 1, "module proxies stay valid across a reset"
