"""Notebook 06's experiment over seeds: the residual stream and the logit lens of two small
trained GPTs (pre-norm and post-norm), measured on held-out names.

The notebook trains one pair on seed 0; this command trains the same pair for each seed
(the model's initial weights and its order of training names both come from the seed;
the 40 held-out names stay those of the notebook, `random.Random(0)`'s shuffle) and
measures, with microgpt's own `GPT.stream_states` and `GPT.head`, per depth k (the number
of blocks a state has been through): the stream's mean RMS, its mean cosine with the
embedding state, the mean logit-lens loss, how often the lens's top-1 guess is the next
letter and how often it is already the model's final guess. Seed 0 reproduces the
notebook's committed table. Then, per seed, the criteria of
`results/heldout/CRITERIA.md` (E1-E3, F1-F3).

    python -m experiments.stream_probe --seeds 100 101 102 --out results/heldout/stream_probe.json
"""

import argparse
import math
import random
import sys

from microgpt import GPT, CharTokenizer, census_names, train
from microgpt.engine import cycle_collector_paused

from .common import RunClock, Stopwatch, add_common_arguments, fmt, provenance_line, save

__all__ = ["held_out_split", "measure", "verdicts", "main"]

N_LAYER, N_EVAL, STEPS, LR = 3, 40, 250, 0.01


def held_out_split():
    """(training names, held-out names, tokenizer): notebook 06's split."""
    names = census_names()
    tok = CharTokenizer(names)
    random.Random(0).shuffle(names)
    return names[N_EVAL:], names[:N_EVAL], tok


def _log_softmax_at(logits, target):
    m = max(logits)
    return logits[target] - m - math.log(math.fsum(math.exp(z - m) for z in logits))


def measure(model, names, tok):
    """Per depth: mean RMS, mean cosine with x_0 (over every state), mean lens loss (per name,
    averaged over names, as the notebook does), top-1 = next letter, top-1 = final guess."""
    depth = model.config.n_layer + 1
    rms_sum, cos_sum, lens_sum = [0.0] * depth, [0.0] * depth, [0.0] * depth
    right, same = [0] * depth, [0] * depth
    n_states = n_positions = 0
    own, worst_gap = 0.0, 0.0
    with cycle_collector_paused():
        for name in names:
            tokens = tok.encode(name)
            states = model.stream_states(tokens)
            x0s = []
            for position in states:
                n_states += 1
                vals = [[v.data for v in s] for s in position]
                x0 = vals[0]
                x0s.append(x0)
                n0 = math.sqrt(math.fsum(a * a for a in x0))
                for k, x in enumerate(vals):
                    sq = math.fsum(a * a for a in x)
                    rms_sum[k] += math.sqrt(sq / len(x))
                    cos_sum[k] += math.fsum(a * b for a, b in zip(x, x0)) / (math.sqrt(sq) * n0)
            n = min(len(states), len(tokens) - 1)
            lens = [0.0] * depth
            for p in range(n):
                guesses = []
                for k, state in enumerate(states[p]):
                    logits = [z.data for z in model.head(state)]
                    lens[k] -= _log_softmax_at(logits, tokens[p + 1])
                    guesses.append(max(range(len(logits)), key=logits.__getitem__))
                n_positions += 1
                for k, g in enumerate(guesses):
                    right[k] += g == tokens[p + 1]
                    same[k] += g == guesses[-1]
            for k in range(depth):
                lens_sum[k] += lens[k] / n
            loss = model.loss(tokens).data
            own += loss
            worst_gap = max(worst_gap, abs(lens[-1] / n - loss))
    return {"rms": [s / n_states for s in rms_sum], "cosine": [s / n_states for s in cos_sum],
            "lens": [s / len(names) for s in lens_sum], "own_loss": own / len(names),
            "worst_gap": worst_gap, "top1_next": [r / n_positions for r in right],
            "top1_final": [s / n_positions for s in same], "positions": n_positions}


def _falls(xs):
    return all(b < a for a, b in zip(xs, xs[1:]))


