"""Hostile submissions: the grader must give an attack no points and keep no scars.

(Lecture 7's and module 6's cases, the four ways of grading and grade-all: tests/test_hostile_modes.py.)

Every case is a lecture02 submission made of an honest part and a payload (a folder of tests/hostile/,
see its README.md):
the honest part is the starter or the reference solution with some functions stubbed, and earns a
known score (graded once per session, alone); the payload is the attack. Each case is graded
through the real flow, as Gradescope does: the Gradescope package unpacked into a folder laid out
like /autograder, `source/run_autograder` run there. For every case:

1. a results.json exists and validates against results_schema.json;
2. its score is at most the honest part's score (and equal when the attack leaves the honest code
   working); every test it passes, the honest part passes too;
3. no hidden-test text or solution text appears in results.json or in run_autograder's output;
4. the grader finished within its budget (the suite lowers the limits through KVLAB_CALL_TIMEOUT and
   KVLAB_TIME_BUDGET, see autograder/harness/run.py);
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
"""
from __future__ import annotations

import ast
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder.build import build
from autograder.grade import unpack
from autograder.harness.results import validate
from autograder.harness.sandbox import identity
from suite_support import bubblewrapped, readable_python

REPO = Path(__file__).resolve().parent.parent
ASSIGNMENT = "lecture02"
SOLUTION = REPO / "solutions" / ASSIGNMENT / "kv_decode.py"
STARTER = REPO / "starter" / ASSIGNMENT / "kv_decode.py"
HIDDEN = REPO / "autograder" / "hidden" / ASSIGNMENT
PUBLIC = REPO / "assignments" / ASSIGNMENT / "tests"
VENV = Path(sys.prefix)
SITE_PACKAGES = Path(sysconfig.get_paths()["purelib"])
IS_ROOT = os.geteuid() == 0

# Small limits keep the suite short: 2 s per call into student code and 30 s per grading (less for
# the cases that hang or burn CPU on purpose); a grading may overrun its budget by at most one test
# (which is itself capped at the budget) plus start-up and validation.
CALL_TIMEOUT = 2.0
TIME_BUDGET = 30.0
START_AND_CHECK_SECONDS = 20.0
# The budget of the cases that burn CPU until the budget runs out: three calls' worth is enough to
# show that the remaining tests are not run.
BURN_BUDGET = 6.0
# The infinite loop must reach its first call to be told of the 2 s limit: on a machine busy with
# other work (CI beside mutation sweeps) start-up and the kv_cache tests alone took 6 s of wall time.
LOOP_BUDGET = 10.0
# Gradings run at once (threads waiting on processes); each is a python process plus the worker.
PARALLEL = 3
# Cases graded one after another in one folder, then the reference once (see run_chain): what a case
# leaves for later submissions has the rest of its chain to show, and the suite grades the
# reference 9 times instead of 80.
CHAIN_LENGTH = 10
# The campaign (every grading, once per session) runs in the setup of the first test that uses it;
# on a busy 2-core machine it takes minutes, beyond the suite's default per-test timeout.
CAMPAIGN_TIMEOUT = 1800

# Gradescope's default container memory: the whole grading (runner, worker, pytest) must fit in it.
GRADER_MEMORY_BYTES = 768 << 20
# Room a grading must leave under that limit (where a cgroup reports its peak): one that peaks closer
# is one larger allocation away from an OOM kill. The worst case peaks at about 440 MB (the memory
# bomb, at the worker's own 512 MB limit); the garbage of failed tests once took a grading to 700 MB.
GRADER_HEADROOM_BYTES = 128 << 20

HOSTILE_DIR = Path(__file__).resolve().parent / "hostile"
# Extra files of a case are stored under this suffix, so that no tool (pytest above all: a conftest.py
# under tests/ would be loaded) ever takes them for the repository's own files.
STORED_SUFFIX = ".hostile"


# ----- honest parts ---------------------------------------------------------------------------------

