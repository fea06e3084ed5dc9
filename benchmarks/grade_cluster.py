"""Seconds per submission against the number of workers: the local pool, Dask's
LocalCluster, and one sequential `nbgrader autograde` call, in the same run.

    .venv/bin/python benchmarks/grade_cluster.py [-n 12] [--out results/cluster]

A class of N generated submissions of the first assignment (solutions, untouched student
versions and the registered wrong answers, in turn; `grade_class.make_class`) is graded,
one after the other on this machine, by:

1. `residual-pack grade -j 1` (no worker process: the coordinator grades in turn),
2. `residual-pack grade -j 2` (the local pool: two spawned worker processes),
3. `residual-pack grade --cluster local -j 1` (a LocalCluster of one worker process),
4. `residual-pack grade --cluster local -j 2` (a LocalCluster of two),
5. one sequential `nbgrader autograde ASSIGNMENT --force` in a course copy where the
   assignment was generated beforehand, with the course config (since 5d63902 it puts our
   steps into nbgrader's, so this run is sandboxed too; `grade_class.py --baseline stock`
   times nbgrader's own steps).

Each of ours is the whole command, from start to report (sandbox, reference run, feedback
off), with --fresh. Every run must give every student the same autograded score. The
table, the per-run figures and the provenance of the run go to OUT/grade_cluster.json and
OUT/grade_cluster.md.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from grade_class import ASSIGNMENT, make_class, nbgraders  # noqa: E402

from microgpt.provenance import describe, record  # noqa: E402

RUNS = [
    ("local pool, 1 worker", ["-j", "1"]),
    ("local pool, 2 workers", ["-j", "2"]),
    ("Dask LocalCluster, 1 worker", ["--cluster", "local", "-j", "1"]),
    ("Dask LocalCluster, 2 workers", ["--cluster", "local", "-j", "2"]),
]


def ours(submissions, out, args):
    script = Path(sys.executable).parent / "residual-pack"
    command = [str(script), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
               "--fresh", "--no-feedback", *args]
    start = time.perf_counter()
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if run.returncode != 0:
        sys.exit(f"{' '.join(command[1:])} failed:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    report = json.loads((Path(out) / "report.json").read_text())
    journal = (Path(out) / ".grading" / "journal.jsonl").read_text().splitlines()[1:]
    times = sorted(json.loads(line)["at"] for line in journal)
    # the pace once grading runs: from the first student written to the last
    pace = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else None
    scores = {s["student"]: s["autograded_score"] for s in report["students"]}
    autograde = [s["seconds"] for s in report["students"] if s["graded"]]
    level = next((ln for ln in run.stdout.splitlines() if ln.startswith("isolation:")), "")
    return seconds, scores, autograde, level, pace


def table(rows, n):
    lines = ["| how | workers | wall (s) | s per submission (wall / n) | "
             "s per submission once running | the rest (s) | median autograde call (s) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        median = f"{r['median_autograde']:.2f}" if r.get("median_autograde") else "-"
        pace = f"{r['pace']:.2f}" if r.get("pace") else "-"
        fixed = f"{r['fixed']:.1f}" if r.get("fixed") is not None else "-"
        lines.append(f"| {r['how']} | {r['workers']} | {r['seconds']:.1f} | "
                     f"{r['seconds'] / n:.2f} | {pace} | {fixed} | {median} |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=12, help="submissions (default: %(default)s)")
    p.add_argument("--out", default=str(ROOT / "results" / "cluster"),
                   help="folder for grade_cluster.json and .md (default: results/cluster)")
    args = p.parse_args(argv)
    started = time.perf_counter()
    folder = Path(tempfile.mkdtemp(prefix="grade-cluster-"))
    rows = []
    try:
        submissions = folder / "submissions"
        made = make_class(submissions, args.n)
        print(f"{args.n} submissions of {ASSIGNMENT}; {os.cpu_count()} cores, load "
              f"{os.getloadavg()[0]:.1f}", flush=True)
        reference = None
        level = ""
        for i, (how, extra) in enumerate(RUNS):
            seconds, scores, autograde, level, pace = ours(submissions, folder / f"ours{i}",
                                                           extra)
            workers = int(extra[extra.index("-j") + 1])
            rows.append({"how": how, "workers": workers, "command": "residual-pack grade "
                         + " ".join(extra), "seconds": round(seconds, 2),
                         "median_autograde": round(statistics.median(autograde), 2)
                         if autograde else None, "pace": round(pace, 2) if pace else None,
                         "fixed": round(seconds - pace * (args.n - 1), 1) if pace else None,
                         "load_after": os.getloadavg()[0]})
            print(f"{how}: {seconds:.1f} s, {seconds / args.n:.2f} s per submission",
                  flush=True)
            if reference is None:
                reference = scores
            elif scores != reference:
                sys.exit(f"{how} gave other scores than {RUNS[0][0]}")
        t_nb, s_nb = nbgraders(submissions, folder / "nbgrader")
        rows.append({"how": "nbgrader autograde (course config: sandboxed; one call, "
                            "sequential)",
                     "workers": 1, "command": f"nbgrader autograde {ASSIGNMENT} --force",
                     "seconds": round(t_nb, 2), "median_autograde": None,
                     "load_after": os.getloadavg()[0]})
        print(f"nbgrader autograde: {t_nb:.1f} s, {t_nb / args.n:.2f} s per submission")
        differ = sorted(s for s in made if reference.get(s) != s_nb.get(s))
        if differ:
            sys.exit(f"nbgrader's scores differ for {differ}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    by = {r["how"]: r["seconds"] / args.n for r in rows}
    pace = {r["how"]: r.get("pace") for r in rows}

    def name(kind, k):
        return f"{kind}, {k} worker{'s' if k > 1 else ''}"

    overhead = {
        str(k): round(by[name("Dask LocalCluster", k)] - by[name("local pool", k)], 2)
        for k in (1, 2)}
    overhead_running = {
        str(k): round(pace[name("Dask LocalCluster", k)] - pace[name("local pool", k)], 2)
        for k in (1, 2)}
    result = {
        "assignment": ASSIGNMENT, "submissions": args.n, "isolation": level,
        "kinds": sorted(set(made.values())), "runs": rows,
        "dask_overhead_seconds_per_submission": overhead,
        "dask_overhead_seconds_per_submission_once_running": overhead_running,
        "provenance": record(wall_seconds=time.perf_counter() - started),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "grade_cluster.json").write_text(json.dumps(result, indent=1) + "\n")
    text = (f"# Grading a class of {args.n}: local pool, Dask LocalCluster, nbgrader\n\n"
            f"{ASSIGNMENT}, {args.n} submissions ({len(result['kinds'])} kinds: solution, "
            f"untouched stub, registered wrong answers), no feedback pages; every run gave "
            f"every student the same autograded score.\n\n"
            f"{table(rows, args.n)}\n\n"
            f"'Once running' is the time from the first student written to the gradebook "
            f"to the last, over {args.n - 1}; 'the rest' is the wall time less {args.n - 1} "
            f"such intervals: starting up (sandbox, reference run, release, and for Dask the "
            f"cluster and each worker's scratch course), the first student, and the report.\n\n"
            f"Dask against the local pool, per submission: {overhead['1']:+.2f} s with 1 "
            f"worker and {overhead['2']:+.2f} s with 2 over the whole command / {args.n}; "
            f"{overhead_running['1']:+.2f} s and {overhead_running['2']:+.2f} s once "
            f"running.\n\n"
            f"Ours: {level}\n\n"
            f"Made by {describe(result['provenance'])}\n")
    (out / "grade_cluster.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