def verdicts(runs):
    """E1-E3 and F1-F3 of results/heldout/CRITERIA.md for one seed ({layout: measure})."""
    pre, post = runs["pre"], runs["post"]
    lens = pre["lens"]
    total = lens[0] - lens[-1]
    return {
        "E1_pre_lens_falls": _falls(lens),
        "E1_post_lens_falls": _falls(post["lens"]),
        "E2_first_block_share": (lens[0] - lens[1]) / total if total > 0 else None,
        "E2": total > 0 and (lens[0] - lens[1]) >= 0.75 * total,
        "E3_top1_gain_1_to_L": pre["top1_next"][-1] - pre["top1_next"][1],
        "E3": pre["top1_next"][-1] - pre["top1_next"][1] >= 0.05,
        "F1": all(b > a for a, b in zip(pre["rms"], pre["rms"][1:])),
        "F2": all(abs(r - 1) <= 0.01 for r in post["rms"]),
        "F3_pre": _falls(pre["cosine"]),
        "F3_post": _falls(post["cosine"]),
    }


def render(result):
    lines = [f"# The residual stream and the logit lens over seeds (notebook 06's experiment: "
             f"{N_LAYER} blocks, width 16, final norm, {STEPS} steps at lr {LR}, "
             f"{N_EVAL} held-out names)", "",
             "Per depth k = 0..3: stream RMS, cosine with the embedding state, lens loss, "
             "top-1 = next letter, top-1 = final guess.", "",
             "| seed | layout | RMS | cosine | lens loss | top-1 next | top-1 final | "
             "own loss |", "|---|---|---|---|---|---|---|---|"]

    def row(xs, d=3):
        return " / ".join(fmt(x, d) for x in xs)

    def pct(xs):
        return " / ".join(f"{x:.0%}" for x in xs)

    for s in result["per_seed"]:
        for layout in ("pre", "post"):
            r = s["runs"][layout]
            lines.append(f"| {s['seed']} | {layout} | {row(r['rms'])} | {row(r['cosine'])} | "
                         f"{row(r['lens'], 4)} | {pct(r['top1_next'])} | "
                         f"{pct(r['top1_final'])} | {fmt(r['own_loss'], 4)} |")
    keys = ["E1_pre_lens_falls", "E1_post_lens_falls", "E2", "E3", "F1", "F2", "F3_pre",
            "F3_post"]
    lines += ["", "| seed | " + " | ".join(keys) + " | first block's share of the drop | "
              "top-1 gain, k = 1 to 3 |", "|---" * (len(keys) + 3) + "|"]
    for s in result["per_seed"]:
        v = s["verdicts"]
        lines.append(f"| {s['seed']} | " + " | ".join(fmt(v[k]) for k in keys)
                     + f" | {fmt(v['E2_first_block_share'], 2)} | "
                     f"{v['E3_top1_gain_1_to_L'] * 100:+.1f} points |")
    n = len(result["per_seed"])
    lines += ["", "Counts: " + "; ".join(
        f"{k} {sum(bool(s['verdicts'][k]) for s in result['per_seed'])} of {n}" for k in keys)
        + ".", "", provenance_line(result), ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_common_arguments(p, "results/heldout/stream_probe.json")
    args = p.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv
    clock = RunClock()
    train_names, held_out, tok = held_out_split()
    per_seed = []
    for seed in args.seeds:
        runs = {}
        for layout in ("pre", "post"):
            watch = Stopwatch()
            model = GPT(layout=layout, seed=seed, vocab_size=tok.vocab_size, n_layer=N_LAYER,
                        n_embd=16, n_head=4, final_norm=True)
            history = train(model, train_names, tok, steps=STEPS, lr=LR, seed=seed,
                            progress=False)
            runs[layout] = measure(model, held_out, tok)
            runs[layout]["train_loss_last100"] = math.fsum(history[-100:]) / 100
            runs[layout]["seconds"] = round(watch.seconds(), 1)
            if not args.quiet:
                print(f"seed {seed} {layout}: lens {runs[layout]['lens']}, rms "
                      f"{runs[layout]['rms']}", file=sys.stderr, flush=True)
        per_seed.append({"seed": seed, "runs": runs, "verdicts": verdicts(runs)})
    result = {"experiment": "stream_probe", "seeds": list(args.seeds),
              "config": {"n_layer": N_LAYER, "n_embd": 16, "n_head": 4, "final_norm": True,
                         "steps": STEPS, "lr": LR, "held_out_names": N_EVAL},
              "per_seed": per_seed}
    out, table = save(result, args.out, render, "experiments.stream_probe", argv, clock)
    print(table)
    return result


if __name__ == "__main__":
    main()
