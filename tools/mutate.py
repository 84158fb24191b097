"""Mutation testing of an assignment's tests (`make mutate A=<id>`).

Mutates only the code between `# BEGIN SOLUTION` / `# END SOLUTION` of each file of
`solutions/<id>/`, one small change at a time, and runs the hidden suite (`autograder/hidden/<id>`)
and the public suite (`assignments/<id>/tests`) against a copy of the solution folder holding that
change, in-process as students and the repository's tests run them (`pytest -p kvlab.testing
--submission DIR --noconftest --assert=plain -x`). A mutant is killed when a suite fails (or
cannot be collected), killed by timeout when a run outlasts `--timeout`, and survives when the
suite passes. Prints both kill rates over the non-equivalent mutants and every survivor.

Operators (the classic ones; the name is part of each mutant's id):
  compare      a comparison swapped (< to <= and >=, == to !=, in to not in, is to is not, ...)
  arith        an arithmetic operator swapped (+ to -, * to /, // to / and *, ...), also in `x += y`
  constant     an integer constant +1 and -1 (so 0 <-> 1 too), True <-> False
  negate       a condition of if / while / x-if-c-else-y negated; a `not` or unary minus removed
  boolop       and <-> or
  statement    a statement replaced by `pass`
  return-none  `return x` becomes `return None`
  slice        a slice bound +1 and -1
  loop-control break <-> continue
  drop-arg     one argument left out of a call of a function, class or method the solution defines
Docstrings and f-strings (error messages) are left alone. A mutant whose code is the same syntax
tree as the original or as an earlier mutant is dropped, so each mutant is a distinct program.

A mutant's id, `<file>:<operator>:<digest>:<index>`, names what it changes, not where: the digest
covers the whole source lines the change touches, before and after, and the index counts the
mutants of that file with the same operator and lines. An edit elsewhere in the file (a docstring, a
new helper) leaves every id alone; only an edit of the mutated lines themselves retires one. Equivalent mutants (no test could tell them from the reference) are
listed with the reason in `autograder/mutants/<id>.equivalent.json` ({id: reason}); they are not
run and not counted, and an entry that matches no mutant any more is reported as stale.

mutmut and cosmic-ray were evaluated and do not fit this layout: mutmut 3 rewrites whole modules
into trampolines that need mutmut importable by the code under test (the student's worker), and
runs one test command; cosmic-ray mutates the files in place and runs one test command per
session. Neither restricts mutations to the solution markers nor tests a copy of the folder
against two suites.

    python -m tools.mutate lecture02 [--jobs N] [--limit N] [--file F] [--mutant ID ...] [--only hidden|public]
                                     [--timeout S] [--json OUT]

The suites run in this process's environment: lecture 7's hidden tests on Mooncake's real trace
skip unless KVLAB_MOONCAKE_DIR (or ../shared/data/mooncake) holds it, and their run then takes
about four times longer.

Exit status 0 whenever the sweep ran; 1 when the reference solution does not pass a suite (every
mutant would then count as killed) or an option is wrong.

One module on purpose (over 400 lines): one tool, `make mutate`; its docstring is the tool's manual, and
generating the mutants and running them share the Mutant and its id: neither half is used without the
other.
"""
from __future__ import annotations

import argparse
import hashlib
import ast
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "# BEGIN SOLUTION", "# END SOLUTION"
SUITES = ("hidden", "public")

