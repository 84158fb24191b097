"""The repository's documents stay self-contained and current.

- No tracked file cites the numbered items of a tracker that is not in the repository, or a dated
  work period: a comment says why in its own words, and git already says when.
- Every relative link in README.md and docs/*.md leads to a file that exists.
- Every path in design.md's layout table exists.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from autograder.assignment import discover

ROOT = Path(__file__).resolve().parents[2]

# A tracker's numbered items, and work periods named by date or by their place in a sequence.
# (Each pattern is written so that this file's own text does not match it.)
CITATIONS = {
    "a tracker's issue": re.compile(r"\b[Ii]ssues?\s+#?[0-9]+"),
    "a tracker's item": re.compile(r"\b[Ii]tems?\s+#?[0-9]+"),
    "a dated work period": re.compile(r"\b20[0-9]{2}-[01][0-9]-[0-3][0-9]\b"),
    "a numbered work period": re.compile(
        r"\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|"
        r"[a-z]+teenth|twentieth|twenty-[a-z]+|next)\s+session\b|"
        r"\bsession\s+[0-9]+\b|\bround\s+(?:one|two|three|four|five)\b", re.IGNORECASE),
}
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def tracked_text_files() -> list[Path]:
    """Every file git tracks that exists in the work tree and reads as text."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if listed.returncode != 0:
        pytest.skip(f"not a git checkout ({listed.stderr.decode(errors='replace').strip()})")
    files = []
    for name in listed.stdout.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue  # deleted in the work tree, not yet committed
        head = path.read_bytes()[:8192]
        if b"\0" not in head:
            files.append(path)
    return files


def test_no_file_cites_a_tracker_or_a_dated_work_period() -> None:
    found = []
    for path in tracked_text_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for what, pattern in CITATIONS.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {match.group(0)!r} ({what})")
    assert not found, (
        "these lines cite a tracker's numbered item or a work period by its date or place, which a "
        "reader of the repository cannot look up: say why in words instead (git records when):\n"
        + "\n".join(found[:50]))


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("document", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_lead_to_files(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    broken = []
    for target in [*LINK.findall(text), *REFERENCE_LINK.findall(text)]:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) or target.startswith("#"):
            continue  # a URL (https:, mailto:) or an anchor in the same page
        path = target.split("#", 1)[0]
        if path and not (document.parent / path).exists():
            broken.append(target)
    assert not broken, (
        f"{document.relative_to(ROOT)} links to files that do not exist (relative to its folder): {broken}")


def layout_paths() -> list[str]:
    """The paths in the first column of design.md's layout table, `<id>` as each assignment."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = text[text.index("## Layout"):]
    table = table[:table.index("\n## ")]
    paths = []
    for row in table.splitlines():
        cells = row.split("|")
        if len(cells) < 3 or not cells[1].strip().startswith("`"):
            continue
        folder = ""
        for name in re.findall(r"`([^`]+)`", cells[1]):
            if "/" in name.rstrip("/"):
                folder = name.rsplit("/", 1)[0] + "/" if not name.endswith("/") else ""
                paths.append(name)
            else:
                paths.append(folder + name)  # a sibling of the cell's previous path
    return paths


def test_the_layout_table_names_files_that_exist() -> None:
    assignments = discover()
    missing = []
    paths = layout_paths()
    assert len(paths) > 20, f"design.md's layout table should list the repository's parts; read {paths}"
    for path in paths:
        for concrete in ([path.replace("<id>", a) for a in assignments] if "<id>" in path else [path]):
            if not any(ROOT.glob(concrete.rstrip("/"))):
                missing.append(concrete)
    assert not missing, f"docs/design.md's layout table names paths that do not exist: {missing}"
