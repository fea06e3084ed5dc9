"""Benchmark: what a gradient check's own backward costs against the engine's backward.

A gradient check does not read `.grad` as the student's code left it: it first walks the
graph to make sure every node is the engine's own, with plain numbers in it, then runs
the engine's backward (`autograder.kernel.checks.backward_alone`). This times, on the
loss of the tiny GPT over one document (the graph a check of 05 or 06 walks), the
forward pass, the engine's `backward()`, the walk alone and `backward_alone`, taking
turns so that a slow patch of a shared machine hits them all, with the collector paused
around each timing. Run from the repository root:

    python benchmarks/gradient_check_cost.py [--repeats N] [--layers L] [--tokens T]

The last line is ``forward + backward: A ms; with the check's walk: B ms (ratio R)``.
"""

import argparse
import gc
import platform
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from autograder.kernel import checks  # noqa: E402
from microgpt import GPT  # noqa: E402


def timed(fn):
    gc.collect()
    gc.disable()
    try:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start
    finally:
        gc.enable()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--tokens", type=int, default=16)
    args = p.parse_args(argv)
    gpt = GPT(vocab_size=27, n_layer=args.layers, n_embd=16, n_head=4, seed=0)
    tokens = [(7 * i + 1) % 27 for i in range(args.tokens)]
    rows = {"forward": [], "backward": [], "walk": [], "backward_alone": []}
    made = {}

    def forward():
        made["loss"] = gpt.loss(tokens)

    for _ in range(args.repeats):
        rows["forward"].append(timed(forward))
        rows["backward"].append(timed(lambda: made["loss"].backward()))
        forward()
        rows["walk"].append(timed(lambda: checks._graph_problem(made["loss"])))
        forward()
        rows["backward_alone"].append(
            timed(lambda: checks.backward_alone(made["loss"], gpt.parameters())))
    ms = {name: 1e3 * statistics.median(times) for name, times in rows.items()}
    print(f"python {platform.python_version()}, {args.layers} layers, {args.tokens} tokens, "
          f"median of {args.repeats}, collector paused around each timing")
    for name, value in ms.items():
        print(f"  {name:>15}: {value:7.1f} ms")
    plain, checked = ms["forward"] + ms["backward"], ms["forward"] + ms["backward_alone"]
    print(f"forward + backward: {plain:.0f} ms; with the check's walk: {checked:.0f} ms "
          f"(ratio {checked / plain:.2f})")


if __name__ == "__main__":
    main()
