"""What one call through the wire costs, apart from what the call does: a graded test cell
that runs in the grader calls a student's function in a kernel N times, for three
functions of one made-up assignment (written to a temporary folder, never to the course):

- `bare`: returns its float argument (the round trip alone: two messages, no node);
- `scale`: returns the Value it was given times 2 (a node or two per call);
- `layer`: h + relu(W h) at width 8 on Values, as a student writes it with `sum` (some 150
  new nodes per call, the size of a depth assignment's layer call).

    .venv/bin/python benchmarks/wire_cost.py [-n 2000] [--in-process [--collector-on]]

Each runs as one graded test cell of a reference run (`grading.reference_run`: the same
path a submission's test takes, in a local kernel), and prints the cell's wall time, the
grader test thread's CPU, microseconds per call and per node the kernel sent (counted as
the grader takes them). The kernel's CPU is
printed for the whole run (the three cells and the kernel's start).

With `--in-process`, `layer`'s calls are taken apart in one process instead, without a
kernel or a socket: the layer's arithmetic alone, the kernel's end (the layer, then
`Peer._value` on each output and the message as JSON), and the grader's end (`json.loads`
alone, then with `Peer.take`), each in microseconds per call: where a node's cost lies,
and a steadier figure to compare two versions of `wire.py` with. The garbage collector is
paused there, as a graded test pauses it (`wire.collector_paused`); `--collector-on`
leaves it on.
"""

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ANSWER = '''\
from microgpt.engine import Value


def bare(x):
    return x


def scale(v):
    return v * 2


def layer(h, W):
    out = [sum((w * x for w, x in zip(row, h)), Value(0.0)) for row in W]
    return [a + b.relu() for a, b in zip(h, out)]
'''

TEST = '''\
import random
from autograder.kernel.checks import check_value, task
from microgpt.engine import Value

rng = random.Random(0)
W = [[Value(rng.gauss(0, 0.3)) for _ in range(8)] for _ in range(8)]
with task("{name}"):
    total = 0.0
    for _ in range({n}):
        {body}
    check_value(1.0, 1.0, what="the calls ran", expected_text="1.0")
'''

BODIES = {
    "bare": "total += bare(1.0)",
    "scale": "total += scale(Value(rng.random())).data",
    "layer": "total += layer([Value(rng.gauss(0, 1)) for _ in range(8)], W)[0].data",
}


def notebook(n: int) -> nbformat.NotebookNode:
    answer = new_code_cell(ANSWER)
    answer.metadata["nbgrader"] = {"solution": True, "grade": False, "locked": False,
                                   "grade_id": "answer", "schema_version": 3}
    cells = [answer]
    for name, body in BODIES.items():
        test = new_code_cell(TEST.format(name=name, n=n, body=body))
        test.metadata["nbgrader"] = {"solution": False, "grade": True, "locked": True,
                                     "grade_id": name, "points": 1, "schema_version": 3}
        cells.append(test)
    nb = new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def in_process(n: int, collector: bool) -> None:
    """`layer`'s calls, each end of the wire timed on its own (see the docstring)."""
    import contextlib
    import json
    import random
    import socket

    from autograder.kernel.wire import Peer, collector_paused
    from microgpt.engine import Value

    space: dict = {}
    exec(ANSWER, space)  # the made-up answers, as the kernel would define them
    layer = space["layer"]
    rng = random.Random(0)
    ends = socket.socketpair()  # two Peers need sockets; nothing is sent on them
    kernel, grader = Peer(ends[0]), Peer(ends[1])
    kernel.side, grader.side = "k", "g"
    W = [[Value(rng.gauss(0, 0.3)) for _ in range(8)] for _ in range(8)]
    for w in (w for row in W for w in row):  # the weights, as both ends hold them
        grader._value(w)
    kernel.take(json.loads(json.dumps(grader.message())))
    kW = [[kernel.objects[grader.names[id(w)]] for w in row] for row in W]
    inputs = [[Value(rng.gauss(0, 1)) for _ in range(8)] for _ in range(n)]

    def per_call(start: float) -> float:
        return (time.perf_counter() - start) / n * 1e6

    # the collector as a graded test has it on each end (paused: `wire.collector_paused`),
    # or on as everywhere else (`collector=True`)
    pause = contextlib.nullcontext() if collector else collector_paused()
    with pause:
        start = time.perf_counter()
        for h in inputs:
            layer(h, kW)
        alone = per_call(start)
        messages = []
        start = time.perf_counter()
        for h in inputs:
            out = [kernel._value(v) for v in layer(h, kW)]
            messages.append(json.dumps(kernel.message(v=out), separators=(",", ":")))
        sent = per_call(start)
        start = time.perf_counter()
        for m in messages:
            json.loads(m)
        loads = per_call(start)
        start = time.perf_counter()
        for m in messages:
            grader.take(json.loads(m))
        taken = per_call(start)
    nodes = sum(len(json.loads(m)["n"]) for m in messages) / n
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{n} calls of layer in one process, {nodes:.0f} nodes and "
          f"{sum(map(len, messages)) / n:.0f} bytes a call, the garbage collector "
          f"{'on' if collector else 'paused'}; load {load}")
    print(f"  the layer's arithmetic alone            {alone:6.0f} us per call")
    print(f"  kernel: the layer, _value, json.dumps   {sent:6.0f} us per call")
    print(f"  grader: json.loads alone                {loads:6.0f} us per call")
    print(f"  grader: json.loads and Peer.take        {taken:6.0f} us per call")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=2000, help="calls per cell (default: %(default)s)")
    p.add_argument("--in-process", action="store_true",
                   help="take `layer`'s calls apart in this process (no kernel)")
    p.add_argument("--collector-on", action="store_true",
                   help="with --in-process: leave the garbage collector on, where a graded "
                        "test pauses it")
    args = p.parse_args(argv)
    if args.in_process:
        in_process(args.n, args.collector_on)
        return

    from autograder.grading import remote
    from autograder.grading.reference_run import run_reference
    from autograder.kernel.wire import Peer

    seen: dict[str, tuple[float, float, int]] = {}
    nodes = [0]
    run_test, take = remote.run_test, Peer.take

    def timed(sock, source, filename, *rest, **kw):
        cpu, wall, before = time.thread_time(), time.perf_counter(), nodes[0]
        try:
            return run_test(sock, source, filename, *rest, **kw)
        finally:
            seen[filename] = (time.perf_counter() - wall, time.thread_time() - cpu,
                              nodes[0] - before)

    def counted(self, message):
        if isinstance(message, dict) and isinstance(message.get("n"), list):
            nodes[0] += len(message["n"])
        return take(self, message)

    remote.run_test, Peer.take = timed, counted
    with tempfile.TemporaryDirectory(prefix="wire-cost-") as tmp:
        folder = Path(tmp) / "wire_cost"
        folder.mkdir()
        nbformat.write(notebook(args.n), str(folder / "wire_cost.ipynb"))
        run_reference(str(folder), "wire_cost")
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.n} calls per cell; load {load}")
    for name in BODIES:
        wall, cpu, sent = next(v for k, v in seen.items() if f"<graded test cell {name}>" == k)
        per_node = f", {wall / sent * 1e6:.1f} us per node" if sent else ""
        print(f"  {name:6s} wall {wall:6.2f} s, grader thread CPU {cpu:6.2f} s, "
              f"{sent / args.n:5.1f} nodes per call: {wall / args.n * 1e6:6.0f} us per call"
              f"{per_node}")
    print(f"  kernel CPU, whole run: {kids.ru_utime + kids.ru_stime:.2f} s")


if __name__ == "__main__":
    main()
