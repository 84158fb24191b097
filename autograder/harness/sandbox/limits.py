"""The worker's resource limits (its own module: isolation and the sandbox both read it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Resource limits for the worker; the defaults fit Gradescope's 768 MB box beside pytest."""

    cpu_seconds: int = 60
    # Address space, not resident memory: Python with numpy maps about 100 MB before any work.
    memory_bytes: int = 512 << 20
    max_processes: int = 0
    file_bytes: int = 16 << 20
    call_timeout: float = 10.0
    output_bytes: int = 64 << 10

    def describe(self) -> str:
        """The limits in one line of the isolation report."""
        return (
            f"limits: {self.cpu_seconds} s CPU, {self.memory_bytes >> 20} MB address space, "
            f"{self.max_processes} new processes, {self.file_bytes >> 20} MB per file written, "
            f"{self.call_timeout:g} s wall clock per call"
        )
