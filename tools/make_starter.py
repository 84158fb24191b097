"""Generate `starter/<id>/*.py` from `solutions/<id>/*.py` (the Makefile's `make starter`).

Each solution file goes through nbgrader's own `ClearSolutions` preprocessor, wrapped in a one-cell
notebook, so the starter is exactly what nbgrader would release: every `BEGIN SOLUTION` ..
`END SOLUTION` region becomes `# YOUR CODE HERE` + `raise NotImplementedError()` at the marker's
indentation. Each of those raise lines is then rewritten to name its function and task,
`raise NotImplementedError("KVCache.update (task kv_cache)")`, so a student's failing test says which
task is still open. Tasks come from the "functions" list of each task in
`assignments/<id>/assignment.json` (read by autograder.assignment): a stub belongs to the
task listing its function, method or enclosing class.

    python -m tools.make_starter [ID ...] [--out DIR]     (default: every assignment)
"""
from __future__ import annotations

import argparse
import ast
import json
import re
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

import nbformat

from autograder.assignment import AssignmentError, Task, discover, load_assignment

with warnings.catch_warnings():
    # nbgrader 0.9.5's gradebook models raise SQLAlchemy 2 deprecation warnings when its package is
    # imported; the gradebook plays no part in clearing solutions.
    warnings.simplefilter("ignore", DeprecationWarning)
    from nbgrader.preprocessors import ClearSolutions

ROOT = Path(__file__).resolve().parent.parent

# The line of nbgrader's python code stub that this tool rewrites; checked against the stub itself.
STUB_RAISE = "raise NotImplementedError()"


class StarterError(Exception):
    """A solution file or task table the starter cannot be generated from; the message says why."""


def check_markers(text: str, filename: str) -> int:
    """The number of solution regions in `text`; StarterError for none or unbalanced markers.

    nbgrader raises on nested or unclosed regions but silently drops a stray END; checking here
    first catches all three and names the line.
    """
    clear = ClearSolutions()
    begin, end = clear.begin_solution_delimeter, clear.end_solution_delimeter
    open_at: int | None = None
    regions = 0
    # Same test order as nbgrader: a line holding both delimiters counts as a BEGIN.
    for number, line in enumerate(text.split("\n"), start=1):
        if begin in line:
            if open_at is not None:
                raise StarterError(f"{filename}:{number}: {begin} inside the region opened at line {open_at}")
            open_at = number
        elif end in line:
            if open_at is None:
                raise StarterError(f"{filename}:{number}: {end} without a {begin} before it")
            open_at = None
            regions += 1
    if open_at is not None:
        raise StarterError(f"{filename}:{open_at}: {begin} is never closed by {end}")
    if regions == 0:
        raise StarterError(f"{filename}: no {begin} / {end} markers, so the starter would ship the whole answer")
    return regions


def clear_solutions(text: str) -> str:
    """`text` with every solution region replaced by nbgrader's code stub."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell(text)],
        metadata={"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}},
    )
    # The cell is plain .py text, not a cell nbgrader marked as a solution cell.
    cleared, _ = ClearSolutions(enforce_metadata=False).preprocess(notebook, {})
    return cleared.cells[0].source


def task_table(tasks: Sequence[Task], filename: str) -> dict[str, str]:
    """Map each name in the tasks' "functions" lists to its task; StarterError for a name listed twice."""
    table: dict[str, str] = {}
    for task in tasks:
        for name in task.functions:
            if name in table:
                raise StarterError(f"{filename}: {name!r} is listed under both task {table[name]!r} and {task.name!r}")
            table[name] = task.name
    return table


def _scopes(tree: ast.Module) -> list[tuple[int, int, str]]:
    """(first line, last line, dotted qualname) of every function and class, outer before inner."""
    scopes: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                qualname = prefix + child.name
                scopes.append((child.lineno, child.end_lineno or child.lineno, qualname))
                visit(child, qualname + ".")
            else:
                visit(child, prefix)

    visit(tree, "")
    return scopes


def _task_of(qualname: str, table: dict[str, str]) -> tuple[str, str] | None:
    """(table name, task) for the most specific of "A.b.c", "A.b", "A" listed in `table`."""
    parts = qualname.split(".")
    for size in range(len(parts), 0, -1):
        name = ".".join(parts[:size])
        if name in table:
            return name, table[name]
    return None


