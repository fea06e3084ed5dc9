"""Deleting one layer of trained plain and residual nets (Veit et al., 2016): the notebook
of assignment 4 (Task 4.3) on seed 0, here over several seeds.

Trains the plain and the residual net of `depth` layers in the depth study's
configuration where residual depth pays (`microgpt.studies.DEPTH_PAYS`: width 12, lr
0.002, 600 steps), then measures the training loss on all points with each layer left
out in turn (`microgpt.studies.without_layer`).

    python -m experiments.deletion_probe --seeds 0 1 2
"""

import argparse
import sys

from microgpt import layernorm, linear
from microgpt.deepnet import mean_loss, teacher_data
from microgpt.studies import DEPTH_PAYS, Variant, data_seed, run, without_layer

from .common import RunClock, Stopwatch, add_common_arguments, fmt, provenance_line, save

__all__ = ["plain_layer", "residual_layer", "deletion_losses", "main"]


def plain_layer(h, W):
    """relu(W LayerNorm(h))"""
    return [v.relu() for v in linear(layernorm(h), W)]


def residual_layer(h, W):
    """h + relu(W LayerNorm(h))"""
    return [a + b for a, b in zip(h, plain_layer(h, W))]


def deletion_losses(net, X, Y, layer):
    """The mean loss on X, Y with each layer of `net` left out in turn."""
    return [mean_loss(without_layer(net, i), X, Y, layer).data for i in range(net.depth)]


def render(result):
    entropy = "H(y)"
    lines = [f"# Deleting one layer of trained {result['depth']}-layer nets "
             f"(width {result['config']['width']}, lr {result['config']['lr']}, "
             f"{result['config']['steps']} steps)", "",
             "Training loss on all points, with every layer and with one layer left out. "
             f"{entropy}: the best constant guess.", "",
             "| seed | H(y) | net | every layer | one left out: min | max | above H(y) |",
             "|---|---|---|---|---|---|---|"]
    for s in result["per_seed"]:
        for kind in ("plain", "residual"):
            r = s[kind]
            above = sum(v > s["entropy"] for v in r["deleted"])
            lines.append(f"| {s['seed']} | {fmt(s['entropy'])} | {kind} | {fmt(r['loss'])} | "
                         f"{fmt(min(r['deleted']))} | {fmt(max(r['deleted']))} | "
                         f"{above} of {len(r['deleted'])} |")
    lines += ["", "Per layer (1 = next to the input):", ""]
    for s in result["per_seed"]:
        for kind in ("plain", "residual"):
            lines.append(f"- seed {s['seed']}, {kind}: "
                         + " ".join(fmt(v) for v in s[kind]["deleted"]))
    lines += ["", provenance_line(result), ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(p, "results/pure_python/deletion_probe.json")
    p.add_argument("--depth", type=int, default=10)
    args = p.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    clock = RunClock()
    config = DEPTH_PAYS
    per_seed = []
    for seed in args.seeds:
        X, Y = teacher_data(config.n, config.d_in, config.n_classes, data_seed(seed))
        row = {"seed": seed}
        for kind, layer in (("plain", plain_layer), ("residual", residual_layer)):
            watch = Stopwatch()
            trained = run(Variant(layer, args.depth), seed, config)
            row["entropy"] = trained.entropy
            row[kind] = {"loss": trained.loss,
                         "deleted": deletion_losses(trained.net, X, Y, layer),
                         "seconds": round(watch.seconds(), 1)}
            if not args.quiet:
                print(f"seed {seed} {kind}: {row[kind]}", file=sys.stderr, flush=True)
        per_seed.append(row)
    result = {"experiment": "deletion_probe", "depth": args.depth,
              "config": {"width": config.width, "lr": config.lr, "steps": config.steps,
                         "n": config.n, "batch": config.batch},
              "seeds": list(args.seeds), "per_seed": per_seed}
    out, table = save(result, args.out, render, "experiments.deletion_probe", argv, clock)
    print(table)
    return result


if __name__ == "__main__":
    main()
