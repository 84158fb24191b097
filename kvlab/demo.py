"""The runner of the lecture demos (`demo.py`: `make demo` in a student's folder runs it on their files).

A demo is its tables: functions that take the student's files and print. `run` does the rest: it
parses the command line (`--submission DIR`, plus any option the demo adds), imports the student's
modules, calls the tables in order with a blank line between them, and turns a stub into one line
instead of a traceback. The line names the stub and its task, read from the stub's own message
(the starter's stubs raise `NotImplementedError("KVCache.update (task kv_cache)")`):

    KVCache is not implemented yet (task kv_cache): row 'batch 4' skipped

`student.skip(...)` skips a row (or a column, or a note) inside a table; a stub that escapes a table
skips the rest of it, with a line naming the table by the tag its docstring starts with ("(2) ..."
-> "table (2) skipped").
Any other exception is a bug in the student's code and keeps its traceback: that is what the
student needs to fix it. A whole demo, as `assignments/<id>/demo.py`:

    \"\"\"Lecture N demo: what it shows, run on your kv_memory.py.\"\"\"
    import sys
    from pathlib import Path

    # Run as a script, only this file's folder is on sys.path: add the folder that holds kvlab/.
    sys.path.insert(0, str(next(p for p in Path(__file__).resolve().parents if (p / "kvlab").is_dir())))

    from kvlab.demo import Student, run  # before numpy: it sets the BLAS threads
    from kvlab.tables import format_table

    def table_sizes(student: Student) -> None:
        \"\"\"(1) Bytes per token of three models.\"\"\"
        rows, notes = [], []
        for layers in (16, 32, 80):
            with student.skip(f"row '{layers} layers' skipped") as attempt:
                rows.append([layers, student.kv_memory.bytes_per_token(layers)])
            notes += attempt.notes
        print(format_table("(1) Bytes per token", ["layers", "bytes"], rows, notes=notes))

    if __name__ == "__main__":
        sys.exit(run(__file__, __doc__, modules=["kv_memory"], tables=[table_sizes]))

The submission folder is the first of: --submission, $KVLAB_SUBMISSION, the current directory if it
holds the last of `modules`, else `solutions/<id>/` beside kvlab/ (in the course repository, the
reference solution). Exit 2 when a file is missing or does not import: the message names the folder
searched, what was expected there and what was found.
"""
from __future__ import annotations

# First, before numpy loads (so import kvlab.demo first): one BLAS thread, as the server runs.
import kvlab.blas  # noqa: F401

import argparse  # noqa: E402
import os  # noqa: E402
import importlib.util  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator, Sequence  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType, TracebackType  # noqa: E402
from typing import Any, TypeVar  # noqa: E402

from kvlab.submission import SubmissionError, missing_file_message  # noqa: E402

T = TypeVar("T")

# The starter's stub message (tools/make_starter.py): "<qualname> (task <task>)".
STUB_MESSAGE = re.compile(r"^(?P<name>[\w.]+) \(task (?P<task>[\w-]+)\)$")
# A table's docstring starts with its tag, "(2a) ...": the skip line names the table by it.
TABLE_TAG = re.compile(r"\s*(\([\w.]+\))")


def submission_dir(explicit: str | None, module_file: str, fallback: Path) -> Path:
    """The folder holding the student's files.

    The first of: `explicit` (the --submission argument), $KVLAB_SUBMISSION, the current directory
    if it holds `module_file` (a student running the demo in their own folder), else `fallback`
    (in the repository: the reference solution).
    """
    if explicit:
        return Path(explicit)
    if os.environ.get("KVLAB_SUBMISSION"):
        return Path(os.environ["KVLAB_SUBMISSION"])
    if (Path.cwd() / module_file).is_file():
        return Path.cwd()
    return fallback


def load_module(directory: Path, name: str) -> ModuleType:
    """Import `directory/name.py` by its path as the module `name`.

    By path, so no other `name.py` on sys.path can shadow it; its folder goes on sys.path so the
    student's own helper modules import too. SubmissionError when the file is missing or its import
    fails (the message names what was expected and what was found).
    """
    directory = Path(directory).resolve()
    path = directory / f"{name}.py"
    if not path.is_file():
        raise SubmissionError(missing_file_message(directory, path.name))
    if str(directory) not in sys.path:
        sys.path.insert(0, str(directory))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as a normal import would be (dataclasses and pickling look it up).
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise SubmissionError(f"{path.name} could not be imported: {type(error).__name__}: {error}") from error
    return module


def _student_frames(traceback: TracebackType | None, modules: Sequence[ModuleType]) -> list[str]:
    """Names of the traceback's frames that run in one of `modules`' files, innermost first.

    A method is named "Class.method", except `__init__`, which is named after its class.
    """
    files = {Path(module.__file__).resolve() for module in modules}
    names = []
    while traceback is not None:
        frame = traceback.tb_frame
        if Path(frame.f_code.co_filename).resolve() in files:
            name = frame.f_code.co_name
            owner = frame.f_locals.get("self")
            if owner is not None and any(type(owner).__module__ == m.__name__ for m in modules):
                name = type(owner).__name__ if name == "__init__" else f"{type(owner).__name__}.{name}"
            names.append(name)
        traceback = traceback.tb_next
    return names[::-1]


