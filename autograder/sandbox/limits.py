"""What one notebook may use while it is graded, how many this machine grades at a time
(`default_jobs`), whether it can isolate a kernel, and the uid slots that keep kernels
running at the same time apart.

Standard library only (plus the launcher, for the isolation probe's command).
"""

import contextlib
import dataclasses
import fcntl
import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.sandbox.launcher import FULL, LIMITS, probe_command

__all__ = ["MiB", "GiB", "FULL", "LIMITS", "SandboxError", "Limits", "default_jobs",
           "size_words", "isolation_available", "acquire_uid", "process_uid"]

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


# ---------------------------------------------------------------- can we isolate?


def _uid_range():
    text = os.environ.get("RESIDUAL_PACK_SANDBOX_UIDS", "64000-64999")
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


@functools.cache
def isolation_available():
    """(level, why not full): `namespaces` when a probe kernel launcher could unshare,
    mount and change uid; else `limits` and the reason."""
    forced = os.environ.get("RESIDUAL_PACK_ISOLATION", "")
    if forced == LIMITS:
        return LIMITS, "RESIDUAL_PACK_ISOLATION=limits"
    if not sys.platform.startswith("linux"):
        return LIMITS, "namespaces need Linux"
    if os.geteuid() != 0:
        return LIMITS, "the grading process is not root (own uid and namespaces need root)"
    lo, _ = _uid_range()
    try:
        run = subprocess.run(probe_command(lo), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return LIMITS, f"the namespace probe failed ({exc})"
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines() or ["no output"]
        return LIMITS, f"the namespace probe failed: {lines[-1]}"
    return FULL, ""


# ---------------------------------------------------------------- uid slots


_HELD_UIDS = []  # open lock files: a uid stays ours while its file is locked
_PROCESS_UID = {}  # pid -> the uid slot that process's kernels run as


def acquire_uid():
    """A uid no other sandboxed kernel uses now (held until this process exits)."""
    lo, hi = _uid_range()
    locks = Path(tempfile.gettempdir()) / "residual-pack-uids"
    locks.mkdir(mode=0o700, exist_ok=True)
    busy = _uids_in_use()
    for uid in range(lo, hi + 1):
        if uid in busy:
            continue
        f = open(locks / f"{uid}.lock", "a+")  # noqa: SIM115 (kept open: it is the lock)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _HELD_UIDS.append(f)
        return uid
    raise SandboxError(f"no free sandbox uid in {lo}-{hi}")


def process_uid():
    """This process's uid slot for its sandboxed kernels: taken on first use, kept until
    the process exits (a forked child takes its own)."""
    pid = os.getpid()
    if pid not in _PROCESS_UID:
        _PROCESS_UID[pid] = acquire_uid()
    return _PROCESS_UID[pid]


def _uids_in_use():
    uids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                uids.add(entry.stat().st_uid)
    return uids
