"""The depth studies of the pure-Python notebooks (assignments 2 to 4): their sizes, which
size a run takes, and the runs.

`INTERACTIVE` is what a notebook runs for its reader; `GRADING` the small study nbgrader
runs while it validates or autogrades (`grading()`: it sets ``NBGRADER_EXECUTION``), so a
notebook grades in well under a minute with the graded checks unchanged. The decision
lives here, beside the studies, as `torchtrack.studies` keeps it for the torch track:
`deepnet` (the task, the nets, training) knows nothing of grading.

`run` trains one `Variant` on the teacher task of a seed; `study` runs several over seeds.
"""

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import deepnet
from .deepnet import Net, label_entropy, make_net, mean_loss, plain_params, teacher_data, train
from .engine import cycle_collector_paused
from .train import progress_bar

__all__ = [
    "Config",
    "INTERACTIVE",
    "GRADING",
    "grading",
    "study_config",
    "data_seed",
    "probe_data",
    "Variant",
    "Run",
    "run",
    "study",
    "smooth",
    "DEPTH_PAYS",
    "DEPTH_PAYS_GRADING",
    "depth_pays_config",
    "without_layer",
    "StressConfig",
    "STRESS",
    "STRESS_GRADING",
    "stress_config",
    "stress_split",
    "validation_loss",
    "unigram_loss",
    "position_loss",
]


@dataclass(frozen=True)
class Config:
    """The size of a depth study: task, widths, depths and the training run."""

    depth: int = 30  # the deep nets
    shallow: int = 3  # the shallow net
    depths: tuple = (3, 10, 30)  # a sweep over depth
    width: int = 8
    d_in: int = 8
    n_classes: int = 4
    n: int = 128  # training points
    batch: int = 8
    steps: int = 200
    lr: float = 0.01
    # the highway study: every net it compares trains for budgets[-1] steps, and the loss
    # on all points is read after each budget (equal budgets for every net)
    budgets: tuple = (200, 300)
    seeds: tuple = (0, 1, 2)
    probe_width: int = 16  # nets whose gradient per layer is measured at initialisation
    probe_points: int = 32
    probe_seeds: tuple = (0, 1, 2, 3, 4, 5)  # measuring costs far less than training


# the notebooks' experiments, and the small one a graded run takes (see `study_config`)
INTERACTIVE = Config()
GRADING = Config(depth=20, depths=(3, 20), n=64, steps=100, lr=0.02, budgets=(40, 60),
                 seeds=(0,), probe_points=16, probe_seeds=(0,))


# "residual depth pays" (assignment 4): the configuration that shows it on `Value`, found by
# the search in results/pure_python/SEARCH.md (depth_study.json: 3 of 3 seeds). A notebook
# runs one seed of it live and quotes the committed three-seed table; a graded run takes a
# small version that only has to run.
DEPTH_PAYS = Config(width=12, lr=0.002, steps=600, seeds=(0,))
DEPTH_PAYS_GRADING = Config(width=12, lr=0.002, steps=60, n=64, depths=(3, 10), seeds=(0,))


def grading() -> bool:
    """True while nbgrader validates or autogrades (it sets ``NBGRADER_EXECUTION``)."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def study_config() -> Config:
    """GRADING while nbgrader validates or autogrades (`grading()`), else INTERACTIVE."""
    return GRADING if grading() else INTERACTIVE


def depth_pays_config() -> Config:
    """DEPTH_PAYS_GRADING while nbgrader grades, else DEPTH_PAYS."""
    return DEPTH_PAYS_GRADING if grading() else DEPTH_PAYS


def data_seed(seed: int) -> int:
    """The seed of a run's teacher task: apart from the net's, so their draws differ."""
    return 1000 + seed


@dataclass(frozen=True)
class Variant:
    """One net of a study: its layer function, depth and parameters, and how long it trains."""

    layer: Callable[..., Any]
    depth: int
    layer_params: Callable[..., dict[str, Any]] = plain_params
    steps: int = 0  # 0: the config's `steps`
    forward: Callable[..., Any] = deepnet.logits


@dataclass
class Run:
    seed: int
    history: list  # minibatch loss per step
    loss: float  # mean loss on the whole training set after training
    entropy: float  # H(y) of the training labels: the best constant guess
    net: Net | None = field(repr=False, default=None)
    X: list | None = field(repr=False, default=None)
    loss_at: dict = field(default_factory=dict)  # {step: mean loss on all points then}


def run(variant: Variant, seed: int, config: Config, progress: Any = False,
        checkpoints: Sequence[int] = ()) -> Run:
    """Train `variant` on the teacher task of `seed` (net and batches seeded by `seed` too);
    the loss on all training points is also read after each step number in `checkpoints`."""
    X, Y = teacher_data(config.n, config.d_in, config.n_classes, data_seed(seed))
    net = make_net(variant.depth, config.width, config.d_in, config.n_classes, seed,
                   variant.layer_params)
    steps = variant.steps or config.steps
    loss_at: dict[int, float] = {}

    def read_loss(step: int) -> None:
        if step in checkpoints:
            loss_at[step] = mean_loss(net, X, Y, variant.layer, variant.forward).data

    history = train(net, X, Y, variant.layer, steps, config.lr, config.batch, seed,
                    variant.forward, progress, after_step=read_loss if checkpoints else None)
    with cycle_collector_paused():
        loss = mean_loss(net, X, Y, variant.layer, variant.forward).data
    return Run(seed, history, loss, label_entropy(Y), net, X, loss_at)


def study(variants: dict[str, Variant], config: Config, seeds: Sequence[int] | None = None,
          progress: bool = True, checkpoints: Sequence[int] = ()) -> dict[str, list[Run]]:
    """{name: [Run per seed]} for a dict of named `Variant`s, with one progress bar for all
    (`checkpoints`: step numbers after which each run also reads its loss on all points)."""
    seeds = config.seeds if seeds is None else seeds
    total = sum((v.steps or config.steps) for v in variants.values()) * len(seeds)
    results: dict[str, list[Run]] = {name: [] for name in variants}
    with progress_bar(total, progress, unit="step") as bar:
        for seed in seeds:
            for name, variant in variants.items():
                bar.set_postfix_str(f"{name}, seed {seed}", refresh=False)
                results[name].append(run(variant, seed, config,
                                         progress=bar if progress else False,
                                         checkpoints=checkpoints))
    return results


def smooth(values: Sequence[float], k: int = 20) -> list[float]:
    """The running mean of the last `k` values at each step (fewer at the start)."""
    out: list[float] = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= k:
            total -= values[i - k]
        out.append(total / min(i + 1, k))
    return out


def probe_data(config: Config, seed: int) -> tuple[list[list[float]], list[int]]:
    """The points whose mean loss the gradient probes differentiate: `probe_points` of the task."""
    return teacher_data(config.probe_points, config.d_in, config.n_classes, data_seed(seed))



def without_layer(net: Net, index: int) -> Net:
    """A net sharing `net`'s weights with layer `index` left out (`net` is unchanged)."""
    return Net(net.w_in, net.layers[:index] + net.layers[index + 1:], net.w_out)


