"""Benchmark: microgpt's own training script on its own `Value` and on ours.

The script is Karpathy's `microgpt.py`, which is not our code and is never committed:
pass the path of a copy (``--script``, else ``$MICROGPT_SCRIPT``, else
``../shared/data/microgpt.py`` beside the repository). Each run is a fresh Python
process that executes the script's source from that path, as it is (``theirs``) or with
its ``class Value`` definition replaced by ``from microgpt import Value`` (``ours``),
nothing else changed. The two alternate, the order flipping from one pair to the next,
with the garbage collector at its defaults and with it disabled (``gc.disable()`` before
the script starts). Run from the repository root:

    python benchmarks/microgpt_script.py [--script PATH] [--steps N] [--pairs P]

Every run trains for the same number of steps (the script's own schedule, 1,000 steps,
stopped after ``--steps``: the run ends after that step's progress line). Each step's
loss is read, as a float, when the script prints it; the two engines' losses must be
identical to the last bit, or the exit status is 1. The script may download its data
into ``input.txt`` in its working folder: each run gets a temporary folder holding a copy
of ``--data`` (default ``../shared/data/names.txt``) under that name.

Times are the whole process (start to exit) as wall time, and its CPU time (user +
system, from the kernel's accounting of the finished child), which moves less than wall
time when other work shares the machine. The first line and the third from last record
the run (``# provenance ...``: the command, commit, versions, machine, load and date, and
the script's sha256); then the speedups in CPU time, and last, always,
``speedup (microgpt's script on our Value, collector on / off): A.AAx / B.BBx`` (wall
time, the ratio of the summed times).
"""

import argparse
import ast
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = REPO.parent / "shared" / "data"
DEFAULT_SCRIPT = Path(os.environ.get("MICROGPT_SCRIPT") or SHARED / "microgpt.py")
DEFAULT_DATA = SHARED / "names.txt"
ENGINES = ("theirs", "ours")
COLLECTOR = ("on", "off")
OUR_VALUE = "from microgpt import Value  # the benchmark's swap: our engine in place of the class"


class _StopAfter(BaseException):
    """Raised from the script's progress print once the last timed step is done."""


def swapped_source(source, engine):
    """The script's source as `engine` runs it: unchanged, or with `class Value` replaced."""
    if engine == "theirs":
        return source
    classes = [node for node in ast.parse(source).body
               if isinstance(node, ast.ClassDef) and node.name == "Value"]
    if len(classes) != 1:
        raise ValueError(f"expected one top-level `class Value` in the script, found "
                         f"{len(classes)}")
    lines = source.splitlines(keepends=True)
    start, end = classes[0].lineno - 1, classes[0].end_lineno
    # keep the line count, so a traceback's line numbers are the script's own
    filler = "\n" * (end - start - 1)
    return "".join(lines[:start]) + OUR_VALUE + "\n" + filler + "".join(lines[end:])


def child(script, engine, collector, steps, gc_stats=False):
    """Run in the child process: execute the script, report each step's loss as a float
    (and, with `gc_stats`, the collections of each generation and their CPU seconds)."""
    import gc

    if collector == "off":
        gc.disable()
    collections = [[0, 0.0] for _ in range(3)]
    started = [0.0]

    def watch(phase, info):
        if phase == "start":
            started[0] = time.process_time()
        else:
            c = collections[info["generation"]]
            c[0] += 1
            c[1] += time.process_time() - started[0]

    if gc_stats:
        gc.callbacks.append(watch)
    source = swapped_source(Path(script).read_text(encoding="utf-8"), engine)
    code = compile(source, str(script), "exec")
    namespace = {"__name__": "__main__", "__file__": str(script)}
    done = [0]
    real_print = print

    def progress_print(*args, **kwargs):
        # the script's step line prints its loss rounded; the global `loss` holds the float
        if args and isinstance(args[0], str) and args[0].startswith("step"):
            done[0] += 1
            real_print(f"loss {done[0]} {namespace['loss'].data!r}")
            if done[0] == steps:
                raise _StopAfter
            return
        real_print(*args, **kwargs)

    namespace["print"] = progress_print  # found before the builtin by the script's code
    try:
        exec(code, namespace)
    except _StopAfter:
        pass
    if gc_stats:
        gc.callbacks.remove(watch)
        real_print("gc collections of generation 0/1/2 and their CPU seconds: " + ", ".join(
            f"{n} in {t:.2f} s" for n, t in collections))
    sys.stdout.flush()


