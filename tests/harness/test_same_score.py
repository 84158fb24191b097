"""The same files get the same score at every grading; other files get other draws.

The hidden tests' draws (kvlab.testing.draws) are seeded by the trusted grader from the submitted
files and the course's grading key (autograder/harness/seeds.py). Checked here: the seed and the
draws as functions; then corpus entries (autograder/corpus/<id>/, applied with
autograder.corpus.apply) graded through support.graders (the runner Gradescope's run_autograder
calls) in a first grading process sandboxed and in-process, and in a second, fresh one sandboxed
again: the three results.json agree on the score, each test's outcome, message and draws, and the
seed. A submission that differs from one of them by a comment draws other values, so what its
messages showed answers no other submission (the hostile suite's harvest cases replay such
outputs). The everyday tier grades one lecture 7 bug on its task's tests; the full tier a sample
of every corpus, its bases included.
"""
from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder import corpus
from autograder.assignment import load_assignment
from autograder.harness.backends import GraderFault
from autograder.harness.seeds import KEY_BYTES, KEY_PATH, read_key, submission_seed
from autograder.harness.settings import CALL_TIMEOUT_ENV
from kvlab.testing.draws import drawn, grading_seed, restart_draws, take_draws
from support.graders import Graders, Job, JobResults
from support.suite import suites
from support.traces import stand_in_traces

SUITES = suites()
# The everyday tier's entry: lecture 7's LFU tie rule, which some draws of the eviction tests reach
# and others do not (graded unseeded, such a bug scored 100, 100 and 99).
EVERYDAY = ("lecture07", "lfu_tie_evicts_most_recent")
# The full tier: this many bugs of each corpus, spread over bugs.json, and its first base.
SAMPLED_BUGS = 3
# Seconds of CPU per call for the gradings, as tests/suites/test_corpus.py grades the corpus' bugs: a
# bug past any limit fails after 3 s, far from every correct call's time.
CALL_TIMEOUT = 3.0
pytestmark = pytest.mark.timeout(1800)


# ----- the seed and the draws ---------------------------------------------------------------------

def draws_of(seed: int, test: str, n: int = 8) -> list[int]:
    """What `test` draws under `seed`, as the grader's plugin starts it."""
    restart_draws(seed, test)
    values = [drawn(0, 2**31) for _ in range(n)]
    take_draws()
    return values


def test_draws_depend_on_the_seed_and_the_test_only() -> None:
    """A test's draws start over from the grading's seed and its own name: the same in every run of
    one process (each submission sandboxed then in-process, tests/support/grade_batch.py), whatever ran before."""
    first = draws_of(7, "a.py::test_x")
    draws_of(7, "a.py::test_y", n=100)  # another test drawing more in between changes nothing
    assert draws_of(7, "a.py::test_x") == first, "restart_draws(seed, test) must start the test's draws over"
    assert grading_seed() == 7, f"grading_seed() must give the seed restart_draws set, not {grading_seed()}"
    assert draws_of(7, "a.py::test_y") != first, "two tests of one grading must draw independently"
    assert draws_of(8, "a.py::test_x") != first, "another seed must give other draws"
    restart_draws(None, "a.py::test_x")
    assert grading_seed() == 8, f"restart_draws without a seed must keep the grading's (8), not {grading_seed()}"


