"""A numpy copy of `microgpt.deepnet`'s plain and residual MLPs, to scan many sizes quickly.

Only a guide for the search: the same initial weights (drawn from the same `random.Random`
in the same order as `make_net`), the same minibatches and the same Adam as
`microgpt.deepnet.train`, with the gradients written out by hand. A short run agrees
with the `Value` engine's to rounding (tests/integration/test_experiments.py), but every number the
pack reports comes from the `Value` engine (`experiments.depth_search`).

    python -m experiments.numpy_mirror --width 16 --steps 300 --seeds 0 1 2 \\
        --out results/pure_python/search/mirror.json

takes `experiments.depth_search`'s arguments and writes the same JSON and table.
"""

import math
import sys

import numpy as np

from microgpt.deepnet import layer_std
from microgpt.nn import make_rng

from . import depth_search
from .common import Stopwatch, coarse_curve

__all__ = ["init", "forward_backward", "train", "full_loss", "run_net", "main"]

EPS = 1e-5


def init(depth, width, d_in, n_classes, seed, bias=False):
    """The weights `make_net` draws for `seed`, as a dict of arrays: "w_in", "layers" (one
    matrix per layer), "w_out"; with `bias`, also "b_in", "b_layers", "b_out", drawn as
    PyTorch draws a linear layer's bias, $U(-1/\\sqrt{fan\\_in}, 1/\\sqrt{fan\\_in})$, from
    a generator of their own (the weights stay those of the `Value` net)."""
    rng = make_rng(seed)

    def draw(n_out, n_in, std):
        return np.array([[rng.gauss(0, std) for _ in range(n_in)] for _ in range(n_out)])

    params = {"w_in": draw(width, d_in, 1 / math.sqrt(d_in))}
    params["w_out"] = draw(n_classes, width, 1 / math.sqrt(width))
    params["layers"] = [draw(width, width, layer_std(width)) for _ in range(depth)]
    if bias:
        g = np.random.default_rng(10_000 + seed)

        def uniform(n, fan_in):
            bound = 1 / math.sqrt(fan_in)
            return g.uniform(-bound, bound, n)

        params["b_in"] = uniform(width, d_in)
        params["b_layers"] = [uniform(width, width) for _ in range(depth)]
        params["b_out"] = uniform(n_classes, width)
    return params


def _layernorm(x):
    c = x - x.mean(axis=1, keepdims=True)
    s = 1 / np.sqrt((c * c).mean(axis=1, keepdims=True) + EPS)
    return c * s, s


def _layernorm_back(dy, y, s):
    return s * (dy - dy.mean(axis=1, keepdims=True) - y * (dy * y).mean(axis=1, keepdims=True))


def forward_backward(params, X, Y, residual, head_norm=True):
    """Mean cross-entropy of the batch and the gradients of every weight (same dict).

    `head_norm=False` drops the LayerNorm before the head (the torch track's net has none).
    """
    bias = "b_in" in params
    h = X @ params["w_in"].T
    if bias:
        h = h + params["b_in"]
    saved = []
    for i, W in enumerate(params["layers"]):
        u, s = _layernorm(h)
        z = u @ W.T
        if bias:
            z = z + params["b_layers"][i]
        a = np.maximum(z, 0)
        saved.append((u, s, z))
        h = h + a if residual else a
    if head_norm:
        u, s = _layernorm(h)
    else:
        u = h
    logits = u @ params["w_out"].T
    if bias:
        logits = logits + params["b_out"]
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    p = e / e.sum(axis=1, keepdims=True)
    n = len(Y)
    rows = np.arange(n)
    loss = float(np.mean(np.log(e.sum(axis=1)) + m[:, 0] - logits[rows, Y]))
    d_logits = p.copy()
    d_logits[rows, Y] -= 1
    d_logits /= n
    grads = {"w_out": d_logits.T @ u, "layers": [None] * len(params["layers"])}
    if bias:
        grads["b_out"] = d_logits.sum(axis=0)
        grads["b_layers"] = [None] * len(params["layers"])
    dh = d_logits @ params["w_out"]
    if head_norm:
        dh = _layernorm_back(dh, u, s)
    for i in range(len(params["layers"]) - 1, -1, -1):
        u_i, s_i, z = saved[i]
        dz = dh * (z > 0)
        grads["layers"][i] = dz.T @ u_i
        if bias:
            grads["b_layers"][i] = dz.sum(axis=0)
        du = dz @ params["layers"][i]
        dx = _layernorm_back(du, u_i, s_i)
        dh = dh + dx if residual else dx
    grads["w_in"] = dh.T @ X
    if bias:
        grads["b_in"] = dh.sum(axis=0)
    return loss, grads


def _flatten(tree):
    out = []
    for key in sorted(tree):
        value = tree[key]
        out.extend(value if isinstance(value, list) else [value])
    return out


def train(params, X, Y, residual, steps, lr, batch, seed, head_norm=True):
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
        loss, grads = forward_backward(params, X[idx], Y[idx], residual, head_norm)
        history.append(loss)
        c1, c2 = 1 - b1**t, 1 - b2**t
        for p, g, mi, vi in zip(flat, _flatten(grads), m, v):
            mi *= b1
            mi += (1 - b1) * g
            vi *= b2
            vi += (1 - b2) * g * g
            p -= lr * (mi / c1) / (np.sqrt(vi / c2) + eps)
    return history


def full_loss(params, X, Y, residual, head_norm=True):
    return forward_backward(params, np.asarray(X), np.asarray(Y), residual, head_norm)[0]


VARIANT = {"bias": False, "head_norm": True}  # set by main from --bias / --no-head-norm


def run_net(kind, depth, seed, config, X, Y):
    """`experiments.depth_search.run_net` on arrays (plain and residual nets only)."""
    if kind not in ("plain", "residual"):
        raise ValueError(f"the numpy mirror has plain and residual nets, not {kind!r}")
    residual, head_norm = kind == "residual", VARIANT["head_norm"]
    params = init(depth, config.width, config.d_in, config.n_classes, seed, VARIANT["bias"])
    clock = Stopwatch()
    history = train(params, X, Y, residual, config.steps, config.lr, config.batch, seed,
                    head_norm)
    train_seconds = clock.seconds()
    return {
        "kind": kind,
        "depth": depth,
        "loss": full_loss(params, X, Y, residual, head_norm),
        "curve": coarse_curve(history),
        "train_seconds": round(train_seconds, 2),
        "ms_per_step": round(1000 * train_seconds / config.steps, 2),
        "seconds": round(clock.seconds(), 2),
    }


def main(argv=None):
    """`experiments.depth_search`'s command and result, trained by the numpy mirror.

    Two extra flags leave the `Value` nets behind to test what the torch track's nets do
    differently: `--bias` (a bias in the input layer, every layer and the head) and
    `--no-head-norm` (no LayerNorm before the head).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    VARIANT["bias"] = "--bias" in argv
    VARIANT["head_norm"] = "--no-head-norm" not in argv
    rest = [a for a in argv if a not in ("--bias", "--no-head-norm")]
    engine = "the numpy mirror of the `Value` nets"
    changes = [text for flag, text in (("--bias", "biases"), ("--no-head-norm",
               "no LayerNorm before the head")) if flag in argv]
    if changes:
        engine = "a numpy variant of the `Value` nets (" + ", ".join(changes) + ")"
    result = depth_search.main(rest, run_net, engine, "experiments.numpy_mirror",
                               "results/pure_python/search/mirror.json", command_argv=argv)
    VARIANT.update(bias=False, head_norm=True)
    return result


if __name__ == "__main__":
    main()
