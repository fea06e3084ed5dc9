"""Neural-net pieces on `Value`: initialisation, norms, softmax, cross-entropy and Adam.

Each function takes and returns plain lists of `Value`s, as microgpt does. Randomness
always comes from a seed or a `random.Random` passed in, never the global random state.
"""

import math
import random
from collections.abc import Iterable, Sequence

from .engine import Value, dot, fused, linear

__all__ = [
    "make_rng",
    "matrix",
    "dot",
    "linear",
    "rmsnorm",
    "layernorm",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "Adam",
]


def make_rng(seed_or_rng: int | random.Random | None) -> random.Random:
    """A `random.Random` from a seed, or the generator itself when given one."""
    if isinstance(seed_or_rng, random.Random):
        return seed_or_rng
    return random.Random(seed_or_rng)


def matrix(n_out: int, n_in: int, rng: int | random.Random | None,
           std: float = 0.08) -> list[list[Value]]:
    """An `n_out` x `n_in` list of rows of parameters drawn from $N(0, std^2)$."""
    rng = make_rng(rng)
    return [[Value(rng.gauss(0, std)) for _ in range(n_in)] for _ in range(n_out)]


def _inv_rms(x: Sequence[Value], eps: float) -> Value:
    """$s = (\\frac{1}{n}\\sum_i x_i^2 + eps)^{-1/2}$ as one node."""
    n = len(x)
    xd = [v.data for v in x]
    s = (sum(a * a for a in xd) / n + eps) ** -0.5
    c = -(s**3) / n
    return fused("1/rms", s, tuple(x), tuple(c * a for a in xd), eps)


def rmsnorm(x: Sequence[Value], eps: float = 1e-5) -> list[Value]:
    """$y_i = x_i / \\sqrt{\\mathrm{mean}(x^2) + eps}$ (no gain, as in microgpt)."""
    s = _inv_rms(x, eps)
    return [v * s for v in x]


def _mean(x: Sequence[Value]) -> Value:
    """$\\mu = \\frac{1}{n}\\sum_i x_i$ as one node."""
    n = len(x)
    return fused("mean", sum(v.data for v in x) / n, tuple(x), (1 / n,) * n)


def layernorm(x: Sequence[Value], eps: float = 1e-5) -> list[Value]:
    """$y_i = (x_i - \\mu) / \\sqrt{\\sigma^2 + eps}$ (no gain or bias)."""
    mu = _mean(x)
    centred = [v - mu for v in x]
    s = _inv_rms(centred, eps)
    return [v * s for v in centred]


def softmax(logits: Sequence[Value]) -> list[Value]:
    """$p_i = e^{z_i} / \\sum_j e^{z_j}$, shifted by the largest logit so it cannot overflow.

    Each $p_i$ is one node whose children are all the logits, with local gradients
    $\\partial p_i / \\partial z_j = p_i (\\delta_{ij} - p_j)$.
    """
    zd = [z.data for z in logits]
    m = max(zd)
    exps = [math.exp(z - m) for z in zd]
    total = sum(exps)
    probs = [e / total for e in exps]
    children = tuple(logits)
    out = []
    for i, p in enumerate(probs):
        local = [-p * q for q in probs]
        local[i] += p
        out.append(fused("softmax", p, children, tuple(local), i))
    return out


def _log_sum_exp(zd: list[float]) -> tuple[float, list[float]]:
    m = max(zd)
    exps = [math.exp(z - m) for z in zd]
    total = sum(exps)
    return m + math.log(total), [e / total for e in exps]


def log_softmax(logits: Sequence[Value]) -> list[Value]:
    """$\\log p_i = z_i - \\log \\sum_j e^{z_j}$, finite even where $p_i$ underflows to 0."""
    zd = [z.data for z in logits]
    lse, probs = _log_sum_exp(zd)
    children = tuple(logits)
    out = []
    for i, z in enumerate(zd):
        local = [-q for q in probs]
        local[i] += 1
        out.append(fused("log_softmax", z - lse, children, tuple(local), i))
    return out


def cross_entropy(logits: Sequence[Value], target: int) -> Value:
    """$-\\log p_t = \\log \\sum_j e^{z_j} - z_t$ as one node, with gradient $p - onehot(t)$.

    Never computes $\\log p_t$ from $p_t$, so a target probability that underflows
    gives a large finite loss instead of `log(0)`.
    """
    zd = [z.data for z in logits]
    lse, probs = _log_sum_exp(zd)
    probs[target] -= 1
    return fused("cross_entropy", lse - zd[target], tuple(logits), tuple(probs), target)


class Adam:
    """Adam with bias correction and a learning rate that decays linearly to 0, as in microgpt.

    $m \\leftarrow \\beta_1 m + (1-\\beta_1) g$, $v \\leftarrow \\beta_2 v + (1-\\beta_2) g^2$,
    $p \\leftarrow p - lr_t \\hat m / (\\sqrt{\\hat v} + eps)$ with $lr_t = lr (1 - t/T)$.
    `step()` also clears the gradients, ready for the next backward.
    """

    def __init__(self, params: Iterable[Value], lr: float = 0.01,
                 betas: tuple[float, float] = (0.85, 0.99), eps: float = 1e-8,
                 total_steps: int | None = None) -> None:
        self.params = list(params)
        self.lr, (self.beta1, self.beta2), self.eps = lr, betas, eps
        self.total_steps = total_steps
        self.m = [0.0] * len(self.params)
        self.v = [0.0] * len(self.params)
        self.t = 0

    def current_lr(self) -> float:
        """The learning rate for the next step (linear decay when `total_steps` is set)."""
        if self.total_steps is None:
            return self.lr
        return self.lr * (1 - self.t / self.total_steps)

    def step(self) -> None:
        lr, b1, b2, eps = self.current_lr(), self.beta1, self.beta2, self.eps
        self.t += 1
        c1, c2 = 1 - b1**self.t, 1 - b2**self.t
        params, m, v = self.params, self.m, self.v
        a1, a2 = 1 - b1, 1 - b2
        grads = [p.grad for p in params]
        m[:] = [b1 * mi + a1 * g for mi, g in zip(m, grads)]
        v[:] = [b2 * vi + a2 * g * g for vi, g in zip(v, grads)]
        for p, mi, vi in zip(params, m, v):
            p.data -= lr * (mi / c1) / ((vi / c2) ** 0.5 + eps)
            p.grad = 0
