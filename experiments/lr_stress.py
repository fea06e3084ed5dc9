"""The learning-rate stress on `Value`: post-norm against pre-norm GPTs at a high lr, no warmup.

The chapter's result (full size, torch): at lr 3e-2 with no warmup the post-norm model
collapses to the unigram loss (it predicts the letter frequencies and nothing more)
while the pre-norm model trains on. This command trains microgpt's GPT in each layout
on the same data, from the same initial weights, for each learning-rate setting
(`--settings LR:WARMUP`, warmup as a fraction of the steps) and each seed, and
reports the final validation loss beside the unigram loss. For the last setting (the
stress) it says, seed by seed, whether

- (c) post-norm collapses (its validation loss ends no lower than that of a model that
  knows only the position in the sequence, not the tokens: on names that is 0.29 nats
  below the unigram loss, on text windows it is about the unigram loss) while pre-norm
  trains on (it ends below that loss).

Data: census names (`--data census`, the pack's offline default: one name per
sequence, BOS at both ends), or a slice of a text file (`--data PATH`, e.g.
TinyShakespeare): fixed windows of `block_size + 1` characters, the last tenth of the
slice held out.

    python -m experiments.lr_stress --n-layer 4 --settings 0.01:0.1 0.1:0 \\
        --seeds 0 1 2 --out results/pure_python/lr_stress.json
"""

import argparse
import math
import sys
from dataclasses import asdict, dataclass

from microgpt import GPT, CharTokenizer, Value, census_names
from microgpt.engine import cycle_collector_paused
from microgpt.nn import Adam, make_rng

from .common import (
    RunClock,
    Stopwatch,
    add_common_arguments,
    coarse_curve,
    fmt,
    provenance_line,
    save,
)

__all__ = ["StressConfig", "load_data", "lr_at", "train_lm", "eval_loss", "unigram_loss",
           "position_loss", "run_one", "study", "render", "main", "CHAPTER"]

# the chapter's full-size transformer study (TinyShakespeare, 6 blocks, width 64, AdamW,
# 300 steps; one seed): final validation loss. Theirs, not ours.
CHAPTER = {"unigram (no residual)": 3.368, "post lr 3e-3, warmup 10%": 1.951,
           "pre lr 3e-3, warmup 10%": 1.985, "post lr 3e-2, no warmup": 3.368,
           "pre lr 3e-2, no warmup": 1.974}

DATA_SEED = 12345  # the split of the data into training and validation: fixed for every run


@dataclass(frozen=True)
class StressConfig:
    data: str = "census"
    text_chars: int = 200_000  # for a text file: the slice used (train + validation)
    n_layer: int = 4
    n_embd: int = 16
    n_head: int = 4
    block_size: int = 16
    init_std: float = 0.08
    final_norm: bool = False
    layouts: tuple = ("post", "pre")
    settings: tuple = ((0.1, 0.0),)  # (lr, warmup fraction); the last is the stress
    schedule: str = "linear"  # after warmup: "linear" to min_lr, "cosine" to min_lr, "constant"
    min_lr: float = 0.0  # as a fraction of lr
    beta1: float = 0.85
    beta2: float = 0.99
    weight_decay: float = 0.0  # decoupled (AdamW-style), per step lr_t * wd * p
    clip: float = 0.0  # gradient clipping at this global norm (0: none)
    batch: int = 1  # sequences per step
    steps: int = 200
    val_seqs: int = 200  # validation sequences scored at the end
    window: int = 50  # the training loss reported is the mean of the last `window` steps


def load_data(config):
    """(train sequences, validation sequences, vocabulary size) as lists of token ids."""
    if config.data == "census":
        docs = census_names()
        tok = CharTokenizer(docs)
        order = list(docs)
        make_rng(DATA_SEED).shuffle(order)
        n_val = len(order) // 10
        seqs = [tok.encode(d) for d in order]
        return seqs[n_val:], seqs[:n_val], tok.vocab_size
    with open(config.data, encoding="utf-8") as f:
        text = f.read()[: config.text_chars]
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    ids = [stoi[c] for c in text]
    span = config.block_size + 1
    split = len(ids) - len(ids) // 10
    train = [ids[i:i + span] for i in range(0, split - span + 1, span)]
    val = [ids[i:i + span] for i in range(split, len(ids) - span + 1, span)]
    make_rng(DATA_SEED).shuffle(val)
    return train, val, len(chars)


