"""The depth study on `Value`: plain, residual and highway MLPs of several depths, per seed.

One configuration per command: a teacher task, a width, a training run (Adam, constant
lr, the same number of steps for every net), and the depths to compare. For each seed
it trains every net on the same points and reports the final training loss on all of
them, beside H(y) (the best constant guess) and the chapter's full-size numbers; then
it says, seed by seed, whether the chapter's two depth effects show:

- (a) moderate depth helps, then hurts: the middle plain depth ends below the shallow
  one, and the deepest plain net fails (its loss is at least `FAIL_FRACTION` of H(y));
- (b) residual depth pays: every deeper residual net ends at most `FAR_BELOW` times the
  shallow residual net's loss.

The teacher generalises `microgpt.deepnet.teacher_data` (its defaults give the same
points): `teacher_depth` tanh layers of `teacher_hidden` units with gain `teacher_gain`.

    python -m experiments.depth_search --width 16 --n 256 --steps 300 --seeds 0 1 2 \\
        --out results/pure_python/depth.json
"""

import argparse
import math
import sys
from dataclasses import asdict, dataclass

from autograder.answers.reference import highway_layer, highway_params, plain_layer, residual_layer
from microgpt.deepnet import label_entropy, make_net, mean_loss, plain_params, train
from microgpt.engine import cycle_collector_paused
from microgpt.nn import make_rng
from microgpt.studies import data_seed

from .common import (
    RunClock,
    Stopwatch,
    add_common_arguments,
    coarse_curve,
    fmt,
    provenance_line,
    save,
)

__all__ = ["DepthConfig", "teacher", "KINDS", "run_net", "run_seed", "effects", "study",
           "render", "main", "CHAPTER", "FAIL_FRACTION", "FAR_BELOW"]

# kind -> (layer function, parameters of one layer)
KINDS = {
    "plain": (plain_layer, plain_params),
    "residual": (residual_layer, plain_params),
    "highway": (highway_layer, highway_params),
}

# the chapter's full-size MLP study (width 64, 4,096 points in 32 dimensions, 10 classes,
# Adam lr 1e-3, batch 128, 800 steps; one seed): final training loss. Theirs, not ours.
CHAPTER = {"plain": {3: 0.420, 10: 0.319, 30: 2.208},
           "residual": {3: 0.649, 10: 0.069, 30: 0.085},
           "highway": {30: 0.116}}

FAIL_FRACTION = 0.9  # (a): the deepest plain net "fails" at or above this share of H(y)
FAR_BELOW = 0.5  # (b): a deeper residual net ends at most this times the shallow one's loss


@dataclass(frozen=True)
class DepthConfig:
    """A depth study's task, nets and training run; the defaults are studies.INTERACTIVE's."""

    width: int = 8
    d_in: int = 8
    n_classes: int = 4
    teacher_hidden: int = 16
    teacher_depth: int = 2
    teacher_gain: float = 2.0
    n: int = 128
    batch: int = 8
    steps: int = 200
    lr: float = 0.01
    depths: tuple = (3, 10, 30)
    kinds: tuple = ("plain", "residual")
    highway_depths: tuple = ()  # highway nets, if any, at these depths (same steps)
    cost_only: bool = False  # time the training steps only: no final loss on all points

    def net_list(self):
        out = [(kind, d) for kind in self.kinds for d in self.depths]
        out += [("highway", d) for d in self.highway_depths]
        return out


def teacher(n, d_in=8, n_classes=4, seed=0, hidden=16, depth=2, gain=2.0):
    """`n` points $x \\sim N(0, I)$ labelled by $\\arg\\max W_{out} h_k$, with $h_0 = x$ and
    $h_{i+1} = \\tanh(g\\, W_i h_i)$ for `depth` layers of `hidden` units, gain $g$.

    Weights from $N(0, 1/\\mathrm{fan\\_in})$, drawn first (layers in order, then the
    output), then the points, all from `seed`. With depth 2 and gain 2 this is
    `microgpt.deepnet.teacher_data`, point for point.
    """
    rng = make_rng(seed)

    def weights(n_out, n_in):
        return [[rng.gauss(0, 1) / math.sqrt(n_in) for _ in range(n_in)] for _ in range(n_out)]

    def times(w, v):
        return [math.fsum(a * b for a, b in zip(row, v)) for row in w]

    layers = [weights(hidden, d_in if i == 0 else hidden) for i in range(depth)]
    w_out = weights(n_classes, hidden)
    X = [[rng.gauss(0, 1) for _ in range(d_in)] for _ in range(n)]
    Y = []
    for x in X:
        h = x
        for w in layers:
            h = [math.tanh(gain * a) for a in times(w, h)]
        z = times(w_out, h)
        Y.append(max(range(n_classes), key=z.__getitem__))
    return X, Y


