"""What a student waits for: each notebook's Run All, top to bottom, as a student who has
answered every task runs it in JupyterLab (the committed solution, the experiments at
their full interactive sizes), and the cells that take the time.

    .venv/bin/python benchmarks/run_all_time.py [--min-seconds 3] [NOTEBOOK ...]

NOTEBOOK is an assignment folder name (default: every assignment with a notebook in
`solutions/`). Each notebook runs in a fresh kernel (nbclient, as JupyterLab's Run All
sends the cells one after another) in a copy of its folder, one notebook at a time. The
torch notebooks are run only when torch is installed; notebook 09 reads TinyShakespeare
from $TINYSHAKESPEARE as its text says. Prints one line per notebook (wall time of the
whole run, kernel start included, and the sum of its cells), then each cell that took at
least --min-seconds with its grade id, and the run's provenance
(`microgpt.provenance.record`) at the start and the end. Quote the figures from the
committed output in `results/benchmarks/`, not from memory.
"""

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TORCH_NOTEBOOKS = ("08_torch_mlp", "09_torch_transformer")


def _seconds(cell):
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not (start and end):
        return None
    parse = datetime.datetime.fromisoformat
    return (parse(end.replace("Z", "+00:00")) - parse(start.replace("Z", "+00:00"))
            ).total_seconds()


def run_all(folder, timeout=3600):
    """(wall seconds, [(index, grade id, seconds, first line)], errors) of one Run All."""
    import nbformat
    from nbclient import NotebookClient

    [path] = sorted(Path(folder).glob("*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="run-all-time-") as tmp:
        work = Path(tmp) / Path(folder).name
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        nb = nbformat.read(work / path.name, as_version=4)
        env = {k: v for k, v in os.environ.items() if k != "NBGRADER_EXECUTION"}
        client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                resources={"metadata": {"path": str(work)}},
                                record_timing=True, allow_errors=True)
        client.km = client.create_kernel_manager()
        start = time.perf_counter()
        client.execute(env=env)
        wall = time.perf_counter() - start
    cells, errors = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        seconds = _seconds(cell)
        if seconds is not None:
            cells.append((i, gid, seconds, cell.source.splitlines()[0][:60] if cell.source
                          else ""))
        errors += [f"cell {i} ({gid}): {o.get('ename')}" for o in cell.get("outputs", [])
                   if o.get("output_type") == "error"]
    return wall, cells, errors


def _context():
    """What `record()` does not say about this run: the kernels' threads and the memory."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            memory = f.readline().split(":", 1)[1].strip()
    except OSError:
        memory = "unknown"
    return {"kernel_threads": os.environ.get("OMP_NUM_THREADS",
                                             "OMP_NUM_THREADS unset (torch: one per core)"),
            "memory": memory}


def main(argv=None):
    from microgpt.provenance import record

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK")
    p.add_argument("--min-seconds", type=float, default=3.0,
                   help="list the cells that took at least this long (default: %(default)s)")
    args = p.parse_args(argv)
    names = args.notebooks or sorted(d.name for d in (ROOT / "solutions").iterdir()
                                     if any(d.glob("*.ipynb")))
    has_torch = importlib.util.find_spec("torch") is not None
    print(f"# provenance at the start: {json.dumps(record(**_context()))}", flush=True)
    rows, failed = [], []
    for name in names:
        if name in TORCH_NOTEBOOKS and not has_torch:
            print(f"{name}: left out (torch is not installed)")
            continue
        wall, cells, errors = run_all(ROOT / "solutions" / name)
        total = sum(c[2] for c in cells)
        rows.append((name, wall, total))
        load = os.getloadavg()[0]
        print(f"{name}: Run All {wall:.1f} s (cells {total:.1f} s), load {load:.1f}",
              flush=True)
        for i, gid, seconds, first in cells:
            if seconds >= args.min_seconds:
                print(f"    cell {i:3d} {gid or '(no id)':28s} {seconds:7.1f} s  {first}")
        if errors:
            failed.append(name)
            print("    errors: " + "; ".join(errors))
    print()
    print("| notebook | Run All (s) | of which in cells (s) |")
    print("|---|---:|---:|")
    for name, wall, total in rows:
        print(f"| {name} | {wall:.0f} | {total:.0f} |")
    print(f"# provenance at the end: {json.dumps(record(**_context()))}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