# Replacements per operator class. Comparisons: the boundary shift and the opposite direction,
# the two classic off-by-one and inverted-test bugs; the rest: the negation.
COMPARE_SWAPS: dict[type[ast.cmpop], tuple[type[ast.cmpop], ...]] = {
    ast.Lt: (ast.LtE, ast.GtE), ast.LtE: (ast.Lt, ast.Gt), ast.Gt: (ast.GtE, ast.LtE),
    ast.GtE: (ast.Gt, ast.Lt), ast.Eq: (ast.NotEq,), ast.NotEq: (ast.Eq,), ast.In: (ast.NotIn,),
    ast.NotIn: (ast.In,), ast.Is: (ast.IsNot,), ast.IsNot: (ast.Is,),
}
ARITH_SWAPS: dict[type[ast.operator], tuple[type[ast.operator], ...]] = {
    ast.Add: (ast.Sub,), ast.Sub: (ast.Add,), ast.Mult: (ast.Div,), ast.Div: (ast.Mult,),
    ast.FloorDiv: (ast.Div, ast.Mult), ast.Mod: (ast.FloorDiv,), ast.Pow: (ast.Mult,),
}

# A suite's run status: the first two count as killed.
KILLED, TIMEOUT, SURVIVED, ERROR = "killed", "timeout", "survived", "error"
# pytest exit codes: 1 tests failed, 2 interrupted (a collection error: the module does not import),
# 3 internal error (raised from the submission while the plugin loads it). 4 (usage) and 5 (no
# tests) are the tool's fault, not the mutant's.
KILLING_CODES = (1, 2, 3)
# Seconds the reference solution's run may take; a mutant's run may take TIMEOUT_FACTOR times as
# long plus TIMEOUT_MARGIN (the machine may be busy), unless --timeout says otherwise.
REFERENCE_TIMEOUT = 600
TIMEOUT_FACTOR, TIMEOUT_MARGIN = 10, 10
# Output lines kept from a run that ended in an error, to tell why.
ERROR_LINES = 15


@dataclass(frozen=True)
class Mutant:
    """One change to one solution file.

    `original` / `mutated`: the source lines the change touches, before and after (stripped).
    `text`: the whole mutated file.
    """

    id: str
    file: str
    line: int
    col: int
    operator: str
    original: str
    mutated: str
    text: str = field(repr=False)


@dataclass
class Result:
    """A mutant's outcome: status per suite run (see KILLED ...) and, for errors, the output's tail."""

    mutant: Mutant
    equivalent: str | None = None  # the reason, when listed as equivalent (then nothing is run)
    status: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    detail: str = ""


def solution_lines(text: str) -> set[int]:
    """1-based numbers of the lines strictly between each BEGIN / END SOLUTION marker pair."""
    inside: set[int] = set()
    start = None
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() == BEGIN:
            start = number
        elif line.strip() == END and start is not None:
            inside.update(range(start + 1, number))
            start = None
    return inside


def own_names(folder: Path) -> set[str]:
    """Functions, classes and methods the solution's files define: the student's own helpers."""
    names: set[str] = set()
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return names


class Source:
    """A file's text with conversions from AST positions (UTF-8 byte columns) to string offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        """String offset of 1-based `line`, UTF-8 byte column `col`."""
        return self.starts[line - 1] + len(self.lines[line - 1].encode()[:col].decode())

    def span(self, node: ast.AST) -> tuple[int, int]:
        """String offsets [start, end) of `node`'s source."""
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        """`node`'s source text."""
        start, end = self.span(node)
        return self.text[start:end]


# A proposed change: operator name, the node whose position names it, and (start, end, new text).
Change = tuple[str, ast.AST, tuple[int, int, str]]


def _replaced(source: Source, node: ast.AST, new: str) -> tuple[int, int, str]:
    """An edit putting `new` in place of `node`'s source."""
    start, end = source.span(node)
    return start, end, new


def _expression(source: Source, node: ast.expr, mutated: ast.expr) -> tuple[int, int, str]:
    """An edit putting `mutated` in place of the expression `node`, parenthesized so that the
    surrounding operators keep binding the way they did (a*b in x-a*b turned to a+b must not
    become x-a+b)."""
    return _replaced(source, node, f"({ast.unparse(mutated)})")


def _with(node: ast.AST, **fields: object) -> ast.AST:
    """A shallow copy of `node` with `fields` replaced."""
    clone = copy.copy(node)
    for name, value in fields.items():
        setattr(clone, name, value)
    return clone


