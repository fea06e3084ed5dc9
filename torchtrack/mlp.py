"""Deep MLPs on a teacher task: plain, highway and residual layers, and the gradient per layer.

The task: `n` points $x \\sim N(0, I)$ in `d_in` dimensions, labelled by a fixed random
teacher network $y = \\arg\\max \\tanh(2\\tanh(2\\,x W_1)\\,W_2)\\,W_3$.

The nets: $h_0 = W_{in} x + b_{in}$, then `depth` layers of one kind, then
$\\mathrm{logits} = W_{out} h_L + b_{out}$. Every layer has the same branch
$F(h) = \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h) + b)$:

- plain: $h \\leftarrow F(h)$
- highway: $h \\leftarrow T \\odot F(h) + (1 - T) \\odot h$, $T = \\sigma(W_T h + b_T)$, $b_T = -2$
- residual: $h \\leftarrow h + F(h)$

Initialisation is PyTorch's default, drawn inside `seeded(seed)`, which leaves the
global random state as it found it.
"""

import contextlib
import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "seeded",
    "teacher_task",
    "PlainLayer",
    "HighwayLayer",
    "ResidualLayer",
    "LAYERS",
    "DeepMLP",
    "make_mlp",
    "train_mlp",
    "full_loss",
    "grad_norm_per_layer",
    "MLPConfig",
    "run_variant",
]

GATE_BIAS = -2.0


@contextlib.contextmanager
def seeded(seed):
    """Run the block with torch's global generator seeded with `seed`, then restore it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def teacher_task(n=4096, d_in=32, n_classes=10, hidden=64, seed=0):
    """`(X, Y)`: `n` points in `d_in` dimensions (float32) and their teacher labels (long).

    The teacher: $W_1 \\sim N(0, 1/d_{in})$ ($d_{in}$ x hidden), $W_2, W_3 \\sim N(0, 1/64)$,
    $y = \\arg\\max \\tanh(2\\tanh(2\\,X W_1)\\,W_2)\\,W_3$; all drawn from one generator
    seeded with `seed`, the points first.
    """
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d_in, generator=g)
    w1 = torch.randn(d_in, hidden, generator=g) / math.sqrt(d_in)
    w2 = torch.randn(hidden, hidden, generator=g) / 8
    w3 = torch.randn(hidden, n_classes, generator=g) / 8
    Y = (torch.tanh(torch.tanh(X @ w1 * 2) @ w2 * 2) @ w3).argmax(1)
    return X, Y


class PlainLayer(nn.Module):
    """$h \\leftarrow F(h) = \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h) + b)$"""

    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.linear = nn.Linear(width, width)

    def branch(self, h):
        """$F(h) = \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h) + b)$, shared by all three kinds."""
        return F.relu(self.linear(self.norm(h)))

    def forward(self, h):
        return self.branch(h)


class HighwayLayer(PlainLayer):
    """$h \\leftarrow T \\odot F(h) + (1 - T) \\odot h$ with the gate $T = \\sigma(W_T h + b_T)$."""

    def __init__(self, width, gate_bias=GATE_BIAS):
        super().__init__(width)
        self.gate = nn.Linear(width, width)
        with torch.no_grad():
            self.gate.bias.fill_(gate_bias)

    def forward(self, h):
        t = torch.sigmoid(self.gate(h))
        return t * self.branch(h) + (1 - t) * h


class ResidualLayer(PlainLayer):
    """$h \\leftarrow h + F(h)$"""

    def forward(self, h):
        return h + self.branch(h)


LAYERS = {"plain": PlainLayer, "highway": HighwayLayer, "residual": ResidualLayer}


class DeepMLP(nn.Module):
    """`W_in`, `depth` layers made by `layer(width)`, `W_out`."""

    def __init__(self, depth, layer=PlainLayer, width=64, d_in=32, n_classes=10):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.layers = nn.ModuleList(layer(width) for _ in range(depth))
        self.out = nn.Linear(width, n_classes)

    def forward(self, x):
        h = self.inp(x)
        for layer in self.layers:
            h = layer(h)
        return self.out(h)


def make_mlp(kind, depth, seed=0, width=64, d_in=32, n_classes=10):
    """A `DeepMLP` of `depth` layers of `kind` (a name in `LAYERS`, or a layer class),
    initialised from `seed`."""
    layer = LAYERS[kind] if isinstance(kind, str) else kind
    with seeded(seed):
        return DeepMLP(depth, layer, width, d_in, n_classes)


def full_loss(model, X, Y):
    """Mean cross-entropy on all of `X`, without a graph."""
    with torch.no_grad():
        return F.cross_entropy(model(X), Y).item()


def train_mlp(model, X, Y, steps=800, lr=1e-3, batch=128, seed=1, progress=None):
    """Adam on minibatches drawn from a generator seeded with `seed`.

    Returns `{"curve": minibatch loss per step, "final": loss on all points}`.
    `progress`, if given, is called with each step's loss (a tqdm bar's update, say).
    """
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    curve = []
    for _ in range(steps):
        idx = torch.randint(len(X), (batch,), generator=g)
        loss = F.cross_entropy(model(X[idx]), Y[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        curve.append(loss.item())
        if progress is not None:
            progress(loss.item())
    return {"curve": curve, "final": full_loss(model, X, Y)}


def grad_norm_per_layer(model, X, Y):
    """$\\lVert \\partial L / \\partial W_l \\rVert$ for each layer's `linear.weight`, first
    layer first, for the mean cross-entropy $L$ on `(X, Y)`. Leaves no gradients behind."""
    model.zero_grad(set_to_none=True)
    F.cross_entropy(model(X), Y).backward()
    norms = [layer.linear.weight.grad.norm().item() for layer in model.layers]
    model.zero_grad(set_to_none=True)
    return norms


@dataclass(frozen=True)
class MLPConfig:
    """The MLP study's sizes; the defaults are the full protocol."""

    n: int = 4096
    d_in: int = 32
    n_classes: int = 10
    width: int = 64
    steps: int = 800
    lr: float = 1e-3
    batch: int = 128
    variants: tuple = field(default=(
        ("plain", 3), ("plain", 10), ("plain", 30), ("highway", 30),
        ("residual", 3), ("residual", 10), ("residual", 30),
    ))
    probe_depth: int = 30  # the depth of the gradient-per-layer probe at initialisation


def run_variant(kind, depth, seed, config=MLPConfig(), X=None, Y=None, progress=None):
    """Train one net of the study; returns `{"curve", "final", "seconds"}`.

    Seed `s` draws the teacher task from `s`, the weights from `s` and the minibatches
    from `s + 1`.
    """
    if X is None:
        X, Y = teacher_task(config.n, config.d_in, config.n_classes, seed=seed)
    start = time.perf_counter()
    model = make_mlp(kind, depth, seed, config.width, config.d_in, config.n_classes)
    out = train_mlp(model, X, Y, config.steps, config.lr, config.batch, seed=seed + 1,
                    progress=progress)
    out["seconds"] = time.perf_counter() - start
    return out