def lr_at(step, steps, lr, warmup, schedule="linear", min_lr=0.0):
    """The learning rate of `step` (0-based): a linear ramp over `warmup` x `steps` steps,
    then `schedule` from lr down to `min_lr` x lr at the end."""
    n_warm = round(warmup * steps)
    if step < n_warm:
        return lr * (step + 1) / n_warm
    if schedule == "constant":
        return lr
    progress = (step - n_warm) / max(1, steps - n_warm)
    floor = min_lr * lr
    if schedule == "linear":
        return floor + (lr - floor) * (1 - progress)
    if schedule == "cosine":
        return floor + (lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))
    raise ValueError(f"unknown schedule {schedule!r}")


def train_lm(model, seqs, config, lr, warmup, seed):
    """Adam on `batch` sequences a step, taken in turn from a shuffle by `seed`; the history."""
    order = list(seqs)
    make_rng(seed).shuffle(order)
    params = model.parameters()
    opt = Adam(params, lr=lr, betas=(config.beta1, config.beta2))
    history, k = [], 0
    with cycle_collector_paused():
        for step in range(config.steps):
            batch = [order[(k + i) % len(order)] for i in range(config.batch)]
            k += config.batch
            losses = [model.loss(s) for s in batch]
            loss = Value.sum(losses) * (1 / len(losses))
            loss.backward()
            if config.clip:
                norm = math.sqrt(math.fsum(p.grad * p.grad for p in params))
                if norm > config.clip:
                    scale = config.clip / norm
                    for p in params:
                        p.grad *= scale
            opt.lr = lr_at(step, config.steps, lr, warmup, config.schedule, config.min_lr)
            if config.weight_decay:
                shrink = 1 - opt.lr * config.weight_decay
                for p in params:
                    p.data *= shrink
            opt.step()
            history.append(loss.data)
    return history


def eval_loss(model, seqs):
    """Mean next-token loss over every target of `seqs` (each sequence weighted by length)."""
    total, count = 0.0, 0
    with cycle_collector_paused():
        for s in seqs:
            n = min(model.config.block_size, len(s) - 1)
            total += model.loss(s).data * n
            count += n
    return total / count


def unigram_loss(train, val, block_size):
    """The loss of predicting the training targets' frequencies at every position, on `val`."""
    counts = {}
    for s in train:
        for t in s[1:block_size + 1]:
            counts[t] = counts.get(t, 0) + 1
    total = sum(counts.values())
    losses = [-math.log(counts.get(t, 0.5) / total) for s in val for t in s[1:block_size + 1]]
    return math.fsum(losses) / len(losses)


def position_loss(train, val, block_size, vocab_size):
    """The loss of predicting, at each position, the training targets' frequencies there.

    What a model that knows where it is in a sequence but not which tokens it has seen
    can reach (add-0.1 smoothing). For names it is well below the unigram loss (names
    end at typical lengths); for windows cut at arbitrary places in a text it is about
    the unigram loss.
    """
    counts = {}
    for s in train:
        for p, t in enumerate(s[1:block_size + 1]):
            row = counts.setdefault(p, {})
            row[t] = row.get(t, 0) + 1
    losses = []
    for s in val:
        for p, t in enumerate(s[1:block_size + 1]):
            row = counts.get(p, {})
            total = sum(row.values())
            losses.append(-math.log((row.get(t, 0) + 0.1) / (total + 0.1 * vocab_size)))
    return math.fsum(losses) / len(losses)


def setting_name(lr, warmup):
    return f"lr {lr:g}, " + (f"warmup {warmup:.0%}" if warmup else "no warmup")


