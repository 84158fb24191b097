"""Hostile submissions: the grader must give an attack no points and keep no scars.

(Lecture 7's and module 6's cases, the four ways of grading and grade-all: tests/hostile/test_hostile_modes.py;
the machinery both share: tests/support/hostile_campaign.py.)

Every case is a lecture02 submission made of an honest part and a payload (a folder of
tests/hostile/payloads/, see tests/hostile/README.md):
the honest part is the starter or the reference solution with some functions stubbed, and earns a
known score (graded once per session, alone); the payload is the attack. Each case is graded
through the real flow, as Gradescope does: the Gradescope package unpacked into a folder laid out
like /autograder, `source/run_autograder` run there. For every case:

1. a results.json exists and validates against results_schema.json;
2. its score is at most the honest part's score (and equal when the attack leaves the honest code
   working); every test it passes, the honest part passes too;
3. no hidden-test text or solution text appears in results.json or in run_autograder's output;
4. the grader finished within its budget (the suite lowers the limits through KVLAB_CALL_TIMEOUT and
   KVLAB_TIME_BUDGET, see autograder/harness/settings.py);
5. nothing is left behind: the repository's kvlab, hidden tests and solutions, the venv, the
   layout's source/ are unchanged, no process of the grading remains, nothing the payload planted
   ever runs, and the reference solution graded later in the same folder gets full marks.

Cases are graded in chains (CHAIN_LENGTH of one mode, with or without bubblewrap): one folder laid
out like /autograder takes the chain's cases as successive submissions, then the reference
solution. Whatever a case planted there has every later grading of its chain to run in or to
spoil; a reference that loses points names the chain. The chains run in parallel threads (each
grading is a separate process tree) from one session fixture; each test then checks one case's
outcome.

Every grading runs under a real memory limit of 768 MB for the whole grader (Gradescope's box): a
memory cgroup (v2, or v1's memory hierarchy) when root can make one, else RLIMIT_AS on run_autograder
(see `memory_limited`); under a cgroup the campaign prints each grading's peak.
Each grading must still end graded; a case's failure message says how many of its processes the
kernel killed for memory (the worker volunteers first; known under a cgroup only).

As root the worker runs as an unprivileged user under bubblewrap, and every case (but the few
NOT_WITHOUT_BUBBLEWRAP lists, with the reason) is graded a second time as Gradescope's Docker grades:
without bubblewrap, the unprivileged user and file permissions only, on a system interpreter that
user can run (setup.sh's venv stands for it there). Run as another user, the worker
shares the grader's identity: cases that need root-level isolation are skipped (with the reason),
and a case that writes the grader's files must end in a grader fault (the runner's Watch detects
the change) instead of a score.

One module on purpose (over 400 lines): its checks read the campaign that one session fixture
grades, and a test file is the unit `--dist loadfile` gives a worker, so checks split off would grade
the campaign twice; a quarter of it is the case table (CASES), data, which the direct checks of the
runner's defences at the end read too.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.hostile_campaign import (
    BURN_BUDGET, CAMPAIGN_TIMEOUT, GRADER_HEADROOM_BYTES, GRADER_MEMORY_BYTES, HIDDEN_LINES, HONEST, HOSTILE_DIR,
    IS_ROOT, LOOP_BUDGET, READABLE_PYTHON, SOLUTION, SOLUTION_LINES, START_AND_CHECK_SECONDS, STORED_SUFFIX, Campaign,
    Case, all_text, distinct_outputs, leaks, memory_limited, memory_mechanism, passed_tests, release_cgroup,
    run_campaign, sandbox_processes,
)
from support.repo import REPO
from support.tiers import FULL, by_family, params_of, selected, unfamilied


# ----- the cases ------------------------------------------------------------------------------------

# What the position-budget tests tell a decode whose work grows faster than its tokens (that it
# took too many times the CPU time, or, with the suite's 2 s per call, that the long run timed out).
WORK_GROWS = "new tokens on tiny-wide"
NOT_ROOT_WRITES = ("writes into every folder it can; run by the grading user itself it would write that "
                   "user's own files (root-level isolation needed)")
CASES = [
    Case("fake results.json at import", "no_decode", "fake_results", says=("HOSTILE could not write",),
         root_only=NOT_ROOT_WRITES),
    Case("sys.exit(0) at import", "no_decode", "sys_exit_at_import", breaks=True,
         says=("kv_decode.py could not be imported", "SystemExit")),
    Case("os._exit(0) at import", "no_decode", "os_exit_at_import", breaks=True,
         says=("kv_decode.py could not be imported", "exited with status 0")),
    Case("os._exit(0) in greedy_decode", "no_decode", "os_exit_in_call",
         says=("the student's process exited with status 0 during kv_decode.greedy_decode(...)",)),
    Case("atexit and signal handlers rewrite results", "no_decode", "atexit_rewrites"),
    Case("conftest.py and pytest configs in the submission", "no_decode", "conftest_files"),
    Case("sitecustomize and .pth planted", "no_decode", "plant_site_hooks",
         says=("HOSTILE could not plant",), root_only=NOT_ROOT_WRITES),
    Case("numpy and pytest comparisons patched", "no_decode", "monkeypatch_checks"),
    Case("always-equal results", "starter", "always_equal"),
    Case("course library patched in memory", "no_update", "patch_library_in_memory"),
    Case("course library patched on disk", "no_decode", "patch_library_on_disk", says=("HOSTILE could not",),
         writes_grader_files=True),
    Case("infinite loop in a call", "no_decode", "infinite_loop", breaks=True, budget=LOOP_BUDGET,
         says=("did not finish within the time limit of 2 s", "not run: the earlier tests used up the time")),
    Case("every call just under the timeout", "no_decode", "slow_calls", breaks=True, budget=BURN_BUDGET,
         says=("not run: the earlier tests used up the time",)),
    Case("memory bomb", "no_decode", "memory_bomb", says=("MemoryError", "may use at most 512 MB of memory")),
    Case("fork bomb", "no_decode", "fork_bomb", says=("HOSTILE fork refused",)),
    Case("memory files outside the address space", "no_decode", "memfd_hoard",
         says=("HOSTILE memfd stopped: PermissionError",)),
    Case("shared-memory segments outside the address space", "no_decode", "shm_segments_hoard",
         says=("HOSTILE shmget refused, errno 1",)),
    Case("50 MB on stdout", "no_decode", "stdout_flood", says=("more bytes of output not kept",)),
    Case("KeyboardInterrupt from a call", "no_decode", "keyboard_interrupt",
         says=("student code raised KeyboardInterrupt",)),
    Case("SystemExit from a call", "no_decode", "system_exit_in_call", says=("student code raised SystemExit",)),
    Case("hunting and printing the hidden tests", "no_decode", "read_hidden", says=("HOSTILE environ",),
         root_only="the grading user can read its own files; hiding them needs bubblewrap as root"),
    Case("signals to the grader", "no_decode", "signals", says=("HOSTILE could not signal",),
         root_only="kill(-1) as the grading user would kill that user's processes, the test run included"),
    Case("operation counters gamed in the student's process", "no_decode", "count_gaming"),
    Case("forged count reply on the protocol pipe", "no_decode", "forge_reply"),
    Case("garbage on the protocol pipe at import", "no_decode", "forge_garbage", breaks=True,
         says=("invalid data from the student's process during kv_decode",)),
    # Without root the network is reachable (reported as reduced isolation): the payload gains nothing.
    Case("network", "no_decode", "network", says=("HOSTILE no connection to 1.1.1.1 53",) if IS_ROOT else ()),
    Case("odd text everywhere", "no_decode", "odd_text"),
    Case("background thread and endless results", "no_decode", "background_mischief"),
    Case("huge and deeply nested results", "no_decode", "huge_results"),
    # Disk: each graded with and without bubblewrap.
    Case("3,000-deep folder chain", "no_decode", "deep_chain"),
    # Without bubblewrap every greedy_decode test makes the chain on disk, and the folder check then
    # stops the worker, removes the chain and starts another: 32 s once on a loaded machine, past the
    # usual 30 s budget, so the kv_cache tests after them were not run.
    Case("3,000-deep folder chain, no bubblewrap", "no_decode", "deep_chain", bubblewrap=False,
         says=("nested more than 64 deep",), budget=60.0),
    # At most a second of CPU per call (see the payload); the folder check stops a later call.
    Case("up to 4,000 more empty files at every call", "no_decode", "many_files", breaks=True,
         says=("more than 10000 files and folders",)),
    Case("up to 4,000 more empty files at every call, no bubblewrap", "no_decode", "many_files", bubblewrap=False,
         breaks=True, says=("more than 10000 files and folders",)),
    Case("filling the disk", "no_decode", "fill_disk", says=("HOSTILE could not fill its folder: OSError",)),
    Case("filling the disk, no bubblewrap", "no_decode", "fill_disk", bubblewrap=False,
         says=("its folder held more than 64 MB",)),
    # Time: the per-call limit is the worker's CPU time, the wall clock a backstop.
    Case("every call just under the CPU limit", "no_decode", "cpu_just_under_limit", breaks=True, budget=BURN_BUDGET,
         says=("not run: the earlier tests used up the time",)),
    Case("a call that sleeps forever", "no_decode", "sleep_forever", breaks=True, budget=15.0,
         says=("of wall-clock time", "not run: the earlier tests used up the time"), waits=True),
    Case("endless loop at import", "no_decode", "spin_at_import", breaks=True,
         says=("kv_decode.py could not be imported", "time limit of 2 s of CPU time")),
    Case("forward asked to do far too much", "no_decode", "huge_forward",
         says=("is bigger than the grader runs in one call", "more than the grader runs attention over")),
    # A decode without a cache, its logits from a private copy of the model (uncounted), plus one
    # junk counted forward call of the budgeted size: the work it does is still measured.
    Case("uncounted model loaded from the library's file", "no_cache", "private_model_by_path",
         says=(WORK_GROWS,)),
    Case("uncounted model from the library's source text", "no_cache", "private_model_pasted", says=(WORK_GROWS,)),
    Case("uncounted model re-imported under its own name", "no_cache", "private_model_reimported",
         says=(WORK_GROWS,)),
    # Replies the trusted side cannot use: the test that asked fails, grading goes on.
    Case("numpy.asarray answered with an int", "no_decode", "reply_array_wrong_kind", breaks=True,
         says=("gave something that is not an array",)),
    Case("update's pair a list subclass that equals anything", "no_decode", "reply_list_subclass", breaks=True,
         says=("should return a pair (K, V)",)),
    Case("the worker ends itself, its objects go stale", "no_decode", "reply_stale_after_crash", breaks=True,
         says=("exited with status 3",)),
    # The trusted process's memory.
    Case("no-cache forward of 8,192 positions with tiny heads", "no_decode", "nocache_forward_8k",
         says=("attention scores",)),
    # No honest test keeps more than two of these replies at once (128 MB is the bound, see
    # tests/harness/test_memory_limit.py); what piled up was the garbage of failed tests, which held the
    # trusted process at 836 MB until it was collected between tests and before large replies
    # (sandbox/kept.py). The student is told what is wrong with each reply.
    Case("large replies held together", "no_decode", "large_replies_held", breaks=True,
         says=("K returned by update on",)),
    # Three calls answer so (see the payload), 2-3 s each: 8-10 s on a slow hour. The budget stays 20 s,
    # since bombing every call once ran out of 10 s on a busy machine before the first test.
    Case("plain data that parses into far more memory", "no_decode", "json_bomb", budget=20.0, breaks=True,
         says=("MB of plain data",)),
]
# Gradescope's Docker: no bubblewrap, the unprivileged user and file permissions only. Every
# case is graded that way too, with the same expectations, except these (folder: why not here).
NOT_WITHOUT_BUBBLEWRAP = {
    "read_hidden": "this machine's checkout of the repository is readable by all users (Gradescope's "
                   "/autograder/source is mode 700)",
    "plant_site_hooks": "the suite's canary is a file anyone may write: permissions alone cannot protect it",
    "network": "without bubblewrap the worker has the machine's network (reported as reduced isolation)",
}
CASES += [dataclasses.replace(case, name=f"{case.name}, no bubblewrap", bubblewrap=False) for case in CASES
          if case.bubblewrap and case.folder not in NOT_WITHOUT_BUBBLEWRAP
          and not any(not other.bubblewrap and other.folder == case.folder for other in CASES)]
CASE_IDS = [re.sub(r"[^\w.]+", "-", case.name).strip("-") for case in CASES]
# The payload families, by folder: the everyday tier grades the first folder of each (its first case,
# the one with bubblewrap where both exist), ordered so that it is among the family's cheapest to grade
# (a loop at import stops at the first limit, a hang uses up the budget: 3 s against 12, on 2 cores);
# `make test-all` grades every case.
FAMILIES = {
    "results and exits": ("sys_exit_at_import", "fake_results", "os_exit_at_import", "os_exit_in_call",
                          "atexit_rewrites", "keyboard_interrupt", "system_exit_in_call"),
    "the grader's checks, library and files": ("monkeypatch_checks", "conftest_files", "plant_site_hooks",
                                               "always_equal", "patch_library_in_memory", "patch_library_on_disk",
                                               "count_gaming"),
    "replies on the protocol pipe": ("reply_list_subclass", "forge_reply", "forge_garbage", "reply_array_wrong_kind",
                                     "reply_stale_after_crash", "odd_text", "background_mischief", "huge_results"),
    "time": ("spin_at_import", "infinite_loop", "slow_calls", "cpu_just_under_limit", "sleep_forever"),
    "memory, processes and output": ("memory_bomb", "fork_bomb", "memfd_hoard", "shm_segments_hoard", "stdout_flood"),
    "the trusted process's memory": ("nocache_forward_8k", "huge_forward", "large_replies_held", "json_bomb"),
    "reading and reaching out": ("read_hidden", "signals", "network"),
    "disk": ("fill_disk", "deep_chain", "many_files"),
    "uncounted work": ("private_model_by_path", "private_model_pasted", "private_model_reimported"),
}
CASE_PARAMS = by_family(CASES, FAMILIES, lambda case: case.folder, default=lambda case: case.bubblewrap,
                        ids=lambda case: CASE_IDS[CASES.index(case)])


def unwrapped(case: Case, bubblewrap: bool) -> bool:
    """A case for bubblewrap, as root where bubblewrap does not work, or by an ordinary user's grader
    (which never uses it) where a no-bubblewrap variant grades the same payload: not graded. Its worker
    would run without it, as that variant's does; the rest (NOT_WITHOUT_BUBBLEWRAP) permissions and
    Landlock alone cannot pass."""
    if not case.bubblewrap:
        return False
    if IS_ROOT:
        return not bubblewrap
    return any(other.folder == case.folder and not other.bubblewrap for other in CASES)


@pytest.fixture(scope="session")
def campaign(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """The cases the session's selected tests read and the honest parts they are compared with,
    graded once, in parallel."""
    items = selected(request, "campaign")
    cases = params_of(items, "case")
    # At least one honest part: the isolation check reads one.
    honest = {case.honest for case in cases} | set(params_of(items, "variant")) or {"starter"}
    return run_campaign(tmp_path_factory.mktemp("hostile"), cases, unwrapped, honest)


# ----- the checks -------------------------------------------------------------------------------------

# The everyday tier checks the honest parts its cases are compared with; the full tier all four.
EVERYDAY_HONEST = {param.values[0].honest for param in CASE_PARAMS if not param.marks}


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize("variant", [pytest.param(variant, marks=() if variant in EVERYDAY_HONEST else (FULL,))
                                     for variant in sorted(HONEST)])
def test_honest_parts_grade_as_expected(campaign: Campaign, variant: str) -> None:
    graded = campaign.honest[variant]
    assert graded.results is not None, f"{variant}: {graded.problem}\n{graded.log[-3000:]}"
    assert graded.results["extra_data"]["status"] == "graded", f"{variant}: {graded.results['output']}"
    score = graded.results["score"]
    expected = {"starter": lambda s: s == 0, "no_decode": lambda s: 0 < s < 100, "no_update": lambda s: 0 < s < 100,
                "no_cache": lambda s: 0 < s < 100}
    assert expected[variant](score), f"the honest part {variant} scored {score}"


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize("case", CASE_PARAMS)
def test_hostile_submission(campaign: Campaign, case: Case) -> None:
    if case.root_only and not IS_ROOT:
        pytest.skip(f"needs root-level isolation: {case.root_only}")
    if not case.bubblewrap and READABLE_PYTHON is None:
        pytest.skip("no interpreter here that the unprivileged user can run, so no grading without bubblewrap")
    if unwrapped(case, campaign.bubblewrap):
        pytest.skip("bubblewrap does not work here (.ci/run installs it), so no grading with it" if IS_ROOT else
                    "an ordinary user's grader never uses bubblewrap; this payload's no-bubblewrap variant expects "
                    "what it does without it, and grading that variant needs root (a uid of its own)")
    outcome = campaign.outcomes[case.name]
    hostile, honest = outcome.hostile, campaign.honest[case.honest].results
    assert honest is not None, f"the honest part {case.honest} was not graded"
    log = hostile.log[-4000:]

    # (1) a valid results.json, always
    memory = f"processes the kernel killed for memory: {hostile.oom_kills}"
    assert hostile.results is not None, (
        f"no valid results.json: {hostile.problem} ({memory})\nrun_autograder's log:\n{log}")
    results = hostile.results
    for name, graded in (("the attack", hostile), ("the chain's reference", outcome.clean)):
        assert graded.memory_peak is None or graded.memory_peak <= GRADER_MEMORY_BYTES - GRADER_HEADROOM_BYTES, (
            f"{name}'s grading peaked at {graded.memory_peak >> 20} MB, within {GRADER_HEADROOM_BYTES >> 20} MB of the "
            f"{GRADER_MEMORY_BYTES >> 20} MB limit")
    status = results["extra_data"]["status"]
    # A worker of the grader's own user: only Landlock (and seccomp's refusal of chmod) keeps it from the
    # grader's files; without Landlock the grader must notice the write and refuse to score.
    confined = any(line.startswith("Landlock (ABI") for line in (hostile.results or {}).get("extra_data", {}).get(
        "isolation", []))
    tamper_detected = case.writes_grader_files and not IS_ROOT and not confined
    if tamper_detected:
        # The worker could write the grader's files: the runner must notice and refuse to score.
        assert status == "grader_fault" and results["score"] == 0, (
            f"the payload could write the grader's files and the grader did not notice: status {status}, "
            f"score {results['score']}\n{log}"
        )
        assert "the grader's files changed while the student's code ran" in hostile.log, f"log:\n{log}"
    else:
        assert status == "graded", f"the attack made the grader fail ({results['output']}; {memory})\n{log}"

    # (2) no points beyond the honest part's
    assert results["score"] <= honest["score"], (
        f"the attack scored {results['score']}, the honest part {case.honest} alone {honest['score']}; "
        f"passed beyond it: {sorted(passed_tests(results) - passed_tests(honest))}"
    )
    extra = passed_tests(results) - passed_tests(honest)
    assert not extra, f"tests passed only thanks to the attack: {sorted(extra)}"
    if not case.breaks and not tamper_detected:
        lost = sorted(passed_tests(honest) - passed_tests(results))
        assert results["score"] == honest["score"], (
            f"the attack should leave the honest code's {honest['score']} points alone, got {results['score']}; "
            f"lost: {lost[:5]}"
        )

    # the student is told what happened (a grader fault has no per-test results to tell it in)
    outputs = "\n".join(t["output"] for t in results["tests"])
    for text in case.says if not tamper_detected else ():
        assert text in outputs, (
            f"no test output says {text!r}; the grading took {hostile.seconds:.1f} s of its {case.budget:g} s budget "
            f"({memory}); what the tests said, each distinct output once:\n{distinct_outputs(results)}\n"
            f"run_autograder's log:\n{log}")
    assert len(json.dumps(results)) < 1_000_000, f"results.json is {len(json.dumps(results))} bytes"

    # (3) nothing hidden reaches the student or the log
    for where, text in (("results.json", all_text(results)), ("run_autograder's output", hostile.log)):
        found = leaks(text, outcome.submitted)
        assert not found, f"{where} shows hidden-test or solution text: {found[:3]}"

    # (4) within the budget
    bound = case.budget + min(case.budget, 60.0) + START_AND_CHECK_SECONDS
    assert hostile.seconds <= bound, f"grading took {hostile.seconds:.1f} s; the bound is {bound:.0f} s"

    # (5) nothing left behind
    if not tamper_detected:
        assert not outcome.changed, f"the grading changed its environment: {outcome.changed}"
    assert not outcome.stray, f"processes of this grading outlived it: {outcome.stray}"
    assert not outcome.planted_ran, f"code the payload planted was executed later: {outcome.planted_ran}"
    clean = outcome.clean
    assert clean.results is not None, f"the next submission got no valid results.json: {clean.problem}"
    assert clean.results["extra_data"]["status"] == "graded" and clean.results["score"] == 100, (
        f"the reference, graded in the same folder after the cases {outcome.chain} (this one among them), scored "
        f"{clean.results['score']} ({clean.results['extra_data']['status']}): {clean.results['output'][:2000]}"
    )


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_no_temporary_folder_outlives_the_suite(campaign: Campaign) -> None:
    """Every grading removes its temporary folders (the sandbox's, whatever the payload made there;
    the grader's private one; the course library's copy without bubblewrap)."""
    assert not campaign.folders_left, f"left behind by the gradings: {sorted(campaign.folders_left)[:5]}"


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_no_grading_changed_the_interpreter(campaign: Campaign) -> None:
    """The venv and the interpreter's libraries are as before the first grading (a planted .pth or
    sitecustomize, a file added to a package folder, a changed start-up file)."""
    assert not campaign.interpreter_changed, (
        f"the gradings changed the venv or the interpreter's libraries: {campaign.interpreter_changed}")


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_no_sandbox_process_outlives_the_suite(campaign: Campaign) -> None:
    """After every grading has ended, no worker and no process of the unprivileged user remains.

    Only processes alive when the last grading ended count (another grading started meanwhile on
    this machine is not ours), and they get a few seconds to go (a grading in progress elsewhere).
    """
    deadline = time.monotonic() + 15.0
    while True:
        left = (sandbox_processes(campaign.tmp) & campaign.sandbox_after) - campaign.sandbox_before
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    described = []
    for pid in sorted(left):
        try:
            described.append(f"{pid}: {Path(f'/proc/{pid}/cmdline').read_bytes()[:200]!r}")
        except OSError:
            described.append(f"{pid}: (gone)")
    assert not left, f"sandbox processes left after the suite: {described}"


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_suite_isolation_is_what_the_checks_assume(campaign: Campaign) -> None:
    """As root the worker must be a uid of its own under bubblewrap (what the cases rely on)."""
    graded = next(iter(campaign.honest.values()))
    assert graded.results is not None, f"{graded.problem}\n{graded.log[-3000:]}"
    isolation = "\n".join(graded.results["extra_data"]["isolation"])
    if IS_ROOT:
        assert re.search(r"unprivileged uid \d+ of its own", isolation), isolation
        if "private filesystem view (bubblewrap)" not in isolation:
            pytest.skip(f"bubblewrap unavailable here; isolation: {isolation}")
        assert "only the system folders" in isolation, f"the worker should see only system folders:\n{isolation}"
    else:
        assert "reduced" in isolation, f"a non-root grader must report reduced isolation:\n{isolation}"


# ----- the runner's own defences, directly --------------------------------------------------------

def python_sources() -> list[Path]:
    """Every payload and every stored Python file of the hostile cases."""
    return sorted([*HOSTILE_DIR.glob("*/payload.py"), *HOSTILE_DIR.glob(f"*/files/*.py{STORED_SUFFIX}")])


@pytest.mark.parametrize("path", python_sources(), ids=lambda p: str(p.relative_to(HOSTILE_DIR)))
def test_hostile_sources_parse(path: Path) -> None:
    """A payload that does not parse would test nothing but the grader's SyntaxError report."""
    try:
        ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as error:
        pytest.fail(f"{path.relative_to(REPO)} does not parse: {error}")


