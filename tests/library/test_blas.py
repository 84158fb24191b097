"""kvlab.blas: one BLAS thread unless the environment sets a count, and the start-up line's words for it."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.mark.parametrize(("given", "imports", "said", "threads"), [
    ({}, "import kvlab.blas", "BLAS threads 1", "1"),
    ({"OPENBLAS_NUM_THREADS": "1"}, "import kvlab.blas", "BLAS threads 1", "1"),
    ({"OPENBLAS_NUM_THREADS": "3"}, "import kvlab.blas", "BLAS threads 3 (OPENBLAS_NUM_THREADS from the environment)",
     "3"),
    ({}, "import numpy, kvlab.blas", "BLAS threads: numpy's default (numpy loaded before kvlab.blas)", "1"),
], ids=["default", "one given", "three given", "too late"])
def test_thread_count_and_its_description(given: dict[str, str], imports: str, said: str, threads: str) -> None:
    env = {key: value for key, value in os.environ.items() if key not in VARIABLES} | given
    code = f"{imports}, os; print(kvlab.blas.describe()); print(os.environ['OPENBLAS_NUM_THREADS'])"
    run = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [said, threads], f"with {given or 'nothing'} set and `{imports}`: {run.stdout!r}"
