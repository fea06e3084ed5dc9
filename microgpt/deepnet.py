"""Deep MLPs on `Value` for the depth assignments: a teacher task, nets, training, gradient norms.

A net maps an input $x$ to class logits through a stack of layers of one width $w$:

    h_0 = W_in x,    h_{l+1} = layer(h_l, **params_l),    logits = W_out LayerNorm(h_L)

The layer function is the caller's (the plain, highway and residual layers are what the
students write); `make_net` creates each layer's parameters as a dict of keyword
arguments for it. The LayerNorm before the head keeps the head's input at unit scale
however large the stream grows. Every random draw comes from a seed passed in.
"""

import contextlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .engine import Value, cycle_collector_paused, linear, zero_grad
from .nn import Adam, cross_entropy, layernorm, make_rng, matrix
from .train import progress_bar

__all__ = [
    "teacher_data",
    "label_entropy",
    "layer_std",
    "plain_params",
    "Net",
    "make_net",
    "logits",
    "mean_loss",
    "train",
    "gradient_norms",
]


# ---------------------------------------------------------------- the task


def teacher_data(n: int, d_in: int = 8, n_classes: int = 4, seed: int = 0,
                 hidden: int = 16) -> tuple[list[list[float]], list[int]]:
    """`n` points $x \\sim N(0, I)$ labelled $y = \\arg\\max \\tanh(2\\tanh(2 x W_1) W_2) W_3$.

    The teacher's weights are drawn from $N(0, 1/\\mathrm{fan\\_in})$ with `seed`, then the
    points. Returns (X, Y): a list of `n` lists of `d_in` floats, and `n` class indices.
    """
    rng = make_rng(seed)

    def weights(n_out: int, n_in: int) -> list[list[float]]:
        return [[rng.gauss(0, 1) / math.sqrt(n_in) for _ in range(n_in)] for _ in range(n_out)]

    def times(w: list[list[float]], v: list[float]) -> list[float]:
        return [math.fsum(a * b for a, b in zip(row, v)) for row in w]

    w1, w2, w3 = weights(hidden, d_in), weights(hidden, hidden), weights(n_classes, hidden)
    X = [[rng.gauss(0, 1) for _ in range(d_in)] for _ in range(n)]
    Y = []
    for x in X:
        h = [math.tanh(2 * a) for a in times(w1, x)]
        h = [math.tanh(2 * a) for a in times(w2, h)]
        z = times(w3, h)
        Y.append(max(range(n_classes), key=z.__getitem__))
    return X, Y


def label_entropy(labels: Sequence[int]) -> float:
    """$H(y) = -\\sum_c p_c \\ln p_c$: the loss of the best constant guess, in nats."""
    n = len(labels)
    counts: dict[int, int] = {}
    for y in labels:
        counts[y] = counts.get(y, 0) + 1
    return -math.fsum(k / n * math.log(k / n) for k in counts.values())


# ---------------------------------------------------------------- the net


def layer_std(width: int) -> float:
    """$\\sigma = 1/\\sqrt{3w}$, PyTorch's `nn.Linear` default scale for a layer's weights."""
    return 1 / math.sqrt(3 * width)


def plain_params(width: int, rng: random.Random) -> dict[str, Any]:
    """Parameters of a plain layer: {"W": a $w \\times w$ matrix from $N(0, \\sigma^2)$}."""
    return {"W": matrix(width, width, rng, layer_std(width))}


@dataclass
class Net:
    """The input matrix, one dict of parameters per layer, and the head."""

    w_in: list
    layers: list
    w_out: list

    @property
    def depth(self) -> int:
        return len(self.layers)

    def parameters(self) -> list[Value]:
        """Every parameter `Value`: input matrix, the layers in order, then the head."""
        out = _flat(self.w_in)
        for params in self.layers:
            for value in params.values():
                out.extend(_flat(value))
        out.extend(_flat(self.w_out))
        return out


