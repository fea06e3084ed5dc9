"""A numpy copy of `microgpt.deepnet`'s plain and residual MLPs, to scan many sizes quickly.

Only a guide for the search: the same initial weights (drawn from the same `random.Random`
in the same order as `make_net`), the same minibatches and the same Adam as
`microgpt.deepnet.train`, with the gradients written out by hand. A short run agrees
with the `Value` engine's to rounding (tests/test_experiments.py), but every number the
pack reports comes from the `Value` engine (`experiments.depth_search`).

    python -m experiments.numpy_mirror --width 16 --steps 300 --seeds 0 1 2 \\
        --out results/pure_python/search/mirror.json

takes `experiments.depth_search`'s arguments and writes the same JSON and table.
"""

import math

import numpy as np

from microgpt.deepnet import layer_std
from microgpt.nn import make_rng

from . import depth_search
from .common import Stopwatch, coarse_curve

__all__ = ["init", "forward_backward", "train", "full_loss", "run_net", "main"]

EPS = 1e-5


def init(depth, width, d_in, n_classes, seed):
    """The weights `make_net` draws for `seed`, as arrays: (w_in, [W per layer], w_out)."""
    rng = make_rng(seed)

    def draw(n_out, n_in, std):
        return np.array([[rng.gauss(0, std) for _ in range(n_in)] for _ in range(n_out)])

    w_in = draw(width, d_in, 1 / math.sqrt(d_in))
    w_out = draw(n_classes, width, 1 / math.sqrt(width))
    layers = [draw(width, width, layer_std(width)) for _ in range(depth)]
    return w_in, layers, w_out


def _layernorm(x):
    c = x - x.mean(axis=1, keepdims=True)
    s = 1 / np.sqrt((c * c).mean(axis=1, keepdims=True) + EPS)
    return c * s, s


def _layernorm_back(dy, y, s):
    return s * (dy - dy.mean(axis=1, keepdims=True) - y * (dy * y).mean(axis=1, keepdims=True))


def forward_backward(params, X, Y, residual):
    """Mean cross-entropy of the batch and the gradients of every weight (same structure)."""
    w_in, layers, w_out = params
    h = X @ w_in.T
    saved = []
    for W in layers:
        u, s = _layernorm(h)
        z = u @ W.T
        a = np.maximum(z, 0)
        saved.append((u, s, z))
        h = h + a if residual else a
    u, s = _layernorm(h)
    logits = u @ w_out.T
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(axis=1, keepdims=True)
    n = len(Y)
    rows = np.arange(n)
    loss = float(np.mean(np.log(e.sum(axis=1)) + m[:, 0] - logits[rows, Y]))
    d_logits = p.copy()
    d_logits[rows, Y] -= 1
    d_logits /= n
    g_out = d_logits.T @ u
    dh = _layernorm_back(d_logits @ w_out, u, s)
    g_layers = [None] * len(layers)
    for i in range(len(layers) - 1, -1, -1):
        u_i, s_i, z = saved[i]
        dz = dh * (z > 0)
        g_layers[i] = dz.T @ u_i
        du = dz @ layers[i]
        dx = _layernorm_back(du, u_i, s_i)
        dh = dh + dx if residual else dx
    g_in = dh.T @ X
    return loss, (g_in, g_layers, g_out)


def _flatten(tree):
    w_in, layers, w_out = tree
    return [w_in, *layers, w_out]


def train(params, X, Y, residual, steps, lr, batch, seed):
    """`microgpt.deepnet.train` on arrays: same batches, same Adam (0.9, 0.999, 1e-8)."""
    rng = make_rng(seed)
    X, Y = np.asarray(X), np.asarray(Y)
    flat = _flatten(params)
    m = [np.zeros_like(p) for p in flat]
    v = [np.zeros_like(p) for p in flat]
    b1, b2, eps = 0.9, 0.999, 1e-8
    history = []
    for t in range(1, steps + 1):
        idx = [rng.randrange(len(X)) for _ in range(batch)]
        loss, grads = forward_backward(params, X[idx], Y[idx], residual)
        history.append(loss)
        c1, c2 = 1 - b1**t, 1 - b2**t
        for p, g, mi, vi in zip(flat, _flatten(grads), m, v):
            mi *= b1
            mi += (1 - b1) * g
            vi *= b2
            vi += (1 - b2) * g * g
            p -= lr * (mi / c1) / (np.sqrt(vi / c2) + eps)
    return history


def full_loss(params, X, Y, residual):
    return forward_backward(params, np.asarray(X), np.asarray(Y), residual)[0]


def run_net(kind, depth, seed, config, X, Y):
    """`experiments.depth_search.run_net` on arrays (plain and residual nets only)."""
    if kind not in ("plain", "residual"):
        raise ValueError(f"the numpy mirror has plain and residual nets, not {kind!r}")
    residual = kind == "residual"
    params = init(depth, config.width, config.d_in, config.n_classes, seed)
    clock = Stopwatch()
    history = train(params, X, Y, residual, config.steps, config.lr, config.batch, seed)
    train_seconds = clock.seconds()
    return {
        "kind": kind,
        "depth": depth,
        "loss": full_loss(params, X, Y, residual),
        "curve": coarse_curve(history),
        "train_seconds": round(train_seconds, 2),
        "ms_per_step": round(1000 * train_seconds / config.steps, 2),
        "seconds": round(clock.seconds(), 2),
    }


def main(argv=None):
    """`experiments.depth_search`'s command and result, trained by the numpy mirror."""
    return depth_search.main(argv, run_net, "the numpy mirror of the `Value` nets",
                             "experiments.numpy_mirror", "results/pure_python/search/mirror.json")


if __name__ == "__main__":
    main()
