"""The sandbox's walls, as root (a fresh uid per kernel, cgroups) and as a non-root
instructor (bwrap as uid 65534 in a user namespace): one payload tries each way out and
reports; each test reads one answer. Skipped without bwrap or root, failed instead under
SANDBOX_REQUIRED=1."""

import json
import socket

import pytest
from bwrap_support import MODES, run_python, sandbox_uid

PROBE = r'''
import ctypes, json, os, platform, socket, subprocess, time
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": {"keyctl": 250, "add_key": 248, "bpf": 321, "userfaultfd": 323,
                 "io_uring_setup": 425, "perf_event_open": 298, "clone": 56, "setns": 308},
      "aarch64": {"keyctl": 219, "add_key": 217, "bpf": 280, "userfaultfd": 282,
                  "io_uring_setup": 425, "perf_event_open": 241, "clone": 220,
                  "setns": 268}}[platform.machine()]
r = {"fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),  # before any open
     "lifeline": os.environ.get("RESIDUAL_PACK_LIFELINE")}
def call(name, f):
    ctypes.set_errno(0)
    rc = f()
    r[name] = [rc, ctypes.get_errno()]
call("unshare_user", lambda: libc.unshare(0x10000000))
call("unshare_mount", lambda: libc.unshare(0x00020000))
call("setns", lambda: libc.syscall(NR["setns"], os.open("/proc/self/ns/net", os.O_RDONLY), 0))
def clone_user():
    rc = libc.syscall(NR["clone"], 0x10000000 | 17, 0, 0, 0, 0)
    if rc == 0:
        os._exit(0)
    return rc
call("clone_newuser", clone_user)
call("mount", lambda: libc.mount(b"none", b"/tmp", b"tmpfs", 0, None))
call("keyctl", lambda: libc.syscall(NR["keyctl"], 0, ctypes.c_long(-4), 1))
call("add_key", lambda: libc.syscall(NR["add_key"], b"user", b"note", b"secret", 6,
                                     ctypes.c_long(-4)))
call("ptrace_traceme", lambda: libc.ptrace(0, 0, None, None))
child = os.fork()
if child == 0:
    time.sleep(10)
    os._exit(0)
call("ptrace_attach", lambda: libc.ptrace(16, child, None, None))
os.kill(child, 9)
call("bpf", lambda: libc.syscall(NR["bpf"], 0, None, 0))
call("userfaultfd", lambda: libc.syscall(NR["userfaultfd"], 0))
call("io_uring_setup", lambda: libc.syscall(NR["io_uring_setup"], 1,
                                            ctypes.create_string_buffer(120)))
call("personality_norandom", lambda: libc.personality(0x0040000))
run = subprocess.run(["unshare", "-U", "true"], capture_output=True, text=True)
r["unshare_command"] = [run.returncode, run.stderr.strip()]
run = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, text=True)
r["unshare_root_command"] = [run.returncode, run.stderr.strip()]
for name, where in (("internet", ("1.1.1.1", 53)),
                    ("host_loopback", ("127.0.0.1", int(os.environ["HOST_PORT"])))):
    try:
        socket.create_connection(where, timeout=3).close()
        r[name] = "connected"
    except OSError as exc:
        r[name] = f"{type(exc).__name__}: {exc}"
r["interfaces"] = [name for _, name in socket.if_nameindex()]
r["top"] = sorted(os.listdir("/"))
r["exists"] = {p: os.path.exists(p) for p in ("/root", "/work", "/home", "/etc/passwd",
                                              "/var", "/sys", "/tmp", "/run/kernel")}
for name, path in (("write_root", "/x"), ("write_python", "/opt/python/lib/x"),
                   ("write_dev", "/dev/x"), ("write_run", "/run/kernel/x"),
                   ("write_tmp", "/tmp/x")):
    try:
        open(path, "w").write("x")
        r[name] = "written"
    except OSError as exc:
        r[name] = type(exc).__name__
r["uid"] = os.getuid()
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\t" in line)
r["status"] = {k: status[k].strip() for k in ("Seccomp", "NoNewPrivs", "CapEff", "CapBnd")}
r["hostname"] = socket.gethostname()
r["ppid1"] = os.getppid()
print(json.dumps(r))
'''


@pytest.fixture(scope="module")
def host_port():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server.getsockname()[1]
    server.close()


@pytest.fixture(scope="module", params=MODES)
def seen(request, tmp_path_factory, host_port):
    """(mode, what the probe payload reported from inside the sandbox)."""
    tmp = tmp_path_factory.mktemp(request.param)
    code = f"import os; os.environ['HOST_PORT'] = '{host_port}'\n" + PROBE
    outcome, out, err = run_python(tmp, request.param, code)
    assert outcome.kind == "exited" and outcome.returncode == 0, (outcome, err)
    return request.param, json.loads(out)


EPERM = 1


def test_no_new_user_namespace(seen):
    _, r = seen
    assert r["unshare_user"] == [-1, EPERM]
    assert r["clone_newuser"] == [-1, EPERM]
    assert r["unshare_mount"] == [-1, EPERM]
    assert r["setns"] == [-1, EPERM]
    assert r["unshare_command"][0] != 0 and "Operation not permitted" in r["unshare_command"][1]
    assert r["unshare_root_command"][0] != 0


