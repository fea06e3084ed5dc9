"""Reference answers and test inputs for the graded cells of the depth assignments (2, 3, 4).

Two kinds of reference. The `f_` functions compute on plain floats, straight from the
equations and without the engine, so a student's values are checked independently of
how their graph was built. The `Value` functions are the model answers, for reference
training runs and gradients; the graded cells compare a student's run with one of these.
"""

import math
import random

from microgpt import Value, linear
from microgpt.deepnet import gradient_norms, layer_std, logits, mean_loss
from microgpt.nn import layernorm, matrix

from .checks import CheckFailed

EPS = 1e-5  # LayerNorm's epsilon, as in microgpt.nn.layernorm
GATE_BIAS = -2.0

# ---------------------------------------------------------------- on floats


def f_layernorm(x):
    """$(x_i - \\mu) / \\sqrt{\\sigma^2 + eps}$ on floats."""
    mu = math.fsum(x) / len(x)
    var = math.fsum((a - mu) ** 2 for a in x) / len(x)
    return [(a - mu) / math.sqrt(var + EPS) for a in x]


def f_linear(x, W):
    """$W x$ on floats."""
    return [math.fsum(w * a for w, a in zip(row, x)) for row in W]


def f_sigmoid(a):
    return 1 / (1 + math.exp(-a))


def f_plain_layer(h, W):
    """$\\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$ on floats."""
    return [max(0.0, a) for a in f_linear(f_layernorm(h), W)]


def f_residual_layer(h, W):
    """$h + \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$ on floats."""
    return [a + b for a, b in zip(h, f_plain_layer(h, W))]


def f_highway_gate(h, W_gate, b_gate):
    """$T = \\sigma(W_T h + b_T)$ on floats."""
    return [f_sigmoid(a + b) for a, b in zip(f_linear(h, W_gate), b_gate)]


def f_highway_layer(h, W, W_gate, b_gate):
    """$T \\odot \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h)) + (1 - T) \\odot h$ on floats."""
    t = f_highway_gate(h, W_gate, b_gate)
    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f_plain_layer(h, W), h)]


def f_logits(net, x, f_layer):
    """The net's logits on floats: `f_layer(h, **params)` gets the layers' numbers."""
    h = f_linear(x, numbers(net.w_in))
    for params in net.layers:
        h = f_layer(h, **{k: numbers(v) for k, v in params.items()})
    return f_linear(f_layernorm(h), numbers(net.w_out))


def numbers(v):
    """The floats inside a Value, a list of them or a list of rows of them."""
    if isinstance(v, Value):
        return v.data
    if isinstance(v, (list, tuple)):
        return [numbers(a) for a in v]
    return v


# ---------------------------------------------------------------- the model answers


def plain_layer(h, W):
    """Task 2.1: $\\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$."""
    return [v.relu() for v in linear(layernorm(h), W)]


def residual_layer(h, W):
    """Task 4.1: $h + \\mathrm{relu}(W\\,\\mathrm{LayerNorm}(h))$."""
    return [a + b for a, b in zip(h, plain_layer(h, W))]


def highway_gate(h, W_gate, b_gate):
    """Task 3.1: $T = \\sigma(W_T h + b_T)$."""
    return [(z + b).sigmoid() for z, b in zip(linear(h, W_gate), b_gate)]


def highway_layer(h, W, W_gate, b_gate):
    """Task 3.2: $T \\odot H(h) + (1 - T) \\odot h$ with $H$ the plain layer."""
    t = highway_gate(h, W_gate, b_gate)
    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, plain_layer(h, W), h)]


def highway_params(width, rng):
    """Task 3.3: W, then W_gate, from $N(0, 1/(3w))$; b_gate = -2 (a Value per unit)."""
    std = layer_std(width)
    return {
        "W": matrix(width, width, rng, std),
        "W_gate": matrix(width, width, rng, std),
        "b_gate": [Value(GATE_BIAS) for _ in range(width)],
    }


mlp_logits = logits  # Task 2.2


def layer_gradient_norms(net, loss):
    """Task 2.3: backward, then $\\lVert \\partial L / \\partial W_l \\rVert_F$ per layer,
    then every grad back to 0."""
    loss.backward()
    norms = [math.sqrt(math.fsum(p.grad**2 for row in lp["W"] for p in row)) for lp in net.layers]
    for p in net.parameters():
        p.grad = 0
    return norms


