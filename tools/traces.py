"""Install the real Mooncake traces into `data/mooncake/` of this clone (`make traces`).

Where they are published: the repository github.com/kvcache-ai/Mooncake, folder
`FAST25-release/traces/`, at commit 3cca71daccf2a7afb8fe3f0295358f70e3a69fdb ("add FAST25
release"; the files are unchanged since), released with the Mooncake paper (FAST'25) under
the repository's Apache-2.0 licence (its LICENSE-APACHE). They are data, never committed here:
`data/` is ignored by git, and `kvlab.trace.mooncake_dir()` finds them there by default.

Each file comes from the first of: a good copy already in `data/mooncake/`; a local copy in
$KVLAB_MOONCAKE_DIR or `../shared/data/mooncake` beside the clone; a download pinned to the commit
(raw.githubusercontent.com). Its SHA-256 is checked either way; a mismatch deletes the file and fails.

    python -m tools.traces [--dest DIR] [--check]

Exit 0 when installed, and also when neither a copy nor the network is there: then it prints one
line naming `make traces` and where the files come from, so `make` builds everything else. Exit 1
on a SHA-256 mismatch. `--check` only prints that line when a file is missing.
Standard library only: it runs before anything is installed.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from autograder.mooncake_traces import COMMIT, FOLDER, REPOSITORY, missing_line

ROOT = Path(__file__).resolve().parent.parent
DEST = ROOT / "data" / "mooncake"
# The workspace's copy, beside the clone (read-only there).
SHARED_COPY = ROOT.parent / "shared" / "data" / "mooncake"
URL_BASE = f"https://raw.githubusercontent.com/{REPOSITORY}/{COMMIT}/{FOLDER}/"
SHA256 = {
    "conversation_trace.jsonl": "b8cbb061a85206d729d91cdc2981f43c9e0d99209dce588d3af5f7934408b9df",
    "synthetic_trace.jsonl": "bd070915a98fc0ed264d7cfef2ce746002eb3076a695ec31ba2674c0111ec131",
}
DOWNLOAD_TIMEOUT = 30.0


class TraceMismatch(Exception):
    """A copied or downloaded file is not the published one (its SHA-256 differs); it was deleted."""


class TraceUnavailable(Exception):
    """A file is in no local copy and could not be downloaded."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def local_copies() -> list[Path]:
    """Folders that may hold the traces already: $KVLAB_MOONCAKE_DIR, then the workspace's copy."""
    configured = os.environ.get("KVLAB_MOONCAKE_DIR")
    return ([Path(configured)] if configured else []) + [SHARED_COPY]


def missing(dest: Path = DEST, hashes: Mapping[str, str] = SHA256) -> list[str]:
    """The names of `hashes` with no file in `dest` (present files are checked by `install`)."""
    return [name for name in hashes if not (dest / name).is_file()]


def _fetch(name: str, partial: Path, sources: Sequence[Path], dest: Path, url_base: str, timeout: float) -> str:
    """Put `name` at `partial` from the first local copy, else the URL; say where it came from."""
    for folder in sources:
        source = folder / name
        if source.is_file() and source.resolve() != (dest / name).resolve():
            shutil.copyfile(source, partial)
            return str(source)
    url = url_base + name
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response, open(partial, "wb") as out:
            shutil.copyfileobj(response, out, 1 << 20)
    except (urllib.error.URLError, OSError) as error:
        partial.unlink(missing_ok=True)
        reason = getattr(error, "reason", error)
        raise TraceUnavailable(f"{name}: in no local copy ({', '.join(map(str, sources)) or 'none'}) and "
                               f"{url} could not be downloaded ({reason})") from error
    return url


def install(dest: Path = DEST, sources: Sequence[Path] = (), url_base: str = URL_BASE,
            hashes: Mapping[str, str] = SHA256, timeout: float = DOWNLOAD_TIMEOUT) -> list[str]:
    """Put every file of `hashes` (name -> SHA-256 hex) into `dest`; one line per file saying how.

    A file already in `dest` with the right hash stays. Otherwise it is copied from the first of
    `sources` that holds it, else downloaded from `url_base` + name, into a temporary name in
    `dest` that is renamed only once its hash is right. TraceMismatch (the file deleted) when the
    hash is wrong; TraceUnavailable when it can be neither copied nor downloaded.
    """
    dest.mkdir(parents=True, exist_ok=True)
    done = []
    for name, expected in hashes.items():
        target = dest / name
        if target.is_file() and sha256_of(target) == expected:
            done.append(f"{name}: already in {dest}, SHA-256 checked")
            continue
        partial = dest / f".{name}.partial"
        origin = _fetch(name, partial, sources, dest, url_base, timeout)
        got = sha256_of(partial)
        if got != expected:
            partial.unlink()
            raise TraceMismatch(f"{name} from {origin} has SHA-256 {got}, expected {expected} (the file published "
                                f"at github.com/{REPOSITORY} {FOLDER}/ at commit {COMMIT}); it was deleted")
        os.replace(partial, target)
        done.append(f"{name}: from {origin}, SHA-256 checked")
    return done


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.traces", description=__doc__.split("\n")[0])
    parser.add_argument("--dest", type=Path, default=DEST, help=f"where to put them (default: {DEST})")
    parser.add_argument("--url-base", default=URL_BASE, help="download from here instead (a mirror ending in /)")
    parser.add_argument("--check", action="store_true", help="only print the line naming `make traces` if one is missing")
    args = parser.parse_args(argv)
    if args.check:
        absent = missing(args.dest)
        if absent:
            print(missing_line(absent))
        return 0
    try:
        for line in install(args.dest, local_copies(), args.url_base):
            print(line)
    except TraceUnavailable as error:
        print(f"{error}\n{missing_line(missing(args.dest))}")
        return 0
    except TraceMismatch as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
