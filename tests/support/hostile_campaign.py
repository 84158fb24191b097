"""The hostile campaign's machinery: how a case is built, graded and judged (tests/hostile/).

A case (`Case`) is a lecture 2 submission: an honest part (`HONEST`: the starter or the reference
with some functions stubbed) plus a payload folder of tests/hostile/payloads/. `run_campaign`
grades the honest parts and the cases, as Gradescope does (the package unpacked into a folder laid
out like /autograder, `source/run_autograder` run there, under a real memory limit: `memory_limited`),
in chains that share a folder (`chains`, `run_chain`), and records what each grading left behind
(`environment`, `differences`, `stray_processes`, `sandbox_processes`, `interpreter_state`) and what
it must not show (`leaks`). tests/hostile/test_hostile.py holds lecture 2's cases and the checks;
test_hostile_modes.py and test_hostile_batch.py grade their own cases with the same parts, in the
ways of grading of support/grading_modes.py.

One module on purpose (over 400 lines): one concept, the campaign; `run_campaign` and `run_chain`
build on each part (the honest parts, the snapshots of what a grading leaves, the grader's memory
limit) under one set of budgets and limits, and every hostile test file imports its names from here.
"""
from __future__ import annotations

import concurrent.futures
import contextlib
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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from autograder.build import build
from autograder.grade import unpack
from autograder.harness.results import validate
from autograder.harness.sandbox import identity
from support import slots
from support.isolation import bubblewrapped, readable_python
from support.repo import REPO

ASSIGNMENT = "lecture02"
SOLUTION = REPO / "solutions" / ASSIGNMENT / "kv_decode.py"
STARTER = REPO / "starter" / ASSIGNMENT / "kv_decode.py"
HIDDEN = REPO / "autograder" / "hidden" / ASSIGNMENT
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
# Threads preparing and waiting on gradings; the gradings themselves run one per slot (support.slots).
PARALLEL = slots.count() + 1
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

# The payload folders, one a case (see tests/hostile/README.md).
HOSTILE_DIR = REPO / "tests" / "hostile" / "payloads"
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


# ----- a case ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    honest: str  # a key of HONEST
    # tests/hostile/payloads/<folder>: payload.py is appended to the honest kv_decode.py (module level:
    # it runs at import); files/<name>.hostile are more files of the submission, named <name>.
    folder: str
    breaks: bool = False  # the attack also breaks the honest code: score <= honest, not ==
    says: tuple[str, ...] = ()  # each must appear in some test's output (the student is told why)
    budget: float = TIME_BUDGET
    root_only: str = ""  # why the case cannot run safely or meaningfully without root-level isolation
    writes_grader_files: bool = False  # without an unprivileged worker, must end in a grader fault
    # False: graded as Gradescope's Docker grades (no bubblewrap; the unprivileged user and file
    # permissions only), with an interpreter that user can run (see gradescope_env).
    bubblewrap: bool = True
    # The grading spends its budget waiting on the wall clock (a call that sleeps), not on a CPU: it
    # takes no grading slot, whose count is the cores'.
    waits: bool = False

    @property
    def payload(self) -> str:
        path = HOSTILE_DIR / self.folder / "payload.py"
        return path.read_text(encoding="utf-8") if path.exists() else ""

    @property
    def files(self) -> dict[str, str]:
        stored = sorted((HOSTILE_DIR / self.folder / "files").glob(f"*{STORED_SUFFIX}"))
        return {path.name.removesuffix(STORED_SUFFIX): path.read_text(encoding="utf-8") for path in stored}


READABLE_PYTHON = readable_python()


def gradescope_env(env: dict[str, str]) -> dict[str, str]:
    """`env` for a grading as Gradescope's Docker runs it: no bubblewrap, and the grader (hence the
    worker) on an interpreter the unprivileged user can run, with this venv's packages."""
    assert READABLE_PYTHON is not None, "callers skip without a readable interpreter"
    return {**env, "KVLAB_NO_BUBBLEWRAP": "1", "KVLAB_PYTHON": READABLE_PYTHON,
            "PYTHONPATH": os.pathsep.join(filter(None, [env.get("PYTHONPATH"), str(SITE_PACKAGES)]))}


# ----- what must not leak ---------------------------------------------------------------------------

def shipped_text() -> str:
    """What students have anyway, one file after another: the public tests, the course library, the starters."""
    paths = [*REPO.glob("assignments/*/tests/*.py"), *(REPO / "kvlab").rglob("*.py"), *REPO.glob("starter/*/*.py")]
    return "\n".join(path.read_text() for path in sorted(paths))


def hidden_lines() -> list[str]:
    """Distinctive lines of the hidden tests (every assignment's: a payload finds whatever it can
    read): 40+ characters, not also in what students have, whole or as part of a line (a public
    test may hold a hidden test's line with a comment after it)."""
    shipped = shipped_text()
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
    """path -> mode, sha256 and extended attributes (ACLs among them) of every file and folder under
    root (symlinks: their target)."""
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
                    out[path] = f"{info.st_mode:o} {hashlib.sha256(f.read()).hexdigest()} {attributes(path)}"
            else:
                out[path] = f"{info.st_mode:o} {attributes(path)}"
    return out