def replaced(text: str, function: str, body: str) -> str:
    """`text` with the solution region of `def function` replaced by `body` (lines, unindented)."""
    lines = text.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if re.match(rf"\s*def {function}\(", line))
    begin = next(i for i in range(start, len(lines)) if "BEGIN SOLUTION" in lines[i])
    end = next(i for i in range(begin, len(lines)) if "END SOLUTION" in lines[i])
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    lines[begin:end + 1] = [f"{indent}{line}\n" for line in body.splitlines()]
    return "".join(lines)


def stubbed(text: str, function: str, message: str) -> str:
    """`text` with the solution region of `def function` replaced by the starter's kind of stub."""
    return replaced(text, function, f"raise NotImplementedError({message!r})")


# A correct greedy decode that does not use its cache: every step recomputes the whole sequence
# through the counted forward. It earns everything but the position budget.
RECOMPUTE = """tokens = np.asarray(prompt)
step_logits = []
for _ in range(n_new):
    logits = forward(params, cfg, tokens)[:, -1]
    step_logits.append(logits)
    tokens = np.concatenate([tokens, logits.argmax(axis=-1)[:, None].astype(tokens.dtype)], axis=1)
return tokens, step_logits"""


def without_markers(text: str) -> str:
    """A student's file has no solution markers."""
    return "".join(line for line in text.splitlines(keepends=True)
                   if "BEGIN SOLUTION" not in line and "END SOLUTION" not in line)


HONEST = {
    # the stubs: 0 points
    "starter": STARTER.read_text(),
    # KVCache and the byte counts done, greedy_decode a stub
    "no_decode": without_markers(stubbed(SOLUTION.read_text(), "greedy_decode", "greedy_decode (task greedy_decode)")),
    # everything, but greedy_decode recomputes the whole sequence at every step (no cache)
    "no_cache": without_markers(replaced(SOLUTION.read_text(), "greedy_decode", RECOMPUTE)),
    # everything but KVCache.update, so greedy_decode fails too
    "no_update": without_markers(stubbed(SOLUTION.read_text(), "update", "KVCache.update (task kv_cache)")),
}


# ----- the cases ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    honest: str  # a key of HONEST
    # tests/hostile/<folder>: payload.py is appended to the honest kv_decode.py (module level: it runs
    # at import); files/<name>.hostile are more files of the submission, named <name>.
    folder: str
    breaks: bool = False  # the attack also breaks the honest code: score <= honest, not ==
    says: tuple[str, ...] = ()  # each must appear in some test's output (the student is told why)
    budget: float = TIME_BUDGET
    root_only: str = ""  # why the case cannot run safely or meaningfully without root-level isolation
    writes_grader_files: bool = False  # without an unprivileged worker, must end in a grader fault
    # False: graded as Gradescope's Docker grades (no bubblewrap; the unprivileged user and file
    # permissions only), with an interpreter that user can run (see gradescope_env).
    bubblewrap: bool = True

    @property
    def payload(self) -> str:
        path = HOSTILE_DIR / self.folder / "payload.py"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    @property
    def files(self) -> dict[str, str]:
        stored = sorted((HOSTILE_DIR / self.folder / "files").glob(f"*{STORED_SUFFIX}"))
        return {path.name.removesuffix(STORED_SUFFIX): path.read_text(encoding="utf-8") for path in stored}


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
         says=("of wall-clock time", "not run: the earlier tests used up the time")),
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
    # tests/test_memory_limit.py); what piled up was the garbage of failed tests, which held the
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


READABLE_PYTHON = readable_python()


def gradescope_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a grading as Gradescope's Docker runs it: no bubblewrap, and the grader (hence the
    worker) on an interpreter the unprivileged user can run, with this venv's packages."""
    assert READABLE_PYTHON is not None, "callers skip without a readable interpreter"
    return {**env, "KVLAB_NO_BUBBLEWRAP": "1", "KVLAB_PYTHON": READABLE_PYTHON,
            "PYTHONPATH": os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(SITE_PACKAGES)]))}