def _is_docstring(node: ast.stmt, parent: ast.AST) -> bool:
    """True for the string expression opening a module, class or function body."""
    body = getattr(parent, "body", None)
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str) and isinstance(body, list) and bool(body) and body[0] is node)


def _changes(source: Source, node: ast.AST, parent: ast.AST, helpers: set[str]) -> Iterator[Change]:
    """Every mutation of `node` itself (not of its children)."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            for swap in COMPARE_SWAPS.get(type(op), ()):
                ops = [*node.ops[:i], swap(), *node.ops[i + 1:]]
                yield "compare", node, _expression(source, node, _with(node, ops=ops))  # type: ignore[arg-type]
    elif isinstance(node, ast.BinOp):
        for swap in ARITH_SWAPS.get(type(node.op), ()):
            yield "arith", node, _expression(source, node, _with(node, op=swap()))  # type: ignore[arg-type]
    elif isinstance(node, ast.AugAssign):
        for swap in ARITH_SWAPS.get(type(node.op), ()):
            yield "arith", node, _replaced(source, node, ast.unparse(_with(node, op=swap())))
    elif isinstance(node, ast.BoolOp):
        swap = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", node, _expression(source, node, _with(node, op=swap))  # type: ignore[arg-type]
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        yield "negate", node, _replaced(source, node, f"({source.segment(node.operand)})")
    elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
        yield "constant", node, _replaced(source, node, repr(not node.value))
    elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        for value in (node.value + 1, node.value - 1):
            yield "constant", node, _replaced(source, node, f"({value!r})" if value < 0 else repr(value))
    elif isinstance(node, ast.Slice):
        for bound in (node.lower, node.upper):
            if bound is not None:
                for sign in "+-":
                    yield "slice", bound, _replaced(source, bound, f"({source.segment(bound)} {sign} 1)")
    elif isinstance(node, ast.Call):
        name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if name in helpers:
            for i in range(len(node.args)):
                yield "drop-arg", node, _replaced(source, node, ast.unparse(_with(node, args=node.args[:i] + node.args[i + 1:])))
            for i in range(len(node.keywords)):
                kept = node.keywords[:i] + node.keywords[i + 1:]
                yield "drop-arg", node, _replaced(source, node, ast.unparse(_with(node, keywords=kept)))
    # A test that is already `not x` is covered by removing the `not`.
    if isinstance(node, (ast.If, ast.While, ast.IfExp)) and not (
            isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):
        yield "negate", node.test, _replaced(source, node.test, f"not ({source.segment(node.test)})")
    if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        yield "return-none", node, _replaced(source, node, "return None")
    if isinstance(node, (ast.Break, ast.Continue)):
        yield "loop-control", node, _replaced(source, node, "continue" if isinstance(node, ast.Break) else "break")
    if isinstance(node, ast.stmt) and not isinstance(node, ast.Pass) and not _is_docstring(node, parent):
        yield "statement", node, _replaced(source, node, "pass")


def _walk(node: ast.AST, parent: ast.AST) -> Iterator[tuple[ast.AST, ast.AST]]:
    """(node, parent) pairs in source order, f-strings (messages) not entered."""
    yield node, parent
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.JoinedStr):
            yield from _walk(child, node)


def _stripped(block: str) -> str:
    """`block` with each line stripped of its indentation."""
    return "\n".join(line.strip() for line in block.splitlines())


def _touched(source: Source, start: int, end: int, new: str) -> tuple[str, str]:
    """The whole lines an edit touches, stripped: before, after."""
    first = source.text.rfind("\n", 0, start) + 1
    last = source.text.find("\n", end)
    last = len(source.text) if last < 0 else last
    return _stripped(source.text[first:last]), _stripped(source.text[first:start] + new + source.text[end:last])


def mutants_of(text: str, file: str, helpers: set[str]) -> list[Mutant]:
    """Every distinct mutant of the code between the solution markers of `text` (the file `file`).

    `helpers`: names whose calls lose an argument (drop-arg). Deterministic: the same text gives the
    same mutants, in source order, with the same ids.
    """
    source = Source(text)
    inside = solution_lines(text)
    tree = ast.parse(text)
    seen = {ast.dump(tree)}
    per_change: Counter[tuple[str, str]] = Counter()
    found = []
    for node, parent in _walk(tree, tree):
        lines = range(getattr(node, "lineno", 0), getattr(node, "end_lineno", 0) + 1)
        if not lines or not set(lines) <= inside:
            continue
        for operator, at, (start, end, new) in _changes(source, node, parent, helpers):
            mutated = text[:start] + new + text[end:]
            try:
                shape = ast.dump(ast.parse(mutated))
            except SyntaxError:
                continue
            if shape in seen:
                continue
            seen.add(shape)
            before, after = _touched(source, start, end, new)
            digest = hashlib.sha256(f"{before}\n=>\n{after}".encode()).hexdigest()[:12]
            index = per_change[operator, digest]
            per_change[operator, digest] += 1
            found.append(Mutant(f"{file}:{operator}:{digest}:{index}", file,
                                at.lineno, at.col_offset, operator, before, after, mutated))  # type: ignore[attr-defined]
    return found


def generate(folder: Path) -> list[Mutant]:
    """The mutants of every .py file of a solution folder, file by file in name order."""
    helpers = own_names(folder)
    return [mutant for path in sorted(folder.glob("*.py"))
            for mutant in mutants_of(path.read_text(encoding="utf-8"), path.name, helpers)]


def equivalents_path(assignment: str) -> Path:
    """Where the assignment's equivalent mutants are listed, beside its bug catalog."""
    return REPO / "autograder" / "mutants" / f"{assignment}.equivalent.json"