def attributes(path: str) -> dict[str, bytes]:
    """The extended attributes of `path` (an access or default ACL shows as system.posix_acl_*)."""
    try:
        return {name: os.getxattr(path, name, follow_symlinks=False)
                for name in sorted(os.listxattr(path, follow_symlinks=False))}
    except OSError:
        return {}


def metadata_left(folders: list[Path]) -> list[str]:
    """What a grading changed in the metadata of the grading user's files under `folders` (the
    checkout, the gradings' folders and results), found without a snapshot: none of them carries an
    ACL or an attribute a payload names `user.kvlab-hostile*`, is writable by every user (but sticky
    folders and the lecture 2 campaign's canary), or has lost its owner's read permission."""
    found = []
    for top in folders:
        for folder, dirs, files in os.walk(top):
            for name in dirs + files:
                path = os.path.join(folder, name)
                try:
                    info = os.lstat(path)
                except OSError:
                    continue  # removed meanwhile
                if os.path.islink(path):
                    continue
                marks = [key for key in attributes(path) if key.startswith(("system.posix_acl", "user.kvlab-hostile"))]
                needed = 0o500 if os.path.isdir(path) else 0o400
                if (info.st_mode & 0o002 and not info.st_mode & 0o1000 and not name.startswith("kvlab-hostile-canary")):
                    marks.append(f"mode {info.st_mode & 0o7777:o}: writable by every user")
                if info.st_mode & needed != needed:
                    marks.append(f"mode {info.st_mode & 0o7777:o}: its owner lost read access")
                found += [f"{path}: {mark}" for mark in marks]
    return found


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


def grade(layout: Path, files: dict[str, str], env: dict[str, str], budget: float,
          waits: bool = False) -> AutograderRun:
    """Put `files` in the layout's submission/ and run source/run_autograder as Gradescope does (in a
    grading slot, unless it `waits`: see Case.waits)."""
    submission = layout / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    submission.mkdir()
    for name, text in files.items():
        (submission / name).write_text(text)
    env = {**env, "AUTOGRADER_ROOT": str(layout), "KVLAB_TIME_BUDGET": str(budget)}
    with contextlib.nullcontext() if waits else slots.grading_slot():
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
    """The cases in chains that share a mode (with or without bubblewrap), of at most CHAIN_LENGTH
    and at least as many chains as grading slots (a chain is graded one case after another); a case
    that can write the grader's files (not as root) gets a chain of its own, so that no other case
    is graded by a grader it changed."""
    result = [[case] for case in cases if case.writes_grader_files and not IS_ROOT]
    length = max(1, min(CHAIN_LENGTH, -(-len(cases) // slots.count())))
    for mode in (True, False):
        shared = [case for case in cases if case.bubblewrap is mode and [case] not in result]
        result += [shared[i:i + length] for i in range(0, len(shared), length)]
    return result


def run_chain(chain: list[Case], cases: list[Case], package: Path, base: Path,
              env: dict[str, str]) -> dict[str, CaseOutcome]:
    """The chain's cases one after another in one folder laid out like /autograder, as successive
    submissions, then the reference solution: what each grading leaves there is checked after it,
    and whatever a case planted has every later grading of the chain to run in. A case's marker
    folder is numbered by its place in `cases` (every case of the campaign)."""
    if not chain[0].bubblewrap:
        env = gradescope_env(env)
    layout = make_layout(base / re.sub(r"\W+", "-", chain[0].name), package)
    graded = []
    for case in chain:
        marker = layout / f"marker-{cases.index(case)}"
        marker.mkdir()
        os.chmod(marker, 0o777)
        submitted = (HONEST[case.honest] + ("\n\n# ----- hostile payload -----\n" + case.payload if case.payload else "")
                     ).replace("@MARKER@", str(marker))
        files = {"kv_decode.py": submitted, **{k: v.replace("@MARKER@", str(marker)) for k, v in case.files.items()}}
        before = environment(layout)
        hostile = grade(layout, files, env, case.budget, case.waits)
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


def megabytes(peak: int | None) -> str:
    """", peak N MB" for a grading's peak memory (known under a cgroup only)."""
    return f", peak {peak >> 20} MB" if peak is not None else ""


def run_campaign(base: Path, cases: list[Case], unwrapped: Callable[[Case, bool], bool],
                 honest_parts: set[str]) -> Campaign:
    """The honest parts named in `honest_parts` and every case of `cases` that this machine can
    grade, graded once, in parallel, in folders under `base`; skips the caller when no grading could
    run student code here. `unwrapped(case, bubblewrap)`: whether a case is left out, given whether
    bubblewrap works here."""
    started = time.monotonic()
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
    runnable = [case for case in cases if (IS_ROOT or not case.root_only)
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
            for name, text in ((name, HONEST[name]) for name in sorted(honest_parts)):
                layout = make_layout(base / f"honest-{name}", package)
                honest_jobs[name] = pool.submit(grade, layout, {"kv_decode.py": text}, env, TIME_BUDGET)
            chain_jobs = [pool.submit(run_chain, chain, cases, package, base, env) for chain in chains(runnable)]
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


# ----- reading a results.json ------------------------------------------------------------------------

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
