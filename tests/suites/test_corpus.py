"""The blind corpora (autograder/corpus/<id>/), graded by the grader that grades students.

Written from the student bundle alone, they check the grading against the bugs students write from
the handout's text (the catalogs of autograder/mutants/ hold the bugs the solution's authors
imagine). Every base (a correct submission in another style) gets full marks; every bug loses
points in the hidden suite, fails a public test unless its entry says why none can look, and the
first hidden test it fails names its concept in its message; every rule sentence of the stubs is
broken by some corpus bug or catalog mutant (so a test is shown to check it). The gradings are in-process (the
grader's in-process mode, on the hidden and public tests together), and a bug's ends once what these
tests read of it is settled (KVLAB_UNTIL_FIRST_CATCH: whether a public test fails, and its first hidden
failure); SANDBOXED of them are graded whole and through the sandbox as well, where both modes must
agree test by test. The everyday tier (support.tiers) grades the first corpus's first base and the
first bug of each task, in-process (it compares the modes on the catalogs' first mutants and the
baselines, tests/suites/test_suites.py); `make test-all` every entry, the sandboxed ones in both
modes, and the public tests' share over the whole corpus.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from autograder import corpus
from support import first_catch
from support.checks import check_modes_agree, fails_a_public_test
from support.graders import Graders, Job, JobResults
from support.suite import suites
from support.tiers import FULL, params_of, sample, selected
from support.traces import stand_in_traces
from support.verdicts import Verdict, listing, not_passed

SUITES = suites()
ASSIGNMENTS = sorted(a for a in SUITES if corpus.folder(a).is_dir())
pytestmark = pytest.mark.timeout(1800)  # a test waits for the batch's gradings (see test_suites.py)

# What each corpus must hold at least: bugs, and bases in styles unlike the reference's.
MIN_BUGS = {"lecture02": 25, "lecture07": 25, "module06": 40}
MIN_BASES = 3
# The share of an assignment's bugs that must fail a public test (a public_blind entry counts as not).
PUBLIC_SHARE = {"lecture02": 1.0, "lecture07": 1.0, "module06": 0.9}
# Graded through the sandbox too, per assignment: the first base and the first bugs of bugs.json.
SANDBOXED_BUGS = 2

BUGS = {a: corpus.bugs(a) for a in ASSIGNMENTS}
BASES = {a: corpus.bases(a) for a in ASSIGNMENTS}


def label_of_base(style: str) -> str:
    return f"base-{style}"


def sandboxed(assignment: str) -> set[str]:
    """The labels of `assignment` graded in both modes."""
    return {label_of_base(next(iter(BASES[assignment]))), *(bug.name for bug in BUGS[assignment][:SANDBOXED_BUGS])}


@pytest.fixture(scope="module")
def gradings(request: pytest.FixtureRequest,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[JobResults]]]:
    """The gradings of every corpus entry of the assignments this session's tests read, queued at
    once (support.graders.Graders)."""
    wanted: dict[str, set[str]] = {}
    compared = [item for item in selected(request, "gradings") if item.originalname == "test_sandboxed_grading_agrees"]
    for item in selected(request, "gradings"):
        for name in params_of([item], "assignment"):
            labels = wanted.setdefault(name, set())
            labels.update(label_of_base(style) for style in params_of([item], "style"))
            labels.update(bug.name for bug in params_of([item], "bug"))
            labels.update(params_of([item], "label"))
            if not {"style", "bug", "label"} & set(item.callspec.params):  # a test over the whole corpus
                labels.update([*map(label_of_base, BASES[name]), *(bug.name for bug in BUGS[name])])
    jobs = []
    for name, labels in sorted(wanted.items()):
        suite = SUITES[name]
        base = tmp_path_factory.mktemp(f"corpus-{name}")
        env = stand_in_traces(suite.assignment.traces, base / "traces", real_if_present=False)
        whole = suite.tests_root(base / "root-all")
        # In both modes only the entries whose modes a selected test compares (the full tier's).
        both = {item.callspec.params["label"] for item in compared if item.callspec.params["assignment"] == name}
        for style, folder in BASES[name].items():
            label = label_of_base(style)
            if label not in labels:
                continue
            modes = ("sandbox", "inprocess") if label in both else ("inprocess",)
            jobs.append(Job(name, label, folder, whole, base / label, suite.checks.run_seconds, env, modes=modes))
        for bug in (bug for bug in BUGS[name] if bug.name in labels):
            out = base / bug.name
            root = suite.tests_root(out / "root", (bug.task,)) if suite.checks.mutants_run_own_tasks else whole
            submission = corpus.apply(name, bug, out / "submission")
            modes = ("sandbox", "inprocess") if bug.name in both else ("inprocess",)
            # A bug graded in both modes is graded whole: the modes are compared test by test.
            jobs.append(Job(name, bug.name, submission, root, out, suite.checks.run_seconds,
                            {**env, **first_catch.bug_switches(whole=bug.name in both)}, modes=modes))
    graders = Graders(sorted(jobs, key=lambda job: (-job.seconds, job.label)))
    yield graders.futures
    graders.stop()


def outcomes(gradings: dict[tuple[str, str], Future[JobResults]], assignment: str, label: str) -> list[Verdict]:
    return gradings[assignment, label].result().outcomes("inprocess")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_corpus_is_complete_and_applies(assignment: str) -> None:
    bugs, bases = BUGS[assignment], BASES[assignment]
    assert len(bugs) >= MIN_BUGS[assignment], f"{assignment}'s corpus holds {len(bugs)} bugs; at least {MIN_BUGS[assignment]} needed"
    assert len(bases) >= MIN_BASES, f"{assignment}'s corpus holds {len(bases)} correct bases; at least {MIN_BASES} needed"
    files = set(SUITES[assignment].assignment.files)
    tasks = set(SUITES[assignment].tasks)
    for style, folder in bases.items():
        present = {path.name for path in folder.iterdir() if path.suffix == ".py"}
        assert present == files, f"base {style} holds {sorted(present)}; a submission is exactly {sorted(files)}"
    for bug in bugs:
        assert bug.base in bases, f"corpus entry {bug.name} edits base {bug.base!r}, which is not in bases/"
        assert bug.file in files, f"corpus entry {bug.name} edits {bug.file}, not a submitted file"
        assert bug.task in tasks, f"corpus entry {bug.name} names task {bug.task!r}, not one of {sorted(tasks)}"
        text = (bases[bug.base] / bug.file).read_text(encoding="utf-8")
        assert corpus.mutate(bug, text) != text, f"corpus entry {bug.name} changes nothing"


# The everyday tier: the first corpus's first base, and the first bug of each task.
BASE_PARAMS = sample([(a, style) for a in ASSIGNMENTS for style in BASES[a]], group=lambda entry: "bases",
                     args=lambda entry: entry, ids=lambda entry: f"{entry[0]}-{entry[1]}")
BUG_PARAMS = sample([(a, bug) for a in ASSIGNMENTS for bug in BUGS[a]], group=lambda entry: (entry[0], entry[1].task),
                    args=lambda entry: entry, ids=lambda entry: f"{entry[0]}-{entry[1].name}")


@pytest.mark.parametrize(("assignment", "style"), BASE_PARAMS)
def test_correct_submission_gets_full_marks(assignment: str, style: str,
                                            gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    failed = not_passed(outcomes(gradings, assignment, label_of_base(style)))
    assert not failed, f"{assignment}'s correct corpus submission {style} fails {len(failed)} tests:\n{listing(failed)}"


def first_hidden_failure(found: list[Verdict]) -> Verdict | None:
    """The first hidden test, in the suite's order, that did not pass."""
    return next((o for o in found if not o.public and not o.passed), None)