def load_equivalents(assignment: str) -> dict[str, str]:
    """{mutant id: why no test can kill it}; empty when the file does not exist."""
    path = equivalents_path(assignment)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@dataclass(frozen=True)
class Runner:
    """Runs one suite against a submission folder, in-process, the way students' `make test` does."""

    tests: Path
    timeout: float
    # Folders the tests import helpers from: the hidden tests import the public folder's diagnosis
    # helpers, which the grader has on sys.path because it collects both folders.
    imports: tuple[Path, ...] = ()

    def command(self, submission: Path) -> list[str]:
        """The pytest command line: stop at the first failure, since one is enough to kill."""
        # The hypothesis plugin costs half a second per run; leave it out where no test imports it.
        uses_hypothesis = any("hypothesis" in path.read_text(encoding="utf-8") for path in self.tests.glob("*.py"))
        return [sys.executable, "-m", "pytest", "-p", "kvlab.testing", "--submission", str(submission),
                "--noconftest", "--assert=plain", "-q", "-p", "no:cacheprovider", "-x",
                *(() if uses_hypothesis else ("-p", "no:hypothesispytest")), str(self.tests)]

    def run(self, submission: Path, log: Path) -> tuple[str, str]:
        """(status, the output's tail when the status is ERROR)."""
        with log.open("wb") as out:
            # A session of its own, so a timeout ends the processes the tests started too.
            process = subprocess.Popen(self.command(submission), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1",
                                            "PYTHONPATH": os.pathsep.join(map(str, self.imports))})
            try:
                code = process.wait(self.timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
                return TIMEOUT, ""
        if code == 0:
            return SURVIVED, ""
        if code in KILLING_CODES:
            return KILLED, ""
        tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-ERROR_LINES:]
        return ERROR, f"pytest exited with {code}:\n" + "\n".join(tail)