def _flat(value: list) -> list[Value]:
    """The `Value`s of a vector or a matrix (a list of rows), in order."""
    out: list[Value] = []
    for item in value:
        out.extend(item if isinstance(item, list) else [item])
    return out


def make_net(depth: int, width: int = 8, d_in: int = 8, n_classes: int = 4, seed: int = 0,
             layer_params: Callable[[int, random.Random], dict[str, Any]] = plain_params) -> Net:
    """A net with $W_{in} \\sim N(0, 1/d_{in})$, $W_{out} \\sim N(0, 1/w)$, and `depth` layers
    whose parameters come from `layer_params(width, rng)` (drawn in this order)."""
    rng = make_rng(seed)
    w_in = matrix(width, d_in, rng, 1 / math.sqrt(d_in))
    w_out = matrix(n_classes, width, rng, 1 / math.sqrt(width))
    layers = [layer_params(width, rng) for _ in range(depth)]
    return Net(w_in, layers, w_out)


def logits(net: Net, x: Sequence[Any], layer: Callable[..., list[Value]]) -> list[Value]:
    """$W_{out}\\,\\mathrm{LayerNorm}(h_L)$; $h_0 = W_{in} x$, $h_{l+1} = layer(h_l, **p_l)$."""
    h = linear(x, net.w_in)
    for params in net.layers:
        h = layer(h, **params)
    return linear(layernorm(h), net.w_out)


def mean_loss(net: Net, X: Sequence[Sequence[Any]], Y: Sequence[int], layer: Callable[..., Any],
              forward: Callable[..., list[Value]] = logits) -> Value:
    """$L = -\\frac{1}{n}\\sum_i \\ln \\mathrm{softmax}(forward(net, x_i, layer))_{y_i}$"""
    losses = [cross_entropy(forward(net, x, layer), y) for x, y in zip(X, Y)]
    return Value.sum(losses) * (1 / len(losses))


def train(net: Net, X: Sequence[Sequence[Any]], Y: Sequence[int], layer: Callable[..., Any],
          steps: int, lr: float = 0.01, batch: int = 8, seed: int = 0,
          forward: Callable[..., list[Value]] = logits, progress: Any = False,
          after_step: Callable[[int], object] | None = None) -> list[float]:
    """Adam (betas 0.9/0.999, constant `lr`) on minibatches of `batch` points drawn with
    replacement by `seed`; returns the minibatch losses, one per step.

    progress: False, True (a bar of its own), or a tqdm bar to advance by one per step.
    after_step: None, or a function called with the number of steps done after each step.
    """
    rng = make_rng(seed)
    opt = Adam(net.parameters(), lr=lr, betas=(0.9, 0.999))
    history = []
    with contextlib.ExitStack() as stack:
        if progress is True:  # a bar of its own (tqdm loaded only then)
            bar: Any = stack.enter_context(progress_bar(steps, unit="step"))
        else:
            bar = progress if progress is not False else None
        with cycle_collector_paused():
            for _ in range(steps):
                idx = [rng.randrange(len(X)) for _ in range(batch)]
                loss = mean_loss(net, [X[i] for i in idx], [Y[i] for i in idx], layer, forward)
                loss.backward()
                opt.step()
                history.append(loss.data)
                if after_step is not None:
                    after_step(len(history))
                if bar is not None:
                    bar.update(1)
    return history


def gradient_norms(net: Net, X: Sequence[Sequence[Any]], Y: Sequence[int],
                   layer: Callable[..., Any],
                   forward: Callable[..., list[Value]] = logits, key: str = "W") -> list[float]:
    """$\\lVert \\partial L / \\partial W_l \\rVert_F$ for each layer $l$ (first layer first),
    $L$ the mean loss on (X, Y); every gradient is left at 0."""
    params = net.parameters()
    zero_grad(params)
    with cycle_collector_paused():
        mean_loss(net, X, Y, layer, forward).backward()
    norms = [math.sqrt(math.fsum(p.grad * p.grad for p in _flat(lp[key]))) for lp in net.layers]
    zero_grad(params)
    return norms

