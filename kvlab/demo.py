"""Shared helpers for the lecture demos (`assignments/<id>/demo.py`, run by `make demo`).

A demo runs on a student's files: `submission_dir` picks the folder, `load_module` imports a file
from it by path, and `skip_if_not_implemented` turns a stub's NotImplementedError into one clear
line ("greedy_decode is not implemented yet (task greedy_decode): table (2) skipped") so the demo
goes on with its other tables. Any other exception is a bug in the student's code and keeps its
traceback: that is what the student needs to fix it.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, TypeVar

from kvlab.testing import SubmissionError, missing_file_message

T = TypeVar("T")


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


def parse_submission(description: str, module_file: str, fallback: Path,
                     argv: Sequence[str] | None = None) -> Path:
    """Parse a demo's command line (`--submission DIR`) and return the folder (see `submission_dir`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--submission", metavar="DIR", default=None,
        help=f"folder holding {module_file} (default: $KVLAB_SUBMISSION, else the current directory "
             f"if it holds {module_file}, else {fallback})",
    )
    return submission_dir(parser.parse_args(argv).submission, module_file, fallback)


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


def _student_frames(traceback: TracebackType | None, module: ModuleType) -> list[str]:
    """Names of the traceback's frames that run in `module`'s file, innermost first.

    A method is named "Class.method", except `__init__`, which is named after its class.
    """
    source = Path(module.__file__).resolve()
    names = []
    while traceback is not None:
        frame = traceback.tb_frame
        if Path(frame.f_code.co_filename).resolve() == source:
            name = frame.f_code.co_name
            owner = frame.f_locals.get("self")
            if owner is not None and getattr(type(owner), "__module__", None) == module.__name__:
                name = type(owner).__name__ if name == "__init__" else f"{type(owner).__name__}.{name}"
            names.append(name)
        traceback = traceback.tb_next
    return names[::-1]


def not_implemented_message(error: NotImplementedError, module: ModuleType, tasks: Mapping[str, str],
                            skipped: str) -> str:
    """"<function> is not implemented yet (task <task>): <skipped>".

    The function is the innermost one of the student's that belongs to a task in `tasks` (name ->
    task; a class's name covers its methods), so a stub reached through the student's own helper,
    or through another function of theirs, is still named and its task given.
    """
    names = _student_frames(error.__traceback__, module)
    for name in names:
        task = tasks.get(name) or tasks.get(name.split(".")[0])
        if task is not None:
            return f"{name} is not implemented yet (task {task}): {skipped}"
    return f"{names[0] if names else 'a function'} is not implemented yet: {skipped}"


class Attempt:
    """What `skip_if_not_implemented` saw: `message` is the line it made, or None if nothing was skipped."""

    def __init__(self) -> None:
        self.message: str | None = None

    @property
    def skipped(self) -> bool:
        return self.message is not None


@contextmanager
def skip_if_not_implemented(module: ModuleType, tasks: Mapping[str, str], skipped: str,
                            echo: bool = True) -> Iterator[Attempt]:
    """Run the block; if a stub raises NotImplementedError, make one line saying which, and go on.

    The rest of the block is skipped, so put in it everything that needs the student's result.
    The line is printed at once (`echo`), or left in the yielded `Attempt` for the caller to print
    where it belongs (below a table whose row it cost).
    """
    attempt = Attempt()
    try:
        yield attempt
    except NotImplementedError as error:
        attempt.message = not_implemented_message(error, module, tasks, skipped)
        if echo:
            print(attempt.message)


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T, float]:
    """(fn(*args, **kwargs), wall-clock seconds it took)."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start
