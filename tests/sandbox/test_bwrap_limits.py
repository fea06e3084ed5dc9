"""Each limit hit, and what the grader would show the instructor: memory (anonymous, a
memfd, files on the /tmp tmpfs, /dev/shm), processes (a fork bomb), disk (a file bigger
than the tmpfs, a file bigger than the file-size limit). As root the memory cgroup counts
all four kinds of memory together and the kernel is stopped at the limit ("out of
memory"); as a non-root instructor (uid 65534, no cgroup) each kind meets the rlimit or
the refusal that stands in for it. Run with -s to see the messages."""

import pytest
from bwrap_support import run_python

from autograder.sandbox.limits import Limits, MiB

SMALL = Limits(memory=128 * MiB, disk=1024 * MiB, processes=32, file_size=1024 * MiB)

# each allocates up to 768 MiB, 8 MiB at a time, then says it survived
MEMORY = {
    "anonymous": "chunks = []\nfor _ in range(96):\n    chunks.append(b'x' * (8 << 20))\n",
    "memfd": ("import os\nfd = os.memfd_create('held')\nchunk = b'x' * (8 << 20)\n"
              "for _ in range(96):\n    os.write(fd, chunk)\n"),
    "tmpfs": ("chunk = b'x' * (8 << 20)\nwith open('/tmp/big', 'wb') as f:\n"
              "    for _ in range(96):\n        f.write(chunk)\n        f.flush()\n"),
    "dev_shm": ("chunk = b'x' * (8 << 20)\nwith open('/dev/shm/big', 'wb') as f:\n"
                "    for _ in range(96):\n        f.write(chunk)\n        f.flush()\n"),
}
SURVIVED = "\nprint('survived')\n"


def _show(name, outcome, err):
    last = (err.strip().splitlines() or [""])[-1]
    print(f"\n[{name}] {outcome.kind}: {outcome.message} | report {outcome.report} "
          f"| last stderr line: {last}")


@pytest.mark.parametrize("kind", sorted(MEMORY))
def test_memory_of_every_kind_stops_at_the_cgroup_limit(tmp_path, kind):
    outcome, out, err = run_python(tmp_path, "root", MEMORY[kind] + SURVIVED, SMALL)
    _show(f"root memory {kind}", outcome, err)
    assert "survived" not in out
    assert outcome.kind == "out of memory"
    assert outcome.message.startswith("out of memory: the kernel needed more than its 128 MiB")
    assert outcome.report["oom_kills"] > 0 or outcome.report["memory_failures"] > 0


@pytest.mark.parametrize("kind,expected", [
    ("anonymous", "MemoryError"),  # RLIMIT_AS
    ("memfd", "PermissionError"),  # memfd_create refused by seccomp: nothing would count it
    ("tmpfs", "No space left on device"),  # the tmpfs's own size (64 MiB here)
    ("dev_shm", "No space left on device"),
])
def test_without_cgroups_every_kind_meets_its_stand_in(tmp_path, kind, expected):
    limits = Limits(memory=256 * MiB, disk=64 * MiB, processes=32, file_size=1024 * MiB)
    outcome, out, err = run_python(tmp_path, "nonroot", MEMORY[kind] + SURVIVED, limits)
    _show(f"non-root memory {kind}", outcome, err)
    assert "survived" not in out
    assert outcome.kind == "exited" and outcome.returncode == 1
    assert expected in err


FORK_BOMB = r'''
import os, sys, time
started = 0
while True:
    try:
        pid = os.fork()
    except OSError as exc:
        print(f"fork refused after {started}: {exc}")
        sys.stdout.flush()
        os._exit(3)
    if pid == 0:
        time.sleep(30)
        os._exit(0)
    started += 1
'''


@pytest.mark.parametrize("mode", ["root", "nonroot"])
def test_a_fork_bomb_stops_at_the_process_limit(tmp_path, mode):
    outcome, out, err = run_python(tmp_path, mode, FORK_BOMB, SMALL)
    _show(f"{mode} fork bomb", outcome, out)
    assert "fork refused after" in out and "Resource temporarily unavailable" in out
    started = int(out.split("after ")[1].split(":")[0])
    assert started < SMALL.processes
    if mode == "root":
        assert outcome.kind == "process limit"
        assert outcome.message.startswith("process limit: the kernel tried to run more than 32")
    else:
        assert outcome.kind == "exited" and outcome.returncode == 3


DISK = r'''
import errno
chunk = b"x" * (1 << 20)
written = 0
try:
    with open("/tmp/disk", "wb") as f:
        for _ in range(200):
            f.write(chunk)
            f.flush()
            written += 1
except OSError as exc:
    print(f"stopped after {written} MiB: {errno.errorcode[exc.errno]} {exc.strerror}")
'''


@pytest.mark.parametrize("mode", ["root", "nonroot"])
def test_a_file_bigger_than_the_tmpfs(tmp_path, mode):
    limits = Limits(memory=512 * MiB, disk=32 * MiB, file_size=1024 * MiB)
    outcome, out, err = run_python(tmp_path, mode, DISK, limits)
    _show(f"{mode} disk full", outcome, out)
    assert outcome.kind == "exited" and outcome.returncode == 0
    assert "ENOSPC No space left on device" in out
    assert int(out.split("after ")[1].split(" ")[0]) <= 32


@pytest.mark.parametrize("mode", ["root", "nonroot"])
def test_a_file_bigger_than_the_file_size_limit(tmp_path, mode):
    limits = Limits(memory=512 * MiB, disk=256 * MiB, file_size=16 * MiB)
    code = "import signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n" + DISK
    outcome, out, err = run_python(tmp_path, mode, code, limits)
    _show(f"{mode} file size", outcome, out)
    assert "EFBIG File too large" in out and "stopped after 16 MiB" in out


BUSY = r'''
import time
start = time.monotonic()
while time.monotonic() - start < 2:
    pass
print(time.process_time())
'''


def test_a_cpu_quota_of_half_a_core(tmp_path):
    outcome, out, err = run_python(tmp_path, "root", BUSY, Limits(cpus=0.5))
    used = float(out)
    print(f"\n[root cpu quota 0.5] {used:.2f} s of CPU in 2 s of wall time")
    assert outcome.kind == "exited" and outcome.returncode == 0
    assert used < 1.4  # 1.0 at the quota; 2.0 without it


RUN_FOLDER = DISK.replace("/tmp/disk", "/run/kernel/disk")


def test_the_writable_folder_is_a_small_tmpfs_as_root(tmp_path):
    limits = Limits(memory=512 * MiB, disk=256 * MiB, run_space=4 * MiB, file_size=1024 * MiB)
    outcome, out, err = run_python(tmp_path, "root", RUN_FOLDER, limits)
    _show("root writable folder full", outcome, out)
    assert "ENOSPC No space left on device" in out
    assert int(out.split("after ")[1].split(" ")[0]) <= 4
    assert not (tmp_path / "run" / "disk").exists()  # unmounted by cleanup: nothing on disk