def not_implemented_message(error: NotImplementedError, modules: Sequence[ModuleType], skipped: str) -> str | None:
    """"<function> is not implemented yet (task <task>): <skipped>", or None if no student code raised it.

    The function and task come from the stub's message ("KVCache.__init__ (task kv_cache)" names
    KVCache). A student's own `raise NotImplementedError` carries no task: the line names the
    innermost public function of theirs that raised it (a private helper's caller). None when no
    frame of the traceback is in the student's files: then it is not a stub but a bug elsewhere.
    """
    names = _student_frames(error.__traceback__, modules)
    if not names:
        return None
    stub = STUB_MESSAGE.match(str(error))
    if stub:
        return f"{stub['name'].removesuffix('.__init__')} is not implemented yet (task {stub['task']}): {skipped}"
    public = [name for name in names if not any(part.startswith("_") for part in name.split("."))]
    return f"{(public or names)[0]} is not implemented yet: {skipped}"


class Attempt:
    """What `Student.skip` saw: `message` is the line it made, or None if nothing was skipped."""

    def __init__(self) -> None:
        self.message: str | None = None

    @property
    def skipped(self) -> bool:
        return self.message is not None

    @property
    def notes(self) -> list[str]:
        """[message] when something was skipped, else []: for a table's notes."""
        return [self.message] if self.message is not None else []


class Student:
    """The student's files, loaded for a demo: `student.kv_decode` is the module kv_decode.py.

    `student.directory` is their folder, `student.args` the parsed command line (with the options
    the demo added), `student.skip(...)` the stub guard.
    """

    def __init__(self, directory: Path, modules: dict[str, ModuleType], args: argparse.Namespace) -> None:
        self.directory = directory
        self.modules = modules
        self.args = args

    def __getattr__(self, name: str) -> ModuleType:
        modules = self.__dict__.get("modules", {})
        if name not in modules:
            raise AttributeError(f"the demo loaded no module {name!r}; it loaded {', '.join(modules)}")
        return modules[name]

    @contextmanager
    def skip(self, skipped: str, *, echo: bool = False) -> Iterator[Attempt]:
        """Run the block; if a stub raises NotImplementedError, make one line saying which, and go on.

        The rest of the block is skipped, so put in it everything that needs the student's result.
        The line is left in the yielded `Attempt` for the caller to print where it belongs (below
        the table whose row it cost), or printed at once with `echo=True`.
        """
        attempt = Attempt()
        try:
            yield attempt
        except NotImplementedError as error:
            attempt.message = not_implemented_message(error, list(self.modules.values()), skipped)
            if attempt.message is None:
                raise
            if echo:
                print(attempt.message)


def _table_label(table: Callable[..., Any]) -> str:
    tag = TABLE_TAG.match(table.__doc__ or "")
    return f"table {tag[1]}" if tag else table.__name__


def _library_root(demo_file: Path) -> Path:
    """The nearest folder at or above the demo's that holds kvlab/ (the repository or a student bundle)."""
    return next((folder for folder in demo_file.parents if (folder / "kvlab").is_dir()), demo_file.parent)


def run(demo_file: str | Path, doc: str | None, *, modules: Sequence[str],
        tables: Sequence[Callable[[Student], object]],
        options: Callable[[argparse.ArgumentParser], None] | None = None,
        argv: Sequence[str] | None = None) -> int:
    """Run a demo: parse its command line, load `modules`, print `tables`; the exit status.

    demo_file: the demo's `__file__` (its folder's name is the assignment id, for the fallback
    solution). doc: its `__doc__` (the first line heads the output, the first paragraph is --help's
    description). modules: the student's module names in import order (a file that imports
    another of theirs by name comes after it). options: adds the demo's own arguments to the
    parser; the tables read them from `student.args`.
    """
    demo_file = Path(demo_file).resolve()
    summary = (doc or demo_file.stem).strip()
    fallback = _library_root(demo_file) / "solutions" / demo_file.parent.name
    files = ", ".join(f"{name}.py" for name in modules)
    parser = argparse.ArgumentParser(description=summary.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--submission", metavar="DIR", default=None,
        help=f"folder holding {files} (default: $KVLAB_SUBMISSION, else the current directory if it "
             f"holds {modules[-1]}.py, else {fallback})",
    )
    if options is not None:
        options(parser)
    args = parser.parse_args(argv)
    directory = submission_dir(args.submission, f"{modules[-1]}.py", fallback)
    try:
        loaded = {name: load_module(directory, name) for name in modules}
    except SubmissionError as error:
        print(f"error: in {directory.resolve()}: {error}", file=sys.stderr)
        if directory == fallback:
            print(f"(no --submission DIR, no $KVLAB_SUBMISSION, and the current folder {Path.cwd()} holds no "
                  f"{modules[-1]}.py: run the demo in the folder that holds your files, or name it with --submission)",
                  file=sys.stderr)
        return 2
    student = Student(directory.resolve(), loaded, args)
    print(f"{summary.splitlines()[0]}\nYour files: {student.directory}\n")
    for table in tables:
        with student.skip(f"{_table_label(table)} skipped", echo=True):
            table(student)
        print()
    return 0


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """(fn(*args, **kwargs), wall-clock seconds it took)."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start
