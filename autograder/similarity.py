"""The class report's similar-pairs check, within a budget per file and per class.

    python -m autograder.similarity < request.json > answer.json   (what `compare` runs)

The submitted files are compared pairwise with copydetect (winnowing over tokenized code, as MOSS
does; names and layout are ignored), the starter's files removed as boilerplate. A pair's
similarity is, for each side, the share of its code (token coverage, summed over the assignment's
files) that the other side has too; a pair is flagged when the larger of the two reaches the
threshold, and its matching code is kept for the page (highlighted, for the MAX_EVIDENCE most
similar flagged pairs).

copydetect's cost grows with the text it reads, comments included (about 180 MB of memory per MB
of a file), so one student's padded file could stop the check for the whole class. Hence:

- a file over MAX_FILE_BYTES is left out and reported (`Skipped`), the rest still compared;
- the class's files are compared largest-last within MAX_CLASS_BYTES; the files over it are left
  out and reported the same way;
- the comparison runs in a child process limited to MEMORY_BYTES of address space and
  TIME_SECONDS of CPU: if it fails anyway the report says the check was not run, and why.
"""
from __future__ import annotations

import itertools
import json
import resource
import subprocess
import sys
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# Chosen on the blind corpus (autograder/corpus/<id>/bases/: correct submissions written without
# the reference) and on renamed, reformatted copies of the references: on runs of 60 tokenized
# characters (about two lines of code) a base shares at most 0.71 of its code with the reference or
# another base (lecture 7's minimal_ordereddict; 0.41 leaving out the two "minimal" bases), a copy
# at least 0.94 (tests/tools/test_class_report.py checks both on every corpus). copydetect's defaults
# (25 characters, flagged at 0.33) flag independent submissions of these short assignments: their
# common idioms are longer than 25 characters.
NOISE_CHARS = 60
THRESHOLD = 0.8
# Flagged pairs whose shared code the page shows (the most similar first): a class that copied
# widely, or a threshold set low, would otherwise make a page of hundreds of megabytes.
MAX_EVIDENCE = 25
# The reference solutions' files are 5 to 20 KB; a file 10 times the largest is not code to compare.
MAX_FILE_BYTES = 256 * 1024
# About 600 students' two files of 12 KB; within MEMORY_BYTES by copydetect's cost above.
MAX_CLASS_BYTES = 12 * 1024 * 1024
MEMORY_BYTES = 3 * 1024**3
TIME_SECONDS = 600


@dataclass
class FileEvidence:
    """One file of a pair: each side's similarity and its code, the shared parts highlighted (HTML)."""

    file: str
    similarity: tuple[float, float]
    code: tuple[str, str]


@dataclass
class Pair:
    a: str
    b: str
    similarity: tuple[float, float]  # share of a's code found in b, and of b's found in a
    files: list[FileEvidence]

    @property
    def score(self) -> float:
        return max(self.similarity)


@dataclass
class Skipped:
    """A submitted file left out of the comparison, and why."""

    submission: str
    file: str
    reason: str


@dataclass
class Budget:
    file_bytes: int = MAX_FILE_BYTES
    class_bytes: int = MAX_CLASS_BYTES
    memory_bytes: int = MEMORY_BYTES
    seconds: int = TIME_SECONDS


def within_budget(files: tuple[str, ...], submissions: list[Path], budget: Budget) -> tuple[list[str], list[Skipped]]:
    """(paths to compare, files left out): each file of `files` in each submission folder, those over
    budget.file_bytes left out, then the largest left out until the rest fit budget.class_bytes."""
    sized, skipped = [], []
    for folder in submissions:
        for name in files:
            path = folder / name
            if not path.is_file() or path.is_symlink():
                continue
            size = path.stat().st_size
            if size > budget.file_bytes:
                skipped.append(Skipped(folder.name, name, f"{size:,} bytes, over the {budget.file_bytes:,} compared per file"))
            else:
                sized.append((size, str(path), folder.name, name))
    sized.sort()
    kept, total = [], 0
    for size, path, owner, name in sized:
        if total + size > budget.class_bytes:
            skipped.append(Skipped(owner, name, f"the class's files reached the {budget.class_bytes:,} bytes compared"))
            continue
        total += size
        kept.append(path)
    return sorted(kept), skipped


