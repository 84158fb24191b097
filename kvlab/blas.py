"""One BLAS thread unless the environment says otherwise, for the programs that run the course's model:
the lecture demos (kvlab.demo), the serving lab's server (kvlab.serving.server), the tests of a
student's `make test` (kvlab.testing) and the grader. Import it before numpy loads; `describe()` says
which thread count numpy got, for a start-up line.

The course's matrices are small: one BLAS thread runs them faster than several, and on a shared or
loaded machine several threads mostly wait for each other (the server on a loaded 2-core machine ran
a cached request up to about ten times slower with OpenBLAS's default of one thread per core). A thread
count set in the environment (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS) wins.
"""
from __future__ import annotations

import os
import sys

VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# What the environment set before this module did, and whether numpy had loaded already (then the
# BLAS library had read its thread count, and setting it here changes nothing).
GIVEN = {name: os.environ[name] for name in VARIABLES if name in os.environ}
TOO_LATE = "numpy" in sys.modules

for _name in VARIABLES:
    os.environ.setdefault(_name, "1")


def describe() -> str:
    """'BLAS threads 1' (this module's choice, or the same given by a parent process such as a demo), or
    where another count came from: 'BLAS threads 4 (OPENBLAS_NUM_THREADS from the environment)', or
    'BLAS threads: numpy's default (numpy loaded before kvlab.blas)'."""
    if TOO_LATE:
        return "BLAS threads: numpy's default (numpy loaded before kvlab.blas)"
    name, value = next(iter(GIVEN.items()), ("", "1"))
    return "BLAS threads 1" if value == "1" else f"BLAS threads {value} ({name} from the environment)"