def run_mutant(result: Result, solution: Path, runners: dict[str, Runner], scratch: Path) -> Result:
    """Fill in `result`: both suites (or the chosen one) against a copy of the solution folder holding its mutant."""
    folder = Path(tempfile.mkdtemp(prefix="mutant-", dir=scratch))
    try:
        submission = folder / "submission"
        shutil.copytree(solution, submission, ignore=shutil.ignore_patterns("__pycache__"))
        (submission / result.mutant.file).write_text(result.mutant.text, encoding="utf-8")
        begun = time.monotonic()
        for suite, runner in runners.items():
            result.status[suite], detail = runner.run(submission, folder / f"{suite}.log")
            result.detail += detail
        result.seconds = time.monotonic() - begun
        return result
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def rate(results: Sequence[Result], suite: str) -> tuple[int, int]:
    """(killed, counted) for one suite over the non-equivalent mutants; runs that errored are not counted."""
    statuses = [r.status[suite] for r in results if r.equivalent is None and suite in r.status]
    counted = [s for s in statuses if s != ERROR]
    return sum(s in (KILLED, TIMEOUT) for s in counted), len(counted)


def percent(killed: int, counted: int) -> str:
    """`killed/counted (p%)`."""
    return f"{killed}/{counted} ({100 * killed / counted:.1f}%)" if counted else "0/0 (-)"


def describe(mutant: Mutant) -> str:
    """A survivor for the listing: id, then the lines before (-) and after (+)."""
    lines = [f"  {mutant.id}"]
    lines += [f"      - {line}" for line in mutant.original.splitlines()]
    lines += [f"      + {line}" for line in mutant.mutated.splitlines()]
    return "\n".join(lines)


def report(results: Sequence[Result], suites: Sequence[str], stale: Sequence[str], write: Callable[[str], None]) -> None:
    """The kill rates (overall and per file), timeouts, errors, survivors per suite, stale equivalents."""
    equivalent = sum(r.equivalent is not None for r in results)
    write(f"\n{len(results)} mutants, {equivalent} listed as equivalent (not run)")
    files = sorted({r.mutant.file for r in results})
    for suite in suites:
        by_file = ", ".join(f"{f} {percent(*rate([r for r in results if r.mutant.file == f], suite))}" for f in files)
        timeouts = sum(r.status.get(suite) == TIMEOUT for r in results)
        write(f"{suite} kill rate: {percent(*rate(results, suite))}  [{by_file}]; {timeouts} killed by timeout")
    for r in results:
        if ERROR in r.status.values():
            write(f"error (not counted): {r.mutant.id}\n{r.detail}")
    for suite in suites:
        survivors = [r.mutant for r in results if r.status.get(suite) == SURVIVED]
        write(f"\nsurvivors of the {suite} suite ({len(survivors)}):")
        write("\n".join(describe(m) for m in survivors) or "  none")
    for entry in stale:
        write(f"stale equivalent entry (matches no mutant): {entry}")


def reference_runner(solution: Path, tests: Path, timeout: float | None, log: Path,
                     imports: tuple[Path, ...] = ()) -> Runner | None:
    """The Runner of a suite for the mutants, or None when the reference solution does not pass it
    (every mutant would then look killed). Without a `timeout`, the reference's time sets it."""
    begun = time.monotonic()
    status, detail = Runner(tests, REFERENCE_TIMEOUT, imports).run(solution, log)
    if status != SURVIVED:
        print(f"{tests.relative_to(REPO)} on {solution.relative_to(REPO)}: {status}\n{detail}")
        return None
    return Runner(tests, timeout or TIMEOUT_FACTOR * (time.monotonic() - begun) + TIMEOUT_MARGIN, imports)


