"""What the tests that run student code in the full sandbox share: the isolation check
(skip where the machine cannot isolate kernels, fail instead under SANDBOX_REQUIRED, as in
CI), the processes a sandbox uid still runs, and the grading command line."""

import functools
import os
import sys
from pathlib import Path

import pytest

from autograder.sandbox import bubblewrap


@functools.cache
def sandbox_level():
    """This machine's `bubblewrap.Level` (probed once per test process)."""
    return bubblewrap.probe()


def require_isolation():
    """Kernels must run in the sandbox's full isolation (bubblewrap as root, a fresh uid
    per kernel): without it a kernel can read the course's files, and the attacks on them
    would succeed. Skip with the reason, or fail when SANDBOX_REQUIRED is set (CI)."""
    level = sandbox_level()
    if not level.root:
        message = f"the sandbox cannot isolate kernels here: {level.message}"
        if os.environ.get("SANDBOX_REQUIRED"):
            pytest.fail(message)
        pytest.skip(message)


def processes_of(uids):
    """The pids of the processes that run as one of `uids`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("Uid:") and int(line.split()[1]) in uids:
                    found.append(int(entry.name))
    return found


def cli():
    """The `residual-pack` command of this environment."""
    script = Path(sys.executable).parent / "residual-pack"
    return [str(script)] if script.exists() else [sys.executable, "-m", "autograder.cli"]
