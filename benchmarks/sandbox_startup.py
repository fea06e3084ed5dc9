"""What the bubblewrap sandbox (autograder/sandbox) costs at start-up, same run, runs
interleaved: `python -c pass` and an ipykernel until it answers kernel_info, unsandboxed,
as root (fresh uid, cgroups, staged binds) and as uid 65534 (user namespace, rlimits).

    sudo .venv/bin/python benchmarks/sandbox_startup.py [--runs 5]

Needs root (it plays both graders) and bwrap.
"""

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from queue import Empty

from jupyter_client import BlockingKernelClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from autograder.sandbox import bubblewrap  # noqa: E402

PORTS = {"shell_port": 1, "iopub_port": 2, "stdin_port": 3, "control_port": 4, "hb_port": 5}
NOBODY = 65534


def _spec(folder, argv):
    return bubblewrap.SandboxSpec(argv=tuple(argv), writable=folder,
                                  site_packages=Path(sysconfig.get_paths()["purelib"]))


def _launch(mode, folder, argv_inside, argv_outside, **popen):
    if mode == "unsandboxed":
        return subprocess.Popen(argv_outside, env={**os.environ, "HOME": str(folder)}, **popen)
    level = ROOT if mode == "root" else USERNS
    extra = {"run_as": NOBODY} if mode == "nonroot" else {}
    return bubblewrap.start(_spec(folder, argv_inside), bubblewrap.Limits(), level,
                            **extra, **popen)


def _end(process):
    if process.poll() is None:
        process.kill()
    process.wait()
    if hasattr(process, "cleanup"):
        process.cleanup()


def time_pass(mode, folder):
    t0 = time.perf_counter()
    process = _launch(mode, folder, [bubblewrap.PYTHON, "-c", "pass"],
                      [sys.executable, "-c", "pass"])
    process.wait()
    elapsed = time.perf_counter() - t0
    _end(process)
    return elapsed


def time_kernel(mode, folder):
    key = secrets.token_hex(16)
    common = {"transport": "ipc", "key": key, "signature_scheme": "hmac-sha256",
              "kernel_name": "", **PORTS}
    inside = str(folder) if mode == "unsandboxed" else bubblewrap.RUN
    (folder / "kernel.json").write_text(json.dumps({**common, "ip": f"{inside}/k"}))
    t0 = time.perf_counter()
    process = _launch(mode, folder,
                      [bubblewrap.PYTHON, "-m", "ipykernel_launcher", "-f",
                       f"{bubblewrap.RUN}/kernel.json"],
                      [sys.executable, "-m", "ipykernel_launcher", "-f",
                       str(folder / "kernel.json")],
                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = BlockingKernelClient()
    client.load_connection_info({**common, "ip": f"{folder}/k"})
    client.start_channels()
    try:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{mode}: the kernel ended ({process.returncode})")
            client.kernel_info()
            try:
                client.get_shell_msg(timeout=1)
                break
            except Empty:
                continue
        elapsed = time.perf_counter() - t0
        client.shutdown()
        process.wait(timeout=30)
    finally:
        client.stop_channels()
        _end(process)
    return elapsed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    if os.geteuid() != 0 or shutil.which("bwrap") is None:
        sys.exit("needs root and bwrap")
    global ROOT, USERNS
    ROOT = bubblewrap.probe()
    USERNS = bubblewrap.Level("userns", "uid 65534")
    print(ROOT.message)
    modes = ["unsandboxed", "root", "nonroot"]
    for name, measure in (("python -c pass", time_pass), ("ipykernel until kernel_info",
                                                          time_kernel)):
        times = {mode: [] for mode in modes}
        for i in range(args.runs):
            for mode in modes if i % 2 == 0 else modes[::-1]:
                folder = Path(tempfile.mkdtemp(prefix="sandbox-bench-"))
                try:
                    times[mode].append(measure(mode, folder))
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
        print(f"\n{name}: seconds, {args.runs} runs each, interleaved")
        base = statistics.median(times["unsandboxed"])
        for mode in modes:
            median = statistics.median(times[mode])
            print(f"  {mode:12} median {median:.3f} (+{median - base:.3f})  runs "
                  + " ".join(f"{t:.3f}" for t in times[mode]))


if __name__ == "__main__":
    main()
