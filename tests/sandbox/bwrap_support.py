"""What the tests of autograder/sandbox share: the skip (or, under SANDBOX_REQUIRED=1 as
in CI, the failure) where bwrap or root is missing, the two ways a sandbox runs here, and
a Python payload run to its end.

The two ways: "root" is the grader as root (a fresh uid per kernel, cgroup limits); and
"nonroot" is an unprivileged instructor's grader: bwrap run as uid 65534 through setpriv,
in a user namespace, with rlimits and no cgroups (the test itself needs root to play that
user, and root stages the bind sources, which lie under /root here; see bubblewrap.py)."""

import os
import shutil
import sysconfig
from pathlib import Path

import pytest

from autograder.sandbox import bubblewrap

NOBODY = 65534
MODES = ["root", "nonroot"]


def _skip_or_fail(why):
    if os.environ.get("SANDBOX_REQUIRED"):
        pytest.fail(why)
    pytest.skip(why)


def require_sandbox():
    """The probed level, root's with cgroups; skip with the reason (fail under
    SANDBOX_REQUIRED)."""
    if shutil.which("bwrap") is None:
        _skip_or_fail("bubblewrap is not installed (scripts/install-bubblewrap)")
    if os.geteuid() != 0:
        _skip_or_fail("a fresh uid per kernel and cgroup limits need the grader to be root")
    level = bubblewrap.probe()
    if level.kind != "root" or level.cgroup is None:
        _skip_or_fail(f"this machine gives no full sandbox: {level.message}")
    return level


def level_for(mode):
    """(level, keywords for start) of a mode. "nonroot" as root plays uid 65534 (setpriv,
    binds staged by root); as a non-root user it is that user's own sandbox, probed."""
    if mode == "root" or os.geteuid() == 0:
        level = require_sandbox()
        if mode == "root":
            return level, {}
        return bubblewrap.Level("userns", bubblewrap.USERNS_MESSAGE.format(
            user="uid 65534", why="not root")), {"run_as": NOBODY}
    if shutil.which("bwrap") is None:
        _skip_or_fail("bubblewrap is not installed (scripts/install-bubblewrap)")
    level = bubblewrap.probe()
    if level.kind != "userns":
        _skip_or_fail(f"no sandbox for a non-root user here: {level.message}")
    return level, {}


def sandbox_uid(mode):
    """The uid a kernel of `mode` runs as, when it is known before it starts."""
    return NOBODY if os.geteuid() == 0 else os.geteuid()


def spec(tmp_path, argv, **extra):
    writable = tmp_path / "run"
    writable.mkdir(exist_ok=True)
    return bubblewrap.SandboxSpec(
        argv=tuple(argv), writable=writable,
        site_packages=Path(sysconfig.get_paths()["purelib"]), **extra)


def run_python(tmp_path, mode, code, limits=None, timeout=60):
    """(outcome, stdout, stderr) of `python -c code` in the sandbox of `mode`."""
    level, kwargs = level_for(mode)
    return bubblewrap.run(spec(tmp_path, [bubblewrap.PYTHON, "-c", code]),
                          limits or bubblewrap.Limits(), level, timeout=timeout, **kwargs)


def processes_of(uid):
    """The pids of the host's processes that run as `uid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("Uid:") and int(line.split()[1]) == uid:
                    found.append(int(entry.name))
    return found
