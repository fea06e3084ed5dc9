"""autograder/sandbox/warm.py: kernels forked from a warm parent, for real (root and
namespaces: skipped without them, failed under SANDBOX_REQUIRED as in CI).

Each test starts real kernels (`autograder.kernel.gradekernel`) through the launcher and the
kernel manager the grader uses, and asks them about themselves from inside."""

import asyncio
import json
import os
import signal
import socket
import time

import pytest
from isolation import processes_of, require_isolation

from autograder.grading import plan as plan_module
from autograder.grading.execute import SandboxKernelManager
from autograder.grading.plan import COLD_VARIABLE, Sandbox
from autograder.sandbox.limits import Limits, acquire_uid

GRADER_ONLY = "RESIDUAL_PACK_TEST_GRADER_ONLY"  # in the grader's environment, not a kernel's

# what a kernel says about itself: its ids, namespaces, open files, environment, a draw
ABOUT = r"""
import json, os, random, numpy
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        fds[fd] = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
print(json.dumps({
    "uid": os.getuid(), "pid": os.getpid(),
    "ns": {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "net", "ipc")},
    "fds": fds, "env": dict(os.environ),
    "draw": float(numpy.random.random()), "pydraw": random.random(),
    "sees": {p: os.path.exists(p) for p in json.loads(os.environ["SEE"])},
}))
"""


@pytest.fixture(scope="module")
def uid():
    require_isolation()
    return acquire_uid()


def _ready(sandbox, within=90):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        path = sandbox._warm_socket()
        if path:
            return path
        time.sleep(0.1)
    raise AssertionError("the warm parent did not get ready")


@pytest.fixture()
def sandbox(uid, monkeypatch):
    monkeypatch.setenv(GRADER_ONLY, "1")
    monkeypatch.delenv(COLD_VARIABLE, raising=False)
    box = Sandbox(Limits(cell_timeout=30, notebook_timeout=120), engine="launcher")
    yield box
    box.close()


async def _kernel(sandbox, uid, code, interrupt_after=None, see=()):
    """Run `code` in a new kernel; (its stdout, its reply's content, its launcher phases)."""
    plan = sandbox.plan(uid, "t/nb")
    config = json.loads(plan.config.read_text())
    config["env"]["SEE"] = json.dumps([str(p) for p in see])
    plan.config.write_text(json.dumps(config))
    km = SandboxKernelManager(plan=plan, limits=sandbox.limits)
    kc = None
    try:
        await km.start_kernel()
        kc = km.client()
        kc.start_channels()
        await kc.wait_for_ready(timeout=60)
        msg_id = kc.execute(code)
        if interrupt_after is not None:
            await asyncio.sleep(interrupt_after)
            await km.interrupt_kernel()
        out = []
        while True:
            msg = await kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                break
        reply = await kc.get_shell_msg(timeout=60)
        return "".join(out), reply["content"], [n for n, _ in plan.launcher_phases()]
    finally:
        if kc is not None:
            kc.stop_channels()
        await km.shutdown_kernel(now=True)
        km.close_client_context()
        plan.remove()


def _fd_targets(pid):
    found = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return found


def _about(sandbox, uid, see=()):
    out, reply, phases = asyncio.run(_kernel(sandbox, uid, ABOUT, see=see))
    assert reply["status"] == "ok", reply
    return json.loads(out), phases


def test_a_warm_kernel_is_a_fresh_process_in_namespaces_of_its_own(sandbox, uid):
    path = _ready(sandbox)
    secret_files = ["launch.json", "exit.json", "phases.txt", "warm-"]
    owner = str(sandbox.root / "owner")  # a file of the run's folder on the host
    warm_pid = plan_module._WARM[str(sandbox.root)][0].pid
    parents_sockets = {target for target in (_fd_targets(warm_pid)) if "socket" in target}
    assert parents_sockets  # its listening socket, at least
    first, phases_1 = _about(sandbox, uid, see=[path, owner])
    second, phases_2 = _about(sandbox, uid)
    assert "kernel forked" in phases_1 and "kernel forked" in phases_2, (phases_1, phases_2)
    host = {n: os.readlink(f"/proc/self/ns/{n}") for n in ("pid", "mnt", "net", "ipc")}
    for about in (first, second):
        assert about["uid"] == uid != 0
        assert about["pid"] < 10  # numbered in its own pid namespace
        for name, ns in about["ns"].items():
            assert ns != host[name], name
        for fd, target in about["fds"].items():
            assert not any(s in target for s in secret_files), (fd, target)
            assert target not in parents_sockets, (fd, target)
        assert GRADER_ONLY not in about["env"]
        assert about["env"]["HOME"] == "/sandbox/home"
    for name in host:
        assert first["ns"][name] != second["ns"][name], name
    assert first["sees"] == {path: False, owner: False}
    # random generators of their own (a copy of the parent's would repeat its draws)
    assert first["draw"] != second["draw"] and first["pydraw"] != second["pydraw"]