# ----- what must not leak ---------------------------------------------------------------------------

def shipped_lines() -> set[str]:
    """Lines students have anyway: the public tests, the course library, the starters."""
    paths = [*REPO.glob("assignments/*/tests/*.py"), *(REPO / "kvlab").rglob("*.py"), *REPO.glob("starter/*/*.py")]
    return {line.strip() for path in paths for line in path.read_text().splitlines()}


def hidden_lines() -> list[str]:
    """Distinctive lines of the hidden tests (every assignment's: a payload finds whatever it can
    read): 40+ characters, not also in what students have."""
    shipped = shipped_lines()
    lines = {line.strip() for path in sorted(REPO.glob("autograder/hidden/*/*.py"))
             for line in path.read_text().splitlines()}
    return sorted(line for line in lines if len(line) >= 40 and line not in shipped)


def solution_lines() -> list[str]:
    """Lines of 30+ characters between the solution markers, in every assignment's solutions."""
    regions = [body for path in sorted(REPO.glob("solutions/*/*.py"))
               for body in re.findall(r"BEGIN SOLUTION[^\n]*\n(.*?)\n[^\n]*END SOLUTION", path.read_text(), re.S)]
    return sorted({line.strip() for body in regions for line in body.splitlines() if len(line.strip()) >= 30})


HIDDEN_LINES = hidden_lines()
SOLUTION_LINES = solution_lines()


def leaks(text: str, submitted: str) -> list[str]:
    """Hidden-test and solution lines found in `text` (a line the student submitted is theirs: lecture
    2's hidden tests hold a trusted cached decode, some of whose lines a correct submission writes too)."""
    own = {line.strip() for line in submitted.splitlines()}
    found = [line for line in [*HIDDEN_LINES, *SOLUTION_LINES] if line not in own and line in text]
    if "BEGIN SOLUTION" in text and "BEGIN SOLUTION" not in submitted:
        found.append("BEGIN SOLUTION")
    return found


# ----- the environment a grading must leave as it found it ----------------------------------------

def digest_tree(root: Path, skip_bytecode: bool = True) -> dict[str, str]:
    """path -> mode and sha256 of every file under root (symlinks: their target)."""
    out = {}
    for folder, dirs, files in os.walk(root):
        if skip_bytecode:
            dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            if os.path.islink(path):
                out[path] = "link " + os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as f:
                    out[path] = f"{info.st_mode:o} {hashlib.sha256(f.read()).hexdigest()}"
            else:
                out[path] = f"{info.st_mode:o}"
    return out


def interpreter_state() -> dict[str, Any]:
    """The venv and the interpreter's own libraries: every folder's entries (a planted file shows),
    and size/mtime/mode of the files where Python looks for start-up hooks, plus a sample."""
    state: dict[str, Any] = {}
    stdlib = Path(os.__file__).parent
    for root in (VENV, stdlib / "site-packages"):
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            state[folder] = tuple(sorted(n for n in dirs + files))
    state[str(stdlib)] = tuple(sorted(n for n in os.listdir(stdlib) if n != "__pycache__"))
    hooks = [p for folder in (SITE_PACKAGES, stdlib, stdlib / "site-packages") if folder.is_dir()
             for p in folder.iterdir() if p.is_file()]
    sample = [SITE_PACKAGES / "numpy" / "__init__.py", SITE_PACKAGES / "numpy" / "_core" / "numeric.py",
              SITE_PACKAGES / "_pytest" / "python_api.py", SITE_PACKAGES / "jsonschema" / "__init__.py",
              stdlib / "os.py", stdlib / "site.py"]
    for path in hooks + sample:
        if path.exists():
            info = path.stat()
            state[str(path)] = (info.st_size, info.st_mtime_ns, info.st_mode)
    return state


