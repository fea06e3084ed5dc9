"""A sandbox's lifetime: a fresh uid per kernel (as root), nothing left once it is killed
(daemons and all), nothing left when the grader itself dies, and its cgroups, stage
folder and uid given back by cleanup()."""

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from bwrap_support import level_for, processes_of, sandbox_uid, spec

from autograder.sandbox import bubblewrap

# counts every process of the sandbox's uid, which another test's kernels may share
pytestmark = pytest.mark.alone

# a daemon (double fork, own session) and a thread pool, then "ready" and a long wait
LINGER = r'''
import os, sys, threading, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(300)
    os._exit(0)
for _ in range(4):
    threading.Thread(target=time.sleep, args=(300,), daemon=True).start()
print(os.getuid(), flush=True)
time.sleep(300)
'''


def _start(tmp_path, mode, code=LINGER):
    level, kwargs = level_for(mode)
    return bubblewrap.start(spec(tmp_path, [bubblewrap.PYTHON, "-c", code]),
                            bubblewrap.Limits(), level, stdout=subprocess.PIPE, text=True,
                            **kwargs)


def _gone(uid, timeout=10, before=()):
    """Whether every process of `uid` but those in `before` has ended (within timeout)."""
    deadline = time.monotonic() + timeout
    while set(processes_of(uid)) - set(before) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not set(processes_of(uid)) - set(before)


def test_two_kernels_get_two_uids_that_are_theirs_alone(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first, second = _start(tmp_path / "a", "root"), _start(tmp_path / "b", "root")
    try:
        uids = [int(p.stdout.readline()) for p in (first, second)]
        assert uids == [first.sandbox_uid, second.sandbox_uid]
        assert uids[0] != uids[1] and min(uids) >= bubblewrap.DEFAULT_UIDS[0]
        for uid in uids:  # the uid inside is the uid on the host
            assert len(processes_of(uid)) >= 3  # bwrap, its pid 1, the kernel, the daemon
    finally:
        for p in (first, second):
            p.cleanup()
    assert all(_gone(uid) for uid in uids)


@pytest.mark.parametrize("mode", ["root", "nonroot"])
def test_kill_ends_everything_the_kernel_started(tmp_path, mode):
    # as a non-root user, the kernel's uid is the test's own: only new processes count
    before = processes_of(sandbox_uid(mode)) if mode == "nonroot" else []
    process = _start(tmp_path, mode)
    uid = int(process.stdout.readline())
    assert uid == (process.sandbox_uid if mode == "root" else sandbox_uid(mode))
    assert len(set(processes_of(uid)) - set(before)) >= 4
    groups = dict(process.cgroups.folders) if process.cgroups else {}
    stage = process.stage
    process.kill()
    process.wait(timeout=10)
    assert _gone(uid, before=before), processes_of(uid)
    assert process.outcome().kind == "killed"
    process.cleanup()
    assert not any(folder.exists() for folder in groups.values())
    assert stage is None or not stage.exists()


DIES = r'''
import json, subprocess, sys, time
from pathlib import Path
from autograder.sandbox import bubblewrap
spec = bubblewrap.SandboxSpec(argv=(bubblewrap.PYTHON, "-c", sys.argv[2]),
                              writable=Path(sys.argv[1]))
level = bubblewrap.probe()
p = bubblewrap.start(spec, bubblewrap.Limits(), level, stdout=subprocess.PIPE, text=True)
p.stdout.readline()
print(json.dumps({"uid": p.sandbox_uid,
                  "groups": [str(f) for f in p.cgroups.folders.values()]}), flush=True)
time.sleep(300)
'''


def test_the_kernel_dies_with_its_grader(tmp_path):
    level_for("root")
    (tmp_path / "run").mkdir()
    grader = subprocess.Popen([sys.executable, "-c", DIES, str(tmp_path / "run"), LINGER],
                              stdout=subprocess.PIPE, text=True)
    try:
        seen = json.loads(grader.stdout.readline())
        assert len(processes_of(seen["uid"])) >= 4
        grader.kill()  # the grader dies without any cleanup
        grader.wait()
        assert _gone(seen["uid"]), processes_of(seen["uid"])  # bwrap --die-with-parent
    finally:
        if grader.poll() is None:
            grader.kill()
    # what its cleanup would have removed, a later grader's sweep removes
    level = level_for("root")[0]
    deadline = time.monotonic() + 10
    while any(Path(f).exists() for f in seen["groups"]) and time.monotonic() < deadline:
        bubblewrap.remove_stale(level)
        time.sleep(0.05)
    assert not any(Path(f).exists() for f in seen["groups"])
    mounts = Path("/proc/self/mounts").read_text()
    assert str(tmp_path / "run") not in mounts
    assert not list(Path(tempfile.gettempdir()).glob(f"{bubblewrap.STAGE}{grader.pid}-*"))
    assert not (bubblewrap.LOCKS / f"{seen['uid']}.lock").exists()


# the grader dies the moment the chain is started, before bwrap could set its
# parent-death signal: the kernel must not start (or must die) all the same
DIES_AT_ONCE = r'''
import os, subprocess, sys
from pathlib import Path
from autograder.sandbox import bubblewrap
spec = bubblewrap.SandboxSpec(argv=(bubblewrap.PYTHON, "-c", sys.argv[2]),
                              writable=Path(sys.argv[1]))
p = bubblewrap.start(spec, bubblewrap.Limits(), bubblewrap.probe(), stdout=subprocess.DEVNULL)
print(p.sandbox_uid, flush=True)
os._exit(0)
'''


def test_a_grader_that_dies_while_the_kernel_starts_leaves_no_kernel(tmp_path):
    level_for("root")
    for i in range(5):
        run = tmp_path / f"run{i}"
        run.mkdir()
        died = subprocess.run([sys.executable, "-c", DIES_AT_ONCE, str(run), LINGER],
                              capture_output=True, text=True, timeout=60)
        uid = int(died.stdout.split()[0])
        time.sleep(2)  # what a started chain would need to reach the kernel's Python
        assert _gone(uid), (i, processes_of(uid))
    level = level_for("root")[0]
    bubblewrap.remove_stale(level)


def test_a_sweep_leaves_a_live_graders_empty_cgroups_alone(tmp_path):
    """A kernel's cgroups are empty for a moment, between their making and the kernel
    joining them; another grader's sweep at that moment must not remove them (it did, and
    the kernel's start then failed: "Kernel died before replying to kernel_info")."""
    from autograder.sandbox import cgroups

    level = level_for("root")[0]
    mine = cgroups.KernelCgroups(level.cgroup, level.parents, 64 << 20, 16)
    gone_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True).stdout.strip()
    dead = cgroups.KernelCgroups(level.cgroup, level.parents, 64 << 20, 16,
                                 name=f"{cgroups.PREFIX}{gone_pid}-test")
    try:
        removed = bubblewrap.remove_stale(level)
        assert mine.name not in removed and all(f.is_dir() for f in mine.folders.values())
        assert dead.name in removed and not any(f.exists() for f in dead.folders.values())
    finally:
        mine.remove()
        dead.remove()