def submitted(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder


def test_seed_depends_on_every_submitted_byte_and_the_key_only(tmp_path: Path) -> None:
    assignment, key = load_assignment("lecture07"), read_key()
    files = {name: f"# {name}\nVALUE = 1\n".encode() for name in assignment.files}
    first, last = assignment.files[0], assignment.files[-1]

    def seed_of(folder: str, given: dict[str, bytes], with_key: bytes = key) -> int:
        return submission_seed(assignment, submitted(tmp_path / folder, given), with_key)

    seed = seed_of("a", files)
    assert seed_of("b", {**files, "notes.txt": b"not submitted"}) == seed, (
        "the same submitted files elsewhere, beside a file the assignment does not list, must give the same seed")
    variants = {
        "a byte changed": seed_of("c", {**files, last: files[last] + b"#"}),
        "a file missing": seed_of("d", {name: data for name, data in files.items() if name != first}),
        "a file empty": seed_of("e", {**files, first: b""}),
        "another key": seed_of("f", files, bytes(KEY_BYTES)),
    }
    alike = [what for what, other in variants.items() if other == seed]
    assert not alike, f"the seed must change with {alike}"
    assert variants["a file missing"] != variants["a file empty"], "a missing file and an empty one must give other seeds"
    assert 0 <= seed < 2**53, f"the seed {seed} must be a JSON number results.json keeps exactly"


@pytest.mark.parametrize("text", ["", "not hex\n", "ab" * (KEY_BYTES - 1)], ids=["empty", "not hex", "too short"])
def test_a_bad_grading_key_is_a_grader_fault_naming_the_fix(tmp_path: Path, text: str) -> None:
    (tmp_path / "grading.key").write_text(text)
    with pytest.raises(GraderFault, match="--new-key"):
        read_key(tmp_path / "grading.key")
    with pytest.raises(GraderFault, match="cannot be read"):
        read_key(tmp_path / "absent.key")


def test_the_committed_key_is_used_as_it_is() -> None:
    """A fresh clone grades with no step of its own: the key is committed, 64 hex digits."""
    assert len(read_key(KEY_PATH)) == KEY_BYTES, f"{KEY_PATH} must hold {2 * KEY_BYTES} hex digits"


# ----- gradings -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entry:
    """A corpus entry to grade: a bug of bugs.json or a base (`bug` None)."""

    assignment: str
    name: str
    bug: corpus.Bug | None = None

    @property
    def label(self) -> str:
        return f"{self.assignment}-{self.name}"


def sample() -> list[Entry]:
    """The full tier's entries: each corpus's first base and SAMPLED_BUGS bugs spread over bugs.json."""
    entries = []
    for assignment in sorted(a for a in SUITES if corpus.folder(a).is_dir()):
        bugs = corpus.bugs(assignment)
        step = max(len(bugs) // SAMPLED_BUGS, 1)
        entries.append(Entry(assignment, f"base-{next(iter(corpus.bases(assignment)))}"))
        entries += [Entry(assignment, bug.name, bug) for bug in bugs[::step][:SAMPLED_BUGS]]
    return entries


def everyday_entry() -> Entry:
    assignment, name = EVERYDAY
    return Entry(assignment, name, next(bug for bug in corpus.bugs(assignment) if bug.name == name))


@dataclass(frozen=True)
class Graded:
    """An entry's three gradings (first process: sandbox and in-process; second: sandbox)."""

    entry: Entry
    first: JobResults
    second: JobResults

    def runs(self) -> dict[str, dict[str, Any]]:
        return {"sandboxed": self.first.results["sandbox"], "in-process": self.first.results["inprocess"],
                "sandboxed in a fresh process": self.second.results["sandbox"]}


def jobs_for(entries: Sequence[Entry], base: Path, round_name: str, modes: tuple[str, ...],
             change: str = "") -> list[Job]:
    """One Job per entry, its submission applied under base/<label> (with `change` appended to the
    bug's file, or the first file, when given), graded on its task's tests where the catalog says so."""
    jobs = []
    for entry in entries:
        suite = SUITES[entry.assignment]
        folder = base / entry.label / round_name
        env = {**stand_in_traces(suite.assignment.traces, base / "traces" / entry.assignment, real_if_present=False),
               CALL_TIMEOUT_ENV: str(CALL_TIMEOUT)}
        if entry.bug is None:
            submission = shutil.copytree(corpus.bases(entry.assignment)[entry.name.removeprefix("base-")],
                                         folder / "submission")
        else:
            submission = corpus.apply(entry.assignment, entry.bug, folder / "submission")
        if change:
            edited = submission / (entry.bug.file if entry.bug else suite.assignment.files[0])
            edited.write_text(edited.read_text(encoding="utf-8") + change, encoding="utf-8")
        tasks = (entry.bug.task,) if entry.bug and suite.checks.mutants_run_own_tasks else ()
        root = base / entry.label / "root"
        if not root.exists():
            suite.tests_root(root, tasks)
        jobs.append(Job(entry.assignment, f"{entry.label}-{round_name}", submission, root, folder,
                        suite.checks.run_seconds, env, modes=modes))
    return jobs


def grade_jobs(jobs: Sequence[Job]) -> dict[str, JobResults]:
    """The jobs graded by support.graders, by label; each batch in processes of its own."""
    graders = Graders(sorted(jobs, key=lambda job: (-job.seconds, job.label)))
    try:
        return {label: future.result() for (_, label), future in graders.futures.items()}
    finally:
        graders.stop()


def grade_three_times(entries: Sequence[Entry], base: Path, *extra: Job) -> tuple[list[Graded], dict[str, JobResults]]:
    """Each entry graded sandboxed and in-process, then (fresh processes) sandboxed again beside the
    `extra` jobs; the entries' Graded and the extra jobs' results."""
    first = grade_jobs(jobs_for(entries, base, "first", ("sandbox", "inprocess")))
    second = grade_jobs([*jobs_for(entries, base, "second", ("sandbox",)), *extra])
    return ([Graded(e, first[f"{e.label}-first"], second[f"{e.label}-second"]) for e in entries],
            {job.label: second[job.label] for job in extra})


def view(results: dict[str, Any], messages: bool) -> list[tuple[Any, ...]]:
    """What must not change between gradings: per test its outcome, points and draws, and (between
    gradings in one mode) its message."""
    return [(f"{t['number']} {t['name']}", t["status"], t["score"], t.get("extra_data", {}).get("draws", []),
             *([t["output"]] if messages else [])) for t in results["tests"]]


# The in-process mode (trusted code only, never a student's grade) words a few failures its own way:
# a student traceback ends with a newline, a library call failing on the student's objects is "the
# test could not check ...", a timeout names no worker. Between the modes, all but the messages agree.
MODE_OF = {"sandboxed": "sandbox", "in-process": "inprocess", "sandboxed in a fresh process": "sandbox"}


def same_score_problems(graded: Graded) -> list[str]:
    """How the three gradings of an entry differ (graded, one seed, the same score, and test by test
    the same outcome, draws and, in one mode, message); empty when they agree."""
    runs, label = graded.runs(), graded.entry.label
    failed = [how for how, results in runs.items() if results["extra_data"]["status"] != "graded"]
    if failed:
        return [f"{label}: the grader failed {', '.join(failed)}: {runs[failed[0]]['output'][:300]}"]
    seeds = {how: results["extra_data"].get("seed") for how, results in runs.items()}
    problems = [] if len(set(seeds.values())) == 1 and None not in seeds.values() else [
        f"{label}: the gradings drew from other seeds: {seeds}"]
    (reference_how, reference), *others = runs.items()
    for how, other in others:
        if other["score"] != reference["score"]:
            problems.append(f"{label}: scored {reference['score']} {reference_how} and {other['score']} {how}")
        messages = MODE_OF[how] == MODE_OF[reference_how]
        mine, theirs = view(reference, messages), view(other, messages)
        differ = [(a, b) for a, b in zip(mine, theirs) if a != b]
        if len(mine) != len(theirs) or differ:
            problems.append(f"{label}: {how}, {len(differ)} of {len(mine)} tests ({len(theirs)} graded) differ from "
                            f"{reference_how} (test, status, score, draws{', message' if messages else ''}), "
                            f"first: {differ[:1]}")
    return problems


def all_draws(results: dict[str, Any]) -> dict[str, list[int]]:
    return {t["name"]: t["extra_data"]["draws"] for t in results["tests"] if "extra_data" in t}


@pytest.fixture(scope="module")
def everyday(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Graded, JobResults]]:
    """The everyday entry graded three times, and the same files with one comment more, in-process."""
    entry, base = everyday_entry(), tmp_path_factory.mktemp("same-score")
    (other,) = jobs_for([entry], base, "commented", ("inprocess",), change="\n# one comment more\n")
    (result,), extra = grade_three_times([entry], base, other)
    yield result, extra[other.label]


def test_one_bug_gets_the_same_score_messages_and_draws_every_time(everyday: tuple[Graded, JobResults]) -> None:
    problems = same_score_problems(everyday[0])
    assert not problems, "\n".join(problems)


def test_other_files_draw_other_values(everyday: tuple[Graded, JobResults]) -> None:
    """One comment more is another submission: another seed, other draws, so the first one's messages
    (the values they show) answer nothing the second is asked."""
    graded, commented = everyday[0].first.results["inprocess"], everyday[1].results["inprocess"]
    assert commented["extra_data"]["status"] == "graded", f"the grader failed: {commented['output']}"
    assert graded["extra_data"]["seed"] != commented["extra_data"]["seed"], "a changed file must give another seed"
    mine, theirs = all_draws(graded), all_draws(commented)
    assert mine and mine.keys() == theirs.keys(), (
        f"both gradings must record the same tests' draws: {sorted(mine)}, {sorted(theirs)}")
    alike = [name for name in mine if mine[name] == theirs[name]]  # wide ranges here: alike by chance ~ never
    assert mine != theirs and not alike, f"another submission drew the same values in {alike or 'every test'}"


@pytest.mark.full
def test_a_sample_of_every_corpus_gets_the_same_score_every_time(tmp_path: Path) -> None:
    results, _ = grade_three_times(sample(), tmp_path)
    problems = [problem for result in results for problem in same_score_problems(result)]
    assert not problems, "\n".join(problems)