def name_stubs(stubbed: str, table: dict[str, str], filename: str, regions: int) -> tuple[str, set[str]]:
    """Rewrite each stub's raise line to name its qualname and task.

    Returns the new text and the table names that matched a stub. StarterError when a stub lies
    outside every function and class, belongs to no task, or the stubs do not number `regions`.
    """
    stub_lines = ClearSolutions().code_stub["python"].split("\n")
    if stub_lines[-1] != STUB_RAISE:
        raise StarterError(f"nbgrader's python code stub changed to {stub_lines!r}; update tools/make_starter.py")
    try:
        tree = ast.parse(stubbed, filename)
    except SyntaxError as error:
        raise StarterError(f"{filename}: the cleared file is not valid Python ({error}); "
                           "does a solution region cut a statement in half?") from error
    scopes = _scopes(tree)
    lines = stubbed.split("\n")
    used: set[str] = set()
    found = 0
    for index in range(len(lines) - len(stub_lines) + 1):
        indent = re.match(r"\s*", lines[index]).group(0)
        if lines[index:index + len(stub_lines)] != [indent + stub for stub in stub_lines]:
            continue
        found += 1
        raise_index = index + len(stub_lines) - 1
        number = raise_index + 1
        enclosing = [qualname for first, last, qualname in scopes if first <= number <= last]
        if not enclosing:
            raise StarterError(f"{filename}:{number}: a solution region outside every function and class")
        qualname = enclosing[-1]
        match = _task_of(qualname, table)
        if match is None:
            raise StarterError(f"{filename}:{number}: the stub in {qualname} belongs to no task; add "
                               f"{qualname.split('.')[0]!r} to the \"functions\" of its task in assignment.json")
        used.add(match[0])
        # json.dumps: a double-quoted literal, the house style, valid Python for these ASCII names.
        lines[raise_index] = f"{indent}raise NotImplementedError({json.dumps(f'{qualname} (task {match[1]})')})"
    if found != regions:
        raise StarterError(f"{filename}: {regions} solution regions but {found} stubs after ClearSolutions")
    return "\n".join(lines), used


def starter_text(solution: str, table: dict[str, str], filename: str) -> tuple[str, set[str]]:
    """The starter for one solution file, and the table names its stubs used."""
    regions = check_markers(solution, filename)
    return name_stubs(clear_solutions(solution), table, filename, regions)


def starters(assignment_id: str, root: Path = ROOT) -> dict[str, str]:
    """File name -> starter text for every `solutions/<id>/*.py`, in name order."""
    try:
        assignment = load_assignment(assignment_id, root)
    except AssignmentError as error:
        raise StarterError(f"{error} (assignment.json lists the tasks the stubs belong to)") from error
    assignment_file = assignment.directory / "assignment.json"
    table = task_table(assignment.tasks, str(assignment_file))
    solution_files = sorted(assignment.solution.glob("*.py"))
    if not solution_files:
        raise StarterError(f"solutions/{assignment_id}/ holds no .py file")
    result: dict[str, str] = {}
    used: set[str] = set()
    for path in solution_files:
        result[path.name], names = starter_text(path.read_text(encoding="utf-8"), table, f"solutions/{assignment_id}/{path.name}")
        used |= names
    unused = sorted(set(table) - used)
    if unused:
        raise StarterError(f"{assignment_file}: \"functions\" lists {', '.join(unused)}, but no stub in "
                           f"solutions/{assignment_id}/ lies in them (a typo, or a renamed function?)")
    return result


def write_starters(assignment_ids: list[str], out: Path, root: Path = ROOT) -> list[Path]:
    """Write `out/<id>/<name>` for every solution file of the assignments; return the paths written."""
    written: list[Path] = []
    for assignment_id in assignment_ids:
        texts = starters(assignment_id, root)
        folder = out / assignment_id
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            # Fixed "\n" endings: the committed starter must not depend on the platform that made it.
            (folder / name).write_text(text, encoding="utf-8", newline="\n")
            written.append(folder / name)
    return written


def main(argv: list[str] | None = None) -> int:
    """Command line: generate the starters, print what was written, exit 1 with the reason on error."""
    parser = argparse.ArgumentParser(prog="python -m tools.make_starter", description=__doc__.split("\n")[0])
    parser.add_argument("ids", nargs="*", help="assignments (default: every assignment)")
    parser.add_argument("--out", type=Path, default=ROOT / "starter", help="output folder (default: starter/)")
    args = parser.parse_args(argv)
    try:
        written = write_starters(args.ids or discover(ROOT), args.out)
    except StarterError as error:
        print(f"make_starter: error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
