"""A real Jupyter kernel in the sandbox: `python -m ipykernel_launcher -f <connection
file>` with the venv's Python and site-packages bound read-only, ZeroMQ over IPC sockets
in the writable folder (/run/kernel inside, the caller's folder outside), reached from
outside with jupyter_client, `1+1` executed, shut down. Also its start-up time against an
unsandboxed kernel, same run (printed; run with -s)."""

import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from queue import Empty

import pytest
from bwrap_support import MODES, level_for, spec
from jupyter_client import BlockingKernelClient

from autograder.sandbox import bubblewrap

PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}


def _connection(folder, inside):
    """The same connection twice: the kernel's (sockets under `inside`) and the client's
    (under `folder`, the same folder seen from outside)."""
    key = secrets.token_hex(16)
    common = {"transport": "ipc", "key": key, "signature_scheme": "hmac-sha256",
              "kernel_name": "", **PORTS}
    (folder / "kernel.json").write_text(json.dumps({**common, "ip": f"{inside}/kernel"}))
    return {**common, "ip": str(folder / "kernel")}


def _wait_for_ready(client, process, timeout=60):
    """Until the kernel answers kernel_info on shell and its IOPub reaches us.
    (jupyter_client's wait_for_ready, without a KernelManager, takes a heartbeat that has
    not beaten yet for a dead kernel now and then.)"""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the kernel ended before it answered ({process.returncode})")
        client.kernel_info()  # requests queue up until the kernel binds; any reply will do
        try:
            client.get_shell_msg(timeout=1)
        except Empty:
            continue
        try:
            client.get_iopub_msg(timeout=0.5)
        except Empty:
            continue
        while True:  # the rest of this request's IOPub messages
            try:
                client.get_iopub_msg(timeout=0.2)
            except Empty:
                return
    raise TimeoutError("the kernel did not answer")


def _run_kernel(tmp_path, mode, must_exit=True):
    """Start a kernel (mode "root", "nonroot" or None: no sandbox), wait until it answers,
    run 1+1, shut it down. (seconds until it answered, result text, outcome or code).
    `must_exit` false: a kernel that has not exited 60 s after its shutdown reply is
    killed instead of failing the caller (the start-up test measures the start only)."""
    folder = tmp_path / "run"
    folder.mkdir()
    if mode is None:
        info = _connection(folder, str(folder))
        env = {**os.environ, "HOME": str(tmp_path), "IPYTHONDIR": str(tmp_path / "ipy"),
               "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt")}
        t0 = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", "ipykernel_launcher", "-f",
                                    str(folder / "kernel.json")], env=env,
                                   stdout=subprocess.DEVNULL,
                                   stderr=open(tmp_path / "stderr.txt", "w"))  # noqa: SIM115
    else:
        level, kwargs = level_for(mode)
        info = _connection(folder, bubblewrap.RUN)
        kernel = spec(tmp_path, [bubblewrap.PYTHON, "-m", "ipykernel_launcher", "-f",
                                 f"{bubblewrap.RUN}/kernel.json"])
        t0 = time.monotonic()
        # stderr to a file, not a pipe nobody reads: a kernel with more than a pipe's
        # worth of warnings would block on its write and never exit
        process = bubblewrap.start(kernel, bubblewrap.Limits(), level,
                                   stdout=subprocess.DEVNULL,
                                   stderr=open(tmp_path / "stderr.txt", "w"),  # noqa: SIM115
                                   **kwargs)
    client = BlockingKernelClient()
    client.load_connection_info(info)
    client.start_channels()
    try:
        _wait_for_ready(client, process)
        ready = time.monotonic() - t0
        results = []
        reply = client.execute_interactive(
            "1+1", timeout=30,
            output_hook=lambda msg: results.append(msg["content"].get("data", {})
                                                   .get("text/plain"))
            if msg["msg_type"] == "execute_result" else None)
        assert reply["content"]["status"] == "ok"
        client.shutdown()
        # 60 s, not 30: once in a full run on the loaded 2-core CI machine a sandboxed
        # kernel took longer than 30 s to exit after its shutdown reply (not understood yet;
        # what ends a kernel for certain is tested in test_bwrap_lifetime.py)
        try:
            code = process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            if not must_exit:
                process.kill()
                process.wait()
                return ready, results, None
            said = (tmp_path / "stderr.txt").read_text(errors="replace")
            raise AssertionError(f"the kernel ({mode}) did not exit within 60 s of its "
                                 f"shutdown reply; its stderr ({len(said)} characters) "
                                 f"ends:\n{said[-2000:]}") from None
    finally:
        client.stop_channels()
        if mode is not None:
            end = process.outcome() if process.poll() is not None else None
            process.cleanup()
        elif process.poll() is None:
            process.kill()
            process.wait()
    return ready, results, (end if mode is not None else code)