def test_every_case_folder_is_used() -> None:
    from test_hostile_batch import PEEKS  # the other parts' cases (they import support.hostile_campaign,
    from test_hostile_modes import TASK_CASES, TASK_FAMILIES  # not this file)

    folders = {p.name for p in HOSTILE_DIR.iterdir() if p.is_dir()}
    used = {case.folder for case in CASES} | {case.folder for case in TASK_CASES} | set(PEEKS)
    assert used == folders, (
        f"each folder of tests/hostile/payloads must be a case: unused {sorted(folders - used)}, missing {sorted(used - folders)}"
    )
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names), "two cases with one name"
    misfiled = [*unfamilied({case.folder for case in CASES}, FAMILIES),
                *unfamilied({case.folder for case in TASK_CASES}, TASK_FAMILIES)]
    assert not misfiled, f"folders in no payload family of FAMILIES, or in more than one: {misfiled}"
    empty = [case.name for case in CASES if not case.payload and not case.files]
    empty += [case.name for case in TASK_CASES if not case.payload.strip()]
    assert not empty, f"cases with neither a payload nor files: {empty}"


def test_leak_check_sees_hidden_and_solution_text() -> None:
    """The check of (3) must find what it looks for: any hidden test file, any solution region."""
    assert len(HIDDEN_LINES) > 50 and len(SOLUTION_LINES) > 10, (len(HIDDEN_LINES), len(SOLUTION_LINES))
    for path in sorted(REPO.glob("autograder/hidden/*/test_*.py")):
        assert leaks(path.read_text(), ""), f"no distinctive line of {path} is recognised"
    solution = SOLUTION.read_text()
    assert leaks(solution, ""), "the solution's lines are not recognised"
    stubbed_away = [line for line in leaks(solution, HONEST["no_decode"]) if line != "BEGIN SOLUTION"]
    assert stubbed_away, "greedy_decode's solution lines must count as a leak for a submission that stubs it"
    assert not leaks(HONEST["no_decode"], HONEST["no_decode"]), "a student's own code is not a leak"


