"""The chapter's two studies, at full size or smaller: what `torchtrack.seeds` runs.

- `mlp_study(seed)`: plain nets of 3, 10 and 30 layers, a 30-layer highway net and
  residual nets of 3, 10 and 30 layers on the teacher task; the final training loss of
  each, and the gradient per layer of fresh 30-layer plain and residual nets.
- `transformer_study(text, seed)`: the LM with no residual, post-norm and pre-norm blocks
  at lr 3e-3 with warmup, then post- and pre-norm at lr 3e-2 without warmup (and, with
  `cure`, post-norm at lr 3e-2 with warmup); the final validation loss of each, the stream
  RMS and cosine per block, and the logit lens.

Seed `s` shifts every seed of the protocol by `s`: the teacher task, the weights, the
batches and (for the LM) the validation batches.
"""

from dataclasses import dataclass, replace

import torch

from microgpt.studies import grading  # noqa: F401 (the notebooks call studies.grading)
from torchtrack.data import get_batch, split_ids
from torchtrack.mlp import MLPConfig, grad_norm_per_layer, make_mlp, run_variant, teacher_task
from torchtrack.train import train_lm
from torchtrack.transformer import logit_lens, make_lm, stream_cosine, stream_rms, stream_states

__all__ = [
    "LMConfig",
    "FULL_LM",
    "MEDIUM_LM",
    "GRADING_LM",
    "FULL_MLP",
    "MEDIUM_MLP",
    "GRADING_MLP",
    "grading",
    "lm_runs",
    "mlp_study",
    "transformer_study",
]


@dataclass(frozen=True)
class LMConfig:
    """The transformer study's sizes and protocol; the defaults are the full protocol."""

    dim: int = 64
    n_layers: int = 6
    n_heads: int = 4
    steps: int = 300
    lr: float = 3e-3
    high_lr: float = 3e-2
    batch_size: int = 32
    block_size: int = 64
    eval_every: int = 50
    eval_iters: int = 10
    warmup_frac: float = 0.1
    eval_seed: int = 1234


FULL_LM = LMConfig()
MEDIUM_LM = LMConfig(steps=150, eval_every=25, eval_iters=5)  # a few minutes, same shapes
GRADING_LM = LMConfig(dim=32, n_layers=3, steps=40, batch_size=8, block_size=32,
                      eval_every=20, eval_iters=2)  # seconds: under nbgrader

FULL_MLP = MLPConfig()
MEDIUM_MLP = MLPConfig(n=2048, steps=400)
GRADING_MLP = MLPConfig(n=512, width=32, steps=60, batch=64, variants=(
    ("plain", 3), ("plain", 30), ("residual", 30),
))


def mlp_study(seed=0, config=FULL_MLP, progress=None):
    """Train every variant of `config`; returns ``{"final": {name: loss}, "curves": {...},
    "grad_norms": {"plain": [...], "residual": [...]}, "seconds": {...}}``."""
    X, Y = teacher_task(config.n, config.d_in, config.n_classes, seed=seed)
    out = {"final": {}, "curves": {}, "seconds": {}, "grad_norms": {}}
    for kind, depth in config.variants:
        name = f"{kind} {depth}"
        r = run_variant(kind, depth, seed, config, X, Y, progress=progress)
        out["final"][name] = r["final"]
        out["curves"][name] = r["curve"]
        out["seconds"][name] = r["seconds"]
    for kind in ("plain", "residual"):
        net = make_mlp(kind, config.probe_depth, seed, config.width, config.d_in,
                       config.n_classes)
        out["grad_norms"][kind] = grad_norm_per_layer(net, X, Y)
    return out


def lm_runs(config=FULL_LM, cure=False):
    """The study's runs: name -> (layout, lr, warmup_frac). `cure`: with post-norm at the
    high rate with warmup too, the chapter's cure (`python -m torchtrack.seeds
    --warmup-cure`; added after the committed seeds 0-2 ran, so they do not have it)."""
    runs = {
        "no residual": ("none", config.lr, config.warmup_frac),
        "post-norm": ("post", config.lr, config.warmup_frac),
        "pre-norm": ("pre", config.lr, config.warmup_frac),
        "post-norm, lr 3e-2 no warmup": ("post", config.high_lr, 0.0),
        "pre-norm, lr 3e-2 no warmup": ("pre", config.high_lr, 0.0),
    }
    if cure:
        runs["post-norm, lr 3e-2 with warmup"] = ("post", config.high_lr, config.warmup_frac)
    return runs


def train_variant(train_ids, val_ids, vocab_size, layout, seed=0, config=FULL_LM, lr=None,
                  warmup_frac=None, progress=None, block_cls=None):
    """Build the LM in `layout` from `seed` and train it; returns `(model, history)`."""
    kwargs = {} if block_cls is None else {"block_cls": block_cls}
    model = make_lm(vocab_size, layout, config.dim, config.n_layers, config.n_heads, seed,
                    **kwargs)
    hist = train_lm(
        model, train_ids, val_ids, steps=config.steps,
        lr=config.lr if lr is None else lr, batch_size=config.batch_size,
        block_size=config.block_size, eval_every=config.eval_every,
        eval_iters=config.eval_iters,
        warmup_frac=config.warmup_frac if warmup_frac is None else warmup_frac,
        seed=seed, eval_seed=config.eval_seed + seed, progress=progress,
    )
    return model, hist


def probe(model, val_ids, seed, config):
    """Stream RMS, cosine with the embedding and logit-lens loss per state, on one
    validation batch drawn from a generator seeded with `seed`."""
    x, y = get_batch(val_ids, config.batch_size, config.block_size,
                     torch.Generator().manual_seed(seed))
    with torch.no_grad():
        states = stream_states(model, x)
    return {"rms": stream_rms(states), "cosine": stream_cosine(states),
            "lens": logit_lens(model, x, y)}


def transformer_study(text, seed=0, config=FULL_LM, runs=None, progress=None, on_run=None,
                      cure=False):
    """Every run of `lm_runs(config, cure)` (or the names in `runs`) on `text`; returns
    ``{"final": {name: last val loss}, "histories": {...}, "probes": {layout: ...},
    "seconds": {...}, "vocab_size": int}``. `on_run(name)` is called before each run."""
    vocab, train_ids, val_ids = split_ids(text)
    out = {"final": {}, "histories": {}, "probes": {}, "seconds": {}, "vocab_size": vocab.size}
    for name, (layout, lr, warmup) in lm_runs(config, cure).items():
        if runs is not None and name not in runs:
            continue
        if on_run is not None:
            on_run(name)
        model, hist = train_variant(train_ids, val_ids, vocab.size, layout, seed, config, lr,
                                    warmup, progress)
        out["final"][name] = hist["val"][-1]
        out["histories"][name] = hist
        out["seconds"][name] = hist["seconds"]
        if lr == config.lr and layout in ("pre", "post"):
            out["probes"][layout] = probe(model, val_ids, seed, config)
    return out


def scaled(config, **changes):
    """A copy of a config with some fields changed."""
    return replace(config, **changes)