def test_no_mount(seen):
    assert seen[1]["mount"] == [-1, EPERM]


def test_no_keyring(seen):
    _, r = seen
    assert r["keyctl"] == [-1, EPERM] and r["add_key"] == [-1, EPERM]


def test_no_ptrace(seen):
    _, r = seen
    assert r["ptrace_traceme"] == [-1, EPERM] and r["ptrace_attach"] == [-1, EPERM]


def test_no_bpf_userfaultfd_io_uring_personality(seen):
    _, r = seen
    for name in ("bpf", "userfaultfd", "io_uring_setup", "personality_norandom"):
        assert r[name] == [-1, EPERM], name


def test_seccomp_on_no_new_privileges_no_capabilities(seen):
    status = seen[1]["status"]
    assert status["Seccomp"] == "2" and status["NoNewPrivs"] == "1"
    assert int(status["CapEff"], 16) == 0 and int(status["CapBnd"], 16) == 0


def test_no_network(seen):
    _, r = seen
    assert r["internet"].startswith("OSError") or "unreachable" in r["internet"]
    assert r["host_loopback"].startswith("ConnectionRefusedError"), r["host_loopback"]
    assert r["interfaces"] == ["lo"]


def test_only_what_a_kernel_needs_is_visible(seen):
    _, r = seen
    assert r["top"] == ["bin", "dev", "etc", "lib", "lib64", "opt", "proc", "run", "sbin",
                        "tmp", "usr"]
    assert r["exists"] == {"/root": False, "/work": False, "/home": False,
                           "/etc/passwd": False, "/var": False, "/sys": False,
                           "/tmp": True, "/run/kernel": True}


def test_only_tmp_and_the_run_folder_are_writable(seen):
    _, r = seen
    assert r["write_run"] == "written" and r["write_tmp"] == "written"
    for name in ("write_root", "write_python", "write_dev"):
        assert r[name] in ("OSError", "PermissionError"), (name, r[name])


def test_no_descriptor_of_the_launch_leaks_in(seen):
    """stdio, the listing's own, and the reading end of the grader's lifeline (named by
    its variable: see `bubblewrap.LIFELINE_VARIABLE`), nothing else."""
    lifeline = seen[1]["lifeline"]
    assert lifeline is not None and lifeline.isdigit()
    assert seen[1]["fds"] == sorted([0, 1, 2, 3, int(lifeline)])


def test_the_uid(seen):
    mode, r = seen
    if mode == "root":
        assert r["uid"] >= 2_100_000_000
    else:
        assert r["uid"] == sandbox_uid(mode)
    assert r["hostname"] == "sandbox"


@pytest.mark.parametrize("mode", MODES)
def test_a_hidden_folder_is_empty_and_read_only(tmp_path, mode):
    """`SandboxSpec.hide`: how the grader keeps an installed copy of itself (answers
    included) in site-packages out of a kernel's sight."""
    import sysconfig
    from pathlib import Path

    from bwrap_support import level_for, spec

    from autograder.sandbox import bubblewrap

    inside = f"{bubblewrap.VENV}/lib/python{sysconfig.get_python_version()}/site-packages"
    assert (Path(sysconfig.get_paths()["purelib"]) / "nbgrader" / "__init__.py").is_file()
    code = (f"import os\nprint(os.listdir({inside + '/nbgrader'!r}))\n"
            f"print(os.path.isfile({inside + '/jupyter_client/__init__.py'!r}))\n"
            f"try:\n    open({inside + '/nbgrader/x'!r}, 'w')\n"
            "except OSError as exc:\n    print(type(exc).__name__)\n")
    level, kwargs = level_for(mode)
    outcome, out, err = bubblewrap.run(
        spec(tmp_path, [bubblewrap.PYTHON, "-c", code], hide=(inside + "/nbgrader",)),
        bubblewrap.Limits(), level, **kwargs)
    assert outcome.kind == "exited" and outcome.returncode == 0, (outcome, err)
    assert out.split() == ["[]", "True", "PermissionError"]


@pytest.mark.parametrize("mode", MODES)
def test_nothing_of_the_callers_environment_is_readable_inside(tmp_path, mode, monkeypatch):
    """The grader's environment (a database URL, a token) reaches neither the kernel's
    environment nor that of bwrap's pid 1, which the kernel can read in /proc/1/environ."""
    from bwrap_support import level_for, spec

    from autograder.sandbox import bubblewrap

    monkeypatch.setenv("GRADER_SECRET", "s3cret-token-of-the-grader")
    code = ("import os\nfor pid in ('1', 'self'):\n"
            "    try:\n        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except OSError as exc:\n        print(pid, type(exc).__name__)\n"
            "print(sorted(os.environ))\n")
    level, kwargs = level_for(mode)
    outcome, out, err = bubblewrap.run(spec(tmp_path, [bubblewrap.PYTHON, "-c", code]),
                                       bubblewrap.Limits(), level, **kwargs)
    assert outcome.kind == "exited" and outcome.returncode == 0, (outcome, err)
    assert "s3cret-token-of-the-grader" not in out and "GRADER_SECRET" not in out, out
