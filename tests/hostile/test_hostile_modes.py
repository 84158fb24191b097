"""The hostile campaign's second part: verdicts that must depend only on the trusted side, the worker's
state, its writes and reads, graded in the four ways a course grades (support.grading_modes.MODES),
and every reference graded in each of them.

A file of its own so that the test runner's workers grade it beside the other parts
(tests/hostile/test_hostile.py: lecture 2's cases; tests/hostile/test_hostile_batch.py: grade-all; the
machinery they share: tests/support/hostile_campaign.py). One module on purpose (over 400 lines): the
cases, the one fixture that grades them all in parallel and the tests that read its gradings share the
cases' declarations.
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder.assignment import load_assignment
from autograder.harness.results import validate
from autograder.harness.sandbox import identity
from support import slots
from support.grading_modes import (
    MODE_SAYS, MODE_SUFFIX, MODES, ROOT_MODES, OrdinaryUser, mode_env, mode_refusal, ordinary_user,
)
from support.hostile_campaign import (
    CALL_TIMEOUT, CAMPAIGN_TIMEOUT, GRADER_HEADROOM_BYTES, GRADER_MEMORY_BYTES, HOSTILE_DIR, IS_ROOT, PARALLEL,
    SITE_PACKAGES, AutograderRun, all_text, leaks, memory_limited, metadata_left, passed_tests, release_cgroup,
)
from support.repo import ASSIGNMENT_IDS, REPO
from support.tiers import FULL, by_family, params_of, selected, unfamilied
from support.traces import stand_in_traces

# ----- lectures 7 and module 6: verdicts that depend only on the trusted side ------------------------
# Each case is a catalog mutant (the honest part: a real bug that loses points; lecture 7's unless it
# says otherwise) with a payload appended to the mutant's file that tries to win those points back
# through the worker: the library function a test calls replaced there, state a "fresh" process
# inherits, work deferred past a cost guard or a cost guard's workload replaced. Only the mutant's
# tasks are graded, or of them the tests the attack aims at (TaskCase.aims) (sandboxed, through the
# grader's entry `autograder.harness.run.run`, in a subprocess, with the suite's 2 s per call), once
# with the payload and once without; the attack must score at most the honest part, pass nothing
# the honest part fails, say why, and show no hidden or solution text. Each case is graded in each
# of its modes (MODES: how the grader runs); the honest parts once, as root with bubblewrap.

L07 = "lecture07"

@dataclass(frozen=True)
class TaskCase:
    name: str
    honest: str  # a mutant of the assignment's catalog
    folder: str  # tests/hostile/payloads/<folder>/payload.py, appended to the mutant's file
    says: tuple[str, ...] = ()
    root_only: str = ""
    assignment: str = L07
    # Harvested expected values: the honest part's graded outputs (what a student reads in an earlier
    # results.json) are pasted into the payload's HARVEST_LINE, for it to answer from. The
    # outputs must mention this call: the attack had something to aim at.
    harvest: str = ""
    modes: tuple[str, ...] = ROOT_MODES  # what the declaration asks for
    mode: str = "bubblewrap"  # this grading's (the declaration is expanded into one case per mode)
    # The tasks graded, when fewer than the honest mutant's: the ones the attack aims at.
    tasks: tuple[str, ...] = ()
    # Why file permissions alone cannot keep this read out, when they cannot: with neither bubblewrap
    # nor Landlock the results must then say the isolation is reduced, as grade-all's PEEKS_UNHELD.
    unheld_by_permissions: str = ""
    # The payload answers inputs a public test shows (as a harvest pastes a public expected value): it may
    # earn that public test, never a hidden one.
    public_inputs: bool = False
    # The test functions the attack aims at, when not every test of its tasks: the case and its honest
    # part are graded on those alone (public and hidden; Suite.tests_root's `tests`).
    aims: tuple[str, ...] = ()

    @property
    def payload(self) -> str:
        return (HOSTILE_DIR / self.folder / "payload.py").read_text(encoding="utf-8")

    @property
    def hidden_only(self) -> bool:
        """Whether only the hidden tests' scores are compared (see public_inputs)."""
        return bool(self.harvest) or self.public_inputs

    @property
    def key(self) -> tuple[str, str, tuple[str, ...], tuple[str, ...]]:
        """The honest grading this case is compared with, on the same tests: (assignment, mutant, tasks
        graded, tests aimed at)."""
        return self.assignment, self.honest, self.tasks, self.aims


# A grader that is not root runs every worker as itself: what one leaves outside its folder cannot be
# told from the grader's own.
SHARED_OUTSIDE = "the worker's own uid (root's grader claims one) owns what it leaves in /tmp and IPC objects"
CHECKOUT_READABLE = ("a checkout that every user may read (as most are) is read through the permission bits "
                     "every grader leaves; only Landlock or bubblewrap keeps the worker out of it")
# The tests a case aims at (TaskCase.aims): lecture 7's that call paged_step, module 6's that read
# the store's counters, lecture 7's eviction cost guards and lecture 2's position budget. (The tasks'
# generated-call tests, most of a grading's time, call them too, but prove nothing more of where the
# worker's reach ends.)
PAGED_STEP_TESTS = ("test_paged_step_matches_forward", "test_paged_logits_equal_dense",
                    "test_slots_across_block_boundaries", "test_slots_edges")
STORE_COUNT_TESTS = ("test_store_and_load_across_connectors", "test_load_and_lookup_talk_to_the_store_as_stated",
                     "test_a_second_engine_loads_what_the_first_stored", "test_connector_rule")
