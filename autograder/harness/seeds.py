"""The seed of a grading's draws: a keyed hash of the submitted files (`submission_seed`).

The runner (run.py) computes it in the trusted process from the staged copy of the files
assignment.json lists, before the student's code runs, and hands it to `kvlab.testing.draws`
through the plugin: the same files get the same draws at every grading, in every mode and on every
machine; other files get other draws. The hash is keyed by the course's grading key,
`autograder/grading.key` (64 hex digits, committed, carried by the Gradescope package, never by a
student bundle), so that a student who has the hidden tests' source still cannot compute the draws
of a file before submitting it.

    python -m autograder.harness.seeds --new-key     # rotate: a fresh key in autograder/grading.key

docs/design.md ("Seeded draws") says why; README.md, for instructors, when to rotate.
"""
from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import secrets
import sys
import tempfile
from pathlib import Path

from autograder.assignment import REPO_ROOT, Assignment
from autograder.harness.backends import GraderFault
from kvlab.testing.draws import SEED_BITS

# Relative to the repository (or the Gradescope package's root): the package carries it there.
KEY_FILE = "autograder/grading.key"
KEY_PATH = REPO_ROOT / KEY_FILE
KEY_BYTES = 32


def read_key(path: Path = KEY_PATH) -> bytes:
    """The grading key in `path`; GraderFault when it is missing or not 64 hex digits."""
    fix = "`python -m autograder.harness.seeds --new-key` writes one (see README.md, for instructors)"
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise GraderFault(f"the grading key {path} cannot be read ({error}); {fix}") from error
    try:
        key = bytes.fromhex(text)
    except ValueError:
        key = b""
    if len(key) != KEY_BYTES:
        raise GraderFault(f"the grading key {path} is not {2 * KEY_BYTES} hex digits; {fix}")
    return key


def submission_seed(assignment: Assignment, folder: Path, key: bytes) -> int:
    """The seed for the files of `assignment` in `folder`: an HMAC-SHA256 under `key` of the
    assignment's id and, in assignment.json's order, each file's name and bytes (or that it is
    absent: a missing file and an empty one differ), cut to SEED_BITS bits."""
    mac = hmac.new(key, digestmod=hashlib.sha256)
    mac.update(assignment.id.encode() + b"\0")
    for name in assignment.files:
        path = folder / name
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        mac.update(name.encode() + b"\0")
        mac.update(b"absent\0" if data is None else b"%d\0" % len(data) + data)
    return int.from_bytes(mac.digest()[:8], "big") >> (64 - SEED_BITS)


def write_new_key(path: Path = KEY_PATH) -> None:
    """Replace the key in `path` by a fresh random one, atomically."""
    handle, temp = tempfile.mkstemp(prefix=".grading-key-", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(secrets.token_hex(KEY_BYTES) + "\n")
        os.chmod(temp, 0o644)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.harness.seeds", description=__doc__.split("\n")[0])
    parser.add_argument("--new-key", action="store_true", required=True,
                        help=f"write a fresh random grading key to {KEY_FILE}")
    parser.parse_args(argv)
    write_new_key()
    print(f"wrote a new grading key to {KEY_PATH}: commit it, then rebuild and upload every Gradescope package")
    return 0


if __name__ == "__main__":
    sys.exit(main())
