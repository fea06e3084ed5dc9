"""Reference answers for the graded cells of the depth assignments (2, 3, 4): grader's side.

This module never reaches a student's kernel (only `autograder.kernel` does), nor a
student's install: only the hidden tests name it, and only in the arguments that say what
is right, which the grader strips before it sends a cell to the student's kernel
(`testsource`). The visible tests compare with numbers made from it once and stored
kernel-side (`residual-pack stored`, `autograder/authoring/stored.py`). The inputs the
tests hand to the student's code are in `probes`.

Two kinds of reference. The `f_` functions compute on plain floats, straight from the
equations and without the engine, so a student's values are checked independently of
how their graph was built. The `Value` functions are the model answers, for reference
training runs and gradients; the graded cells compare a student's run with one of these.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from autograder.kernel.probes import as_values, layer_inputs, numbers, rows, vector  # noqa: F401 (old names)
from microgpt import Value, linear
from microgpt.deepnet import gradient_norms, layer_std, logits, mean_loss
from microgpt.nn import layernorm, matrix

if TYPE_CHECKING:
    from microgpt.deepnet import Net

EPS = 1e-5  # LayerNorm's epsilon, as in microgpt.nn.layernorm
GATE_BIAS = -2.0

# ---------------------------------------------------------------- on floats


def f_layernorm(x: Sequence[float]) -> list[float]:
    """$(x_i - \\mu) / \\sqrt{\\sigma^2 + eps}$ on floats."""
    mu = math.fsum(x) / len(x)
    var = math.fsum((a - mu) ** 2 for a in x) / len(x)
    return [(a - mu) / math.sqrt(var + EPS) for a in x]


def f_linear(x: Sequence[float], W: Sequence[Sequence[float]]) -> list[float]:
    """$W x$ on floats."""
    return [math.fsum(w * a for w, a in zip(row, x)) for row in W]


def f_sigmoid(a: float) -> float:
    return 1 / (1 + math.exp(-a))


def f_plain_layer(h: Sequence[float], W: Sequence[Sequence[float]]) -> list[float]:
    """$\\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$ on floats."""
    return [max(0.0, a) for a in f_linear(f_layernorm(h), W)]


def f_residual_layer(h: Sequence[float], W: Sequence[Sequence[float]]) -> list[float]:
    """$h + \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$ on floats."""
    return [a + b for a, b in zip(h, f_plain_layer(h, W))]


def f_highway_gate(h: Sequence[float], W_gate: Sequence[Sequence[float]],
                   b_gate: Sequence[float]) -> list[float]:
    """$T = \\sigma(W_T h + b_T)$ on floats."""
    return [f_sigmoid(a + b) for a, b in zip(f_linear(h, W_gate), b_gate)]


def f_highway_layer(h: Sequence[float], W: Sequence[Sequence[float]],
                    W_gate: Sequence[Sequence[float]], b_gate: Sequence[float]) -> list[float]:
    """$T \\odot \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h)) + (1 - T) \\odot h$ on floats."""
    t = f_highway_gate(h, W_gate, b_gate)
    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f_plain_layer(h, W), h)]


def f_logits(net: Net, x: Sequence[float], f_layer: Callable[..., list[float]]) -> list[float]:
    """The net's logits on floats: `f_layer(h, **params)` gets the layers' numbers."""
    h = f_linear(x, numbers(net.w_in))
    for params in net.layers:
        h = f_layer(h, **{k: numbers(v) for k, v in params.items()})
    return f_linear(f_layernorm(h), numbers(net.w_out))


# ---------------------------------------------------------------- the model answers


def plain_layer(h: list[Value], W: list[list[Value]]) -> list[Value]:
    """Task 2.1: $\\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$."""
    return [v.relu() for v in linear(layernorm(h), W)]


def residual_layer(h: list[Value], W: list[list[Value]]) -> list[Value]:
    """Task 4.1: $h + \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$."""
    return [a + b for a, b in zip(h, plain_layer(h, W))]


def highway_gate(h: list[Value], W_gate: list[list[Value]], b_gate: list[Value]) -> list[Value]:
    """Task 3.1: $T = \\sigma(W_T h + b_T)$."""
    return [(z + b).sigmoid() for z, b in zip(linear(h, W_gate), b_gate)]


def highway_layer(h: list[Value], W: list[list[Value]], W_gate: list[list[Value]],
                  b_gate: list[Value]) -> list[Value]:
    """Task 3.2: $T \\odot H(h) + (1 - T) \\odot h$ with $H$ the plain layer."""
    t = highway_gate(h, W_gate, b_gate)
    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, plain_layer(h, W), h)]


def highway_params(width: int, rng: random.Random) -> dict[str, Any]:
    """Task 3.3: W, then W_gate, from $N(0, 1/(3w))$; b_gate = -2 (a Value per unit)."""
    std = layer_std(width)
    return {
        "W": matrix(width, width, rng, std),
        "W_gate": matrix(width, width, rng, std),
        "b_gate": [Value(GATE_BIAS) for _ in range(width)],
    }


mlp_logits = logits  # Task 2.2


def layer_gradient_norms(net: Net, loss: Value) -> list[float]:
    """Task 2.3: backward, then $\\lVert \\partial L / \\partial W_l \\rVert_F$ per layer,
    then every grad back to 0."""
    loss.backward()
    norms = [math.sqrt(math.fsum(p.grad**2 for row in lp["W"] for p in row)) for lp in net.layers]
    for p in net.parameters():
        p.grad = 0
    return norms


def mean_gate_per_layer(net: Net, X: Sequence[Any],
                        gate: Callable[..., list[Value]] = highway_gate,
                        layer: Callable[..., list[Value]] = highway_layer) -> list[float]:
    """Task 3.4: the mean of $T$ over units and points, for each layer of a highway net."""
    totals = [0.0] * net.depth
    for x in X:
        h = linear(x, net.w_in)
        for i, params in enumerate(net.layers):
            t = gate(h, params["W_gate"], params["b_gate"])
            totals[i] += math.fsum(v.data for v in t) / len(t)
            h = layer(h, **params)
    return [s / len(X) for s in totals]


def first_last_ratio(net: Net, X: Sequence[Any], Y: Sequence[int],
                     layer: Callable[..., list[Value]]) -> float:
    """Task 4.2: $\\lVert g_1 \\rVert / \\lVert g_L \\rVert$ of the gradient norms per layer."""
    norms = gradient_norms(net, X, Y, layer)
    for p in net.parameters():
        p.grad = 0
    return norms[0] / norms[-1]


# ---------------------------------------------------------------- expected values for the tests


def f_probe_layer(h: Sequence[float], W: Sequence[Sequence[float]]) -> list[float]:
    """`probes.probe_layer` on floats: $\\tanh(W h)$."""
    return [math.tanh(a) for a in f_linear(h, W)]


def f_probe_residual_layer(h: Sequence[float], W: Sequence[Sequence[float]]) -> list[float]:
    """`probes.probe_residual_layer` on floats: $h + \\tanh(W h)$."""
    return [a + b for a, b in zip(h, f_probe_layer(h, W))]


def f_probe_gate(h: Sequence[float], W_gate: Sequence[Sequence[float]],
                 b_gate: Sequence[float]) -> list[float]:
    """`probes.probe_gate` on floats: $\\sigma(2 (W_T h + b_T))$."""
    return [f_sigmoid(2 * (a + b)) for a, b in zip(f_linear(h, W_gate), b_gate)]


def f_probe_highway_layer(h: Sequence[float], W: Sequence[Sequence[float]],
                          W_gate: Sequence[Sequence[float]],
                          b_gate: Sequence[float]) -> list[float]:
    """`probes.probe_highway_layer` on floats."""
    t = f_probe_gate(h, W_gate, b_gate)
    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f_probe_layer(h, W), h)]


def logit_weight_grads(net: Net, x: Sequence[Any], layer: Callable[..., list[Value]],
                       coeffs: Sequence[float]) -> list[float]:
    """d(sum_i coeffs_i z_i)/d(each weight, in net.parameters() order), z the reference
    logits of `x`; every grad is 0 again afterwards."""
    for p in net.parameters():
        p.grad = 0
    z = mlp_logits(net, x, layer)
    Value.sum([c * v for c, v in zip(coeffs, z)]).backward()
    grads = [p.grad for p in net.parameters()]
    for p in net.parameters():
        p.grad = 0
    return grads


def highway_draws(width: int,
                  seed: int) -> tuple[list[list[float]], list[list[float]], float]:
    """(W, W_gate numbers, the next number of the generator) after Task 3.3's reference
    draws its parameters from `random.Random(seed)`."""
    rng = random.Random(seed)
    params = highway_params(width, rng)
    return ([[p.data for p in row] for row in params["W"]],
            [[p.data for p in row] for row in params["W_gate"]], rng.random())


def trained_highway_biases(depth: int, seed: int, config: Any) -> list[list[float]]:
    """The gate biases, layer by layer, of the reference highway net after a short run."""
    from microgpt.studies import Variant, run

    done = run(Variant(highway_layer, depth, layer_params=highway_params), seed=seed,
               config=config)
    return [[b.data for b in params["b_gate"]]
            for params in done.net.layers]  # type: ignore[union-attr]


def training_loss(layer: Any, depth: int, seed: int, config: Any, **variant: Any) -> float:
    """The final training loss of the reference run of `layer` nets (microgpt.studies.run)."""
    from microgpt.studies import Variant, run

    return run(Variant(layer, depth, **variant), seed=seed, config=config).loss


def central_gradient_norms(net: Net, X: Sequence[Any], Y: Sequence[int],
                           layer: Callable[..., list[Value]], h: float = 1e-6,
                           forward: Callable[..., list[Value]] = logits) -> list[float]:
    """$\\lVert \\partial L / \\partial W_l \\rVert$ per layer from central differences
    of the mean loss, one weight at a time (small nets only)."""
    norms = []
    for params in net.layers:
        total = []
        for row in params["W"]:
            for p in row:
                keep = p.data
                p.data = keep + h
                up = mean_loss(net, X, Y, layer, forward).data
                p.data = keep - h
                down = mean_loss(net, X, Y, layer, forward).data
                p.data = keep
                total.append(((up - down) / (2 * h)) ** 2)
        norms.append(math.sqrt(math.fsum(total)))
    return norms


# ---------------------------------------------------------------- Task 4.3: deleting a layer


def f_mean_loss(net: Net, X: Sequence[Any], Y: Sequence[int],
                f_layer: Callable[..., list[float]]) -> float:
    """The mean cross-entropy of the net's logits on floats (`f_logits`) over X, Y."""
    total = []
    for x, y in zip(X, Y):
        z = f_logits(net, x, f_layer)
        top = max(z)
        log_norm = top + math.log(math.fsum(math.exp(a - top) for a in z))
        total.append(log_norm - z[y])
    return math.fsum(total) / len(total)


def f_deletion_losses(net: Net, X: Sequence[Any], Y: Sequence[int],
                      f_layer: Callable[..., list[float]]) -> list[float]:
    """Task 4.3 on floats: for each layer l, the mean loss of the net without layer l."""
    from microgpt.deepnet import Net

    return [f_mean_loss(Net(net.w_in, net.layers[:i] + net.layers[i + 1:], net.w_out),
                        X, Y, f_layer)
            for i in range(net.depth)]


def deletion_losses(net: Net, X: Sequence[Any], Y: Sequence[int],
                    layer: Callable[..., list[Value]]) -> list[float]:
    """Task 4.3, the model answer: the mean loss (a number) with each layer left out in turn."""
    from microgpt.deepnet import Net

    return [mean_loss(Net(net.w_in, net.layers[:i] + net.layers[i + 1:], net.w_out),
                      X, Y, layer).data
            for i in range(net.depth)]