def environment(layout: Path) -> dict[str, Any]:
    """What one case's gradings must leave as they found it. (The venv and the interpreter's
    libraries are large and shared by the parallel gradings: the campaign compares them once,
    before and after every grading, see test_no_grading_changed_the_interpreter.)"""
    return {
        "the repository's kvlab": digest_tree(REPO / "kvlab"),
        "the repository's hidden tests": digest_tree(HIDDEN),
        "the repository's solutions": digest_tree(SOLUTION.parent),
        "the layout's source/": digest_tree(layout / "source", skip_bytecode=False),
    }


def changed_paths(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The first ten paths added, removed or changed between two fingerprints."""
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))[:10]


def differences(before: dict[str, Any], after: dict[str, Any]) -> dict[str, list[str]]:
    changed = {part: changed_paths(old, after[part]) for part, old in before.items()}
    return {part: paths for part, paths in changed.items() if paths}


def processes_mentioning(text: str) -> list[str]:
    """Live processes whose command line mentions `text` (bubblewrap's names the layout's folders)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                    cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline:
                found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def remove_stale_canaries() -> None:
    """Remove the canaries of campaigns that were killed before they could (a world-writable file
    left among the interpreter's packages); a live campaign's canary stays."""
    for stale in SITE_PACKAGES.glob("kvlab-hostile-canary-*.txt"):
        pid = stale.stem.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            stale.unlink(missing_ok=True)


def sandbox_processes(campaign_tmp: Path) -> set[int]:
    """Processes of this campaign's sandboxes: a worker (imported from a sandbox-* folder under
    `campaign_tmp`, the gradings' TMPDIR) or, as root, any process of a worker's uid (identity.POOL)
    but the workers of other gradings on this machine (the tests of the tests may grade beside this
    suite)."""
    ours = f"{campaign_tmp}/sandbox-".encode()
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
            uid = os.stat(f"/proc/{entry.name}").st_uid
        except OSError:
            continue
        worker = b"/sandbox-" in cmdline and b"import worker" in cmdline
        if (worker and ours in cmdline) or (IS_ROOT and uid in identity.POOL and not worker):
            found.add(int(entry.name))
    return found


def sandbox_start(empty: Path) -> tuple[str | None, bool]:
    """Why the grader would refuse to run student code here (as root, no unprivileged identity can
    run this interpreter and bubblewrap cannot help), or None; and whether its worker runs in
    bubblewrap's view."""
    from autograder.harness.sandbox import NoSafeIdentity, Sandbox

    empty.mkdir()
    try:
        with Sandbox(empty, []) as sandbox:
            sandbox.cpu_seconds()  # waits for the first worker's start, where a refusal comes at the latest
            isolation = sandbox.isolation
    except NoSafeIdentity as refusal:
        return str(refusal), False
    return None, bubblewrapped(isolation)


# ----- grading ----------------------------------------------------------------------------------------

@dataclass
class AutograderRun:
    results: dict[str, Any] | None  # None: no results.json at all
    problem: str | None  # why results.json is missing or invalid
    log: str  # run_autograder's stdout and stderr (the staff's log on Gradescope)
    seconds: float
    memory_peak: int | None = None  # bytes, the whole grading (known under a cgroup only)
    oom_kills: int = 0  # processes of the grading the kernel killed for memory (cgroup only)


@dataclass
class CaseOutcome:
    hostile: AutograderRun
    clean: AutograderRun  # the reference, graded in the same folder after the case's chain (see run_chain)
    chain: list[str]  # the cases graded in that folder before the reference, this one among them
    changed: dict[str, list[str]]
    stray: list[str]
    planted_ran: list[str]
    submitted: str


# ----- the grader's memory -------------------------------------------------------------------------

@dataclass(frozen=True)
class MemoryCgroups:
    """Where root makes a memory cgroup per grading, and the files of its controller's version."""

    parent: Path  # this process's own cgroup: the gradings' groups nest inside it
    version: int
    limit: str  # the limit, with swap not counted as room
    no_swap: str
    peak: str
    events: str  # "oom_kill <n>" among its lines

    @property
    def described(self) -> str:
        return f"a memory cgroup v{self.version}"


CGROUP_FILES = {2: ("memory.max", "memory.swap.max", "memory.peak", "memory.events"),
                1: ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "memory.max_usage_in_bytes",
                    "memory.oom_control")}