def _compare(paths: list[str], boilerplate: list[str], noise: int, evidence_at: float) -> dict[str, Any]:
    """The comparison itself (in the limited child): pairs and the paths copydetect could not read."""
    import matplotlib

    matplotlib.use("Agg")  # copydetect imports pyplot
    from copydetect import CopyDetector
    from copydetect.utils import highlight_overlap

    detector = CopyDetector(extensions=["py"], noise_t=noise, guarantee_t=noise, same_name_only=True,
                            autoopen=False, silent=True)
    owner = {path: Path(path).parent.name for path in paths}
    for path in paths:
        detector.add_file(path)
    for path in boilerplate:
        detector.add_file(path, "boilerplate")
    if len(owner) < 2:
        return {"pairs": [], "unreadable": []}
    detector.run()
    unreadable = sorted(path for path in owner if path not in detector.file_data)
    index = {path: i for i, path in enumerate(detector.test_files)}
    # per pair: overlap tokens and coverage of each side, summed over the files, and the files
    sums: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    compared: dict[tuple[str, str], list[tuple[str, str, float, float]]] = defaultdict(list)
    for first, second in itertools.combinations(sorted(owner), 2):
        if owner[first] == owner[second] or Path(first).name != Path(second).name:
            continue
        if first not in detector.file_data or second not in detector.file_data:
            continue  # not UTF-8: copydetect skipped it
        if owner[first] > owner[second]:
            first, second = second, first
        sim_first, sim_second = (max(float(x), 0.0) for x in detector.similarity_matrix[index[first], index[second]])
        cover = (detector.file_data[first].token_coverage, detector.file_data[second].token_coverage)
        key = (owner[first], owner[second])
        entry = sums[key]
        entry[0] += sim_first * cover[0]
        entry[1] += sim_second * cover[1]
        entry[2] += cover[0]
        entry[3] += cover[1]
        compared[key].append((first, second, sim_first, sim_second))
    pairs = []
    for (a, b), (shared_a, shared_b, cover_a, cover_b) in sums.items():
        similarity = (float(shared_a / cover_a) if cover_a else 0.0, float(shared_b / cover_b) if cover_b else 0.0)
        if max(similarity) > 0:
            pairs.append(Pair(a, b, similarity, []))
    pairs.sort(key=lambda p: (-p.score, p.a, p.b))
    for pair in pairs[:MAX_EVIDENCE]:
        if pair.score < evidence_at:
            break  # the shared code is shown for flagged pairs only: building it costs
        for first, second, sim_first, sim_second in compared[(pair.a, pair.b)]:
            slices = detector.slice_matrix.get((first, second))
            if slices is None and (second, first) in detector.slice_matrix:
                slices = detector.slice_matrix[(second, first)][::-1]
            if slices is None:
                continue  # nothing of this file shared
            code = [highlight_overlap(detector.file_data[path].raw_code, whole_words(detector.file_data[path].raw_code,
                                                                                     part),
                                      "<mark>", "</mark>", truncate=6, escape_html=True)[0]
                    for path, part in ((first, slices[0]), (second, slices[1]))]
            pair.files.append(FileEvidence(Path(first).name, (sim_first, sim_second), (code[0], code[1])))
    return {"pairs": [asdict(p) for p in pairs], "unreadable": unreadable}


def whole_words(code: str, slices: Any) -> Any:
    """copydetect's shared slices ([starts], [ends] in `code`) widened to whole words, so that no
    highlight starts or ends inside a name or a number."""
    starts, ends = (list(map(int, row)) for row in slices)
    wide = []
    for start, end in zip(starts, ends):
        while start > 0 and (code[start - 1].isalnum() or code[start - 1] == "_"):
            start -= 1
        while end < len(code) and (code[end].isalnum() or code[end] == "_"):
            end += 1
        wide.append([start, end])
    merged: list[list[int]] = []
    for start, end in sorted(wide):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    import numpy as np

    return np.array([[s for s, _ in merged], [e for _, e in merged]], dtype=np.int64).reshape(2, len(merged))


def _limits(budget: Budget) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (budget.memory_bytes, budget.memory_bytes))
    resource.setrlimit(resource.RLIMIT_CPU, (budget.seconds, budget.seconds))


def compare(files: tuple[str, ...], submissions: list[Path], boilerplate: Path, noise: int = NOISE_CHARS,
            evidence_at: float = THRESHOLD, budget: Budget | None = None) -> tuple[list[Pair], list[Skipped], str]:
    """(pairs, skipped, note): every pair of submissions that shares code, most similar first; the
    files left out (over budget, or not UTF-8 text); and "" or why the comparison could not run.

    Each file is compared only with the same file of the other submissions; `boilerplate`'s files
    (the starter) are removed from every fingerprint.
    """
    budget = budget or Budget()
    paths, skipped = within_budget(files, submissions, budget)
    request = {"paths": paths, "boilerplate": [str(boilerplate / n) for n in files if (boilerplate / n).is_file()],
               "noise": noise, "evidence_at": evidence_at}
    limited = f"the comparison, limited to {budget.memory_bytes / 1024**3:g} GB and {budget.seconds} s of CPU"
    try:
        done = subprocess.run([sys.executable, "-m", "autograder.similarity"], input=json.dumps(request),
                              capture_output=True, text=True, timeout=budget.seconds * 2,
                              preexec_fn=lambda: _limits(budget), cwd=Path(__file__).resolve().parent.parent)
    except subprocess.TimeoutExpired:
        return [], skipped, f"{limited}, was stopped after {budget.seconds * 2} s"
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        why = "it ran out of memory" if "MemoryError" in done.stderr else f"it exited with status {done.returncode}"
        return [], skipped, f"{limited}, failed: {why} ({last[:300]})"
    answer = json.loads(done.stdout)
    pairs = [Pair(p["a"], p["b"], tuple(p["similarity"]),
                  [FileEvidence(f["file"], tuple(f["similarity"]), tuple(f["code"])) for f in p["files"]])
             for p in answer["pairs"]]
    skipped += [Skipped(Path(p).parent.name, Path(p).name, "not UTF-8 text") for p in answer["unreadable"]]
    return pairs, sorted(skipped, key=lambda s: (s.submission, s.file)), ""


def main() -> int:
    """The child: a request (JSON on stdin) in, the answer (JSON on stdout) out."""
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # copydetect warns once per file it skips
    request = json.load(sys.stdin)
    answer = _compare(request["paths"], request["boilerplate"], request["noise"], request["evidence_at"])
    json.dump(answer, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
