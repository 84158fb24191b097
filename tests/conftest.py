"""Before any test module loads numpy: one BLAS thread in every test process and the graders they
start, as the grader itself takes (kvlab.blas says why: on 2 busy cores OpenBLAS's default of a
thread per core made lecture 7's trusted forward about ten times slower)."""
import kvlab.blas  # noqa: F401