def memory_cgroups() -> MemoryCgroups | None:
    """This process's own memory cgroup (v2 where the unified hierarchy has the memory controller,
    else v1's memory hierarchy) if root can make a child in it, else None."""
    if not IS_ROOT:
        return None
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    candidates = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            candidates.append((2, Path("/sys/fs/cgroup") / path.lstrip("/")))
        elif "memory" in controllers.split(","):
            candidates.append((1, Path("/sys/fs/cgroup/memory") / path.lstrip("/")))
    for version, own in sorted(candidates, reverse=True):
        try:
            if version == 2 and "memory" not in (own / "cgroup.controllers").read_text().split():
                continue
            probe = Path(tempfile.mkdtemp(prefix="kvlab-memory-probe-", dir=own))
            probe.rmdir()
        except OSError:
            continue
        return MemoryCgroups(own, version, *CGROUP_FILES[version])
    return None


CGROUPS = memory_cgroups()


def memory_mechanism() -> str:
    return CGROUPS.described if CGROUPS is not None else "RLIMIT_AS on run_autograder"


def memory_limited(command: list[str], name: str) -> tuple[list[str], Path | None]:
    """`command` under a real limit of GRADER_MEMORY_BYTES for the whole grading, and the cgroup
    made for it (None under RLIMIT_AS): a memory cgroup (every process of the grading counted
    together, as in Gradescope's container) when one can be made, else RLIMIT_AS on run_autograder,
    which the runner inherits (the worker sets its own, lower one)."""
    if CGROUPS is not None:
        group = CGROUPS.parent / f"kvlab-hostile-{os.getpid()}-{name}"
        try:
            group.mkdir()
            (group / CGROUPS.limit).write_text(str(GRADER_MEMORY_BYTES))
            if (group / CGROUPS.no_swap).exists():  # v2: no swap at all; v1: memory + swap within the limit
                (group / CGROUPS.no_swap).write_text("0" if CGROUPS.version == 2 else str(GRADER_MEMORY_BYTES))
        except OSError:
            if group.exists():
                group.rmdir()
        else:
            return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(group), *command], group
    return ["sh", "-c", f'ulimit -v {GRADER_MEMORY_BYTES >> 10} && exec "$@"', "sh", *command], None


def release_cgroup(group: Path | None) -> tuple[int | None, int]:
    """(peak bytes, OOM kills) of a grading's cgroup, which is then removed (once its processes are);
    (None, 0) under RLIMIT_AS, which has no cgroup to read."""
    if group is None or CGROUPS is None:
        return None, 0
    peak_file = group / CGROUPS.peak
    peak = int(peak_file.read_text()) if peak_file.exists() else None
    events = dict(line.split() for line in (group / CGROUPS.events).read_text().splitlines())
    deadline = time.monotonic() + 10.0
    while True:
        try:
            group.rmdir()
            break
        except OSError:
            if time.monotonic() > deadline:
                break
            time.sleep(0.1)
    return peak, int(events.get("oom_kill", 0))


def make_layout(root: Path, package: Path) -> Path:
    """A folder laid out like Gradescope's /autograder after setup.sh (see autograder/grade.py)."""
    root.mkdir(parents=True)
    os.chmod(root, 0o755)
    unpack(package, root / "source")
    (root / "source").chmod(0o700)
    (root / "results").mkdir()
    return root


