"""A student's submission folder as the course's tools see it: the error when a submitted file is
missing or does not import (`SubmissionError`), and the message for a missing file, which names
what the folder holds and the likely mix-up (`missing_file_message`). The demos (`kvlab.demo`),
`make test` (`kvlab.testing`) and the grader all say it the same way.
"""
from __future__ import annotations

from pathlib import Path


class SubmissionError(Exception):
    """A submitted file is missing, misnamed or cannot be imported."""


def missing_file_message(directory: Path, expected: str) -> str:
    """Say what was expected, what was found, and the likely mix-up."""
    found = sorted(p.name for p in Path(directory).iterdir()) if Path(directory).is_dir() else []
    message = f"expected the file {expected} in your submission; found: {', '.join(found) or 'nothing'}."
    stem = expected.lower().removesuffix(".py")
    near = [f for f in found if stem in f.lower().replace("-", "_").replace(" ", "_")]
    if near:
        message += f" Did you mean {near[0]!r}? Rename it to {expected} exactly."
    return message
