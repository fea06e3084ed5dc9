"""What a collapsed post-norm GPT looks like inside: dead MLP units, a stream that forgets
its input, predictions that stop depending on it.

Trains the post-norm and the pre-norm model of one `experiments.lr_stress` setting (the
same data, weights and loop), then, on held-out names, measures per block the share of
MLP units that never fire, and for the head's input (the last stream state, through the
final norm if any):

- the mean cosine between the states at different positions (1: every position looks
  the same to the head);
- the mean KL divergence of the model's next-token distribution from its own average
  distribution (0: the prediction does not depend on the input at all, as a unigram
  model's).

    python -m experiments.collapse_probe --settings 0.03:0 --betas 0.9 0.95 --seeds 0
"""

import math
import sys
from dataclasses import asdict

from microgpt import GPT, rmsnorm, softmax
from microgpt.engine import cycle_collector_paused

from . import lr_stress
from .common import RunClock, fmt, provenance_line, save

__all__ = ["probe", "main"]


def probe(model, seqs):
    """Dead-unit share per block, mean cosine between head inputs, mean KL from the mean."""
    c = model.config
    fired = [[False] * (4 * c.n_embd) for _ in range(c.n_layer)]
    heads, dists = [], []

    original_mlp = model.mlp

    def watching_mlp(x, layer):
        h = model._linear(x, f"layer{layer}.mlp_fc1")
        for i, v in enumerate(h):
            if v.data > 0:
                fired[layer][i] = True
        return original_mlp(x, layer)

    model.mlp = watching_mlp
    try:
        with cycle_collector_paused():
            for s in seqs:
                cache = model.new_cache()
                for pos, tok in enumerate(s[: c.block_size]):
                    x = model.embed(tok, pos)
                    for layer in range(c.n_layer):
                        x = model.block(x, layer, cache[layer])
                    logits = model.head(x)
                    x = rmsnorm(x) if c.final_norm else x
                    heads.append([v.data for v in x])
                    dists.append([p.data for p in softmax(logits)])
    finally:
        del model.mlp  # back to the class's method
    dead = [1 - sum(f) / len(f) for f in fired]

    def cos(a, b):
        na = math.sqrt(math.fsum(x * x for x in a))
        nb = math.sqrt(math.fsum(x * x for x in b))
        return math.fsum(x * y for x, y in zip(a, b)) / (na * nb)

    pairs = [(i, j) for i in range(0, len(heads), 3) for j in range(i + 1, len(heads), 7)]
    mean_cos = math.fsum(cos(heads[i], heads[j]) for i, j in pairs) / len(pairs)
    mean = [math.fsum(d[k] for d in dists) / len(dists) for k in range(len(dists[0]))]
    kl = math.fsum(math.fsum(p * math.log(p / q) for p, q in zip(d, mean) if p > 0)
                   for d in dists) / len(dists)
    return {"dead_mlp_units": dead, "head_input_cosine": mean_cos, "kl_from_mean": kl}


def render(result):
    c = result["config"]
    lines = [
        f"# Inside a collapsed model: {c['n_layer']} blocks of width {c['n_embd']}, "
        f"lr {c['settings'][-1][0]}, warmup {c['settings'][-1][1]}, betas "
        f"({c['beta1']}, {c['beta2']}), {c['steps']} steps; {result['probe_seqs']} held-out "
        "names",
        "",
        "Dead MLP units: the share of a block's hidden units that never fire on these names. "
        "Cosine: the mean cosine between the head's inputs at different positions (1: the head "
        "sees the same vector everywhere). KL: the mean divergence of each next-token "
        "distribution from the model's average one (0: the prediction ignores the input).",
        "",
        "| seed | layout | validation loss | dead MLP units per block | cosine | KL |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["per_seed"]:
        for layout, r in p["runs"].items():
            dead = " / ".join(f"{d:.0%}" for d in r["dead_mlp_units"])
            lines.append(f"| {p['seed']} | {layout} | {fmt(r['val_loss'])} | {dead} | "
                         f"{fmt(r['head_input_cosine'])} | {fmt(r['kl_from_mean'])} |")
    lines += ["", f"Unigram loss {fmt(result['unigram_loss'])}, position-only loss "
              f"{fmt(result['position_loss'])}.", "", provenance_line(result), ""]
    return "\n".join(lines)


def main(argv=None):
    args, config = lr_stress.parse(argv)
    argv = sys.argv[1:] if argv is None else argv
    clock = RunClock()
    train, val, vocab = lr_stress.load_data(config)
    val = val[: config.val_seqs]
    lr, warmup = config.settings[-1]
    probe_seqs = val[:40]
    per_seed = []
    for seed in args.seeds:
        runs = {}
        for layout in config.layouts:
            model = GPT(seed=seed, vocab_size=vocab, n_layer=config.n_layer,
                        n_embd=config.n_embd, n_head=config.n_head,
                        block_size=config.block_size, init_std=config.init_std,
                        layout=layout, final_norm=config.final_norm)
            lr_stress.train_lm(model, train, config, lr, warmup, seed)
            runs[layout] = {"val_loss": lr_stress.eval_loss(model, val),
                            **probe(model, probe_seqs)}
            if not args.quiet:
                print(f"seed {seed} {layout}: {runs[layout]}", file=sys.stderr, flush=True)
        per_seed.append({"seed": seed, "runs": runs})
    result = {
        "experiment": "collapse_probe",
        "config": asdict(config),
        "seeds": list(args.seeds),
        "probe_seqs": len(probe_seqs),
        "unigram_loss": lr_stress.unigram_loss(train, val, config.block_size),
        "position_loss": lr_stress.position_loss(train, val, config.block_size, vocab),
        "per_seed": per_seed,
    }
    out = args.out
    if out == "results/pure_python/lr_stress.json":  # lr_stress's default: not ours to write
        out = "results/pure_python/collapse_probe.json"
    out, table = save(result, out, render, "experiments.collapse_probe", argv, clock)
    print(table)
    return result


if __name__ == "__main__":
    main()