def grade(layout: Path, files: dict[str, str], env: dict[str, str], budget: float) -> AutograderRun:
    """Put `files` in the layout's submission/ and run source/run_autograder as Gradescope does."""
    submission = layout / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    submission.mkdir()
    for name, text in files.items():
        (submission / name).write_text(text)
    env = {**env, "AUTOGRADER_ROOT": str(layout), "KVLAB_TIME_BUDGET": str(budget)}
    started = time.monotonic()
    command, group = memory_limited([str(layout / "source" / "run_autograder")], layout.name)
    process = subprocess.Popen(command, cwd=layout, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        out, _ = process.communicate(timeout=3 * budget + 60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        out += b"\n[test_hostile: run_autograder was killed: it ran far past its budget]\n"
    seconds = time.monotonic() - started
    memory_peak, oom_kills = release_cgroup(group)
    path = layout / "results" / "results.json"
    results, problem = None, None
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
        validate(results)
    except Exception as error:  # noqa: BLE001 - any way the file is unusable is the finding
        problem = f"{type(error).__name__}: {str(error)[:500]}"
    return AutograderRun(results, problem, out.decode(errors="replace"), seconds, memory_peak, oom_kills)


def chains(cases: list[Case]) -> list[list[Case]]:
    """The cases in chains of at most CHAIN_LENGTH that share a mode (with or without bubblewrap);
    a case that can write the grader's files (not as root) gets a chain of its own, so that no
    other case is graded by a grader it changed."""
    result = [[case] for case in cases if case.writes_grader_files and not IS_ROOT]
    for mode in (True, False):
        shared = [case for case in cases if case.bubblewrap is mode and [case] not in result]
        result += [shared[i:i + CHAIN_LENGTH] for i in range(0, len(shared), CHAIN_LENGTH)]
    return result


def run_chain(chain: list[Case], package: Path, base: Path, env: dict[str, str]) -> dict[str, CaseOutcome]:
    """The chain's cases one after another in one folder laid out like /autograder, as successive
    submissions, then the reference solution: what each grading leaves there is checked after it,
    and whatever a case planted has every later grading of the chain to run in."""
    if not chain[0].bubblewrap:
        env = gradescope_env(env)
    layout = make_layout(base / re.sub(r"\W+", "-", chain[0].name), package)
    graded = []
    for case in chain:
        marker = layout / f"marker-{CASES.index(case)}"
        marker.mkdir()
        os.chmod(marker, 0o777)
        submitted = (HONEST[case.honest] + ("\n\n# ----- hostile payload -----\n" + case.payload if case.payload else "")
                     ).replace("@MARKER@", str(marker))
        files = {"kv_decode.py": submitted, **{k: v.replace("@MARKER@", str(marker)) for k, v in case.files.items()}}
        before = environment(layout)
        hostile = grade(layout, files, env, case.budget)
        changed = differences(before, environment(layout))
        graded.append((case, marker, submitted, hostile, changed, stray_processes(layout)))
    before = environment(layout)
    clean = grade(layout, {"kv_decode.py": SOLUTION.read_text()}, env, TIME_BUDGET)
    after_clean = {part + " (after the reference's grading)": paths
                   for part, paths in differences(before, environment(layout)).items()}
    names = [case.name for case in chain]
    return {case.name: CaseOutcome(hostile, clean, names, {**changed, **after_clean}, stray, sorted(os.listdir(marker)),
                               submitted)
            for case, marker, submitted, hostile, changed, stray in graded}


def stray_processes(layout: Path) -> list[str]:
    """Processes still naming the layout's folders a few seconds after its grading ended."""
    deadline = time.monotonic() + 3.0
    while True:  # bubblewrap's command line names the layout's folders
        stray = processes_mentioning(f"{layout}/")  # the slash: another case's name may extend this one's
        if not stray or time.monotonic() > deadline:
            return stray
        time.sleep(0.1)


@dataclass
class Campaign:
    honest: dict[str, AutograderRun]
    outcomes: dict[str, CaseOutcome]
    sandbox_before: set[int]  # sandbox processes (of other gradings on this machine) before the suite
    sandbox_after: set[int]  # and right after its last grading
    seconds: float
    folders_left: set[Path]  # what the gradings left in their temporary folder (TMPDIR)
    tmp: Path  # that folder (removed by now; sandbox workers' command lines name it)
    interpreter_changed: list[str]  # the venv's and the interpreter's paths that changed (see environment)
    bubblewrap: bool  # whether the grader's workers run in bubblewrap's view here


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


def megabytes(peak: int | None) -> str:
    """", peak N MB" for a grading's peak memory (known under a cgroup only)."""
    return f", peak {peak >> 20} MB" if peak is not None else ""


@pytest.fixture(scope="session")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    """Every honest part and every case, graded once, in parallel."""
    started = time.monotonic()
    base = tmp_path_factory.mktemp("hostile")
    refusal, bubblewrap = sandbox_start(base / "empty")
    if refusal is not None:
        pytest.skip(f"every grading would stop with a grader fault here (student code never runs as root): {refusal}")
    package = build(ASSIGNMENT, base / "dist")
    grading_tmp = Path(tempfile.mkdtemp(prefix="kvlab-hostile-tmp-"))
    grading_tmp.chmod(0o755)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "KVLAB_"))},
        "KVLAB_PYTHON": sys.executable, "KVLAB_CALL_TIMEOUT": str(CALL_TIMEOUT),
        "PYTHONDONTWRITEBYTECODE": "1",
        # The gradings' temporary folders (the sandboxes' among them) go here, so that what they
        # leave behind is told apart from other programs' (bubblewrap binds them back through /tmp's
        # cover; the worker's user must be able to pass through it).
        "TMPDIR": str(grading_tmp),
    }
    sandbox_before = sandbox_processes(grading_tmp)
    runnable = [case for case in CASES if (IS_ROOT or not case.root_only)
                and (case.bubblewrap or READABLE_PYTHON is not None) and not unwrapped(case, bubblewrap)]
    # A file anyone may write, among the interpreter's packages: the worker must not be able to
    # write it (the payloads append to every writable file they find there). Root only: the venv
    # belongs to root.
    canary = SITE_PACKAGES / f"kvlab-hostile-canary-{os.getpid()}.txt"
    if IS_ROOT:
        remove_stale_canaries()
        canary.write_text("canary\n")
        os.chmod(canary, 0o666)
    try:
        interpreter_before = interpreter_state()
        with concurrent.futures.ThreadPoolExecutor(PARALLEL) as pool:
            honest_jobs = {}
            for name, text in HONEST.items():
                layout = make_layout(base / f"honest-{name}", package)
                honest_jobs[name] = pool.submit(grade, layout, {"kv_decode.py": text}, env, TIME_BUDGET)
            chain_jobs = [pool.submit(run_chain, chain, package, base, env) for chain in chains(runnable)]
            honest = {name: job.result() for name, job in honest_jobs.items()}
            outcomes = {name: outcome for job in chain_jobs for name, outcome in job.result().items()}
        canary_text = canary.read_text() if IS_ROOT else "canary\n"
        interpreter_changed = changed_paths(interpreter_before, interpreter_state())
        left_behind = set(grading_tmp.iterdir())
    finally:
        canary.unlink(missing_ok=True)
        shutil.rmtree(grading_tmp, ignore_errors=True)
    assert canary_text == "canary\n", f"a worker wrote into the world-writable canary {canary}: {canary_text!r}"
    seconds = time.monotonic() - started
    # Shown with -s (or -rA): what each grading scored and took.
    print(f"\nhostile suite: {len(outcomes)} cases graded in {seconds:.1f} s, each grading under "
          f"{memory_mechanism()} of {GRADER_MEMORY_BYTES >> 20} MB")
    for name, graded in honest.items():
        print(f"  honest {name}: score {graded.results and graded.results['score']}, {graded.seconds:.1f} s"
              + megabytes(graded.memory_peak))
    for name, outcome in outcomes.items():
        score = outcome.hostile.results and outcome.hostile.results["score"]
        print(f"  {name}: score {score}, {outcome.hostile.seconds:.1f} s{megabytes(outcome.hostile.memory_peak)} "
              f"(the chain's reference: {outcome.clean.seconds:.1f} s{megabytes(outcome.clean.memory_peak)})")
    return Campaign(honest, outcomes, sandbox_before, sandbox_processes(grading_tmp), seconds, left_behind,
                    grading_tmp, interpreter_changed, bubblewrap)


