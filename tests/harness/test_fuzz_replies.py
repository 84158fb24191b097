"""Fuzzing the trusted side with malformed replies.

Whatever the student's process sends, the test that asked fails with a message about the student's
code and grading goes on: a grader fault ("contact the staff") is for the harness failing on its own.

How: the grader runs in a subprocess (this file's `main`) with a reply mangler installed: the sandbox's
`Reader` (which parses every message from the worker) is replaced by one that, after the real parse,
rewrites a chosen message in one of the ways of `KINDS` (a wrong tag, a value of the wrong type, a
wrong sequence number, truncated JSON or array data, an array of a dtype that must not cross or
whose bytes do not fit its shape, a huge value, a reference where data was expected, a stale
reference, a malformed error report, an exception class the test does not expect)
and runs the result through a fresh real `Reader`, so what a malformed message does to the framing is
the real parser's verdict. What reaches the harness is what a hostile worker could send.

Two suites are graded, under every kind:
- `probe`: a synthetic assignment with one test per kind of operation (getattr, call, len, contains,
  getitem, setitem, setattr, iter, next, numpy.asarray, repr, str, bool, a callback from the worker
  into the trusted `forward`, and a trusted `forward` run on a student cache). In each test the mangler
  rewrites one chosen reply of that test's operation: every test must fail, with a readable message.
- the reference solution of lecture02 (whose hidden tests send the worker's `forward` calls back as
  callbacks), with every 11th message rewritten, each time in the next of the kinds: no fault, a
  valid results.json, every failure readable.

One module on purpose (over 400 lines): the grading subprocess runs this file as its script
(`main`), so the mangler it installs and the tests that judge what it rewrote share one table of
kinds (`KINDS`) in the file both sides load.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 900
# The real suite is graded once, its rewrites cycling through the kinds.
MIXED = "mixed"
# lecture02's reference graded with every EVERY-th message from the worker rewritten.
EVERY = 11

# ----- the mangler (runs in the grading subprocess) ------------------------------------------------

# A value the worker could send for each kind, replacing the reply's "value" (None: not a value kind).
HUGE_ITEMS = 50_000


def _other_value(tree: Any) -> list[Any]:
    """A well-formed value of another type than `tree`'s (an int for a str, a str for an int)."""
    return ["S", "7"] if isinstance(tree, list) and tree[:1] == ["I"] else ["I", 7]


def _error(module: str, qualname: str, mro: list[str]) -> dict[str, Any]:
    return {"module": module, "qualname": qualname, "mro": [["builtins", name] for name in mro],
            "message": "from the fuzzer", "traceback": "", "where": ""}


# kind -> how it rewrites (header, blobs, last reference number seen in this test); the header is a
# reply ({"seq", "ok", "value" | "error"}) or a callback ({"seq", "callback", "args", "kwargs"}).
Mangle = Callable[[dict[str, Any], list[bytes], int], tuple[dict[str, Any], list[bytes]]]


def _set_value(header: dict[str, Any], tree: Any) -> dict[str, Any]:
    """`header` with its value (a reply's value, or a callback's first argument) replaced."""
    if "callback" in header:
        return {**header, "args": [tree, *header.get("args", [])[1:]]}
    return {**header, "ok": True, "value": tree}


def _value(header: dict[str, Any]) -> Any:
    return header["args"][0] if "callback" in header and header.get("args") else header.get("value")


