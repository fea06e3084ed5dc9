"""Benchmark: how long `residual-pack progress` takes a student, against a baseline.

Runs, in alternation, a baseline command (another checkout's `residual-pack`, e.g. one at
the commit before a change: `--baseline /path/to/.venv/bin/residual-pack`) and this
checkout's, on the same notebook folders (default: `exercises/`, the untouched release, and
`solutions/`, every answer in), each in a fresh process with an empty cache folder of its
own, then this checkout's once more with that cache filled (a second run on notebooks
that did not change). Whole process wall time and CPU time (user + system of the finished
child). Run from the repository root:

    python benchmarks/progress_time.py --baseline OTHER/.venv/bin/residual-pack [--pairs N]
"""

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from microgpt.provenance import record  # noqa: E402

OURS = str(Path(sys.executable).parent / "residual-pack")


def timed(command, cache):
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-200:]
    return wall, cpu, done.returncode, last


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="the baseline's residual-pack command")
    ap.add_argument("--pairs", type=int, default=1)
    ap.add_argument("folders", nargs="*", default=["exercises", "solutions"])
    args = ap.parse_args()
    print("# " + json.dumps(record()))
    print(f"# baseline: {args.baseline}; ours: {OURS}")
    for folder in args.folders:
        for pair in range(args.pairs):
            order = [("baseline", args.baseline), ("ours", OURS)]
            if pair % 2:
                order.reverse()
            with tempfile.TemporaryDirectory() as tmp:
                for name, command in order:
                    cache = Path(tmp) / name
                    wall, cpu, code, last = timed([command, "progress", folder], cache)
                    print(f"{folder:10} pair {pair + 1} {name:9} first run  {wall:6.1f} s wall "
                          f"{cpu:6.1f} s CPU  exit {code}  | {last[:90]}")
                wall, cpu, code, last = timed([OURS, "progress", folder], Path(tmp) / "ours")
                print(f"{folder:10} pair {pair + 1} ours      unchanged  {wall:6.1f} s wall "
                      f"{cpu:6.1f} s CPU  exit {code}  | {last[:90]}")
    print(f"# load at the end: {[round(x, 2) for x in os.getloadavg()]}")


if __name__ == "__main__":
    main()