# ---------------------------------------------------------------- the learning-rate stress


@dataclass(frozen=True)
class StressConfig:
    """The learning-rate stress of assignment 5: a GPT of `n_layer` blocks on census names,
    one name a step, Adam `betas`, `lr` from the first step (no warmup) decaying linearly
    to 0; the validation loss on `val_names` held-out names. The defaults are the run of
    results/pure_python/lr_stress.json (5 of 5 seeds)."""

    n_layer: int = 4
    lr: float = 0.03
    betas: tuple = (0.9, 0.95)
    steps: int = 200
    val_names: int = 100
    seeds: tuple = (0,)


STRESS = StressConfig()
STRESS_GRADING = StressConfig(steps=20, val_names=10)
SPLIT_SEED = 12345  # the split of the names into training and validation, as in the search


def stress_config() -> StressConfig:
    """STRESS_GRADING while nbgrader grades, else STRESS."""
    return STRESS_GRADING if grading() else STRESS


def stress_split(names: Iterable[str]) -> tuple[list[str], list[str]]:
    """(training names, validation names): a tenth held out after a shuffle by SPLIT_SEED."""
    from .nn import make_rng

    order = list(names)
    make_rng(SPLIT_SEED).shuffle(order)
    n_val = len(order) // 10
    return order[n_val:], order[:n_val]


def validation_loss(model: Any, names: Iterable[str], tokenizer: Any) -> float:
    """The mean next-token loss over every target of `names` (longer names weigh more)."""
    total, count = 0.0, 0
    with cycle_collector_paused():
        for name in names:
            tokens = tokenizer.encode(name)
            n = min(model.config.block_size, len(tokens) - 1)
            total += model.loss(tokens).data * n
            count += n
    return total / count


def _targets(names: Iterable[str], tokenizer: Any,
             block_size: int) -> Iterator[tuple[int, int]]:
    for name in names:
        yield from enumerate(tokenizer.encode(name)[1:block_size + 1])


def unigram_loss(train_names: Iterable[str], val_names: Iterable[str], tokenizer: Any,
                 block_size: int = 16) -> float:
    """The loss on `val_names` of predicting the training letters' frequencies everywhere:
    what a model that ignores its input reaches."""
    import math

    counts: dict[int, int] = {}
    for _, t in _targets(train_names, tokenizer, block_size):
        counts[t] = counts.get(t, 0) + 1
    total = sum(counts.values())
    losses = [-math.log(counts.get(t, 0.5) / total)
              for _, t in _targets(val_names, tokenizer, block_size)]
    return math.fsum(losses) / len(losses)


def position_loss(train_names: Iterable[str], val_names: Iterable[str], tokenizer: Any,
                  block_size: int = 16) -> float:
    """The loss on `val_names` of predicting, at each position, the training letters'
    frequencies there (add-0.1 smoothing): a model that knows where it is in a name but
    not which letters it has seen."""
    import math

    counts: dict[int, dict[int, int]] = {}
    for p, t in _targets(train_names, tokenizer, block_size):
        row = counts.setdefault(p, {})
        row[t] = row.get(t, 0) + 1
    losses = []
    for p, t in _targets(val_names, tokenizer, block_size):
        row = counts.get(p, {})
        total = sum(row.values())
        losses.append(-math.log((row.get(t, 0) + 0.1) / (total + 0.1 * tokenizer.vocab_size)))
    return math.fsum(losses) / len(losses)
