"""What one notebook may use while it is graded, and how many this machine grades at a
time (`default_jobs`). Whether and how it can isolate a kernel is `bubblewrap.probe`'s.

Standard library only.
"""

import dataclasses
import os

__all__ = ["MiB", "GiB", "SandboxError", "Limits", "default_jobs", "size_words"]

MiB = 1 << 20
GiB = 1 << 30


class SandboxError(Exception):
    """The sandbox could not be set up (or would not be safe)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one notebook may use while it is graded. The defaults are the command line's
    (`residual-pack grade --help`); a session takes `cell_timeout` from the course config
    (`session.course_limits`)."""

    cell_timeout: int = 120  # seconds of wall time per cell (the course config's Execute.timeout)
    notebook_timeout: int = 900  # seconds of wall time for the whole notebook
    memory: int = 2 * GiB  # address space of each process
    processes: int = 256  # processes and threads of the kernel's uid
    # CPU per kernel, in cores: a quota in the kernel's cpu cgroup where the sandbox can
    # make one (as root); 0: none. One core each, so that a kernel that keeps every core
    # busy does not push its neighbours' honest cells past their time limits
    cpus: float = 1.0
    file_size: int = 64 * MiB  # largest file it may write
    disk: int = 256 * MiB  # all it may write (HOME, working folder, /tmp), in memory
    output: int = 8 * MiB  # output kept per notebook; more is left out
    message: int = 64 * MiB  # largest message accepted from the kernel
    notebook_bytes: int = 64 * MiB  # largest notebook file graded
    grace: int = 10  # seconds an interrupted cell has to stop before the kernel is killed

    def describe(self):
        return (f"{self.cell_timeout} s per cell, {self.notebook_timeout} s per notebook, "
                f"{size_words(self.memory)} memory, {self.processes} processes, "
                f"{size_words(self.disk)} disk, {size_words(self.output)} output kept")


def default_jobs(memory=Limits.memory):
    """Submissions graded at a time: one per core, as many as fit in memory when each
    kernel may use `memory` bytes."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 0
    fit = max(1, total // memory) if total else cores
    return max(1, min(cores, fit))


def size_words(n):
    """`n` bytes in words: "2 GiB", "64 MiB", "512 bytes"."""
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"