GUARD_TESTS = ("test_cost_does_not_grow_with_capacity",)
# Lecture 2's position-budget tests, which time the decode (decode_checks.work_problem).
BUDGET_TESTS = ("test_forward_sees_each_position_once",)
# Lecture 7's block_hashes tests that compare with a fresh process, where hashes_through_python_hash, the
# honest part of most cases about the worker's state, fails (and every call's answer shows).
FRESH_PROCESS_TESTS = ("test_chained_and_the_same_everywhere", "test_same_digests_in_a_fresh_process")
TASK_CASES = [
    TaskCase("paged_step replaced in the worker", "slots_count_from_length", "paged_step_replaced",
             says=("paged_step",), modes=MODES, aims=PAGED_STEP_TESTS),
    TaskCase("paged_step's cache adapter replaced in the worker", "slots_count_from_length",
             "paged_cache_replaced", says=("paged_step",), modes=MODES, aims=PAGED_STEP_TESTS),
    TaskCase("kvlab.paged swapped in sys.modules", "slots_count_from_length", "paged_module_swapped",
             says=("paged_step",), modes=MODES, aims=PAGED_STEP_TESTS),
    TaskCase("fresh process reads the earlier one's file", "hashes_through_python_hash", "fresh_memory_in_home",
             says=("fresh process",)),
    TaskCase("fresh process reads the earlier one's /tmp", "hashes_through_python_hash", "fresh_memory_in_tmp",
             says=("fresh process",), root_only=SHARED_OUTSIDE),
    TaskCase("fresh process finds the earlier one's folder by its path", "hashes_through_python_hash",
             "fresh_memory_by_path", says=("fresh process",)),
    TaskCase("fresh process reads the earlier one's shared memory", "hashes_through_python_hash",
             "fresh_memory_in_ipc", says=("fresh process",), modes=MODES),
    TaskCase("fresh process reads the earlier one's POSIX message queue", "hashes_through_python_hash",
             "fresh_memory_in_mqueue", says=("fresh process",), modes=MODES),
    TaskCase("fresh process reads the names of the earlier one's sockets", "hashes_through_python_hash",
             "fresh_memory_in_socket_names", says=("fresh process",), modes=MODES),
    TaskCase("fresh process runs what the earlier one appended to its source", "hashes_through_python_hash",
             "fresh_memory_in_source", says=("fresh process",)),
    TaskCase("eviction deferred to match past the guard", "lru_victim_by_scan", "guard_deferred_to_match",
             says=("did not finish within",), aims=GUARD_TESTS),
    TaskCase("eviction deferred to len past the guard", "lru_victim_by_scan", "guard_deferred_to_len",
             says=("did not finish within",), aims=GUARD_TESTS),
    TaskCase("eviction deferred to the next question past the guard", "lru_victim_by_scan",
             "guard_deferred_to_questions", says=("did not finish within",),
             aims=GUARD_TESTS),
    TaskCase("free-queue churn replaced in the worker", "remove_scans_the_queue", "churn_replaced",
             says=("differs from the order the pairs leave",), assignment="module06", tasks=("free_queue",)),
    # Expected values harvested from an earlier grading and answered from a table.
    TaskCase("kv byte counts answered from harvested messages", "bytes_per_token_without_factor_2",
             "harvest_kv_bytes", says=("factor 2 (K and V are both stored) is missing",), assignment="lecture02",
             harvest="kv_cache_bytes("),
    TaskCase("hit ratios answered from harvested messages", "hit_ratio_mean_of_request_ratios", "harvest_hit_ratio",
             says=("a mean of per-request ratios",), harvest="hit_ratio(make_trace(), capacity="),
    TaskCase("MLA byte counts answered from harvested messages", "mla_treated_as_gqa", "harvest_mla_bytes",
             says=("MLA treated as per-head",), assignment="module06",
             harvest="kv_bytes_per_token(the published DeepSeek-V3 config"),
]
# Graded in every mode (MODES): the worker's state, writes and reads, whose isolation each mode
# gives differently.
M06 = "module06"
TASK_CASES += [
    # Answers that are not plain data, in the fresh process as in the main one: the test fails on the
    # student's code, naming the student's class, never the grader (an object of a fresh process
    # would live in a process closed by the time the test reads it).
    TaskCase("fresh process answers with a list subclass", "hashes_through_python_hash", "fresh_nonplain_list",
             says=("returned _AgreeingList",), modes=MODES),
    TaskCase("fresh process answers with str subclasses", "hashes_through_python_hash", "fresh_nonplain_strings",
             says=("of type _AgreeingDigest",), modes=MODES),
    TaskCase("fresh process answers with an array subclass", "hashes_through_python_hash", "fresh_nonplain_array",
             says=("only numeric and bool arrays cross the sandbox",), modes=MODES),
    # Values just under the bound, shown in every failure message: messages and the session bounded.
    TaskCase("every digest list 2 million ints long", "hashes_through_python_hash", "message_huge_hashes",
             modes=MODES),
    TaskCase("every byte count 2 million ints long", "bytes_per_token_without_factor_2", "message_huge_bytes",
             assignment="lecture02", tasks=("kv_memory",), modes=MODES),
    TaskCase("every KV memory answer 2 million ints long", "mla_treated_as_gqa", "message_huge_kv_memory",
             assignment=M06, tasks=("kv_memory",), modes=MODES),
    # Writes outside the worker's own folder, reads of other processes' files.
    TaskCase("files written beside the worker's folder and in the shared scratch folders",
             "hashes_through_python_hash", "writes_beside_home", says=("fresh process",), modes=MODES),
    TaskCase("other processes' files read through /proc", "hashes_through_python_hash", "reads_through_proc",
             modes=MODES),
    TaskCase("a checkout's hidden tests found above sys.path", "hashes_through_python_hash", "reads_checkout_hidden",
             modes=MODES, unheld_by_permissions=CHECKOUT_READABLE),
    # The grader's command line and working folder name the checkout: what a readable checkout holds is
    # as exposed here as above sys.path.
    TaskCase("the grading's tests found through other processes' command lines", "hashes_through_python_hash",
             "reads_grading_tests", modes=MODES, unheld_by_permissions=CHECKOUT_READABLE),
    TaskCase("the grader's scripts, tests and library appended to", "hashes_through_python_hash",
             "writes_grader_files", modes=MODES),
    TaskCase(".pth import hooks planted in every site folder", "hashes_through_python_hash", "writes_import_hooks",
             modes=MODES),
    # Inputs whose shape tells the expected value.
    TaskCase("max_batch's boundary recognized by its free memory", "max_batch_rounds_up",
             "answers_from_max_batch_args", assignment=M06, tasks=("kv_memory",), modes=MODES),
    TaskCase("max_batch's weights recognized by being one byte too large", "max_batch_negative",
             "answers_from_weights_shortfall", assignment=M06, tasks=("kv_memory",), modes=MODES),
    TaskCase("kv_cache_gib right only on the lab's grid of inputs", "gib_as_decimal_gb", "answers_from_lab_grid",
             assignment=M06, tasks=("kv_memory",), modes=MODES, public_inputs=True),
    # Store counters counted where the worker cannot reach them (the store is lent to the worker).
    TaskCase("store counters decremented from the worker", "store_resends_stored_chunks",
             "m06_store_counts_decrement", says=("a chunk already in the store is sent again",), assignment=M06,
             tasks=("kv_connector",), modes=MODES, aims=STORE_COUNT_TESTS),
    TaskCase("store methods replaced by uncounted ones in the worker", "lookup_reads_values",
             "m06_store_counts_uncounted", says=("lookup reads no values",), assignment=M06, tasks=("kv_connector",),
             modes=MODES, aims=STORE_COUNT_TESTS),
    TaskCase("store's answers replaced by a private memory of what was sent", "store_resends_stored_chunks",
             "m06_store_counts_private_cache", says=("evicted since",), assignment=M06, tasks=("kv_connector",),
             modes=MODES, aims=STORE_COUNT_TESTS),
    # Costs padded to look linear, and answers that depend on who asks.
    TaskCase("recomputing decode padded to a CPU floor per call", "decode_recomputes_sequence",
             "l02_padded_cost_floor", says=("new tokens on tiny-wide",), assignment="lecture02",
             tasks=("greedy_decode",), modes=MODES, aims=BUDGET_TESTS),
    TaskCase("recomputing decode padded per token", "decode_recomputes_sequence", "l02_padded_cost_per_token",
             says=("new tokens on tiny-wide",), assignment="lecture02", tasks=("greedy_decode",),
             modes=MODES, aims=BUDGET_TESTS),
    TaskCase("recomputing decode padded by call count", "decode_recomputes_sequence", "l02_padded_cost_call_count",
             says=("new tokens on tiny-wide",), assignment="lecture02", tasks=("greedy_decode",),
             modes=MODES, aims=BUDGET_TESTS),
    TaskCase("nbytes right only from kvlab.testing.probe's frame", "nbytes_counts_max_seq", "l02_detects_caller_frame",
             says=("instead of the stored tokens",), assignment="lecture02", tasks=("kv_cache",), modes=MODES),
    TaskCase("nbytes right only where argv and stack look like the grader's", "nbytes_counts_max_seq",
             "l02_detects_caller_path", says=("instead of the stored tokens",), assignment="lecture02",
             tasks=("kv_cache",), modes=MODES),
    TaskCase("length right only for test modules", "advance_ignores_n", "l02_detects_caller_test_module",
             says=("advance(n) must",), assignment="lecture02", tasks=("kv_cache",), modes=MODES),
    # Kernel keyrings: no namespace separates them, and a key outlives its process.
    TaskCase("fresh process reads the earlier one's kernel key", "hashes_through_python_hash",
             "fresh_memory_in_keyring", says=("fresh process",), modes=MODES),
    TaskCase("fresh process joins the earlier one's named keyring", "hashes_through_python_hash",
             "fresh_memory_in_named_keyring", says=("fresh process",), modes=MODES),
    TaskCase("the grading user's keys described, read and added to", "hashes_through_python_hash",
             "keys_of_the_grading_user", says=("HOSTILE keyctl refused",), modes=MODES),
    # File metadata, which Landlock does not cover: extended attributes and access ACLs.
    TaskCase("fresh process reads a memo in an extended attribute", "hashes_through_python_hash",
             "fresh_memory_in_xattr", says=("fresh process",), modes=MODES),
    TaskCase("the grader's files opened to every user through ACLs", "hashes_through_python_hash",
             "acl_opens_grader_files", says=("HOSTILE ACL: none changed",), modes=MODES),
    TaskCase("the submission's folder locked from its grader through an ACL", "hashes_through_python_hash",
             "acl_locks_own_folders", says=("HOSTILE ACL: none changed",), modes=MODES),
    # /dev: the grading user's terminals. With neither layer only permissions guard /dev: the worker
    # lists it and opens what every user may (a new terminal), none of another's.
    TaskCase("the grading user's terminals read", "hashes_through_python_hash", "dev_terminals_read",
             says=("HOSTILE terminals: none of another opened",), modes=MODES),
    TaskCase("the grading user's terminals reopened through /proc", "hashes_through_python_hash",
             "dev_terminals_through_proc", says=("HOSTILE terminals through /proc: none opened",), modes=MODES),
    TaskCase("/dev listed and its devices opened", "hashes_through_python_hash", "dev_listed_and_opened",
             says=("HOSTILE /dev: only its four files",), modes=("bubblewrap", "landlock", "user")),
    TaskCase("/dev listed and its devices opened, permissions only", "hashes_through_python_hash",
             "dev_listed_and_opened", says=("HOSTILE /dev reached",), modes=("neither",),
             unheld_by_permissions="without Landlock, /dev is guarded by its permissions alone"),
    # Unix sockets: the worker talks to its grader through pipes, and makes no socket.
    TaskCase("the machine's named unix sockets asked", "hashes_through_python_hash", "unix_socket_services",
             says=("socket refused: PermissionError",), modes=MODES),
    TaskCase("a forged line sent to the system log", "hashes_through_python_hash", "unix_socket_syslog",
             says=("socket refused: PermissionError",), modes=MODES),
    TaskCase("other processes' abstract unix sockets asked", "hashes_through_python_hash", "unix_socket_abstract",
             says=("socket refused: PermissionError",), modes=MODES),
    # Names from the worker: checked as text, the student's failure when they are not.
    TaskCase("an answer whose class name holds a NUL", "hashes_through_python_hash", "name_type_nul",
             says=("a type name that is not printable text",), modes=MODES),
    TaskCase("an answer whose class names hold terminal escapes", "hashes_through_python_hash", "name_type_escapes",
             says=("a type name that is not printable text",), modes=MODES),
    TaskCase("an answer whose keys hold a NUL, escapes and 100,000 characters", "hashes_through_python_hash",
             "name_dict_keys", says=("a key (or field or keyword name) that is not printable text",), modes=MODES),
]
# Every case on hashes_through_python_hash is graded on the fresh-process tests.
TASK_CASES = [dataclasses.replace(case, aims=case.aims or FRESH_PROCESS_TESTS)
              if case.honest == "hashes_through_python_hash" else case for case in TASK_CASES]