@pytest.mark.parametrize("mode", MODES)
def test_an_ipykernel_runs_in_the_sandbox_and_answers_from_outside(tmp_path, mode):
    ready, results, end = _run_kernel(tmp_path, mode)
    assert results == ["2"]
    assert end.kind == "exited" and end.returncode == 0, end


def test_start_up_time_against_an_unsandboxed_kernel(tmp_path):
    level_for("root")
    times = {"unsandboxed": [], "root": [], "nonroot": []}
    for i in range(3):
        for mode in times:
            folder = tmp_path / f"{mode}-{i}"
            folder.mkdir()
            # its exit is not what this measures (test_an_ipykernel_runs_in_the_sandbox_...
            # and test_bwrap_lifetime.py test that): once, in a full CI run on the loaded
            # 2-core machine, a sandboxed kernel had not exited 60 s after its shutdown
            ready, results, _ = _run_kernel(folder, None if mode == "unsandboxed" else mode,
                                            must_exit=False)
            assert results == ["2"]
            times[mode].append(ready)
    print("\nipykernel start-up until kernel_info answers (s), 3 runs each, interleaved:")
    for mode, values in times.items():
        print(f"  {mode:12} median {statistics.median(values):.3f}  "
              f"runs {' '.join(f'{v:.3f}' for v in values)}")
    base = statistics.median(times["unsandboxed"])
    assert statistics.median(times["root"]) < base + 5  # the sandbox costs little


def _reply_to(client, msg_id, timeout):
    deadline = time.monotonic() + timeout
    while True:
        reply = client.get_shell_msg(timeout=max(0.01, deadline - time.monotonic()))
        if reply["parent_header"].get("msg_id") == msg_id:
            return reply


@pytest.mark.parametrize("mode", MODES)
def test_a_cell_is_interrupted_by_message(tmp_path, mode):
    """An interrupt reaches the kernel as a control message (kernelspec interrupt_mode
    "message": the kernel signals itself). A SIGINT to the sandbox process would end the
    whole sandbox: bwrap does not pass signals on."""
    folder = tmp_path / "run"
    folder.mkdir()
    level, kwargs = level_for(mode)
    info = _connection(folder, bubblewrap.RUN)
    kernel = spec(tmp_path, [bubblewrap.PYTHON, "-m", "ipykernel_launcher", "-f",
                             f"{bubblewrap.RUN}/kernel.json"])
    process = bubblewrap.start(kernel, bubblewrap.Limits(), level,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kwargs)
    client = BlockingKernelClient()
    client.load_connection_info(info)
    client.start_channels()
    try:
        _wait_for_ready(client, process)
        # stop_on_error=False as in grading (nbclient with allow_errors): with the default,
        # ipykernel aborts requests that reach it before it has left its abort state, and
        # on a loaded machine the next cell's request can.
        msg_id = client.execute("import time; time.sleep(60)", stop_on_error=False)
        time.sleep(1)
        started = time.monotonic()
        client.control_channel.send(client.session.msg("interrupt_request", {}))
        reply = _reply_to(client, msg_id, timeout=20)
        assert reply["content"]["status"] == "error"
        assert reply["content"]["ename"] == "KeyboardInterrupt"
        assert time.monotonic() - started < 10
        assert process.poll() is None  # the kernel goes on
        msg_id = client.execute("21 * 2")
        assert _reply_to(client, msg_id, timeout=20)["content"]["status"] == "ok"
    finally:
        client.stop_channels()
        process.cleanup()