@pytest.mark.parametrize(("assignment", "bug"), BUG_PARAMS)
def test_bug_loses_points_with_a_message_naming_it(assignment: str, bug: corpus.Bug,
                                                   gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    found = outcomes(gradings, assignment, bug.name)
    about = f"{assignment} corpus bug {bug.name} ({bug.bug}; rule: {bug.rule})"
    first = first_hidden_failure(found)
    assert first is not None, f"{about} passes every hidden test"
    assert bug.names_concept(first.message), (
        f"the first hidden test {about} fails does not name it: its message contains none of {list(bug.expect)}:\n"
        f"{listing([first])}")


@pytest.mark.parametrize(("assignment", "bug"), BUG_PARAMS)
def test_bug_keeps_its_first_catch(assignment: str, bug: corpus.Bug,
                                   gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    # No catch is lost: the recorded first hidden failure still comes from the same test, or from one
    # whose message quotes the same rule.
    first_catch.check_kept(assignment, "corpus", bug.name, outcomes(gradings, assignment, bug.name))


@pytest.mark.parametrize(("assignment", "bug"), [p for p in BUG_PARAMS if not p.values[1].public_blind])
def test_bug_fails_a_public_test(assignment: str, bug: corpus.Bug,
                                 gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    found = outcomes(gradings, assignment, bug.name)
    assert fails_a_public_test(found), (
        f"{assignment} corpus bug {bug.name} ({bug.bug}) passes every public test, so a student cannot see it "
        f"before submitting; strengthen a public test, or say in its public_blind why none can")


@FULL
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_public_tests_catch_their_share(assignment: str, gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    missed = [bug.name for bug in BUGS[assignment] if not fails_a_public_test(outcomes(gradings, assignment, bug.name))]
    share = 1 - len(missed) / len(BUGS[assignment])
    assert share >= PUBLIC_SHARE[assignment], (
        f"the public tests catch {share:.0%} of {assignment}'s corpus bugs ({PUBLIC_SHARE[assignment]:.0%} needed); "
        f"they miss: {', '.join(missed)}")


@FULL
@pytest.mark.parametrize(("assignment", "label"), [pytest.param(a, label, id=f"{a}-{label}")
                                                   for a in ASSIGNMENTS for label in sorted(sandboxed(a))])
def test_sandboxed_grading_agrees(assignment: str, label: str,
                                  gradings: dict[tuple[str, str], Future[JobResults]]) -> None:
    check_modes_agree(gradings[assignment, label].result())


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_stated_rule_is_broken_by_a_corpus_bug(assignment: str) -> None:
    # A bug that breaks the rule and is caught (the tests above) is what shows a test checks it.
    stubs = SUITES[assignment].assignment
    rules = [bug.rule for bug in BUGS[assignment]] + [m.rule for m in SUITES[assignment].catalog if m.rule]
    exempt = corpus.not_rules(assignment)
    sentences = [(where, sentence) for name in stubs.files for where, sentence in corpus.stated_rules(stubs.starter / name)]
    unbroken = [f"{where}: {sentence}" for where, sentence in sentences
                if sentence not in exempt and not any(corpus.quotes_sentence(rule, sentence) for rule in rules)]
    assert not unbroken, (
        f"{len(unbroken)} rule sentences of {assignment}'s stubs are broken by no corpus bug or catalog mutant, so "
        "nothing shows a test checks them; add a bug that breaks each (quoting the sentence in its rule):\n"
        + "\n".join(unbroken))
    stale = sorted(set(exempt) - {sentence for _, sentence in sentences})
    assert not stale, f"not_rules.json of {assignment} lists sentences the stubs no longer hold: {stale}"