# ----- the checks -------------------------------------------------------------------------------------

def passed_tests(results: dict[str, Any]) -> set[str]:
    return {t["name"] for t in results["tests"] if t["status"] == "passed"}


def distinct_outputs(results: dict[str, Any]) -> str:
    """Each different test output (its start) with how many tests gave it, most frequent first."""
    counts: dict[str, int] = {}
    for test in results["tests"]:
        start = test["output"][:160].replace("\n", " ") or "(passed, no output)"
        counts[start] = counts.get(start, 0) + 1
    return "\n".join(f"  {n} x {text}" for text, n in sorted(counts.items(), key=lambda item: -item[1]))


def all_text(results: dict[str, Any]) -> str:
    """Every string in results.json (decoded, so an escaped quote is a quote)."""
    def strings(value: Any) -> list[str]:
        if isinstance(value, str):
            return [value]
        if isinstance(value, dict):
            return [s for v in value.values() for s in strings(v)]
        if isinstance(value, list):
            return [s for v in value for s in strings(v)]
        return []
    return "\n".join(strings(results))


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize("variant", sorted(HONEST))
def test_honest_parts_grade_as_expected(campaign: Campaign, variant: str) -> None:
    graded = campaign.honest[variant]
    assert graded.results is not None, f"{variant}: {graded.problem}\n{graded.log[-3000:]}"
    assert graded.results["extra_data"]["status"] == "graded", f"{variant}: {graded.results['output']}"
    score = graded.results["score"]
    expected = {"starter": lambda s: s == 0, "no_decode": lambda s: 0 < s < 100, "no_update": lambda s: 0 < s < 100,
                "no_cache": lambda s: 0 < s < 100}
    assert expected[variant](score), f"the honest part {variant} scored {score}"