@pytest.mark.parametrize(("megabytes", "fits"), [(128, True), (1024, False)])
def test_the_graders_memory_limit_is_real(megabytes: int, fits: bool) -> None:
    """What the campaigns run under `memory_limited` cannot take more than GRADER_MEMORY_BYTES."""
    script = f"import numpy; a = numpy.ones({megabytes << 17}); print('allocated', a.nbytes)"
    command, group = memory_limited([sys.executable, "-c", script], f"probe-{megabytes}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    peak, _ = release_cgroup(group)
    allocated = done.returncode == 0 and "allocated" in done.stdout
    assert allocated == fits, (
        f"{megabytes} MB under {memory_mechanism()} at {GRADER_MEMORY_BYTES >> 20} MB: "
        f"{'allocated' if allocated else 'refused'} (exit {done.returncode}, {done.stderr[-300:]!r})")
    if group is not None and fits:
        assert peak is not None and peak >= megabytes << 20, (
            f"the cgroup's peak ({peak} bytes) does not show the {megabytes} MB the probe allocated")


def test_watch_reports_every_kind_of_change(tmp_path: Path) -> None:
    from autograder.harness.run import Watch

    hashed, by_metadata = tmp_path / "hashed", tmp_path / "metadata"
    for folder in (hashed, by_metadata):
        (folder / "pkg").mkdir(parents=True)
        (folder / "pkg" / "a.py").write_text("a = 1\n")
        (folder / "pkg" / "b.py").write_text("b = 1\n")
    watch = Watch(([hashed], [by_metadata]))
    assert watch.changed() == [], "nothing changed yet"
    (hashed / "pkg" / "a.py").write_text("a = 2\n")  # same size: only the content differs
    os.utime(hashed / "pkg" / "a.py", ns=(0, 0))
    (hashed / "pkg" / "__pycache__").mkdir()
    (by_metadata / "pkg" / "b.py").write_text("b = 22\n")
    (by_metadata / "zz.pth").write_text("import os\n")
    changed = watch.changed()
    for path in (hashed / "pkg" / "a.py", hashed / "pkg" / "__pycache__", by_metadata / "pkg" / "b.py",
                 by_metadata / "zz.pth"):
        assert str(path) in changed, f"{path} changed but Watch lists only {changed}"