def task(config, seed):
    """The points of `seed`'s study (the teacher draws from `data_seed(seed)`)."""
    return teacher(config.n, config.d_in, config.n_classes, data_seed(seed),
                   config.teacher_hidden, config.teacher_depth, config.teacher_gain)


def run_net(kind, depth, seed, config, X, Y):
    """Train one net; its final loss on all points, the curve, and the seconds it took."""
    layer, params = KINDS[kind]
    net = make_net(depth, config.width, config.d_in, config.n_classes, seed, params)
    clock = Stopwatch()
    history = train(net, X, Y, layer, config.steps, config.lr, config.batch, seed)
    train_seconds = clock.seconds()
    loss = None
    if not config.cost_only:
        with cycle_collector_paused():
            loss = mean_loss(net, X, Y, layer).data
    return {
        "kind": kind,
        "depth": depth,
        "loss": loss,
        "curve": coarse_curve(history),
        "train_seconds": round(train_seconds, 2),
        "ms_per_step": round(1000 * train_seconds / config.steps, 2),
        "seconds": round(clock.seconds(), 2),
    }


def name(kind, depth):
    return f"{kind} {depth}"


def effects(runs, entropy, config):
    """Whether (a) and (b) show in one seed's runs ({name: run}); None when not measured."""
    out = {"a": None, "b": None}
    if any(r["loss"] is None for r in runs.values()):
        return out
    depths = sorted(config.depths)
    shallow, deep, middle = depths[0], depths[-1], depths[1:-1]
    if "plain" in config.kinds and middle:
        loss = {d: runs[name("plain", d)]["loss"] for d in depths}
        out["a"] = (all(loss[m] < loss[shallow] for m in middle)
                    and loss[deep] >= FAIL_FRACTION * entropy)
    if "residual" in config.kinds and len(depths) > 1:
        loss = {d: runs[name("residual", d)]["loss"] for d in depths}
        out["b"] = all(loss[d] <= FAR_BELOW * loss[shallow] for d in depths[1:])
    return out


def run_seed(seed, config, log=None, run_net=run_net):
    X, Y = task(config, seed)
    entropy = label_entropy(Y)
    runs = {}
    for kind, depth in config.net_list():
        r = run_net(kind, depth, seed, config, X, Y)
        runs[name(kind, depth)] = r
        if log:
            log(f"seed {seed} {name(kind, depth)}: loss {fmt(r['loss'])} "
                f"(H(y) {entropy:.3f}), {r['ms_per_step']:.1f} ms/step, {r['seconds']:.1f} s")
    return {"seed": seed, "entropy": entropy, "runs": runs,
            "effects": effects(runs, entropy, config),
            "seconds": round(sum(r["seconds"] for r in runs.values()), 1)}


def study(config, seeds, log=None, run_net=run_net, engine="Value"):
    """The result dict (without provenance) of the study over `seeds`.

    `run_net` trains one net (the `Value` engine's by default; the numpy mirror passes its own).
    """
    per_seed = [run_seed(s, config, log, run_net) for s in seeds]
    names = [name(k, d) for k, d in config.net_list()]
    cost = {n: round(sum(p["runs"][n]["ms_per_step"] for p in per_seed) / len(per_seed), 2)
            for n in names}
    held = {}
    for key in ("a", "b"):
        values = [p["effects"][key] for p in per_seed]
        held[key] = None if any(v is None for v in values) else all(values)
    return {
        "experiment": "depth_search",
        "engine": engine,
        "config": asdict(config),
        "seeds": list(seeds),
        "criteria": {"FAIL_FRACTION": FAIL_FRACTION, "FAR_BELOW": FAR_BELOW},
        "chapter": {k: {str(d): v for d, v in row.items()} for k, row in CHAPTER.items()},
        "per_seed": per_seed,
        "holds_on_every_seed": held,
        "ms_per_step": cost,
        "seconds_per_seed": round(sum(p["seconds"] for p in per_seed) / len(per_seed), 1),
    }


def engine_name(result):
    engine = result.get("engine", "Value")
    return "`Value`" if engine == "Value" else engine


