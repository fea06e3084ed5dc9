"""The sandbox run by a real non-root user, from start to end: the package (standard
library and pyseccomp only) copied where uid 65534 can read it, Debian's own Python
(/usr/bin/python3) as that user's Python, `probe()` and `run()` called by uid 65534
itself: no root anywhere, no staging, no cgroup. The other tests play this user with
root's help (setpriv, staged binds); this one is the instructor's grader as it is."""

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pyseccomp
import pytest
from bwrap_support import NOBODY, require_sandbox

import autograder.sandbox

SYSTEM_PYTHON = Path("/usr/bin/python3")

GRADER = r'''
import json, sys
from pathlib import Path
from autograder.sandbox import bubblewrap
level = bubblewrap.probe()
spec = bubblewrap.SandboxSpec(argv=(bubblewrap.PYTHON, "-c", sys.argv[2]),
                              writable=Path(sys.argv[1]), python_prefix=Path("/usr"))
results = {"kind": level.kind, "message": level.message}
outcome, out, err = bubblewrap.run(spec, bubblewrap.Limits(memory=256 << 20), level)
results["walls"] = [outcome.kind, outcome.returncode, out, err[-300:]]
memory = "chunks = []\nfor _ in range(64):\n    chunks.append(b'x' * (8 << 20))\n"
spec = bubblewrap.SandboxSpec(argv=(bubblewrap.PYTHON, "-c", memory),
                              writable=Path(sys.argv[1]), python_prefix=Path("/usr"))
outcome, out, err = bubblewrap.run(spec, bubblewrap.Limits(memory=256 << 20), level)
results["memory"] = [outcome.kind, outcome.returncode, err.strip().splitlines()[-1:]]
print(json.dumps(results))
'''

WALLS = r'''
import ctypes, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)
r = {"uid": os.getuid(), "root": os.path.exists("/root"), "work": os.path.exists("/work"),
     "home": os.path.exists("/home")}
ctypes.set_errno(0); r["unshare_user"] = [libc.unshare(0x10000000), ctypes.get_errno()]
ctypes.set_errno(0); r["keyctl"] = [libc.syscall(250, 0, ctypes.c_long(-4), 1), ctypes.get_errno()]
ctypes.set_errno(0); r["ptrace"] = [libc.ptrace(0, 0, None, None), ctypes.get_errno()]
try:
    os.memfd_create("x"); r["memfd"] = "made"
except OSError as exc:
    r["memfd"] = exc.errno
try:
    socket.create_connection(("1.1.1.1", 53), timeout=3); r["net"] = "connected"
except OSError as exc:
    r["net"] = str(exc)
r["interfaces"] = [n for _, n in socket.if_nameindex()]
print(json.dumps(r))
'''


@pytest.fixture(scope="module")
def graded():
    require_sandbox()
    if os.uname().machine != "x86_64":
        pytest.skip("the payload names x86_64 syscall numbers")
    if not SYSTEM_PYTHON.exists():
        pytest.skip("no system Python (/usr/bin/python3) for uid 65534 to run")
    place = Path(tempfile.mkdtemp(prefix="sandbox-nonroot-"))
    try:
        os.chmod(place, 0o755)
        package = place / "autograder"
        shutil.copytree(Path(autograder.sandbox.__file__).parent, package / "sandbox",
                        ignore=shutil.ignore_patterns("__pycache__"))
        (package / "__init__.py").write_text("")
        shutil.copy(pyseccomp.__file__, place / "pyseccomp.py")
        run = place / "run"
        run.mkdir()
        os.chown(run, NOBODY, NOBODY)
        for path in place.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        run.chmod(0o700)
        done = subprocess.run(
            ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
             "--", str(SYSTEM_PYTHON), "-I", "-c",
             f"import sys; sys.path.insert(0, {str(place)!r}); " + "exec(sys.argv[3])",
             str(run), WALLS, GRADER],
            capture_output=True, text=True, timeout=120, cwd=place,
            env={"PATH": "/usr/bin:/bin", "HOME": str(place), "TMPDIR": "/tmp"})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def test_the_probe_of_a_non_root_user_says_what_is_lost(graded):
    assert graded["kind"] == "userns"
    message = graded["message"]
    print("\n[non-root probe] " + message)
    assert "unprivileged user namespace" in message and "without a cgroup" in message
    assert "memfd_create and System V shared memory are refused" in message


def test_the_walls_hold_for_a_non_root_grader(graded):
    kind, code, out, err = graded["walls"]
    assert kind == "exited" and code == 0, err
    r = json.loads(out)
    assert r["uid"] == NOBODY
    assert not r["root"] and not r["work"] and not r["home"]
    assert r["unshare_user"] == [-1, 1] and r["keyctl"] == [-1, 1] and r["ptrace"] == [-1, 1]
    assert r["memfd"] == 1  # EPERM: without a cgroup nothing would count it
    assert r["net"] != "connected" and r["interfaces"] == ["lo"]


def test_memory_meets_the_address_space_limit(graded):
    kind, code, last = graded["memory"]
    assert kind == "exited" and code == 1 and last == ["MemoryError"]
