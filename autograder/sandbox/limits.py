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
    """What one notebook's kernel may use while it is graded, every size in bytes: the
    grader's limits (times, output kept) and the sandbox's (`bubblewrap.start` reads the
    same object). The defaults are the command line's (`residual-pack grade --help`); a
    session takes `cell_timeout` from the course config (`session.course_limits`).

    With cgroups (as root), `memory` bounds everything the kernel holds in memory
    together: its processes, shared memory (memfd, /dev/shm, System V) and the files it
    writes in its tmpfs folders; without, it is each process's address space."""

    cell_timeout: int = 120  # seconds of wall time per cell (the course config's Execute.timeout)
    notebook_timeout: int = 900  # seconds of wall time for the whole notebook
    memory: int = 2 * GiB  # see above
    processes: int = 256  # processes and threads of the kernel's uid
    # CPU per kernel, in cores: a quota in the kernel's cpu cgroup where the sandbox can
    # make one (as root); 0 or None: none. One core each, so that a kernel that keeps every
    # core busy does not push its neighbours' honest cells past their time limits
    cpus: float | None = 1.0
    cpu_seconds: int | None = None  # total CPU time of each process (RLIMIT_CPU); None: none
    file_size: int = 64 * MiB  # largest file it may write
    # all it may write in memory: the size of /tmp and, again, of /dev/shm (HOME and the
    # working folder are in /tmp)
    disk: int = 256 * MiB
    # as root: the tmpfs on the folder the kernel shares with the grader (its connection
    # file and sockets), owned by the kernel's uid
    run_space: int = 1 * MiB
    open_files: int = 1024  # descriptors each process may hold open
    output: int = 8 * MiB  # output kept per notebook; more is left out
    message: int = 64 * MiB  # largest message accepted from the kernel
    notebook_bytes: int = 64 * MiB  # largest notebook file graded
    grace: int = 10  # seconds an interrupted cell has to stop before the kernel is killed

    def describe(self) -> str:
        return (f"{self.cell_timeout} s per cell, {self.notebook_timeout} s per notebook, "
                f"{size_words(self.memory)} memory, {self.processes} processes, "
                f"{size_words(self.disk)} disk, {size_words(self.output)} output kept")


def default_jobs(memory: int = Limits.memory) -> int:
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


def size_words(n: int) -> str:
    """`n` bytes in words: "2 GiB", "64 MiB", "512 bytes"."""
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"
