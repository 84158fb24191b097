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
    # CPU seconds of the worker per call: what decides a verdict, so it does not depend on how
    # busy the machine is. Wall clock only backs it up, against a call that sleeps or blocks.
    call_timeout: float = 10.0
    wall_factor: float = 5.0
    output_bytes: int = 64 << 10
    # The worker's folder in all: bytes, and files and folders (each one costs the machine memory or
    # disk even when empty); nesting deeper than disk_depth is refused as well.
    disk_bytes: int = 64 << 20
    disk_files: int = 10_000
    disk_depth: int = 64

    def wall_seconds(self, cpu_seconds: float) -> float:
        """The wall-clock backstop of a call allowed `cpu_seconds` of CPU time."""
        return cpu_seconds * self.wall_factor

    def describe(self) -> str:
        """The limits in one line of the isolation report."""
        return (
            f"limits: {self.cpu_seconds} s CPU, {self.memory_bytes >> 20} MB address space, "
            f"{self.max_processes} new processes, {self.file_bytes >> 20} MB per file written, "
            f"{self.disk_bytes >> 20} MB and {self.disk_files} files and folders in its folder, "
            f"{self.call_timeout:g} s CPU time per call ({self.wall_seconds(self.call_timeout):g} s wall clock), "
            "no memory files or System V shared memory or message queues (seccomp)"
        )