# One case per mode of each declaration.
TASK_CASES = [dataclasses.replace(case, name=case.name + MODE_SUFFIX[mode], mode=mode)
              for case in TASK_CASES for mode in case.modes]
TASK_CASE_IDS = [re.sub(r"[^\w.]+", "-", case.name).strip("-") for case in TASK_CASES]
# The payload families, by folder: the everyday tier grades the first folder of each, as root with
# bubblewrap (the family's cheapest to grade, where they differ: a free-queue task against lecture 7's
# paged forward); `make test-all` grades every case in every mode.
TASK_FAMILIES = {
    "the course library replaced in the worker": ("churn_replaced", "paged_step_replaced", "paged_cache_replaced",
                                                  "paged_module_swapped"),
    "a fresh process's memory": ("fresh_memory_in_home", "fresh_memory_in_tmp", "fresh_memory_by_path",
                                 "fresh_memory_in_ipc", "fresh_memory_in_mqueue", "fresh_memory_in_socket_names",
                                 "fresh_memory_in_source", "writes_beside_home"),
    "work deferred past a cost guard": ("guard_deferred_to_len", "guard_deferred_to_match",
                                        "guard_deferred_to_questions"),
    "padded costs": ("l02_padded_cost_floor", "l02_padded_cost_per_token", "l02_padded_cost_call_count"),
    "answers that depend on who asks": ("l02_detects_caller_frame", "l02_detects_caller_path",
                                        "l02_detects_caller_test_module"),
    "harvested expected values": ("harvest_kv_bytes", "harvest_hit_ratio", "harvest_mla_bytes"),
    "inputs that tell the answer": ("answers_from_max_batch_args", "answers_from_weights_shortfall",
                                    "answers_from_lab_grid"),
    "answers that are not plain data": ("fresh_nonplain_list", "fresh_nonplain_strings", "fresh_nonplain_array"),
    "messages at the value bound": ("message_huge_bytes", "message_huge_hashes", "message_huge_kv_memory"),
    "reads of other processes' files": ("reads_through_proc", "reads_checkout_hidden", "reads_grading_tests"),
    "writes outside the worker's folder": ("writes_import_hooks", "writes_grader_files"),
    "store counters": ("m06_store_counts_uncounted", "m06_store_counts_decrement", "m06_store_counts_private_cache"),
    "kernel keyrings": ("fresh_memory_in_keyring", "fresh_memory_in_named_keyring", "keys_of_the_grading_user"),
    "file metadata": ("fresh_memory_in_xattr", "acl_opens_grader_files", "acl_locks_own_folders"),
    "/dev and terminals": ("dev_terminals_read", "dev_listed_and_opened", "dev_terminals_through_proc"),
    "unix sockets": ("unix_socket_services", "unix_socket_syslog", "unix_socket_abstract"),
    "names from the worker": ("name_type_nul", "name_type_escapes", "name_dict_keys"),
}
TASK_CASE_PARAMS = by_family(TASK_CASES, TASK_FAMILIES, lambda case: case.folder,
                             default=lambda case: case.mode == "bubblewrap",
                             ids=lambda case: TASK_CASE_IDS[TASK_CASES.index(case)])
