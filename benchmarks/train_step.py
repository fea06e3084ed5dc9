"""Benchmark: one training step of the tiny GPT, our engine against the textbook engine.

Both engines start from the same initial weights and train on the same documents in the
same order, one step each in turn, so a slow patch of a shared machine hits both. Run
from the repository root:

    python benchmarks/train_step.py [--steps N] [--data census|canonical|PATH] [--seed S]
                                    [--microgpt-script PATH|none]

See benchmarks/README.md for what it measures and how to read it. The last line is
always ``speedup (train step, vs textbook engine): N.Nx``; the exit status is 1 when the
two engines' losses differ by 1e-9 or more.
"""

import argparse
import gc
import math
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))  # benchmarks/textbook.py

import microgpt_script  # noqa: E402
import textbook  # noqa: E402

from microgpt import GPT, Adam, CharTokenizer, Value  # noqa: E402
from microgpt.data import canonical_names, census_names, load_docs  # noqa: E402

SHARED_NAMES = REPO.parent / "shared" / "data" / "names.txt"
LOSS_TOLERANCE = 1e-9
PER_OP_TOLERANCE = 1e-12  # the same graph on both Value classes: the same numbers


# ---- the two engines, behind the same interface: Engine(model, total_steps).step(tokens) ----

class Ours:
    """microgpt.GPT + microgpt.Adam: fused nodes, iterative backward.

    Its steps run as in `microgpt.train`: with the cyclic garbage collector paused,
    which is safe because this engine's graphs hold no reference cycles (reference
    counting frees each one when the step returns). The textbook engine cannot do
    that: its graphs are cycles that only the collector frees.
    """

    name = "ours"
    pause_collector = True

    def __init__(self, model, total_steps):
        self.model = model
        self.opt = Adam(model.parameters(), total_steps=total_steps)

    def step(self, tokens):
        loss = self.model.loss(tokens)
        loss.backward()
        self.opt.step()
        return loss.data


class Textbook:
    """benchmarks/textbook.py: one node per operation, recursive backward."""

    name = "textbook"
    pause_collector = False
    value_class = textbook.TextbookValue

    def __init__(self, model, total_steps):
        c = model.config
        # the same numbers as the GPT's weights, as TextbookValues, in the same order
        make = self.value_class
        self.sd = {key: [[make(p.data) for p in row] for row in mat]
                   for key, mat in model.state_dict.items()}
        self.params = [p for mat in self.sd.values() for row in mat for p in row]
        self.m = [0.0] * len(self.params)
        self.v = [0.0] * len(self.params)
        self.n_layer, self.n_head, self.block_size = c.n_layer, c.n_head, c.block_size
        self.total_steps, self.t = total_steps, 0

    def step(self, tokens):
        loss = textbook.gpt_loss(self.sd, tokens, self.n_layer, self.n_head, self.block_size)
        loss.backward()
        textbook.adam_step(self.params, self.m, self.v, self.t, self.total_steps)
        self.t += 1
        return loss.data


class PerOperation(Textbook):
    """The textbook's own step code (`gpt_loss`, `adam_step`: one node per scalar
    operation, the way students and microgpt's script write it) on `microgpt.Value`.

    The same graph, node for node, as the textbook row, so the difference is the engine
    alone: node creation, the sort, the gradient accumulation and whether reference
    counting frees the graph. The collector stays at its defaults, as in the textbook
    row (a student's script does not pause it)."""

    name = "per-op"
    value_class = Value


ENGINES = (Ours, Textbook)
class PerOperationPaused(PerOperation):
    """The same, with the cyclic collector paused during the step, as `microgpt.train`
    runs. Only an engine whose graphs hold no reference cycles can do that: the
    textbook's graphs would then never be freed."""

    name = "per-op, paused"
    pause_collector = True


PER_OP_ENGINES = (Textbook, PerOperation, PerOperationPaused)


