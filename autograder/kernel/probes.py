"""Inputs for the graded tests of the depth assignments (2, 3 and 4), on the kernel's side.

Everything here builds what a test hands to a student's code: fixed numbers, vectors and
matrices, a probe that turns a function of many inputs into one of a flat list (for
`checks.check_gradients`), and *probe layers*. A test that must not depend on another task
(Task 2.2's forward pass, say, needs some layer) hands in one of the probe layers below:
each has the shape of a task's layer but none is any task's answer, so a student's code
cannot take a model answer from what a test gives it. The expected values come from
`autograder.answers.reference`, which only the grader has.
"""

import functools
import math
import operator
import random
from typing import Any, Callable, Sequence  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel.witness import CheckFailed
from microgpt import Value, linear
from microgpt.nn import matrix

__all__ = [
    "vector", "rows", "layer_inputs", "as_values", "numbers", "GradientProbe",
    "probe_layer", "probe_residual_layer", "probe_gate", "probe_highway_layer",
    "probe_gated_params", "probe_forward",
]


def vector(rng: random.Random, n: int, scale: float = 1.0, shift: float = 0.0) -> list[float]:
    """`n` floats from $N(shift, scale^2)$."""
    return [shift + scale * rng.gauss(0, 1) for _ in range(n)]


def rows(rng: random.Random, n_out: int, n_in: int,
         scale: float | None = None) -> list[list[float]]:
    """`n_out` rows of `n_in` floats from $N(0, scale^2)$, by default $scale = 1/\\sqrt{n_{in}}$."""
    scale = 1 / math.sqrt(n_in) if scale is None else scale
    return [vector(rng, n_in, scale) for _ in range(n_out)]


def layer_inputs(seed: int, width: int, n_out: int | None = None, gated: bool = False,
                 gate_bias: float = -0.5) -> tuple[Any, ...]:
    """Fixed float inputs for a layer: (h, W) or, `gated`, (h, W, W_gate, b_gate)."""
    rng = random.Random(seed)
    n_out = width if n_out is None else n_out
    h = vector(rng, width, 1.5, 0.3)
    W = rows(rng, n_out, width)
    if not gated:
        return h, W
    return h, W, rows(rng, width, width), vector(rng, width, 0.7, gate_bias)


def as_values(v: Any) -> Any:
    """Numbers, lists of numbers or lists of rows of numbers, as fresh `Value`s."""
    if isinstance(v, (list, tuple)):
        return [as_values(a) for a in v]
    return Value(float(v))


def numbers(v: Any) -> Any:
    """The floats inside a Value, a list of them or a list of rows of them."""
    if isinstance(v, Value):
        return v.data
    if isinstance(v, (list, tuple)):
        return [numbers(a) for a in v]
    return v


class GradientProbe:
    """Fixed numbers `args` (numbers, vectors or matrices) flattened into `xs`, for
    `check_gradients`: `of(fn)` is the function of a flat list that puts the list back in
    the shapes of `args`, calls fn(*args) and returns $\\sum_i c_i\\,out_i$, with weights
    $c_i$ fixed by `seed` (the same for every function probed)."""

    def __init__(self, args: Sequence[Any], arg_names: Sequence[str], seed: int = 0) -> None:
        self.xs: list[float] = []
        self.names: list[str] = []
        self._shapes: list[Any] = []
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
        self._weights: list[float] = []

    def weight(self, i: int) -> float:
        while len(self._weights) <= i:
            self._weights.append(self._rng.uniform(0.5, 1.5) * self._rng.choice((-1, 1)))
        return self._weights[i]

    def of(self, fn: Callable[..., Any]) -> Callable[[Sequence[Any]], Value]:
        def probed(flat: Sequence[Any]) -> Value:
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


# ---------------------------------------------------------------- probe layers (no answers)
#
# These ship with the student's install (the visible tests of 02, 03 and 04 hand them to
# the student's code), so they are written in a form of their own, not in the lines a
# task's answer would have (tests/unit/test_near_answers.py checks that): the numbers are
# those of the formulas in the docstrings, operation for operation, as the stored
# expected values (`autograder/kernel/stored.py`) were computed.


def probe_layer(h: list[Value], W: list[list[Value]]) -> list[Value]:
    """A probe layer: $\\tanh(W h)$ (no norm, no ReLU: not Task 2.1's layer)."""
    return [a.tanh() for a in linear(h, W)]


def probe_residual_layer(h: list[Value], W: list[list[Value]]) -> list[Value]:
    """A probe layer with a shortcut: $h + \\tanh(W h)$ (not Task 4.1's layer)."""
    return list(map(operator.add, h, probe_layer(h, W)))


def probe_gate(h: list[Value], W_gate: list[list[Value]], b_gate: list[Value]) -> list[Value]:
    """A probe gate: $\\sigma(2 (W_T h + b_T))$ (not Task 3.1's gate)."""
    return [(2 * (z + b)).sigmoid() for z, b in zip(linear(h, W_gate), b_gate)]


def _mixed(t: Value, new: Value, old: Value) -> Value:
    """$t \\cdot new + (1 - t) \\cdot old$, for one unit."""
    return t * new + (1 - t) * old


def probe_highway_layer(h: list[Value], W: list[list[Value]], W_gate: list[list[Value]],
                        b_gate: list[Value]) -> list[Value]:
    """A gated probe layer: $T \\tanh(W h) + (1 - T) h$ with the probe gate (not Task 3.2's)."""
    return list(map(_mixed, probe_gate(h, W_gate, b_gate), probe_layer(h, W), h))


def probe_gated_params(width: int, rng: random.Random,
                       gate_bias: float = -1.0) -> dict[str, Any]:
    """Parameters for a gated test layer: W_gate drawn first, then W (not Task 3.3's)."""
    std = 1 / math.sqrt(3 * width)
    W_gate = matrix(width, width, rng, std)
    return dict(W=matrix(width, width, rng, std), W_gate=W_gate,
                b_gate=[Value(gate_bias) for _ in range(width)])


def probe_forward(net: Any, x: list[Value], layer: Callable[..., list[Value]]) -> list[Value]:
    """A probe forward pass: $W_{out} \\tanh(h_L)$ with $h_0 = W_{in} x$ (not Task 2.2's)."""
    h_last = functools.reduce(lambda h, params: layer(h, **params), net.layers,
                              linear(x, net.w_in))
    return linear([v.tanh() for v in h_last], net.w_out)