# Every reference in every mode; the everyday tier grades lecture 2's (the cheapest) in each.
REFERENCE_PARAMS = [pytest.param(assignment, mode, id=f"{mode}-{assignment}",
                                 marks=() if assignment == "lecture02" else (FULL,))
                    for assignment in ASSIGNMENT_IDS for mode in MODES]

GRADE_ONE = """
import sys
from pathlib import Path
from autograder.harness.run import run
run(sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), mode="sandbox", tests_root=Path(sys.argv[4]))
"""


def grade_tasks(assignment: str, submission: Path, tests_root: Path, env: dict[str, str],
                user: OrdinaryUser | None = None) -> AutograderRun:
    """Grade `submission` against `tests_root` in a subprocess, sandboxed, as the grader does, on
    `env`'s KVLAB_PYTHON where it names one (see gradescope_env); as `user` if given (its folders
    must then be under user.work)."""
    results = submission.parent / f"{submission.name}.json"
    grading = [env.get("KVLAB_PYTHON", sys.executable), "-c", GRADE_ONE, assignment, str(submission), str(results),
               str(tests_root)]
    with slots.grading_slot():
        started = time.monotonic()
        command, group = memory_limited(user.command(grading) if user else grading, f"{assignment}-{submission.name}")
        done = subprocess.run(command, cwd=user.work if user else REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        seconds = time.monotonic() - started
        memory_peak, oom_kills = release_cgroup(group)
    try:
        graded, problem = json.loads(results.read_text(encoding="utf-8")), None
        validate(graded)
    except Exception as error:  # noqa: BLE001 - any way the file is unusable is the finding
        graded, problem = None, f"{type(error).__name__}: {str(error)[:500]}"
    return AutograderRun(graded, problem, done.stdout[-4000:] + done.stderr[-4000:], seconds, memory_peak, oom_kills)


@dataclass
class TaskCampaign:
    honest: dict[tuple[str, str, tuple[str, ...]], AutograderRun]  # TaskCase.key -> the honest part's grading
    hostile: dict[str, tuple[AutograderRun, str]]  # case name -> (grading, what was submitted)
    # (assignment, mode) -> its reference graded in that mode (for every mode this machine grades in)
    references: dict[tuple[str, str], AutograderRun]
    # Where the gradings' files are (the cases' folders, tests roots and results, the user's copies of the
    # grader) and the grader's own: what no case may leave a file in.
    grader_folders: list[Path]


# The line of a harvest payload where the outputs it answers from are pasted (as a student would paste
# what an earlier results.json showed into the submitted file).
HARVEST_LINE = "_OUTPUTS = []  # @HARVEST@"


def harvested(payload: str, outputs: list[str]) -> str:
    """`payload` with `outputs` pasted into its HARVEST_LINE."""
    assert payload.count(HARVEST_LINE) == 1, f"a harvest payload must hold the line {HARVEST_LINE!r} once"
    return payload.replace(HARVEST_LINE, f"_OUTPUTS = {outputs!r}")


def harvest_then_grade(case: TaskCase, honest: concurrent.futures.Future[AutograderRun], target: Path, tests_root: Path,
                       env: dict[str, str], user: OrdinaryUser | None) -> AutograderRun:
    """The harvest case's second submission: the honest part's outputs pasted into the payload, graded."""
    graded = honest.result()
    outputs = [test["output"] for test in graded.results["tests"]] if graded.results else []
    target.write_text(harvested(target.read_text(encoding="utf-8"), outputs), encoding="utf-8")
    return grade_tasks(case.assignment, target.parent, tests_root, env, user)


@pytest.fixture(scope="session")
def task_campaign(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[TaskCampaign]:
    """The cases the session's selected tests read, each in its mode, their honest mutants (as root
    with bubblewrap) and the references in the modes selected, graded once, in parallel (a harvest
    case after its honest part), on stand-in traces (as the corpora)."""
    from autograder import mutants
    from support.suite import Suite

    base = tmp_path_factory.mktemp("hostile-tasks")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KVLAB_"))},
           "KVLAB_CALL_TIMEOUT": str(CALL_TIMEOUT), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(REPO)}
    with ordinary_user() as user:
        def as_user(mode: str) -> OrdinaryUser | None:
            return user if mode == "user" else None

        def place(mode: str, source: Path, name: str) -> Path:
            """`source` copied to `name`, in the user's own folder for the user mode."""
            if as_user(mode) is None:
                return shutil.copytree(source, base / name)
            copy = shutil.copytree(source, user.work / name)
            user.give(copy)
            return copy

        items = selected(request, "task_campaign")
        runnable = [case for case in params_of(items, "case") if mode_refusal(case.mode) is None
                    and not (case.root_only and (case.mode == "user" or not IS_ROOT))]
        suites = {name: Suite(load_assignment(name, REPO)) for name in ASSIGNMENT_IDS}
        # Where the ordinary user can read them too (its folder is open to all; pytest's is not).
        env.update(stand_in_traces(sorted({name for suite in suites.values() for name in suite.assignment.traces}),
                                   (user.folder if user else base) / "traces", real_if_present=False))
        wanted_references = {(item.callspec.params["assignment"], item.callspec.params["mode"]) for item in items
                             if item.originalname == "test_reference_scores_full_marks_in_every_mode"}
        catalogs = {name: {mutant.name: mutant for mutant in suite.catalog} for name, suite in suites.items()}
        roots, folders, labels = {}, {}, {}
        for key in sorted({case.key for case in runnable}):
            name, honest, tasks, aims = key
            labels[key] = "-".join((name, honest, *tasks, *(("aimed",) if aims else ())))
            suite, mutant = suites[name], catalogs[name][honest]
            roots[key] = suite.tests_root(base / f"tests-{labels[key]}", tasks or mutant.tasks, aims)
            folders[key] = mutants.apply(mutant, suite.assignment.solution, base / f"honest-{labels[key]}")
        # The user mode's copies, as root (an ordinary user's suite grades the roots themselves, its own files).
        user_roots = {key: place("user", root, f"tests-{labels[key]}") for key, root in roots.items()
                      if user is not None and any(case.key == key and case.mode == "user" for case in runnable)}
        targets = {}
        for case in runnable:
            folder = place(case.mode, folders[case.key], f"case-{case.folder}-{case.mode}")
            targets[case.name] = target = folder / catalogs[case.assignment][case.honest].file
            target.write_text(target.read_text(encoding="utf-8") + "\n\n" + case.payload, encoding="utf-8")
        references = {}
        for name, suite in suites.items():
            full = suite.tests_root(base / f"tests-{name}")
            for mode in (mode for mode in MODES if (name, mode) in wanted_references and mode_refusal(mode) is None):
                references[name, mode] = (place(mode, suite.assignment.solution, f"reference-{name}-{mode}"),
                                          place(mode, full, f"tests-{name}-{mode}") if as_user(mode) else full)
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            # Submitted first, so that a harvest case waiting for its honest part never holds the pool.
            honest_jobs = {key: pool.submit(grade_tasks, key[0], folders[key], roots[key], env) for key in roots}
            reference_jobs = {(name, mode): pool.submit(grade_tasks, name, folder, root, mode_env(mode, env, user),
                                                        as_user(mode))
                              for (name, mode), (folder, root) in references.items()}
            case_jobs = {}
            for case in runnable:
                key, target, case_user = case.key, targets[case.name], as_user(case.mode)
                root = user_roots[key] if case_user else roots[key]
                case_env = mode_env(case.mode, env, user)
                case_jobs[case.name] = (pool.submit(harvest_then_grade, case, honest_jobs[key], target, root,
                                                    case_env, case_user)
                                        if case.harvest else pool.submit(grade_tasks, case.assignment, target.parent,
                                                                         root, case_env, case_user))
            honest = {key: job.result() for key, job in honest_jobs.items()}
            # What was submitted, read after grading: a harvest case's file got its outputs meanwhile.
            hostile = {name: (job.result(), "\n".join(p.read_text(encoding="utf-8")
                                                      for p in sorted(targets[name].parent.glob("*.py"))))
                       for name, job in case_jobs.items()}
            graded_references = {key: job.result() for key, job in reference_jobs.items()}
        # Shown with -s (or -rA): what each grading took.
        print(f"\ntask campaign: {len(hostile)} cases, {len(honest)} honest parts, {len(graded_references)} references")
        for label, graded in [*((f"honest {labels[key]}", run) for key, run in honest.items()),
                              *((f"reference {name} {mode}", run) for (name, mode), run in graded_references.items()),
                              *((name, run) for name, (run, _) in hostile.items())]:
            print(f"  {label}: {graded.seconds:.1f} s")
        yield TaskCampaign(honest, hostile, graded_references,
                           [base, REPO / "kvlab", REPO / "autograder", SITE_PACKAGES, *([user.folder] if user else [])])


def posix_message_queues() -> list[str] | None:
    """The names of this IPC namespace's POSIX message queues (its mqueue filesystem, mounted for a
    moment in a mount namespace of its own), or None where that cannot be done (not root)."""
    if not IS_ROOT or shutil.which("unshare") is None:
        return None
    with tempfile.TemporaryDirectory(prefix="kvlab-mqueue-") as folder:
        done = subprocess.run(["unshare", "--mount", "sh", "-c", 'mount -t mqueue mqueue "$0" && ls -A "$0"', folder],
                              capture_output=True, text=True, timeout=30)
    return done.stdout.split() if done.returncode == 0 else None


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
def test_task_campaign_leaves_nothing(task_campaign: TaskCampaign) -> None:
    """What the cases wrote outside their folders (files named kvlab-hostile-left-*, a message queue
    named /kvlab-hostile-*) is gone once their gradings are over, in every mode; none ever got into
    the grader's folders or the interpreter's, nor changed the metadata of the grading user's files."""
    left = [entry for folder in identity.SHARED_SCRATCH if os.path.isdir(folder)
            for entry in os.listdir(folder) if entry.startswith("kvlab-hostile-left")]
    assert not left, f"the gradings left {left} in the shared scratch folders"
    site = {sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib")}
    planted = [os.path.join(folder, name) for top in [*task_campaign.grader_folders, *site]
               for folder, _, names in os.walk(top) for name in names if name.startswith("kvlab-hostile-left")]
    assert not planted, f"a case wrote into the grader's or the interpreter's folders: {planted}"
    changed = metadata_left(task_campaign.grader_folders)
    assert not changed, f"a case changed the permissions, ACLs or attributes of the grading user's files: {changed[:10]}"
    queues = posix_message_queues()
    assert queues is None or not [q for q in queues if q.startswith("kvlab-hostile")], (
        f"the gradings left POSIX message queues: {queues}")


# Each test that reads the campaign may be the one whose setup grades it (`-k`, a node id).
@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize(("assignment", "mode"), REFERENCE_PARAMS)
def test_reference_scores_full_marks_in_every_mode(task_campaign: TaskCampaign, assignment: str, mode: str) -> None:
    """Each way of grading gives the reference full marks and names its layers. (Without bubblewrap
    the main worker is ended for every fresh call (Sandbox.fresh): a test that used an object of it
    afterwards would be a grader fault there only.)"""
    refusal = mode_refusal(mode)
    if refusal is not None:
        pytest.skip(refusal)
    graded = task_campaign.references[assignment, mode]
    assert graded.results is not None, f"no valid results.json: {graded.problem}\n{graded.log}"
    results = graded.results
    assert results["extra_data"]["status"] == "graded", f"the grader failed: {results['output']}\n{graded.log}"
    lost = {t["name"]: t.get("output", "")[:300] for t in results["tests"] if t["score"] < t["max_score"]}
    assert not lost and results["score"] == results["extra_data"]["max_score"], (
        f"the reference scored {results['score']} of {results['extra_data']['max_score']} in the {mode} mode; "
        f"lost points in {lost}")
    isolation = results["extra_data"]["isolation"]
    if mode != "bubblewrap" or shutil.which("bwrap"):
        assert any(line.startswith(MODE_SAYS[mode]) for line in isolation), (
            f"the {mode} mode's results should name {MODE_SAYS[mode]!r}: {isolation}")


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize("case", TASK_CASE_PARAMS)
def test_task_attack_gains_nothing(task_campaign: TaskCampaign, case: TaskCase) -> None:
    if mode_refusal(case.mode) is not None:
        pytest.skip(mode_refusal(case.mode))
    if case.root_only and (case.mode == "user" or not IS_ROOT):
        pytest.skip(f"needs root-level isolation: {case.root_only}")
    honest_graded = task_campaign.honest[case.key]
    hostile, submitted = task_campaign.hostile[case.name]
    assert honest_graded.results is not None, f"the honest part {case.honest}: {honest_graded.problem}\n{honest_graded.log}"
    assert hostile.results is not None, f"no valid results.json: {hostile.problem}\n{hostile.log}"
    honest, results = honest_graded.results, hostile.results
    assert results["extra_data"]["status"] == "graded", f"the attack made the grader fail ({results['output']})"
    if hostile.memory_peak is not None:
        assert hostile.memory_peak < GRADER_MEMORY_BYTES - GRADER_HEADROOM_BYTES, (
            f"the grading peaked at {hostile.memory_peak >> 20} MB, too close to {GRADER_MEMORY_BYTES >> 20} MB")
    assert passed_tests(honest) != {t["name"] for t in honest["tests"]}, (
        f"the honest part {case.honest} should fail a test on its own")
    # A public test's inputs and expected value are in its source, which students have: a harvest that
    # pastes the value, or a payload that recognizes the inputs, earns that test, by design. What it must
    # not earn is a hidden test.
    from support.suite import HIDDEN_MARK  # the hidden tests' visibility in the tests roots graded here

    counted = [{**r, "tests": [t for t in r["tests"] if not case.hidden_only or t["visibility"] == HIDDEN_MARK]}
               for r in (honest, results)]
    (honest_score, score), (honest_passed, passed) = ([sum(t["score"] for t in r["tests"]) for r in counted],
                                                      [passed_tests(r) for r in counted])
    assert score <= honest_score, (
        f"the attack scored {score}, the honest part {case.honest} alone {honest_score}"
        f"{' (hidden tests)' if case.hidden_only else ''}; passed beyond it: {sorted(passed - honest_passed)}"
    )
    assert not passed - honest_passed, f"tests passed only thanks to the attack: {sorted(passed - honest_passed)}"
    outputs = "\n".join(t["output"] for t in results["tests"] if t["status"] != "passed")
    for text in case.says:
        assert text in outputs, f"no failed test's output says {text!r}; outputs include:\n{outputs[:3000]}"
    if case.unheld_by_permissions and case.mode == "neither":
        isolation = results["extra_data"]["isolation"]
        assert any(line.startswith("reduced") for line in isolation), (
            f"{case.unheld_by_permissions}; the results must say the isolation is reduced: {isolation}")
    else:
        found = leaks(all_text(results), submitted)
        assert not found, f"results.json shows hidden-test or solution text: {found[:3]}"
    if case.harvest:
        harvested = "\n".join(t["output"] for t in honest["tests"])
        assert case.harvest in harvested, (
            f"the harvest had nothing to aim at: no output of the honest grading mentions {case.harvest!r}")


# What a harvest payload must answer when an output reveals the value: (made-up outputs as a
# revealing grader would print them, the call to make, the answer). Built from the checks' own
# message functions where they have a revealing mode (the public tests use it).
# Where the check modules that write the revealing outputs live.
REVEALING_IMPORTS = (REPO / "assignments" / "lecture02" / "tests", REPO / "assignments" / "lecture07" / "tests",
                     REPO / "autograder" / "hidden" / "lecture07")


def revealing_outputs(folder: str) -> tuple[list[str], str, Any]:
    """(outputs, call, answer) for the harvest payload in tests/hostile/payloads/<folder>; the check modules
    of REVEALING_IMPORTS must be importable."""
    if folder == "harvest_kv_bytes":
        from decode_checks import bytes_problem
        text = bytes_problem("kv_cache_bytes(32, 8, 128, seq_len=5000, batch=3, dtype_bytes=2) (Llama-3.1-8B)", 1,
                             2 * 32 * 8 * 128 * 2 * 5000 * 3, {"batch": 3})
        return [text], "kv_cache_bytes(32, 8, 128, 5000, 3, dtype_bytes=2)", 2 * 32 * 8 * 128 * 2 * 5000 * 3
    if folder == "harvest_hit_ratio":
        from _eviction_checks import HAND_BLOCK, HAND_TRACE, reference_hits
        from eviction_checks import describe_call, hit_ratio_problem
        call = describe_call("the 4-request hand trace", 2, "lru", HAND_BLOCK)
        text = hit_ratio_problem(call, 0.5, None, HAND_TRACE, 2, "lru", HAND_BLOCK, replay=reference_hits)
        hit, total = reference_hits(HAND_TRACE, 2, "lru", HAND_BLOCK)
        return [text], f"hit_ratio([None] * 4, 2, 'lru', {HAND_BLOCK})", hit / total
    return (["kv_bytes_per_token(the published DeepSeek-V3 config, dtype_bytes=2) returned 1, which is too little; "
             "expected 70,272"], "kv_bytes_per_token(CONFIGS['DeepSeek-V3'].config, 2)", 70_272)


HARVEST_RUN = """
import json, sys
from pathlib import Path
from kvlab.hf_configs import CONFIGS
from kvlab.trace import BLOCK
call, payload = sys.argv[1], sys.argv[2]
def own(*args, **kwargs):
    return -1
namespace = {"BLOCK": BLOCK, "kv_bytes_per_token": own, "kv_cache_bytes": own, "hit_ratio": own, "CONFIGS": CONFIGS}
exec(compile(Path(payload).read_text(), payload, "exec"), namespace)
print(json.dumps(eval(call, namespace)))
"""


@pytest.mark.parametrize("case", [case for case in TASK_CASES if case.harvest and case.mode == "bubblewrap"],
                         ids=lambda case: case.folder)
def test_harvest_payload_wins_where_a_value_is_revealed(case: TaskCase, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A harvest case proves something only if its payload would profit from a message that showed the
    expected value: run (in a subprocess: no payload runs in the test process) on such outputs, it
    answers the revealed call with the revealed value, and without them it falls back to its own."""
    for folder in REVEALING_IMPORTS:
        monkeypatch.syspath_prepend(str(folder))
    outputs, call, value = revealing_outputs(case.folder)
    assert any(shown in text for text in outputs for shown in (repr(value), f"{value:,}")), (
        f"the made-up outputs do not reveal {value!r}: {outputs}")
    answers = []
    for pasted in (outputs, []):
        payload = tmp_path / "payload.py"
        payload.write_text(harvested(case.payload, pasted), encoding="utf-8")
        done = subprocess.run([sys.executable, "-c", HARVEST_RUN, call, str(payload)],
                              cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, f"{case.folder}'s payload failed on made-up outputs:\n{done.stderr[-2000:]}"
        answers.append(json.loads(done.stdout))
    assert answers == [value, -1], (
        f"{case.folder}'s payload answered {call} with {answers[0]!r} after a message revealing {value!r} "
        f"(and {answers[1]!r} without one): it would not profit from a revealed value, so its case proves nothing")


# A read or write case proves something only if its payload reads or writes where nothing stops it.
# Each runs here unconfined, in a subprocess (no payload runs in the test process), beside a made-up
# target: a checkout above sys.path, a process whose command line names a tests folder or a grader's
# file, a folder on sys.path; KVLAB_HOSTILE_SCOPE keeps it to this test's folder (a worker's
# environment is empty). `block_hashes` is the honest function the payload wraps.
UNCONFINED_RUN = """
import sys
from pathlib import Path
def block_hashes(tokens, block_size, parent=None):
    return []
payload = Path(sys.argv[1])
exec(compile(payload.read_text(), str(payload), "exec"))
try:
    block_hashes([1, 2], 2)
except RuntimeError as error:
    print(error)
"""


@pytest.mark.parametrize("folder", ["reads_checkout_hidden", "reads_grading_tests", "reads_through_proc",
                                    "writes_grader_files", "writes_import_hooks"])
def test_read_and_write_payloads_work_unconfined(folder: str, tmp_path: Path) -> None:
    secret = "def test_the_made_up_hidden_answer(): assert SECRET"
    hidden = tmp_path / "checkout" / "autograder" / "hidden" / "test_hidden_made_up.py"
    hidden.parent.mkdir(parents=True)
    hidden.write_text(secret, encoding="utf-8")
    grader_file = tmp_path / "graded" / "results.json"
    grader_file.parent.mkdir()
    grader_file.write_text("{}", encoding="utf-8")
    on_path = tmp_path / "checkout" / "lib"  # on sys.path, below the checkout
    on_path.mkdir()
    home = tmp_path / "home"  # the payload's working folder, which it leaves alone as its own
    home.mkdir()
    # A process whose command line names the made-up tests and the grader's file, and holds the tests open.
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; f = open(sys.argv[1]); print(flush=True); "
                               "time.sleep(60)", str(hidden), str(grader_file)], stdout=subprocess.PIPE)
    try:
        holder.stdout.readline()  # the file is open: no guess at how long a loaded machine takes to start it
        done = subprocess.run([sys.executable, "-c", UNCONFINED_RUN, str(HOSTILE_DIR / folder / "payload.py")],
                              cwd=home, env={**os.environ, "KVLAB_HOSTILE_SCOPE": str(tmp_path),
                                             "PYTHONPATH": os.pathsep.join([str(REPO), str(on_path)])},
                              capture_output=True, text=True, timeout=60)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()
    assert done.returncode == 0, f"{folder}'s payload failed unconfined:\n{done.stderr[-2000:]}"
    if folder.startswith("reads_"):
        assert secret in done.stdout, f"{folder}'s payload read nothing where nothing stops it:\n{done.stdout[-2000:]}"
    elif folder == "writes_grader_files":
        assert "kvlab-hostile-left" in grader_file.read_text(encoding="utf-8"), (
            f"{folder}'s payload wrote nothing into a file another process names:\n{done.stdout[-2000:]}")
    else:
        assert list(on_path.glob("kvlab-hostile-left*")), (
            f"{folder}'s payload planted nothing in a folder on sys.path:\n{done.stdout[-2000:]}")