def run_one(layout, lr, warmup, seed, config, data):
    train, val, vocab = data
    model = GPT(seed=seed, vocab_size=vocab, n_layer=config.n_layer, n_embd=config.n_embd,
                n_head=config.n_head, block_size=config.block_size, init_std=config.init_std,
                layout=layout, final_norm=config.final_norm)
    clock = Stopwatch()
    history = train_lm(model, train, config, lr, warmup, seed)
    train_seconds = clock.seconds()
    val_loss = eval_loss(model, val[: config.val_seqs])
    tail = history[-config.window:]
    w = min(20, len(history))
    smooth = [math.fsum(history[i:i + w]) / w for i in range(len(history) - w + 1)]
    return {
        "layout": layout, "lr": lr, "warmup": warmup,
        "val_loss": val_loss,
        "train_loss": math.fsum(tail) / len(tail),
        "peak_train_loss": max(smooth),
        "curve": coarse_curve(history),
        "ms_per_step": round(1000 * train_seconds / config.steps, 1),
        "seconds": round(clock.seconds(), 1),
    }


def verdict(runs, position):
    """(c) for one seed's stress runs ({layout: run}): None unless both layouts ran.

    Post-norm has collapsed when it ends no better than the position-only model (one
    that knows where it is in the sequence but not which tokens it has seen); pre-norm
    trains on when it ends below it.
    """
    if "post" not in runs or "pre" not in runs:
        return None
    return (runs["post"]["val_loss"] >= position
            and runs["pre"]["val_loss"] < position)


def study(config, seeds, log=None):
    data = load_data(config)
    val = data[1][: config.val_seqs]
    unigram = unigram_loss(data[0], val, config.block_size)
    position = position_loss(data[0], val, config.block_size, data[2])
    per_seed = []
    for seed in seeds:
        runs = {}
        for lr, warmup in config.settings:
            for layout in config.layouts:
                r = run_one(layout, lr, warmup, seed, config, data)
                runs[f"{layout}, {setting_name(lr, warmup)}"] = r
                if log:
                    log(f"seed {seed} {layout} {setting_name(lr, warmup)}: val "
                        f"{r['val_loss']:.3f} (unigram {unigram:.3f}), train "
                        f"{r['train_loss']:.3f}, peak {r['peak_train_loss']:.3f}, "
                        f"{r['ms_per_step']:.0f} ms/step, {r['seconds']:.0f} s")
        lr, warmup = config.settings[-1]
        stress = {layout: runs[f"{layout}, {setting_name(lr, warmup)}"]
                  for layout in config.layouts}
        per_seed.append({"seed": seed, "runs": runs, "c": verdict(stress, position),
                         "seconds": round(sum(r["seconds"] for r in runs.values()), 1)})
    values = [p["c"] for p in per_seed]
    names = list(per_seed[0]["runs"]) if per_seed else []
    return {
        "experiment": "lr_stress",
        "config": asdict(config),
        "seeds": list(seeds),
        "train_sequences": len(data[0]),
        "vocab_size": data[2],
        "unigram_loss": unigram,
        "position_loss": position,
        "chapter": CHAPTER,
        "per_seed": per_seed,
        "holds_on_every_seed": None if any(v is None for v in values) else all(values),
        "ms_per_step": {n: round(sum(p["runs"][n]["ms_per_step"] for p in per_seed)
                                 / len(per_seed), 1) for n in names},
        "seconds_per_seed": round(sum(p["seconds"] for p in per_seed) / len(per_seed), 1),
    }


