"""What a Python process of the course costs before it does anything: the CPU and wall
time of importing what each kind of command imports (nbgrader's apps, the pack's CLI, the
grading steps, JupyterLab's server app), each in a fresh interpreter of this environment.
With `--overlay DIR`, every other run has DIR first on the path: a folder holding another
version of a package (`pip install --target DIR --no-deps jsonschema==X`), so the two
versions alternate on one machine under the same load.

    .venv/bin/python benchmarks/process_start.py [--overlay DIR] [--rounds N]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

# what each kind of process imports first
IMPORTS = {
    "an nbgrader command (nbgrader.apps)": "import nbgrader.apps",
    "residual-pack (autograder.cli)": "import autograder.cli",
    "a grading process (autograder.grading.execute)": "import autograder.grading.execute",
    "jupyter lab (jupyterlab.labapp)": "import jupyterlab.labapp",
}


def one(code: str, overlay: str | None) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, the jsonschema version) of one fresh interpreter."""
    env = dict(os.environ)
    if overlay:
        env["PYTHONPATH"] = overlay + os.pathsep + env.get("PYTHONPATH", "")
    probe = f"{code}\nimport jsonschema, importlib.metadata as m\nprint(m.version('jsonschema'))"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True,
                          text=True, check=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overlay", help="a folder put first on the path every other run")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    sides = [None, args.overlay] if args.overlay else [None]
    for label, code in IMPORTS.items():
        found: dict = {}
        for _ in range(args.rounds):
            for side in sides:
                cpu, wall, version = one(code, side)
                found.setdefault((side, version), []).append((cpu, wall))
        for (side, version), runs in found.items():
            cpus, walls = [c for c, _ in runs], [w for _, w in runs]
            where = "with the overlay" if side else "as installed"
            print(f"{label}, jsonschema {version} ({where}): CPU median "
                  f"{statistics.median(cpus):.2f} s (min {min(cpus):.2f}, max {max(cpus):.2f}),"
                  f" wall median {statistics.median(walls):.2f} s, {len(runs)} runs")


if __name__ == "__main__":
    main()