def render(result):
    """The markdown table of a result: one row per seed, the chapter's numbers last."""
    c = result["config"]
    names = list(result["per_seed"][0]["runs"]) if result["per_seed"] else []
    lines = [
        f"# Depth study on {engine_name(result)}: {c['width']} wide, teacher "
        f"{c['teacher_depth']} x {c['teacher_hidden']} (gain {c['teacher_gain']}), "
        f"{c['d_in']} inputs, {c['n_classes']} classes, {c['n']} points, batch {c['batch']}, "
        f"Adam lr {c['lr']}, {c['steps']} steps for every net",
        "",
        "Final training loss on all points (nats). H(y): the best constant guess.",
        "",
        "| seed | H(y) | " + " | ".join(names) + " | (a) | (b) |",
        "|---" * (len(names) + 4) + "|",
    ]
    for p in result["per_seed"]:
        cells = [fmt(p["runs"][n]["loss"]) for n in names]
        lines.append(f"| {p['seed']} | {fmt(p['entropy'])} | " + " | ".join(cells)
                     + f" | {fmt(p['effects']['a'])} | {fmt(p['effects']['b'])} |")
    chapter = result["chapter"]
    cells = []
    for n in names:
        kind, depth = n.split()
        cells.append(fmt(chapter.get(kind, {}).get(depth)))
    lines.append("| the chapter's (full size, torch, 1 seed) | (10 classes; ln 10 = 2.303) | "
                 + " | ".join(cells) + " | | |")
    lines.append("| ms per step (mean over seeds) | | "
                 + " | ".join(fmt(result["ms_per_step"][n], 1) for n in names) + " | | |")
    held = result["holds_on_every_seed"]
    crit = result["criteria"]
    lines += [
        "",
        f"(a) moderate depth helps, then hurts: every middle plain depth below the shallowest, "
        f"and the deepest plain net at least {crit['FAIL_FRACTION']} x H(y). "
        f"Holds on every seed: {fmt(held['a'])}.",
        f"(b) residual depth pays: every deeper residual net at most {crit['FAR_BELOW']} x "
        f"the shallowest residual net's loss. Holds on every seed: {fmt(held['b'])}.",
        "",
        f"Cost: {result['seconds_per_seed']} s per seed (all nets, training and the final "
        f"loss).",
        "",
        provenance_line(result),
        "",
    ]
    return "\n".join(lines)


def parse(argv=None, default_out="results/pure_python/depth.json"):
    p = argparse.ArgumentParser(prog="python -m experiments.depth_search",
                                description=__doc__.split("\n")[0])
    d = DepthConfig()
    p.add_argument("--width", type=int, default=d.width)
    p.add_argument("--d-in", type=int, default=d.d_in)
    p.add_argument("--classes", type=int, default=d.n_classes)
    p.add_argument("--teacher-hidden", type=int, default=d.teacher_hidden)
    p.add_argument("--teacher-depth", type=int, default=d.teacher_depth)
    p.add_argument("--teacher-gain", type=float, default=d.teacher_gain)
    p.add_argument("--n", type=int, default=d.n, help="training points")
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--steps", type=int, default=d.steps, help="Adam steps, every net")
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument("--depths", type=int, nargs="+", default=list(d.depths))
    p.add_argument("--kinds", nargs="+", default=list(d.kinds), choices=["plain", "residual"])
    p.add_argument("--highway-depths", type=int, nargs="*", default=[])
    p.add_argument("--cost-only", action="store_true",
                   help="time the training steps only (no final loss on all points)")
    add_common_arguments(p, default_out)
    args = p.parse_args(argv)
    config = DepthConfig(width=args.width, d_in=args.d_in, n_classes=args.classes,
                         teacher_hidden=args.teacher_hidden, teacher_depth=args.teacher_depth,
                         teacher_gain=args.teacher_gain, n=args.n, batch=args.batch,
                         steps=args.steps, lr=args.lr, depths=tuple(args.depths),
                         kinds=tuple(args.kinds), highway_depths=tuple(args.highway_depths),
                         cost_only=args.cost_only)
    return args, config


def main(argv=None, run_net=run_net, engine="Value", module="experiments.depth_search",
         default_out="results/pure_python/depth.json", command_argv=None):
    args, config = parse(argv, default_out)
    argv = sys.argv[1:] if argv is None else argv
    argv = argv if command_argv is None else command_argv
    clock = RunClock()
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    result = study(config, args.seeds, log, run_net, engine)
    out, table = save(result, args.out, render, module, argv, clock)
    print(table)
    return result


if __name__ == "__main__":
    main()
