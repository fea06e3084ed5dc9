"""The neural-net pieces: norms, softmax and cross-entropy against central differences,
their behaviour on extreme logits, Adam against a hand-written Adam, and seeded init."""

import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies import derivative_check, floats, spread_vectors, vectors

from microgpt import Adam, Value, cross_entropy, layernorm, log_softmax, matrix, rmsnorm, softmax
from microgpt.nn import make_rng

EPS = 1e-5  # the norms' epsilon

# ---- float references, written from the definitions ----


def ref_softmax(z):
    m = max(z)
    e = [math.exp(a - m) for a in z]
    total = math.fsum(e)
    return [a / total for a in e]


def ref_log_softmax(z):
    m = max(z)
    lse = m + math.log(math.fsum(math.exp(a - m) for a in z))
    return [a - lse for a in z]


def ref_rmsnorm(x):
    rms = math.sqrt(math.fsum(a * a for a in x) / len(x) + EPS)
    return [a / rms for a in x]


def ref_layernorm(x):
    mu = math.fsum(x) / len(x)
    var = math.fsum((a - mu) ** 2 for a in x) / len(x)
    return [(a - mu) / math.sqrt(var + EPS) for a in x]


# ---- claim 1 (continued): the fused nn functions against central differences ----


@given(x=vectors())
def test_rmsnorm(x):
    derivative_check(rmsnorm, ref_rmsnorm, x, "rmsnorm")


@given(x=vectors(elements=floats(-1e-2, 1e-2)))
def test_rmsnorm_of_a_tiny_vector_where_eps_matters(x):
    derivative_check(rmsnorm, ref_rmsnorm, x, "rmsnorm")


@given(x=spread_vectors())
def test_layernorm(x):
    derivative_check(layernorm, ref_layernorm, x, "layernorm")


@given(z=vectors())
def test_softmax(z):
    derivative_check(softmax, ref_softmax, z, "softmax")


@given(z=vectors())
def test_log_softmax(z):
    derivative_check(log_softmax, ref_log_softmax, z, "log_softmax")


@given(z=vectors(min_size=2), data=st.data())
def test_cross_entropy_gradient_wrt_every_logit(z, data):
    t = data.draw(st.integers(0, len(z) - 1), label="target")
    derivative_check(
        lambda v: cross_entropy(v, t), lambda y: -ref_log_softmax(y)[t], z, f"cross_entropy t={t}"
    )


@given(z=vectors())
def test_softmax_of_repeated_logit_objects(z):
    """The same Value in several slots: its gradient sums over them."""
    derivative_check(
        lambda v: softmax([*v, v[0]]), lambda y: ref_softmax([*y, y[0]]), z, "softmax repeat"
    )


@given(z=vectors(min_size=2))
def test_cross_entropy_equals_minus_log_of_softmax(z):
    """Against the unfused engine graph as well: $-\\log p_t$ built from exp, sum and log."""
    fused = cross_entropy([Value(a) for a in z], 0).data
    zs = [Value(a) for a in z]
    m = max(z)
    exps = [(v - m).exp() for v in zs]
    unfused = -(exps[0] / Value.sum(exps)).log()
    assert fused == pytest.approx(unfused.data, rel=1e-12, abs=1e-12)


# ---- claim 5: extreme logits ----


def test_cross_entropy_of_an_underflowing_target_is_finite():
    """$p_0 = e^{-800} / (1 + e^{-800})$ underflows to 0, but $-\\log p_0 \\approx 800$."""
    z = [Value(0.0), Value(800.0)]
    # the unfused route through the probability fails: this case is a real one
    with pytest.raises(ValueError):
        softmax(z)[0].log()
    loss = cross_entropy(z, 0)
    loss.backward()
    assert loss.data == 800.0
    assert [v.grad for v in z] == [-1.0, 1.0], f"Expected p - onehot = [-1, 1], got {z}"


def test_cross_entropy_of_a_certain_target():
    z = [Value(0.0), Value(800.0)]
    loss = cross_entropy(z, 1)
    loss.backward()
    assert loss.data == 0.0
    assert [v.grad for v in z] == [0.0, 0.0]


def test_log_softmax_of_an_underflowing_entry():
    out = log_softmax([Value(0.0), Value(800.0)])
    assert [o.data for o in out] == [-800.0, 0.0]


@given(z=vectors(max_size=5), shift=floats(-1e5, 1e5))
def test_softmax_of_huge_logits(z, shift):
    """Logits far beyond exp's range give finite probabilities, and the gradient
    $\\partial p_i / \\partial z_j = p_i (\\delta_{ij} - p_j)$."""
    big = [a + shift for a in z]
    expected = ref_softmax(big)
    for i in range(len(big)):
        zs = [Value(a) for a in big]
        p = softmax(zs)
        assert math.isclose(math.fsum(q.data for q in p), 1.0, rel_tol=1e-12)
        assert p[i].data == pytest.approx(expected[i], rel=1e-12, abs=1e-15)
        p[i].backward()
        for j, v in enumerate(zs):
            want = expected[i] * ((i == j) - expected[j])
            assert v.grad == pytest.approx(want, rel=1e-9, abs=1e-15), f"dp{i}/dz{j}"


