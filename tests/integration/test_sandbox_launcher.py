"""autograder/sandbox/launcher.py: its command line, and a kernel it starts at the
level `limits` (a plain process: the namespaces are graded for real in test_hostile)."""

import json
import os
import signal
import subprocess
import sys

from autograder.sandbox import launcher
from autograder.sandbox.limits import LIMITS, Limits


def test_its_command_line():
    command = launcher.launch_command("/x/launch.json", ["python", "-m", "k"])
    assert command == [sys.executable, "-m", launcher.MODULE, "launch", "/x/launch.json",
                       "--", "python", "-m", "k"]
    assert launcher.is_launcher(command)
    assert not launcher.is_launcher([sys.executable, "-m", "autograder.kernel.gradekernel"])
    assert launcher.probe_command(64000)[-2:] == ["probe", "64000"]
    assert launcher.main(["nonsense"]) == 2


def _config(tmp_path, **extra):
    folder = tmp_path / "k"
    (folder / "c").mkdir(parents=True)
    mpl = tmp_path / "mpl"
    mpl.mkdir()
    (mpl / "fontlist.json").write_text("{}")
    support = tmp_path / "data.txt"
    support.write_text("given")
    cfg = {
        "level": LIMITS, "uid": None, "label": "ann/nb", "folder": str(folder),
        "conn": str(folder / "c"), "newroot": str(folder / "r"), "binds": [],
        "support": [[str(support), "data/data.txt"]], "mpl_cache": str(mpl),
        "home": str(folder / "home"), "work": str(folder / "work"),
        "env": {"PATH": os.environ["PATH"], "HOME": str(folder / "home")},
        "exit_file": str(folder / "exit.json"),
        "limits": {**Limits().__dict__, "memory": 1 << 30},
        "parent": os.getpid(),  # the grading process: here, this test
        **extra,
    }
    path = folder / "launch.json"
    path.write_text(json.dumps(cfg))
    return path, cfg


def _launch(path, code):
    return subprocess.run(launcher.launch_command(path, [sys.executable, "-c", code]),
                          capture_output=True, text=True, timeout=60)


def test_a_kernel_gets_its_folders_and_its_exit_is_recorded(tmp_path):
    path, cfg = _config(tmp_path)
    code = ("import os, sys; "
            "ok = open('data/data.txt').read() == 'given' and os.environ['HOME'] != '' "
            "and os.path.isfile(os.path.expanduser('~/.config/matplotlib/fontlist.json')); "
            "sys.exit(3 if ok else 4)")
    done = _launch(path, code)
    assert done.returncode == 3, done.stderr
    assert json.loads(open(cfg["exit_file"]).read()) == {"code": 3}


def test_a_kernel_killed_by_a_signal_is_recorded(tmp_path):
    path, cfg = _config(tmp_path)
    done = _launch(path, "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert done.returncode == 128 + signal.SIGSEGV
    assert json.loads(open(cfg["exit_file"]).read()) == {"signal": signal.SIGSEGV}


def test_no_kernel_starts_when_the_grading_process_is_gone(tmp_path):
    path, cfg = _config(tmp_path, parent=1)
    done = _launch(path, "open('started', 'w')")
    assert done.returncode == 1 and not os.path.exists(cfg["exit_file"])


WALLS = r"""
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
found = {}
try:
    os.close(os.memfd_create("hoard"))
    found["memfd"] = "made"
except OSError as exc:
    found["memfd"] = errno.errorcode[exc.errno]
CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
pid = os.fork()
if pid == 0:  # a child, so that a namespace it makes does not change the test process
    os._exit(0 if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 else ctypes.get_errno())
found["unshare"] = errno.errorcode.get(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), "made")
KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING = 0, -4
r = libc.syscall(250, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 1)  # keyctl (x86_64)
found["keyctl"] = "made" if r >= 0 else errno.errorcode[ctypes.get_errno()]
print(json.dumps(found))
"""


def test_the_kernel_runs_under_the_seccomp_filter(tmp_path):
    """With the plan's filter the kernel cannot hold memory outside its address-space
    limit (memfd_create), make a namespace of its own (unshare) or reach a keyring that
    outlives it (keyctl); without the filter, on the same machine, the memfd is made."""
    import platform

    from autograder.sandbox import seccomp

    if platform.machine() != "x86_64":
        import pytest

        pytest.skip("the keyctl call number in WALLS is x86_64's")
    bpf = tmp_path / "seccomp.bpf"
    with open(bpf, "wb") as f:
        seccomp.build(deny_uncounted_memory=True).export_bpf(f)
    path, _ = _config(tmp_path, seccomp=str(bpf))
    code = "import sys; sys.stdout = open('out.json', 'w'); " + "exec(" + repr(WALLS) + ")"
    done = _launch(path, code)
    assert done.returncode == 0, done.stderr
    walls = json.loads((tmp_path / "k" / "work" / "out.json").read_text())
    assert walls == {"memfd": "EPERM", "unshare": "EPERM", "keyctl": "EPERM"}, walls

    unfiltered = tmp_path / "control"
    unfiltered.mkdir()
    path, _ = _config(unfiltered)
    done = _launch(path, code)
    assert done.returncode == 0, done.stderr
    walls = json.loads((unfiltered / "k" / "work" / "out.json").read_text())
    assert walls["memfd"] == "made", walls
