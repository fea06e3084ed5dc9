"""Per-layer statistics while a deep net trains: how big each layer's activations are and
how much gradient each layer's weights get, read every few steps.

At initialisation a plain deep net already shows its trouble (activations that shrink or
grow with depth, gradients that fade towards the input); what matters is whether training
repairs it. `watched_run` trains one `studies.Variant` exactly as `studies.run` does and,
after the steps in `at`, measures on a fixed set of probe points:

- `rms[l]`: the root mean square of $h_l$, the output of layer $l$ ($l = 0$ is $W_{in} x$);
- `grad[l]`: $\\lVert \\partial L / \\partial W_l \\rVert_F$, the gradient norm of layer $l$'s
  weights for the mean loss on the probe points (`deepnet.gradient_norms`).

`plot_layer_stats` draws them, one row per net, one line per step read (`same_scale=True`
gives every row the same vertical range, so two nets compare by eye); `stats_table` prints
the numbers to read off: per net and step, the gradient norm of the first and the last
layer and the smallest and largest RMS. This module only reads a net; the training, its
seeds and its numbers are those of `studies.run`.
"""

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import deepnet
from .deepnet import Net, gradient_norms, make_net, teacher_data, train
from .engine import cycle_collector_paused, linear
from .studies import Config, Variant, data_seed

__all__ = ["LayerStats", "layer_rms", "layer_stats", "watched_run", "plot_layer_stats",
           "stats_table"]


@dataclass
class LayerStats:
    """What `watched_run` read: {step: [value per layer]} for each statistic."""

    rms: dict = field(default_factory=dict)
    grad: dict = field(default_factory=dict)
    history: list = field(default_factory=list)  # the minibatch loss per step


def layer_rms(net: Net, X: Sequence[Sequence[Any]], layer: Callable[..., Any]) -> list[float]:
    """[RMS of $h_0$, RMS of $h_1$, ..., RMS of $h_L$] over the points `X`, for a net whose
    forward is `deepnet.logits` ($h_0 = W_{in} x$, $h_{l+1} = layer(h_l, **p_l)$)."""
    totals = [0.0] * (len(net.layers) + 1)
    count = 0
    with cycle_collector_paused():
        for x in X:
            h = linear(x, net.w_in)
            totals[0] += math.fsum(v.data * v.data for v in h)
            for i, params in enumerate(net.layers, start=1):
                h = layer(h, **params)
                totals[i] += math.fsum(v.data * v.data for v in h)
            count += len(h)
    return [math.sqrt(t / count) for t in totals]


def layer_stats(net: Net, X: Sequence[Sequence[Any]], Y: Sequence[int], layer: Callable[..., Any],
                key: str = "W") -> tuple[list[float], list[float]]:
    """(activation RMS per layer, weight-gradient norm per layer) on the points (X, Y)."""
    return layer_rms(net, X, layer), gradient_norms(net, X, Y, layer, key=key)


def watched_run(variant: Variant, seed: int, config: Config, at: Iterable[int],
                probe_points: int = 32, key: str = "W") -> LayerStats:
    """Train `variant` on the teacher task of `seed` as `studies.run` does (same data, net,
    batches and steps) and read `layer_stats` on `probe_points` training points before
    training (step 0) and after each step number in `at`. Returns a `LayerStats`."""
    if variant.forward is not deepnet.logits:
        raise ValueError("watched_run reads h_l as deepnet.logits computes it; this variant "
                         f"has its own forward ({getattr(variant.forward, '__name__', '?')})")
    X, Y = teacher_data(config.n, config.d_in, config.n_classes, data_seed(seed))
    net = make_net(variant.depth, config.width, config.d_in, config.n_classes, seed,
                   variant.layer_params)
    PX, PY = X[:probe_points], Y[:probe_points]
    stats = LayerStats()
    wanted = {0, *at}

    def read(step: int) -> None:
        if step in wanted:
            stats.rms[step], stats.grad[step] = layer_stats(net, PX, PY, variant.layer, key)

    read(0)
    steps = variant.steps or config.steps
    stats.history = train(net, X, Y, variant.layer, steps, config.lr, config.batch, seed,
                          variant.forward, after_step=read)
    return stats


def stats_table(runs: dict[Any, LayerStats], steps: Collection[int] | None = None) -> str:
    """The numbers behind `plot_layer_stats`, as text: one line per named run ({name:
    LayerStats}) and step read (`steps`: those steps only), with the gradient norm of the
    first and the last layer's weights, their ratio, and the smallest and largest
    activation RMS over $h_0 .. h_L$."""
    width = max([len("net")] + [len(str(name)) for name in runs])
    lines = [f"{'net':<{width}}  {'step':>5}  {'grad W_1':>9}  {'grad W_L':>9}  "
             f"{'W_1 / W_L':>9}  {'min RMS':>9}  {'max RMS':>9}"]
    for name, stats in runs.items():
        for step in sorted(stats.grad):
            if steps is not None and step not in steps:
                continue
            g, rms = stats.grad[step], stats.rms[step]
            ratio = f"{g[0] / g[-1]:>9.3g}" if g[-1] else f"{'-':>9}"
            lines.append(f"{str(name):<{width}}  {step:>5}  {g[0]:>9.3g}  {g[-1]:>9.3g}  "
                         f"{ratio}  {min(rms):>9.3g}  {max(rms):>9.3g}")
    return "\n".join(lines)


def _log_limits(series: Iterable[Iterable[float]]) -> tuple[float, float] | None:
    """(low, high) y limits of a log axis that shows every positive value in `series`."""
    positive = [v for ys in series for v in ys if v > 0]
    if not positive:
        return None
    return min(positive) / 2, max(positive) * 2


def plot_layer_stats(runs: dict[Any, LayerStats],
                     title: str = "per-layer statistics during training",
                     same_scale: bool = False) -> Any:
    """One row per named run ({name: LayerStats}): activation RMS and weight-gradient norm
    against the layer, one line per step read (lighter lines are earlier). Log scale on
    both. With `same_scale`, every row of a column has the same y limits (the range of all
    rows), so the runs compare by eye. Returns the matplotlib figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(len(runs), 2, figsize=(10, 3.2 * len(runs)), squeeze=False)
    for row, (name, stats) in enumerate(runs.items()):
        steps = sorted(stats.rms)
        for col, (what, values, first) in enumerate((
                ("activation RMS, $h_l$", stats.rms, 0),
                ("gradient norm of $W_l$", stats.grad, 1))):
            ax = axes[row][col]
            for k, step in enumerate(steps):
                shade = 0.25 + 0.75 * (k / max(1, len(steps) - 1))
                ys = values[step]
                ax.plot(range(first, first + len(ys)), ys, color=plt.cm.viridis(1 - shade),
                        label=f"step {step}")
            ax.set_yscale("log")
            ax.set_xlabel("layer $l$")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # layers are whole numbers
            ax.set_title(f"{name}: {what}")
        axes[row][0].legend(fontsize=7, loc="best")
    if same_scale:
        for col, what in enumerate(("rms", "grad")):
            limits = _log_limits([ys for stats in runs.values()
                                  for ys in getattr(stats, what).values()])
            if limits:
                for row in range(len(runs)):
                    axes[row][col].set_ylim(*limits)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