def mean_gate_per_layer(net, X):
    """Task 3.4: the mean of $T$ over units and points, for each layer of a highway net."""
    totals = [0.0] * net.depth
    for x in X:
        h = linear(x, net.w_in)
        for i, params in enumerate(net.layers):
            t = highway_gate(h, params["W_gate"], params["b_gate"])
            totals[i] += math.fsum(v.data for v in t) / len(t)
            h = highway_layer(h, **params)
    return [s / len(X) for s in totals]


def first_last_ratio(net, X, Y, layer):
    """Task 4.2: $\\lVert g_1 \\rVert / \\lVert g_L \\rVert$ of the gradient norms per layer."""
    norms = gradient_norms(net, X, Y, layer)
    return norms[0] / norms[-1]


# ---------------------------------------------------------------- test inputs and probes


def vector(rng, n, scale=1.0, shift=0.0):
    """`n` floats from $N(shift, scale^2)$."""
    return [shift + scale * rng.gauss(0, 1) for _ in range(n)]


def rows(rng, n_out, n_in, scale=None):
    """`n_out` rows of `n_in` floats from $N(0, scale^2)$, by default $scale = 1/\\sqrt{n_{in}}$."""
    scale = 1 / math.sqrt(n_in) if scale is None else scale
    return [vector(rng, n_in, scale) for _ in range(n_out)]


def layer_inputs(seed, width, n_out=None, gated=False, gate_bias=-0.5):
    """Fixed float inputs for a layer: (h, W) or, `gated`, (h, W, W_gate, b_gate)."""
    rng = random.Random(seed)
    n_out = width if n_out is None else n_out
    h = vector(rng, width, 1.5, 0.3)
    W = rows(rng, n_out, width)
    if not gated:
        return h, W
    return h, W, rows(rng, width, width), vector(rng, width, 0.7, gate_bias)


class GradientProbe:
    """Fixed numbers `args` (numbers, vectors or matrices) flattened into `xs`, for
    `check_gradients`: `of(fn)` is the function of a flat list that puts the list back in
    the shapes of `args`, calls fn(*args) and returns $\\sum_i c_i\\,out_i$, with weights
    $c_i$ fixed by `seed` (the same for every function probed)."""

    def __init__(self, args, arg_names, seed=0):
        self.xs, self.names, self._shapes = [], [], []
        for arg, name in zip(args, arg_names):
            if isinstance(arg, (int, float)):
                self._shapes.append(None)
                self.xs.append(float(arg))
                self.names.append(name)
            elif arg and isinstance(arg[0], (list, tuple)):
                self._shapes.append([len(r) for r in arg])
                for i, r in enumerate(arg):
                    self.xs.extend(float(a) for a in r)
                    self.names.extend(f"{name}[{i}][{j}]" for j in range(len(r)))
            else:
                self._shapes.append(len(arg))
                self.xs.extend(float(a) for a in arg)
                self.names.extend(f"{name}[{i}]" for i in range(len(arg)))
        self._rng = random.Random(seed)
        self._weights = []

    def weight(self, i):
        while len(self._weights) <= i:
            self._weights.append(self._rng.uniform(0.5, 1.5) * self._rng.choice((-1, 1)))
        return self._weights[i]

    def of(self, fn):
        def probed(flat):
            it = iter(flat)
            filled = []
            for shape in self._shapes:
                if shape is None:
                    filled.append(next(it))
                elif isinstance(shape, list):
                    filled.append([[next(it) for _ in range(n)] for n in shape])
                else:
                    filled.append([next(it) for _ in range(shape)])
            out = fn(*filled)
            if not isinstance(out, (list, tuple)):
                kind = "None" if out is None else f"a {type(out).__name__}"
                raise CheckFailed(f"expected a list of Values, got {kind}")
            return Value.sum([self.weight(i) * o for i, o in enumerate(out)])

        return probed


def as_values(v):
    """Numbers, lists of numbers or lists of rows of numbers, as fresh `Value`s."""
    if isinstance(v, (list, tuple)):
        return [as_values(a) for a in v]
    return Value(float(v))


def central_gradient_norms(net, X, Y, layer, h=1e-6):
    """$\\lVert \\partial L / \\partial W_l \\rVert$ per layer from central differences
    of the mean loss, one weight at a time (small nets only)."""
    norms = []
    for params in net.layers:
        total = []
        for row in params["W"]:
            for p in row:
                keep = p.data
                p.data = keep + h
                up = mean_loss(net, X, Y, layer).data
                p.data = keep - h
                down = mean_loss(net, X, Y, layer).data
                p.data = keep
                total.append(((up - down) / (2 * h)) ** 2)
        norms.append(math.sqrt(math.fsum(total)))
    return norms