def load(data, seed):
    """(documents shuffled with `seed`, a description of where they came from)."""
    if data is None:
        if SHARED_NAMES.is_file():
            docs = canonical_names(path=SHARED_NAMES)
            where = f"canonical names.txt ({SHARED_NAMES})"
        else:
            docs, where = census_names(), "census names (no canonical names.txt found)"
    else:
        docs, where = load_docs(data), data
    docs = list(docs)
    random.Random(seed).shuffle(docs)
    return docs, where


# ---- the two passes ----

def timed_run(engines, token_seqs):
    """Alternate the engines step by step, each running a step as its own training loop does.

    The textbook engine runs with the garbage collector at its defaults, as microgpt
    does. Its graphs are reference cycles (the recursive sort is a closure that refers
    to itself), so each graph stays in memory until the collector finds it, and the
    collector's runs, triggered by the textbook's own allocations, fall in its steps.
    Ours runs with the collector paused from before its clock starts to after it
    stops, as in `microgpt.train`; reference counting frees its graph inside its step.
    So ours never runs a collection, and never frees the textbook's garbage. Which
    engine goes first flips every step.

    Returns, per engine: seconds per step, losses, the number of collections of each
    generation that started inside its timed steps, and the seconds spent inside those
    collections (so the report can also give the speedup without the collector).
    """
    seconds = {e.name: [] for e in engines}
    losses = {e.name: [] for e in engines}
    collections = {e.name: [0, 0, 0] for e in engines}
    gc_seconds = {e.name: 0.0 for e in engines}
    running = [None]
    clock = time.perf_counter
    started = [0.0]

    def watch(phase, info):
        if running[0] is None:
            return
        if phase == "start":
            collections[running[0]][info["generation"]] += 1
            started[0] = clock()
        else:
            gc_seconds[running[0]] += clock() - started[0]

    collector_on = gc.isenabled()
    gc.collect()
    gc.callbacks.append(watch)
    try:
        for i, tokens in enumerate(token_seqs):
            for e in engines if i % 2 == 0 else reversed(engines):
                if e.pause_collector:
                    gc.disable()
                running[0] = e.name
                t0 = clock()
                loss = e.step(tokens)
                t1 = clock()
                running[0] = None
                if collector_on:
                    gc.enable()
                seconds[e.name].append(t1 - t0)
                losses[e.name].append(loss)
    finally:
        gc.callbacks.remove(watch)
    return seconds, losses, collections, gc_seconds


def timed_own_garbage(engines, token_seqs):
    """Alternate the engines step by step, each step timed together with a full collection
    right after it, so that each engine pays for freeing its own graph and never for the
    other's (a graph that reference counting frees leaves that collection little to do; a
    graph held in reference cycles waits for it). The collector is otherwise at its
    defaults for both, as in a student's script. Returns seconds and losses per engine."""
    seconds = {e.name: [] for e in engines}
    losses = {e.name: [] for e in engines}
    clock, collect = time.perf_counter, gc.collect
    collector_on = gc.isenabled()
    collect()
    for i, tokens in enumerate(token_seqs):
        for e in engines if i % 2 == 0 else reversed(engines):
            t0 = clock()
            if e.pause_collector:
                gc.disable()
            loss = e.step(tokens)
            if collector_on:
                gc.enable()
            collect()
            seconds[e.name].append(clock() - t0)
            losses[e.name].append(loss)
    return seconds, losses