def run_once(script, data, engine, collector, steps, gc_stats=False):
    """One whole process: (wall seconds, CPU seconds, [losses], stdout)."""
    with tempfile.TemporaryDirectory(prefix="microgpt-bench-") as work:
        shutil.copyfile(data, Path(work) / "input.txt")
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONHASHSEED": "0"}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", engine,
               "--collector", collector, "--script", str(script), "--steps", str(steps)]
        cmd += ["--gc-stats"] if gc_stats else []
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        r = subprocess.run(cmd, cwd=work, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if r.returncode != 0:
        raise RuntimeError(f"{engine}, collector {collector}: exit {r.returncode}\n{r.stderr}")
    losses = [float(line.split()[2]) for line in r.stdout.splitlines()
              if line.startswith("loss ")]
    if len(losses) != steps:
        raise RuntimeError(f"{engine}, collector {collector}: {len(losses)} losses, "
                           f"expected {steps}\n{r.stdout}\n{r.stderr}")
    return wall, cpu, losses, r.stdout


def load_text():
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


def measure(script, data, steps, pairs, log=print, gc_stats=False):
    """Alternate the two engines, `pairs` times per collector setting.

    Returns {collector: {engine: [(wall, cpu), ...]}} and whether every run's losses were
    identical to the first run's, bit for bit.
    """
    times = {c: {e: [] for e in ENGINES} for c in COLLECTOR}
    reference, same = None, True
    for i in range(pairs):
        for collector in COLLECTOR:
            order = ENGINES if i % 2 == 0 else ENGINES[::-1]
            for engine in order:
                wall, cpu, losses, out = run_once(script, data, engine, collector, steps,
                                                  gc_stats)
                times[collector][engine].append((wall, cpu))
                if reference is None:
                    reference = losses
                    header = [line for line in out.splitlines()
                              if not line.startswith(("loss ", "gc collections"))]
                    log("script says: " + "; ".join(header))
                    log(f"script losses: step 1 {losses[0]!r}, step {steps} {losses[-1]!r}")
                elif losses != reference:
                    same = False
                    diff = next(k for k, (a, b) in enumerate(zip(losses, reference)) if a != b)
                    log(f"DIFFERENT LOSSES: {engine}, collector {collector}, step {diff + 1}: "
                        f"{losses[diff]!r} against {reference[diff]!r}")
                log(f"  pair {i + 1}, collector {collector:3s} {engine:6s}: "
                    f"{wall:6.2f} s wall, {cpu:6.2f} s CPU; load {load_text()}")
                for line in out.splitlines():
                    if line.startswith("gc collections") and collector == "on":
                        log(f"    {line}")
    return times, same


def ratios(times, collector, which):
    """Per-pair ratios theirs / ours (which: 0 wall, 1 CPU), and the ratio of the sums."""
    theirs = [t[which] for t in times[collector]["theirs"]]
    ours = [t[which] for t in times[collector]["ours"]]
    return [a / b for a, b in zip(theirs, ours)], sum(theirs) / sum(ours)


def report(times, steps, log=print):
    """Print the table; return {collector: wall ratio of sums}."""
    log(f"{'':30s}{'theirs':>12s}{'ours':>12s}   per pair (theirs / ours)")
    headline = {}
    for collector in COLLECTOR:
        for which, kind in ((0, "wall"), (1, "CPU")):
            med = {e: statistics.median(t[which] for t in times[collector][e]) for e in ENGINES}
            per_pair, overall = ratios(times, collector, which)
            pairs = ", ".join(f"{r:.2f}x" for r in per_pair)
            log(f"collector {collector:3s} {kind:4s} s, median{med['theirs']:12.2f}"
                f"{med['ours']:12.2f}   {pairs}; of the sums {overall:.2f}x")
            if which == 0:
                headline[collector] = overall
    return headline


def _provenance(script):
    """A function giving the run's record now (`microgpt.provenance.record`, imported here
    and not at the top: the child processes must not import microgpt for `theirs`)."""
    sys.path.insert(0, str(REPO))
    from microgpt.provenance import record

    digest = hashlib.sha256(Path(script).read_bytes()).hexdigest()
    command = " ".join([f"benchmarks/{Path(__file__).name}", *sys.argv[1:]])
    return lambda: record(command=command, script_sha256=digest)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--script", type=Path, default=DEFAULT_SCRIPT,
                   help="path of a copy of microgpt.py (default: $MICROGPT_SCRIPT, else "
                        "%(default)s)")
    p.add_argument("--data", type=Path, default=DEFAULT_DATA,
                   help="the names file, given to the script as input.txt (default: %(default)s)")
    p.add_argument("--steps", type=int, default=20,
                   help="training steps per process (default: %(default)s)")
    p.add_argument("--pairs", type=int, default=3,
                   help="process pairs per collector setting (default: %(default)s)")
    p.add_argument("--gc-stats", action="store_true",
                   help="also count each process's collections and their CPU time (a "
                        "callback per collection: leave it out of the figures you quote)")
    p.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    p.add_argument("--collector", choices=COLLECTOR, default="on", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        child(args.script, args.child, args.collector, args.steps, args.gc_stats)
        return 0
    if args.steps < 1 or args.pairs < 1:
        p.error("--steps and --pairs must be at least 1")
    for path, what in ((args.script, "--script"), (args.data, "--data")):
        if not path.is_file():
            p.error(f"{what}: no such file: {path}")
    provenance = _provenance(args.script)
    print(f"# provenance at the start: {json.dumps(provenance())}")
    print(f"python {sys.version.split()[0]}; microgpt's script {args.script}, data "
          f"{args.data}; {args.steps} steps per process, {args.pairs} pair(s) per collector "
          f"setting, alternating; load {load_text()}", flush=True)
    times, same = measure(args.script, args.data, args.steps, args.pairs,
                          log=lambda s: print(s, flush=True), gc_stats=args.gc_stats)
    print(f"script losses: {'identical to the last bit in every run' if same else 'DIFFERENT'}; "
          f"load {load_text()}")
    headline = report(times, args.steps)
    cpu = {c: ratios(times, c, 1)[1] for c in COLLECTOR}
    print(f"# provenance at the end: {json.dumps(provenance())}")
    print(f"speedup in CPU time (microgpt's script on our Value, collector on / off): "
          f"{cpu['on']:.2f}x / {cpu['off']:.2f}x")
    print(f"speedup (microgpt's script on our Value, collector on / off): "
          f"{headline['on']:.2f}x / {headline['off']:.2f}x")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
