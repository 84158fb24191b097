"""One limit of concurrent gradings for the whole test run, however many pytest workers run it.

Every batch of gradings (the catalogs and corpora of tests/suites/, the hostile campaigns of
tests/hostile/) holds a slot while a grading runs: at most `count()` gradings run at once across
all pytest-xdist workers, instead of one pool per worker (two workers each grading three at a time
put six CPU-bound processes on two cores). A slot is an exclusive `flock` on one of `count()` files
in a folder of this user's, so it is released when its holder ends, however it ends.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

# The cores the tests may use (the Makefile's TEST_JOBS); every core of the machine when unset.
SLOTS_ENV = "TEST_JOBS"
# How often a grading waiting for a slot looks again.
POLL_SECONDS = 0.05


def count() -> int:
    """How many gradings may run at once: $TEST_JOBS, else the machine's cores."""
    value = os.environ.get(SLOTS_ENV, "")
    return max(1, int(value)) if value.isdigit() else max(1, os.cpu_count() or 1)


def _folder() -> Path:
    # Per user, not per run: two test runs of one user on one machine share its cores too; a folder
    # another user made in /tmp would not be writable here.
    folder = Path(tempfile.gettempdir()) / f"kvlab-test-slots-{os.geteuid()}"
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


@contextlib.contextmanager
def grading_slot() -> Iterator[None]:
    """Hold one of the `count()` slots for the duration of the block (waits until one is free)."""
    folder = _folder()
    files = [open(folder / f"slot-{i}", "a+b") for i in range(count())]  # noqa: SIM115 - closed below
    try:
        while True:
            for held in files:
                try:
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                try:
                    yield
                finally:
                    fcntl.flock(held, fcntl.LOCK_UN)
                return
            time.sleep(POLL_SECONDS)
    finally:
        for file in files:
            file.close()