@pytest.mark.parametrize("mode", ["root", "nonroot"])
def test_the_sandbox_ends_with_its_lifeline_without_the_kernel_reading_it(tmp_path, mode):
    """bwrap's --die-with-parent misses a grader killed while bwrap sets the sandbox up
    (between its clone and the child's own parent-death signal, the child then waits for
    ever on its setup's eventfd, before any kernel could read the lifeline). The watcher
    outside the sandbox covers it: at the lifeline's end of file it SIGKILLs the launch
    chain's process group. Here the kernel never reads the lifeline (a daemon and a thread
    pool, then a long wait), the lifeline is closed by hand and the launch chain left
    alive: everything of the sandbox ends all the same."""
    before = processes_of(sandbox_uid(mode)) if mode == "nonroot" else []
    process = _start(tmp_path, mode)
    try:
        uid = int(process.stdout.readline())
        assert len(set(processes_of(uid)) - set(before)) >= 4
        time.sleep(0.5)
        assert process.poll() is None  # the lifeline is open: the watcher waits
        os.close(process._lifeline)
        process._lifeline = None
        process.wait(timeout=10)
        assert _gone(uid, before=before), processes_of(uid)
    finally:
        process.cleanup()


def test_a_grading_kernel_ends_when_its_lifeline_does(tmp_path):
    """`gradekernel.watch_lifeline`, the grading kernel's watcher: exit at the lifeline's
    end of file, whatever the kernel was doing."""
    from autograder.kernel import policy

    assert policy.LIFELINE_VARIABLE == bubblewrap.LIFELINE_VARIABLE  # both ends' one name
    read, write = os.pipe()
    code = ("import time\nfrom autograder.kernel.gradekernel import watch_lifeline\n"
            "watch_lifeline()\nprint('watching', flush=True)\ntime.sleep(120)\n")
    kernel = subprocess.Popen([sys.executable, "-c", code], pass_fds=(read,),
                              env={**os.environ, bubblewrap.LIFELINE_VARIABLE: str(read)},
                              stdout=subprocess.PIPE, text=True)
    os.close(read)
    try:
        assert kernel.stdout.readline().strip() == "watching"
        time.sleep(0.5)
        assert kernel.poll() is None  # the grader is there: it waits
        os.close(write)
        assert kernel.wait(timeout=10) == 0
    finally:
        if kernel.poll() is None:
            kernel.kill()
