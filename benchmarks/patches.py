"""What each patch in `autograder/compat.py` saves, measured against no patch, same run.

    .venv/bin/python benchmarks/patches.py [--runs 7]

Each measurement runs in a fresh Python (nothing cached from an earlier one), with and
without the patch in alternation, and prints both medians, the saving and the ratio:

- `read_alembic_head_in_process`: a new SQLite gradebook (nbgrader stamps it with its
  alembic head);
- `check_schemas_once`: nbgrader's validation of every cell's metadata
  (`MetadataValidator.validate_nb`) on notebook 05's source, five passes, as autograde
  makes two per notebook.

A patch that saves no measured time should go (issue #25); `tests/unit/test_compat.py`
fails when the upstream code a patch works around has changed.
"""

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GRADEBOOK = """
import sys, time
from nbgrader.api import Gradebook
if {patched}:
    from autograder.compat import read_alembic_head_in_process
    read_alembic_head_in_process()
t = time.perf_counter()
Gradebook("sqlite:///{db}").close()
print(time.perf_counter() - t)
"""

SCHEMAS = """
import sys, time
import nbformat
from nbgrader.nbgraderformat import MetadataValidator
if {patched}:
    from autograder.compat import check_schemas_once
    check_schemas_once()
nb = nbformat.read({path!r}, as_version=4)
validator = MetadataValidator()
t = time.perf_counter()
for _ in range(5):
    validator.validate_nb(nb)
print((time.perf_counter() - t) / 5)
"""

CASES = {
    "read_alembic_head_in_process: a new gradebook": lambda patched, tmp, i: GRADEBOOK.format(
        patched=patched, db=f"{tmp}/gradebook-{patched}-{i}.db"),
    "check_schemas_once: validate_nb, one pass": lambda patched, tmp, i: SCHEMAS.format(
        patched=patched,
        path=str(ROOT / "source" / "05_gpt_residual_adds" / "05_gpt_residual_adds.ipynb")),
}


def measure(code):
    # nbgrader's own way runs the `alembic` command: the venv's, as in a grading run
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}"
                                f"{os.environ.get('PATH', '')}")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=True, env=env)
    return float(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=7)
    args = p.parse_args(argv)
    import nbgrader

    load = Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").exists() \
        else "?"
    print(f"# benchmarks/patches.py --runs {args.runs}, "
          f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, Python "
          f"{platform.python_version()}, nbgrader {nbgrader.__version__}, "
          f"{platform.platform()}, load {load} at the start")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    print(f"# commit {commit or '?'}; seconds, medians of {args.runs} fresh processes each, "
          "with and without the patch in alternation")
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in CASES.items():
            times = {False: [], True: []}
            start = time.perf_counter()
            for i in range(args.runs):
                for patched in (False, True) if i % 2 == 0 else (True, False):
                    times[patched].append(measure(make(patched, tmp, i)))
            without, with_ = statistics.median(times[False]), statistics.median(times[True])
            print(f"{name:48s} without {without:7.3f}  with {with_:7.3f}  "
                  f"saves {without - with_:7.3f}  ({without / with_:5.1f}x)  "
                  f"[{time.perf_counter() - start:.0f} s]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