def test_a_warm_kernel_keeps_no_file_a_cold_one_would_not(sandbox, uid, monkeypatch):
    _ready(sandbox)
    warm, _ = _about(sandbox, uid)
    monkeypatch.setenv(COLD_VARIABLE, "1")
    cold_box = Sandbox(Limits(), engine="launcher")
    try:
        cold, phases = _about(cold_box, uid)
    finally:
        cold_box.close()
    assert "kernel exec" in phases and "kernel forked" not in phases

    def files(fds):
        # (IPython's history database comes and goes as its thread writes; how many
        # sockets ZeroMQ has open depends on the moment)
        return sorted(target.split(":")[0] if ":" in target else target
                      for target in fds.values()
                      if not target.startswith(("/proc/", "/sandbox/home/.ipython/", "socket")))

    assert files(warm["fds"]) == files(cold["fds"])
    same = {k: v for k, v in warm["env"].items() if k not in ("SEE",)}
    assert same == {k: v for k, v in cold["env"].items() if k not in ("SEE",)}


def test_an_interrupt_reaches_a_warm_kernel(sandbox, uid):
    _ready(sandbox)
    code = "import time\nwhile True:\n    time.sleep(0.01)\n"
    out, reply, phases = asyncio.run(_kernel(sandbox, uid, code, interrupt_after=1.0))
    assert "kernel forked" in phases
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply


def test_a_warm_kernel_ends_with_its_launcher(sandbox, uid):
    _ready(sandbox)

    async def run():
        plan = sandbox.plan(uid, "t/nb")
        km = SandboxKernelManager(plan=plan, limits=sandbox.limits)
        try:
            await km.start_kernel()
            kc = km.client()
            kc.start_channels()
            await kc.wait_for_ready(timeout=60)
            kc.stop_channels()
            assert processes_of({uid}), "no kernel runs as the sandbox's uid"
            assert "kernel forked" in [n for n, _ in plan.launcher_phases()]
            process = km.provisioner.process
            os.killpg(os.getpgid(process.pid), signal.SIGKILL)  # as nbclient's kill does
            process.wait(10)
            deadline = time.monotonic() + 5
            while processes_of({uid}) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert not processes_of({uid}), "the kernel outlived its launcher"
        finally:
            km.close_client_context()
            plan.remove()

    asyncio.run(run())


def _ask(path, request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(30)
        client.connect(path)
        client.sendall(request)
        data = b""
        while chunk := client.recv(4096):
            data += chunk
        return data.decode()


def test_the_warm_parent_starts_nothing_else(sandbox, uid):
    path = _ready(sandbox)
    assert os.stat(path).st_mode & 0o777 == 0o600 and os.stat(path).st_uid == 0
    kernel = ["python", "-m", "autograder.kernel.gradekernel", "-f", "k.json"]
    outside = {"config": "/etc/hostname", "argv": kernel}
    assert _ask(path, (json.dumps(outside) + "\n").encode()).startswith("failed")
    plan = sandbox.plan(uid, "t/nb")
    try:
        other = {"config": str(plan.config), "argv": ["python", "-c", "print(1)"]}
        assert _ask(path, (json.dumps(other) + "\n").encode()).startswith("failed")
        assert _ask(path, b"not json\n").startswith("failed")
    finally:
        plan.remove()


def test_without_a_warm_parent_kernels_start_cold(sandbox, uid, monkeypatch):
    _ready(sandbox)
    process = plan_module._WARM[str(sandbox.root)][0]
    process.kill()
    process.wait(10)
    assert sandbox._warm_socket() is None and not sandbox.warm
    about, phases = _about(sandbox, uid)
    assert "kernel exec" in phases and about["uid"] == uid
    monkeypatch.setenv(COLD_VARIABLE, "1")
    cold_box = Sandbox(Limits(), engine="launcher")
    try:
        assert not cold_box.warm and cold_box._warm_socket() is None
    finally:
        cold_box.close()


def test_closing_the_sandbox_ends_its_warm_parent(uid, monkeypatch):
    monkeypatch.delenv(COLD_VARIABLE, raising=False)
    box = Sandbox(Limits(), engine="launcher")
    _ready(box)
    process = plan_module._WARM[str(box.root)][0]
    box.close()
    assert process.poll() is not None and not box.root.exists()