@pytest.mark.timeout(CAMPAIGN_TIMEOUT)
@pytest.mark.parametrize("case", CASES, ids=CASE_IDS)
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
    graded = campaign.honest["starter"]
    assert graded.results is not None
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
    from test_hostile_modes import PEEKS, TASK_CASES  # the second part's cases (it imports this file)

    folders = {p.name for p in HOSTILE_DIR.iterdir() if p.is_dir()}
    used = {case.folder for case in CASES} | {case.folder for case in TASK_CASES} | set(PEEKS)
    assert used == folders, (
        f"each folder of tests/hostile must be a case: unused {sorted(folders - used)}, missing {sorted(used - folders)}"
    )
    names = [case.name for case in CASES]
    assert len(set(names)) == len(names), "two cases with one name"
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


def test_limit_overrides_can_only_lower(monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.harness.backends import GraderFault
    from autograder.harness.run import CALL_TIMEOUT_ENV, lowered_by_env

    monkeypatch.delenv(CALL_TIMEOUT_ENV, raising=False)
    assert lowered_by_env(10.0, CALL_TIMEOUT_ENV) == 10.0, "unset: the value stands"
    monkeypatch.setenv(CALL_TIMEOUT_ENV, "2.5")
    assert lowered_by_env(10.0, CALL_TIMEOUT_ENV) == 2.5, "a smaller value lowers the limit"
    monkeypatch.setenv(CALL_TIMEOUT_ENV, "60")
    assert lowered_by_env(10.0, CALL_TIMEOUT_ENV) == 10.0, "a larger value must never raise the limit"
    for bad in ("soon", "nan", "-1", "0"):
        monkeypatch.setenv(CALL_TIMEOUT_ENV, bad)
        with pytest.raises(GraderFault, match=CALL_TIMEOUT_ENV):
            lowered_by_env(10.0, CALL_TIMEOUT_ENV)
    monkeypatch.setenv(CALL_TIMEOUT_ENV, "0")
    assert lowered_by_env(480.0, CALL_TIMEOUT_ENV, allow_zero=True) == 0.0, "a zero budget is allowed"


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