@pytest.mark.parametrize("logits", [[1000.0, 999.0, -1000.0], [-1e6, -1e6 + 1], [1e300, 0.0]])
def test_softmax_and_log_softmax_stay_finite(logits):
    p = [v.data for v in softmax([Value(a) for a in logits])]
    lp = [v.data for v in log_softmax([Value(a) for a in logits])]
    assert all(math.isfinite(a) for a in p + lp)
    assert math.fsum(p) == pytest.approx(1.0, rel=1e-12)


# ---- claim 7: Adam, and seeded initialisation ----


def quartic(x, y):
    """$f(x, y) = (x y - 1)^2 + x^2/2 + e^y$ on Values or floats."""
    return (x * y - 1) ** 2 + 0.5 * x * x + (y.exp() if isinstance(y, Value) else math.exp(y))


def quartic_grad(x, y):
    return [2 * (x * y - 1) * y + x, 2 * (x * y - 1) * x + math.exp(y)]


def hand_adam(start, steps, lr, beta1, beta2, eps, total_steps):
    """Bias-corrected Adam, written out: the parameters after each step."""
    p = list(start)
    m = [0.0] * len(p)
    v = [0.0] * len(p)
    trajectory = []
    for t in range(steps):
        g = quartic_grad(*p)
        lr_t = lr if total_steps is None else lr * (1 - t / total_steps)
        for i in range(len(p)):
            m[i] = beta1 * m[i] + (1 - beta1) * g[i]
            v[i] = beta2 * v[i] + (1 - beta2) * g[i] ** 2
            m_hat = m[i] / (1 - beta1 ** (t + 1))
            v_hat = v[i] / (1 - beta2 ** (t + 1))
            p[i] -= lr_t * m_hat / (math.sqrt(v_hat) + eps)
        trajectory.append(list(p))
    return trajectory


@pytest.mark.parametrize(
    "kwargs",
    [
        {"total_steps": 12},
        {"total_steps": None},
        {"lr": 0.05, "betas": (0.9, 0.999), "eps": 1e-6, "total_steps": 20},
    ],
    ids=["linear decay", "constant lr", "other hyperparameters"],
)
def test_adam_matches_a_hand_written_adam(kwargs):
    steps = 12
    lr = kwargs.get("lr", 0.01)
    beta1, beta2 = kwargs.get("betas", (0.85, 0.99))
    eps = kwargs.get("eps", 1e-8)
    expected = hand_adam([0.7, -0.4], steps, lr, beta1, beta2, eps, kwargs["total_steps"])
    params = [Value(0.7), Value(-0.4)]
    opt = Adam(params, **kwargs)
    for t in range(steps):
        if kwargs["total_steps"] is not None:
            assert opt.current_lr() == pytest.approx(lr * (1 - t / kwargs["total_steps"]))
        quartic(*params).backward()
        opt.step()
        assert [p.grad for p in params] == [0, 0], "step() clears the gradients"
        got = [p.data for p in params]
        assert got == pytest.approx(expected[t], rel=1e-12), f"step {t + 1}"
    assert expected[-1] != pytest.approx([0.7, -0.4], abs=1e-3), "the parameters moved"


def test_adam_defaults_are_microgpts():
    opt = Adam([Value(1.0)])
    assert (opt.lr, opt.beta1, opt.beta2, opt.eps) == (0.01, 0.85, 0.99, 1e-8)


def _data(mat):
    return [[p.data for p in row] for row in mat]


def test_matrix_from_a_seed_or_a_generator_is_reproducible():
    state = random.getstate()
    a = matrix(3, 5, 7)
    b = matrix(3, 5, random.Random(7))
    c = matrix(3, 5, 8)
    assert random.getstate() == state, "matrix() touched the global random state"
    assert _data(a) == _data(b) == _data(matrix(3, 5, 7))
    assert _data(a) != _data(c)
    assert [len(row) for row in a] == [5, 5, 5]


def test_a_shared_generator_advances():
    rng = random.Random(3)
    assert make_rng(rng) is rng
    assert _data(matrix(2, 2, rng)) != _data(matrix(2, 2, rng))


def test_matrix_draws_from_a_normal_of_the_given_std():
    xs = [p.data for row in matrix(100, 50, 0, std=0.08) for p in row]
    assert abs(statistics.fmean(xs)) < 0.005
    assert statistics.pstdev(xs) == pytest.approx(0.08, rel=0.05)