def render(result):
    c = result["config"]
    names = list(result["per_seed"][0]["runs"]) if result["per_seed"] else []
    data = ("census names" if c["data"] == "census"
            else f"{c['data']} (first {c['text_chars']:,} chars)")
    lines = [
        f"# Learning-rate stress on `Value`: {c['n_layer']} blocks of width {c['n_embd']}, "
        f"{c['n_head']} heads, context {c['block_size']}, final norm "
        f"{'yes' if c['final_norm'] else 'no'}, init std {c['init_std']}; {data}",
        "",
        f"Adam betas ({c['beta1']}, {c['beta2']}), weight decay {c['weight_decay']}, clip "
        f"{c['clip'] or 'none'}, {c['schedule']} schedule to {c['min_lr']} x lr after the "
        f"warmup; batch {c['batch']}, {c['steps']} steps.",
        f"Validation loss on {c['val_seqs']} held-out sequences (nats per token); unigram "
        f"loss {fmt(result['unigram_loss'])}, position-only loss "
        f"{fmt(result['position_loss'])}. Train: mean of the last {c['window']} steps; "
        "peak: the highest 20-step mean.",
        "",
        "| seed | run | validation | train | peak | (c) |",
        "|---|---|---|---|---|---|",
    ]
    for p in result["per_seed"]:
        for i, n in enumerate(names):
            r = p["runs"][n]
            mark = fmt(p["c"]) if i == len(names) - 1 else ""
            lines.append(f"| {p['seed']} | {n} | {fmt(r['val_loss'])} | {fmt(r['train_loss'])}"
                         f" | {fmt(r['peak_train_loss'])} | {mark} |")
    lines += ["", "The chapter's (full size, torch, TinyShakespeare, one seed): "
              + "; ".join(f"{k} {v}" for k, v in result["chapter"].items()) + ".", ""]
    lines += [
        "(c) at the last setting, post-norm collapses (its validation loss ends at or above "
        "the position-only loss: no better than a model that knows where it is in the name "
        "but not which letters it has seen) while pre-norm trains on (below it). Holds on "
        "every seed: "
        f"{fmt(result['holds_on_every_seed'])}.",
        "",
        "Cost, ms per step (mean over seeds): "
        + "; ".join(f"{n} {v}" for n, v in result["ms_per_step"].items())
        + f". {result['seconds_per_seed']} s per seed.",
        "",
        provenance_line(result),
        "",
    ]
    return "\n".join(lines)


def parse_setting(text):
    lr, _, warmup = text.partition(":")
    return float(lr), float(warmup or 0)


def parse(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.lr_stress",
                                description=__doc__.split("\n")[0])
    d = StressConfig()
    p.add_argument("--data", default=d.data, help="'census' or the path of a text file")
    p.add_argument("--text-chars", type=int, default=d.text_chars)
    p.add_argument("--n-layer", type=int, default=d.n_layer)
    p.add_argument("--n-embd", type=int, default=d.n_embd)
    p.add_argument("--n-head", type=int, default=d.n_head)
    p.add_argument("--block-size", type=int, default=d.block_size)
    p.add_argument("--init-std", type=float, default=d.init_std)
    p.add_argument("--final-norm", action="store_true")
    p.add_argument("--layouts", nargs="+", default=list(d.layouts),
                   choices=["pre", "post", "none"])
    p.add_argument("--settings", nargs="+", type=parse_setting, default=list(d.settings),
                   help="LR:WARMUP pairs, warmup a fraction of the steps; the last is the stress")
    p.add_argument("--schedule", default=d.schedule, choices=["linear", "cosine", "constant"])
    p.add_argument("--min-lr", type=float, default=d.min_lr)
    p.add_argument("--betas", type=float, nargs=2, default=[d.beta1, d.beta2])
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--clip", type=float, default=d.clip)
    p.add_argument("--batch", type=int, default=d.batch)
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--val-seqs", type=int, default=d.val_seqs)
    p.add_argument("--window", type=int, default=d.window)
    add_common_arguments(p, "results/pure_python/lr_stress.json")
    a = p.parse_args(argv)
    config = StressConfig(
        data=a.data, text_chars=a.text_chars, n_layer=a.n_layer, n_embd=a.n_embd,
        n_head=a.n_head, block_size=a.block_size, init_std=a.init_std,
        final_norm=a.final_norm, layouts=tuple(a.layouts), settings=tuple(a.settings),
        schedule=a.schedule, min_lr=a.min_lr, beta1=a.betas[0], beta2=a.betas[1],
        weight_decay=a.weight_decay, clip=a.clip, batch=a.batch, steps=a.steps,
        val_seqs=a.val_seqs, window=a.window)
    return a, config


def main(argv=None):
    args, config = parse(argv)
    argv = sys.argv[1:] if argv is None else argv
    clock = RunClock()
    log = None if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    result = study(config, args.seeds, log)
    out, table = save(result, args.out, render, "experiments.lr_stress", argv, clock)
    print(table)
    return result


if __name__ == "__main__":
    main()