def write_json(path: Path, assignment: str, results: Sequence[Result], suites: Sequence[str], stale: Sequence[str]) -> None:
    """The sweep's results as JSON: rates per suite, stale equivalent entries, every mutant (its file's text aside)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rates = {suite: dict(zip(("killed", "counted"), rate(results, suite))) for suite in suites}
    entries = [{**{k: v for k, v in asdict(r.mutant).items() if k != "text"}, "equivalent": r.equivalent,
                "status": r.status, "seconds": round(r.seconds, 2), "detail": r.detail} for r in results]
    path.write_text(json.dumps({"assignment": assignment, "rates": rates, "stale_equivalents": list(stale),
                                "mutants": entries}, indent=1) + "\n", encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sweep (see the module docstring); 0 when it ran."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("assignment", help="assignment id, e.g. lecture02")
    parser.add_argument("--jobs", type=int, default=2, help="mutants tested at a time (default 2)")
    parser.add_argument("--limit", type=int, help="test only the first N mutants that are not listed as equivalent")
    parser.add_argument("--file", help="mutate only this file of the solution folder, e.g. paged_kv.py")
    parser.add_argument("--only", choices=SUITES, help="run only this suite")
    parser.add_argument("--mutant", action="append", metavar="ID",
                        help="run only this mutant (its id as the sweep prints it; repeatable), e.g. to re-check survivors")
    parser.add_argument("--timeout", type=float,
                        help="seconds a suite run may take before the mutant counts as killed by timeout "
                             "(default: 10 times the reference solution's run, plus 10)")
    parser.add_argument("--json", type=Path, help="write the results there as JSON")
    args = parser.parse_args(argv)

    solution = REPO / "solutions" / args.assignment
    tests = {"hidden": REPO / "autograder" / "hidden" / args.assignment,
             "public": REPO / "assignments" / args.assignment / "tests"}
    if not solution.is_dir() or not all(path.is_dir() for path in tests.values()):
        parser.error(f"{args.assignment}: needs {solution.relative_to(REPO)} and its public and hidden tests")
    if args.file and not (solution / args.file).is_file():
        parser.error(f"{args.file} is not a file of {solution.relative_to(REPO)}")
    suites = [args.only] if args.only else list(SUITES)

    everything = generate(solution)
    equivalents = load_equivalents(args.assignment)
    stale = sorted(set(equivalents) - {m.id for m in everything})
    unknown = sorted(set(args.mutant or ()) - {m.id for m in everything})
    if unknown:
        parser.error(f"no such mutant of {args.assignment}: {', '.join(unknown)}")
    chosen = [m for m in everything if args.file in (None, m.file) and (not args.mutant or m.id in args.mutant)]
    results = [Result(m, equivalent=equivalents.get(m.id)) for m in chosen]
    to_run = [r for r in results if r.equivalent is None][:args.limit]
    if args.limit is not None:
        running = {r.mutant.id for r in to_run}
        results = [r for r in results if r.equivalent is not None or r.mutant.id in running]

    with tempfile.TemporaryDirectory(prefix="kvlab-mutate-") as scratch:
        runners = {}
        for suite in suites:
            imports = (tests["public"],) if suite == "hidden" else ()
            runner = reference_runner(solution, tests[suite], args.timeout, Path(scratch) / f"reference-{suite}.log",
                                      imports)
            if runner is None:
                print(f"the reference solution does not pass the {suite} suite; nothing to measure")
                return 1
            runners[suite] = runner
        print(f"{args.assignment}: {len(to_run)} mutants to run ({len(everything)} in all), suites {', '.join(suites)}, "
              f"timeouts {', '.join(f'{s} {r.timeout:.0f} s' for s, r in runners.items())}, {args.jobs} at a time",
              flush=True)
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(run_mutant, r, solution, runners, Path(scratch)) for r in to_run]
            for done, future in enumerate(as_completed(futures), 1):
                finished = future.result()
                states = " ".join(f"{s} {finished.status[s]}" for s in suites)
                print(f"[{done}/{len(to_run)}] {finished.mutant.id}: {states} ({finished.seconds:.1f} s)", flush=True)

    report(results, suites, stale, print)
    if args.json:
        write_json(args.json, args.assignment, results, suites, stale)
    return 0


if __name__ == "__main__":
    sys.exit(main())
