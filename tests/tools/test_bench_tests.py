"""tools.bench_tests' baseline: an older revision's `make test`, timed beside this checkout's.

The baseline must time the older tests, not an install: its worktree shares this checkout's venv,
which make would rebuild (a minute of pip, timed as part of the "before") had the worktree's
freshly written requirements files stayed newer than the venv's stamp.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tools.bench_tests import ROOT, baseline_checkout, remove_checkout


def test_the_baseline_worktree_takes_the_shared_venv_as_installed(tmp_path: Path) -> None:
    if not (ROOT / ".venv" / ".installed").is_file():
        pytest.skip("no installed .venv in this checkout (`make venv` makes one)")
    checkout = baseline_checkout("HEAD", tmp_path)
    try:
        planned = subprocess.run(["make", "-n", "test"], cwd=checkout, capture_output=True, text=True,
                                 timeout=120, check=False)
        assert planned.returncode == 0, f"make -n test failed in the baseline worktree:\n{planned.stderr[-2000:]}"
        assert "pip install" not in planned.stdout, (
            f"make would reinstall the shared venv in the baseline worktree:\n{planned.stdout[:2000]}")
        assert (checkout / ".venv").resolve() == (ROOT / ".venv").resolve(), "the worktree should use this venv"
    finally:
        remove_checkout(checkout)