def peak_memory(engine_cls, model_seed, config, total_steps, token_seqs):
    """Peak traced memory (bytes) of building one engine's model and training it on `token_seqs`."""
    gc.collect()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        model = GPT(config, seed=model_seed)
        engine = engine_cls(model, total_steps)
        for tokens in token_seqs:
            engine.step(tokens)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del engine, model
    gc.collect()
    return peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=100,
                   help="timed training steps per engine (default: %(default)s)")
    p.add_argument("--data", default=None, metavar="census|canonical|PATH",
                   help="documents (default: ../shared/data/names.txt if it exists, "
                        "else the census names)")
    p.add_argument("--seed", type=int, default=42,
                   help="seed for the initial weights and the data order (default: %(default)s)")
    p.add_argument("--memory-steps", type=int, default=5,
                   help="steps in each engine's separate memory pass (default: %(default)s)")
    p.add_argument("--microgpt-script", default=None, metavar="PATH|none",
                   help="a copy of microgpt.py, run on its own Value and on ours (default: "
                        f"{microgpt_script.DEFAULT_SCRIPT} if it exists; none: skip the rows)")
    p.add_argument("--script-steps", type=int, default=None,
                   help="training steps per process of microgpt's script (default: --steps, "
                        "at most 20)")
    p.add_argument("--script-pairs", type=int, default=1,
                   help="process pairs per collector setting for microgpt's script "
                        "(default: %(default)s)")
    args = p.parse_args(argv)
    if args.steps < 1 or args.memory_steps < 1:
        p.error("--steps and --memory-steps must be at least 1")
    script = args.microgpt_script
    if script is None:
        script = microgpt_script.DEFAULT_SCRIPT
        script = script if script.is_file() and SHARED_NAMES.is_file() else None
    elif script == "none":
        script = None
    else:
        script = Path(script)
        if not script.is_file():
            p.error(f"--microgpt-script: no such file: {script}")
        if not SHARED_NAMES.is_file():
            p.error(f"--microgpt-script needs its data, {SHARED_NAMES}")
    script_steps = args.script_steps or min(args.steps, 20)
    if script_steps < 1 or args.script_pairs < 1:
        p.error("--script-steps and --script-pairs must be at least 1")

    docs, where = load(args.data, args.seed)
    tok = CharTokenizer(docs)
    token_seqs = [tok.encode(docs[i % len(docs)]) for i in range(args.steps)]
    model = GPT(vocab_size=tok.vocab_size, seed=args.seed)
    config = model.config
    engines = [cls(model, args.steps) for cls in ENGINES]  # Textbook copies the weights

    print(f"python {sys.version.split()[0]}, gc thresholds {gc.get_threshold()} (defaults, "
          f"{'enabled' if gc.isenabled() else 'DISABLED'}); load {microgpt_script.load_text()}")
    print(f"data: {where}: {len(docs)} docs, shuffled with seed {args.seed}")
    print(f"model: default tiny GPT, {len(model.parameters())} params, vocab {tok.vocab_size}, "
          f"{config.n_layer} layer, n_embd {config.n_embd}, block_size {config.block_size}")
    print(f"timing: {args.steps} steps per engine (forward + backward + Adam), the two "
          f"engines alternating step by step on the same documents", flush=True)

    seconds, losses, collections, gc_seconds = timed_run(engines, token_seqs)

    mem_seqs = token_seqs[: args.memory_steps]
    peaks = {cls.name: peak_memory(cls, args.seed, config, len(mem_seqs), mem_seqs)
             for cls in ENGINES}

    print()
    print(f"{'':34s}" + "".join(f"{cls.name:>16s}" for cls in ENGINES))
    for label, stat in (("seconds per step, median", statistics.median),
                        ("seconds per step, mean", statistics.fmean)):
        row = "".join(f"{stat(seconds[cls.name]):16.4f}" for cls in ENGINES)
        print(f"{label:34s}{row}")
    row = "".join(f"{gc_seconds[cls.name] / args.steps:16.4f}" for cls in ENGINES)
    print(f"{'of which in the garbage collector':34s}{row}")
    row = "".join(f"{'/'.join(map(str, collections[cls.name])):>16s}" for cls in ENGINES)
    print(f"{'gc runs in timed steps, gen 0/1/2':34s}{row}")
    row = "".join(f"{peaks[cls.name] / 2**20:12.1f} MiB" for cls in ENGINES)
    print(f"{'peak memory (tracemalloc)':34s}{row}")
    print(f"(peak memory: a separate pass per engine, after the timing, that builds the model "
          f"and trains {len(mem_seqs)} step(s) under tracemalloc, so tracing does not slow "
          f"the timed steps)")

    diffs = [abs(a - b) for a, b in zip(losses["ours"], losses["textbook"], strict=True)]
    max_diff = max(diffs)
    agree = max_diff < LOSS_TOLERANCE and all(map(math.isfinite, losses["ours"]))
    first, last = losses["ours"][0], losses["ours"][-1]
    print(f"losses: step 1 {first:.6f}, step {args.steps} {last:.6f}; max |ours - textbook| "
          f"over {args.steps} steps = {max_diff:.2e} "
          f"({'agree' if agree else 'DISAGREE'}, tolerance {LOSS_TOLERANCE:g})")
    if not agree:
        print("error: the two engines' losses differ; the timing compares different work",
              file=sys.stderr)

    print()
    print(f"per-operation code: the textbook's gpt_loss and adam_step on microgpt.Value, "
          f"against the same code on TextbookValue ({args.steps} steps each, alternating; "
          f"each step timed with a full collection after it)", flush=True)
    pair = [cls(GPT(config, seed=args.seed), args.steps) for cls in PER_OP_ENGINES]
    op_seconds, op_losses = timed_own_garbage(pair, token_seqs)
    print(f"{'':34s}" + "".join(f"{cls.name:>16s}" for cls in PER_OP_ENGINES))
    for label, stat in (("seconds per step, median", statistics.median),
                        ("seconds per step, mean", statistics.fmean)):
        row = "".join(f"{stat(op_seconds[cls.name]):16.4f}" for cls in PER_OP_ENGINES)
        print(f"{label:34s}{row}")
    same = max(abs(a - b) for name in ("per-op", "per-op, paused")
               for a, b in zip(op_losses[name], op_losses["textbook"], strict=True))
    same_ok = same < PER_OP_TOLERANCE
    print(f"per-op (the textbook's code on our Value): max |per-op - textbook| = {same:.2e} "
          f"({'the same graph' if same_ok else 'DISAGREE'}, tolerance {PER_OP_TOLERANCE:g})")
    if not same_ok:
        print("error: the textbook's code gives other losses on our Value", file=sys.stderr)
    agree = agree and same_ok
    for name in ("per-op", "per-op, paused"):
        ratio = statistics.fmean(op_seconds["textbook"]) / statistics.fmean(op_seconds[name])
        print(f"speedup ({name}: the textbook's code on our Value vs on its own): {ratio:.2f}x")

    if script is not None:
        print()
        print(f"microgpt's own script ({script}), its `class Value` replaced by ours at run "
              f"time, nothing else changed: whole processes, {script_steps} steps each, "
              f"{args.script_pairs} pair(s) per collector setting, alternating", flush=True)
        times, same = microgpt_script.measure(script, SHARED_NAMES, script_steps,
                                              args.script_pairs)
        print(f"losses of microgpt's script: "
              f"{'identical to the last bit' if same else 'DIFFERENT'} on the two Values")
        if not same:
            print("error: microgpt's script gives other losses on our Value", file=sys.stderr)
        agree = agree and same
        headline = microgpt_script.report(times, script_steps)
        print(f"speedup (microgpt's script on our Value, collector on / off): "
              f"{headline['on']:.2f}x / {headline['off']:.2f}x")

    print(f"load at the end: {microgpt_script.load_text()}")

    def without_gc(name):
        return statistics.fmean(seconds[name]) - gc_seconds[name] / args.steps

    print(f"speedup without the collector's time (engine work alone): "
          f"{without_gc('textbook') / without_gc('ours'):.1f}x")
    ratio = statistics.fmean(seconds["textbook"]) / statistics.fmean(seconds["ours"])
    print(f"speedup (train step, vs textbook engine): {ratio:.1f}x")
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
