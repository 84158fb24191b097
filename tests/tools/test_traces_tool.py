"""tools.traces (`make traces`): the real traces from a local copy, else downloaded, SHA-256 checked.

The download path runs against a local HTTP server on 127.0.0.1 serving a small fake trace whose
hash the test passes in; no test touches the network.
"""
from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from autograder.mooncake_traces import COMMIT, missing_line
from tools import traces

FAKE = b'{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [0, 1]}\n'
FAKE_HASH = hashlib.sha256(FAKE).hexdigest()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        """Keep the test output clean: the server's access log is not needed."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """(URL base, the folder it serves), a thread on 127.0.0.1 serving tmp_path/served."""
    served = tmp_path / "served"
    served.mkdir()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(served)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/", served
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def test_download_checks_the_hash_then_keeps_the_file(server: tuple[str, Path], tmp_path: Path) -> None:
    url, served = server
    (served / "fake.jsonl").write_bytes(FAKE)
    dest = tmp_path / "data"
    lines = traces.install(dest, sources=[], url_base=url, hashes={"fake.jsonl": FAKE_HASH}, timeout=10)
    assert (dest / "fake.jsonl").read_bytes() == FAKE, "the downloaded trace should be installed as served"
    assert lines == [f"fake.jsonl: from {url}fake.jsonl, SHA-256 checked"], f"it should say where the file came from: {lines}"
    (served / "fake.jsonl").unlink()
    again = traces.install(dest, sources=[], url_base=url, hashes={"fake.jsonl": FAKE_HASH}, timeout=10)
    assert again == [f"fake.jsonl: already in {dest}, SHA-256 checked"], f"a good copy should stay, not be fetched again: {again}"


@pytest.mark.parametrize("origin", ["download", "local copy"])
def test_a_hash_mismatch_deletes_the_file_and_fails(server: tuple[str, Path], tmp_path: Path, origin: str) -> None:
    url, served = server
    (served / "fake.jsonl").write_bytes(FAKE + b"tampered\n")
    copy = tmp_path / "copy"
    copy.mkdir()
    if origin == "local copy":
        (copy / "fake.jsonl").write_bytes(FAKE[:-2])
    dest = tmp_path / "data"
    with pytest.raises(traces.TraceMismatch, match=f"fake.jsonl from .* has SHA-256 .*, expected {FAKE_HASH}"):
        traces.install(dest, sources=[copy], url_base=url, hashes={"fake.jsonl": FAKE_HASH}, timeout=10)
    assert sorted(p.name for p in dest.iterdir()) == [], f"a file with the wrong hash must not stay in {dest}"


def test_a_local_copy_comes_first(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "fake.jsonl").write_bytes(FAKE)
    # Nothing listens on port 9 of 127.0.0.1 (discard): a download attempt would fail the test.
    lines = traces.install(tmp_path / "data", sources=[tmp_path / "absent", copy], url_base="http://127.0.0.1:9/",
                           hashes={"fake.jsonl": FAKE_HASH}, timeout=10)
    assert lines == [f"fake.jsonl: from {copy / 'fake.jsonl'}, SHA-256 checked"], f"the local copy should be used: {lines}"
    assert (tmp_path / "data" / "fake.jsonl").read_bytes() == FAKE, "the copy should be installed"


def test_no_copy_and_no_network_ends_with_the_line_and_exit_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KVLAB_MOONCAKE_DIR", str(tmp_path / "empty"))
    monkeypatch.setattr(traces, "SHARED_COPY", tmp_path / "no-shared")
    status = traces.main(["--dest", str(tmp_path / "data"), "--url-base", "http://127.0.0.1:9/"])
    out = capsys.readouterr().out.strip().split("\n")
    assert status == 0, f"without a copy or the network, make should go on: exit {status}"
    assert out[-1] == missing_line(sorted(traces.SHA256)), f"the last line should name `make traces`: {out}"
    for words in ("make traces", "github.com/kvcache-ai/Mooncake", "FAST25-release/traces/", COMMIT[:9]):
        assert words in out[-1], f"the line should say {words!r}: {out[-1]}"


@pytest.mark.parametrize("name", sorted(traces.SHA256))
def test_pinned_hashes_are_those_of_the_traces_here(name: str) -> None:
    found = [folder / name for folder in [traces.DEST, *traces.local_copies()] if (folder / name).is_file()]
    if not found:
        pytest.skip(f"{name} is in no local copy: `make traces` installs it")
    digests = {str(path): traces.sha256_of(path) for path in found}
    assert set(digests.values()) == {traces.SHA256[name]}, \
        f"{name}: the pinned SHA-256 {traces.SHA256[name]} should be that of every copy here: {digests}"
