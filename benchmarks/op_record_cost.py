"""Benchmark: what recording each node's operation (`Value._op`) costs the engine.

Loads `microgpt/engine.py` twice in one process: as it is in the working tree (``now``) and
as it was at ``--baseline`` (a git revision, read with ``git show``), and times, alternately
(the order flipping each round), the work a student's per-operation code makes: a
microgpt-style MLP forward of `+`, `*`, `relu`, `**`, `log` and `exp` nodes on scalars,
then ``backward()``. Both must give the same loss and gradients to the last bit. Run from
the repository root:

    python benchmarks/op_record_cost.py --baseline REV [--rounds N]

The last line is ``cost of recording the operation: now / baseline = R.RRx`` (the ratio of
the median times; 1.00x is no cost).
"""

import argparse
import gc
import importlib.util
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _work(Value, seed: int = 0, width: int = 24, depth: int = 6, samples: int = 8):
    """A per-operation MLP's loss on a few samples and its gradients, microgpt's way."""
    rng = random.Random(seed)
    params = [[[Value(rng.gauss(0, 0.3)) for _ in range(width)] for _ in range(width)]
              for _ in range(depth)]
    loss = Value(0.0)
    for _ in range(samples):
        h = [Value(rng.gauss(0, 1)) for _ in range(width)]
        for layer in params:
            h = [sum((w * x for w, x in zip(row, h)), Value(0.0)).relu() + 0.1 * x
                 for row, x in zip(layer, h)]
        ms = sum(x * x for x in h) / width
        loss = loss + (ms + 1).log() + (-(ms**0.5)).exp()
    loss.backward()
    return loss.data, [p.grad for layer in params for row in layer for p in row]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="git revision of the engine to compare")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    old_source = subprocess.run(["git", "show", f"{args.baseline}:microgpt/engine.py"],
                                cwd=ROOT, check=True, capture_output=True, text=True).stdout
    with tempfile.TemporaryDirectory() as tmp:
        old_path = Path(tmp) / "engine_baseline.py"
        old_path.write_text(old_source)
        engines = {"now": _load(ROOT / "microgpt" / "engine.py", "engine_now"),
                   "baseline": _load(old_path, "engine_baseline")}
    results = {name: _work(e.Value) for name, e in engines.items()}
    if results["now"] != results["baseline"]:
        sys.exit("the two engines disagree: the timing would mean nothing")
    times = {name: [] for name in engines}
    gc.disable()  # as microgpt.train runs; both engines' graphs hold no cycles
    for r in range(args.rounds):
        order = list(engines) if r % 2 == 0 else list(engines)[::-1]
        for name in order:
            start = time.perf_counter()
            _work(engines[name].Value, seed=r)
            times[name].append(time.perf_counter() - start)
    gc.enable()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "microgpt"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    import os
    import platform
    print(f"# provenance: command=benchmarks/op_record_cost.py --baseline {args.baseline} "
          f"--rounds {args.rounds}; commit={head}{' (engine uncommitted)' if dirty else ''}; "
          f"python {platform.python_version()}; {os.cpu_count()} cores; "
          f"load {os.getloadavg()[0]:.2f}; {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    for name, ts in times.items():
        print(f"{name:9s} median {statistics.median(ts) * 1000:7.1f} ms, "
              f"min {min(ts) * 1000:7.1f} ms over {len(ts)} rounds")
    ratio = statistics.median(times["now"]) / statistics.median(times["baseline"])
    print("same loss and gradients, bit for bit")
    print(f"cost of recording the operation: now / baseline = {ratio:.2f}x")


if __name__ == "__main__":
    main()