KINDS: dict[str, Mangle] = {
    "wrong-tag": lambda h, b, ref: (_set_value(h, ["Z", 1]), b),
    "wrong-type": lambda h, b, ref: (_set_value(h, _other_value(_value(h))), b),
    "wrong-seq": lambda h, b, ref: ({**h, "seq": h.get("seq", 0) + 1}, b),
    # Cut in half: the JSON when there is no blob, else the last blob (an array's bytes).
    "truncated": lambda h, b, ref: (h, b[:-1] + [b[-1][: len(b[-1]) // 2]]) if b else ({**h, "cut": True}, b),
    "huge": lambda h, b, ref: (_set_value(h, ["L", [["I", i] for i in range(HUGE_ITEMS)]]), b),
    "reference": lambda h, b, ref: (_set_value(h, ["R", ref, "builtins.list"]), b),
    "stale-reference": lambda h, b, ref: (_set_value(h, ["R", 10 ** 9, "fuzz.Gone"]), b),
    # An array handed back by a number the grader never gave out (kept.Sent).
    "forged-echo": lambda h, b, ref: (_set_value(h, ["E", 10 ** 9]), b),
    # Arrays cross as raw bytes described in the header: a dtype outside the numeric table (an
    # object array would need a pickle), and a shape its bytes do not fill.
    "array-dtype": lambda h, b, ref: (_set_value(h, ["A", len(b), "|O", [2], "C"]), b + [bytes(16)]),
    "array-shape": lambda h, b, ref: (_set_value(h, ["A", len(b), "<f8", [3, 1], "C"]), b + [bytes(16)]),
    "malformed-error": lambda h, b, ref: ({"seq": h.get("seq"), "ok": False, "error": {"type": 3}}, []),
    "unexpected-exception": lambda h, b, ref: ({"seq": h.get("seq"), "ok": False, "error": _error(
        "builtins", "StopIteration", ["StopIteration", "Exception", "BaseException", "object"])}, []),
}
# Kinds that leave a reply well-formed but change what it says: harmless where nothing is promised
# (the reply to setattr, setitem: a test cannot tell).
VALUE_KINDS = {"wrong-tag", "wrong-type", "huge", "reference", "stale-reference", "forged-echo", "array-dtype",
               "array-shape"}


def _frame(header: dict[str, Any], blobs: list[bytes]) -> bytes:
    from autograder.harness.sandbox.worker.protocol import frame

    cut = header.pop("cut", False)
    data = b"".join(bytes(part) for part in frame(header, blobs))
    if not cut:
        return data
    from autograder.harness.sandbox.worker.protocol import HEADER

    json_length, blob_length = HEADER.unpack_from(data)
    text = data[HEADER.size:HEADER.size + json_length // 2]
    return HEADER.pack(len(text), blob_length) + text + data[HEADER.size + json_length:]


class Mangler:
    """Chooses which messages of the worker to rewrite, and how; records what it did."""

    def __init__(self, kind: str, targets: dict[str, tuple[str, int]], every: int) -> None:
        self.kind, self.targets, self.every = kind, targets, every
        self.ops: list[str] = []  # the requests in flight, innermost last
        self.test = ""
        self.seen: dict[str, int] = {}  # op -> messages of it seen in this test
        self.reference = 1
        self.count = 0
        self.done: list[tuple[str, str, str]] = []  # (test, op, kind) rewritten

    def choose(self, header: dict[str, Any]) -> bool:
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
        if test != self.test:
            self.test, self.seen, self.reference = test, {}, 1
        op = "callback" if "callback" in header else (self.ops[-1] if self.ops else "start-up")
        index = self.seen.get(op, 0)
        self.seen[op] = index + 1
        if op in ("start-up", "reset"):
            chosen = False
        elif self.targets:
            chosen = self.targets.get(test.rsplit("::", 1)[-1]) == (op, index)
        else:
            self.count += 1
            chosen = self.count % self.every == 0
        if chosen:
            kinds = sorted(KINDS)
            self.done.append((test, op, kinds[len(self.done) % len(kinds)] if self.kind == MIXED else self.kind))
        else:  # "reference" answers with an object an earlier message named: a real one, the wrong one
            value = _value(header)
            if isinstance(value, list) and len(value) >= 2 and value[0] == "R" and type(value[1]) is int:
                self.reference = value[1]
        return chosen

    def install(self) -> None:
        from autograder.harness.sandbox import codec, exchange

        mangler = self
        original_round_trip = exchange.Exchange.round_trip

        class MangledReader(codec.Reader):
            def message(self) -> tuple[dict[str, Any], list[memoryview]]:
                header, blobs = super().message()
                if not mangler.choose(header):
                    return header, blobs
                kind = mangler.done[-1][2]
                header, raw = KINDS[kind](dict(header), [bytes(b) for b in blobs], mangler.reference)
                data = _frame(header, raw)
                reader = codec.Reader()
                while reader.wanted() and data:
                    chunk, data = data[:reader.wanted()], data[reader.wanted():]
                    reader.feed(chunk)
                return reader.message()

        def tracked(self: Any, header: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            mangler.ops.append(str(header.get("op", "start-up")))
            try:
                return original_round_trip(self, header, *args, **kwargs)
            finally:
                mangler.ops.pop()

        exchange.Reader = MangledReader  # type: ignore[misc]
        exchange.Exchange.round_trip = tracked  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """python tests/harness/test_fuzz_replies.py JOBS.json: grade each job with its mangler, sandboxed."""
    sys.path.insert(0, str(REPO))
    from autograder.harness.run import run

    jobs = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    mangler = Mangler("wrong-tag", {}, EVERY)
    mangler.install()
    for job in jobs:
        mangler.kind, mangler.count, mangler.done = job["kind"], 0, []
        mangler.targets = {name: tuple(target) for name, target in job["targets"].items()}
        run(job["assignment"], Path(job["submission"]), Path(job["out"]), tests_root=Path(job["tests_root"]))
        Path(job["out"] + ".rewritten").write_text(json.dumps(mangler.done), encoding="utf-8")
    return 0


# ----- the probe assignment -------------------------------------------------------------------------

PROBE_STUDENT = '''
import numpy as np
from kvlab import model


class Box:
    def __init__(self):
        self.items = [1, 2, 3]
        self.name = "box"

    def __len__(self):
        return 3

    def __contains__(self, item):
        return item in self.items

    def __getitem__(self, index):
        return self.items[index]

    def __setitem__(self, index, value):
        self.items[index] = value

    def __iter__(self):
        return iter(self.items)

    def __array__(self, dtype=None, copy=None):
        return np.array(self.items, dtype=dtype)

    def __repr__(self):
        return "Box(1, 2, 3)"

    def __str__(self):
        return "box of 3"

    def __bool__(self):
        return True

    def total(self):
        return sum(self.items)


class Cache:
    """The KV-cache protocol of kvlab.model.forward, by concatenation."""

    def __init__(self):
        self.length = 0
        self.kv = {}

    def update(self, layer, k, v):
        K, V = self.kv.get(layer, (k[:, :0], v[:, :0]))
        self.kv[layer] = (np.concatenate([K, k], axis=1), np.concatenate([V, v], axis=1))
        return self.kv[layer]

    def advance(self, n):
        self.length += n


def logits(tokens):
    params = model.init_params(model.TINY, seed=0)
    return model.forward(params, model.TINY, np.asarray(tokens), cache=Cache())
'''

# test name -> (the operation whose reply is rewritten, which of them in the test (0 first), body).
# The first test also reads the module's __name__ (getattr 0) as the module is imported, and
# `student.fuzz.Box` (getattr 1): the worker says it is a class, so later tests name it without a
# round trip (["Q", "fuzz:Box"]).
PROBES: dict[str, tuple[str, int, str]] = {
    "test_call": ("call", 1, 'assert student.fuzz.Box().total() == 6, "total() should be 6"'),
    "test_getattr": ("getattr", 0, 'assert student.fuzz.Box().name == "box", "Box().name should be box"'),
    # A method asked for a second time is called in one round trip ("callmethod").
    "test_callmethod": ("callmethod", 0, textwrap.dedent('''\
        box = student.fuzz.Box()
        assert box.total() == 6, "total() should be 6"
        assert box.total() == 6, "total() asked again should be 6"''')),
    "test_len": ("len", 0, 'assert len(student.fuzz.Box()) == 3, "len(Box()) should be 3"'),
    "test_contains": ("contains", 0, 'assert 2 in student.fuzz.Box(), "2 should be in Box()"'),
    "test_getitem": ("getitem", 0, 'assert student.fuzz.Box()[1] == 2, "Box()[1] should be 2"'),
    "test_setitem": ("setitem", 0, textwrap.dedent('''\
        box = student.fuzz.Box()
        box[0] = 5
        assert box.total() == 10, "total() after box[0] = 5 should be 10"''')),
    "test_setattr": ("setattr", 0, textwrap.dedent('''\
        box = student.fuzz.Box()
        box.items = [4, 4]
        assert box.total() == 8, "total() after box.items = [4, 4] should be 8"''')),
    # kvlab.paged's seam: an in-place write into an attribute of a student object (paged_step's K/V).
    "test_assign_into": ("assign_into", 0, textwrap.dedent('''\
        from kvlab.paged import assign_into
        box = student.fuzz.Box()
        assign_into(box, "items", 0, 5)
        assert box.total() == 10, "total() after assign_into(box, 'items', 0, 5) should be 10"''')),
    "test_iter": ("iter", 0, 'assert list(student.fuzz.Box()) == [1, 2, 3], "list(Box()) should be [1, 2, 3]"'),
    "test_next": ("next", 1, 'assert list(student.fuzz.Box()) == [1, 2, 3], "list(Box()) should be [1, 2, 3]"'),
    "test_array": ("array", 0, textwrap.dedent('''\
        got = np.asarray(student.fuzz.Box(), dtype=np.float64)
        assert np.array_equal(got, [1.0, 2.0, 3.0]), f"asarray(Box()) should be [1, 2, 3], got {got}"''')),
    "test_repr": ("repr", 0, 'assert repr(student.fuzz.Box()) == "Box(1, 2, 3)", "repr(Box()) is Box(1, 2, 3)"'),
    "test_str": ("str", 0, 'assert str(student.fuzz.Box()) == "box of 3", "str(Box()) is box of 3"'),
    "test_bool": ("bool", 0, 'assert bool(student.fuzz.Box()), "Box() should be true"'),
    "test_callback": ("callback", 0, textwrap.dedent('''\
        got = np.asarray(student.fuzz.logits([[1, 2, 3]]))
        assert got.shape == (1, 3, model.TINY.vocab), f"logits of 3 tokens: shape {got.shape}"''')),
    # forward runs here on the student's cache: reads length (getattr 0), then update (getattr 1, call 1;
    # the next layers' updates are callmethod).
    "test_trusted_forward": ("call", 1, textwrap.dedent('''\
        params = model.init_params(model.TINY, seed=0)
        got = student.call("kvlab.model:forward", params, model.TINY, np.array([[1, 2, 3]]),
                           cache=student.fuzz.Cache())
        assert got.shape == (1, 3, model.TINY.vocab), f"logits of 3 tokens: shape {got.shape}"''')),
}
# Replies whose content no test can see: rewriting their value (not their framing) changes nothing.
UNSEEN = {"setattr", "setitem", "assign_into"}


def probe_tests() -> str:
    header = "import numpy as np\nimport pytest\nfrom kvlab import model\n"
    bodies = [f'\n\n@pytest.mark.task("probe", points=1)\ndef {name}(student):\n{textwrap.indent(body, "    ")}\n'
              for name, (_, _, body) in PROBES.items()]
    return header + "".join(bodies)


def probe_assignment(root: Path) -> Path:
    """assignments/fuzz under root (public tests only); returns the student's folder."""
    spec = {
        "id": "fuzz", "title": "Reply fuzzing probes", "files": ["fuzz.py"],
        "tasks": [{"name": "probe", "title": "one operation each", "points": len(PROBES)}],
        "visibility": {"public": "visible", "hidden": "after_published"}, "call_timeout_seconds": 5,
    }
    (root / "assignments" / "fuzz" / "tests").mkdir(parents=True)
    (root / "assignments" / "fuzz" / "assignment.json").write_text(json.dumps(spec))
    (root / "assignments" / "fuzz" / "tests" / "test_probes.py").write_text(probe_tests())
    (root / "autograder" / "hidden" / "fuzz").mkdir(parents=True)
    submission = root / "submission"
    submission.mkdir()
    (submission / "fuzz.py").write_text(PROBE_STUDENT)
    return submission


# ----- the tests ---------------------------------------------------------------------------------

def readable_problem(output: str) -> str | None:
    """Why a failed test's output is not a readable message about the student's code, or None."""
    if not output.strip():
        return "the output is empty"
    for internal in ("autograder/harness", "worker/main.py", "worker/protocol.py", "the grader raised"):
        if internal in output:
            return f"the output shows the grader's internals ({internal!r})"
    return None


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[dict[str, Any], list[Any]]]:
    """(suite, kind) -> (results.json, the messages rewritten), all graded in one subprocess."""
    root = tmp_path_factory.mktemp("fuzz")
    probes = probe_assignment(root / "probe")
    targets = {name: [op, index] for name, (op, index, _) in PROBES.items()}
    suites = {"probe": ("fuzz", probes, root / "probe", targets),
              "lecture02": ("lecture02", REPO / "solutions" / "lecture02", REPO, {})}
    jobs = [{"assignment": assignment, "submission": str(submission), "tests_root": str(tests_root),
             "kind": kind, "targets": suite_targets, "out": str(root / f"{suite}-{kind}.json")}
            for suite, (assignment, submission, tests_root, suite_targets) in suites.items()
            for kind in (KINDS if suite_targets else [MIXED])]
    (root / "jobs.json").write_text(json.dumps(jobs))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KVLAB_"))}
    done = subprocess.run([sys.executable, __file__, str(root / "jobs.json")], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 0, f"the fuzzing run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return {(job["out"].rsplit("/", 1)[-1].split("-", 1)[0], job["kind"]):
            (json.loads(Path(job["out"]).read_text()), json.loads(Path(job["out"] + ".rewritten").read_text()))
            for job in jobs}


def check_graded_and_readable(results: dict[str, Any], rewritten: list[Any], what: str) -> dict[str, str]:
    """The failed tests' outputs, once results.json is valid, graded and every failure readable."""
    from autograder.harness.results import validate

    validate(results)
    assert results["extra_data"]["status"] == "graded", (
        f"{what}: malformed replies made the grader fail instead of the tests that asked: {results['output'][:500]}"
    )
    assert rewritten, f"{what}: no message was rewritten: the fuzzer tested nothing"
    failed = {t["name"]: t["output"] for t in results["tests"] if t["status"] != "passed"}
    for name, output in failed.items():
        problem = readable_problem(output)
        assert problem is None, f"{what}: {name}: {problem}:\n{output[:1500]}"
    return failed


@pytest.mark.timeout(RUN_TIMEOUT + 60)
def test_the_reference_under_every_kind_of_malformed_reply(
    fuzzed: dict[tuple[str, str], tuple[dict[str, Any], list[Any]]],
) -> None:
    results, rewritten = fuzzed["lecture02", MIXED]
    failed = check_graded_and_readable(results, rewritten, "lecture02")
    assert failed, f"{len(rewritten)} messages rewritten and every test passed"
    unused = sorted(set(KINDS) - {kind for _, _, kind in rewritten})
    assert not unused, f"kinds never applied to lecture02's messages: {unused}"


@pytest.mark.timeout(RUN_TIMEOUT + 60)
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_operation_fails_only_the_test_that_asked(
    fuzzed: dict[tuple[str, str], tuple[dict[str, Any], list[Any]]], kind: str,
) -> None:
    results, rewritten = fuzzed["probe", kind]
    failed = check_graded_and_readable(results, rewritten, f"probe, {kind}")
    hit = {test.rsplit("::", 1)[-1] for test, _, _ in rewritten}
    missed = sorted(set(PROBES) - hit)
    assert not missed, f"{kind}: the probes {missed} never got the reply they target (change PROBES)"
    passed = sorted(set(PROBES) - {name.rsplit("::", 1)[-1] for name in failed})  # results name file::test
    allowed = {name for name, (op, _, _) in PROBES.items() if op in UNSEEN and kind in VALUE_KINDS}
    assert set(passed) <= allowed, (
        f"{kind}: {sorted(set(passed) - allowed)} passed although the reply they use was rewritten"
    )


def worker_operations() -> set[str]:
    """The keys of the worker's `self.ops` table (read from its source: the worker is never imported here)."""
    main = REPO / "autograder" / "harness" / "sandbox" / "worker" / "main.py"
    tree = ast.parse(main.read_text(encoding="utf-8"))
    return {key.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Attribute) and t.attr == "ops" for t in node.targets)
            and isinstance(node.value, ast.Dict)
            for key in node.value.keys if isinstance(key, ast.Constant)}


def test_every_kind_of_operation_is_probed() -> None:
    ops = {op for op, _, _ in PROBES.values()}
    found = worker_operations()
    assert len(found) >= 10, f"the worker's operation table was not found in its source: {found}"
    missing = sorted(found - ops) + [op for op in ("next", "callback") if op not in ops]
    assert not missing, f"operations of the worker no probe rewrites: {missing}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
