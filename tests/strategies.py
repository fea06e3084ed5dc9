"""Bounded hypothesis strategies and a central-difference gradient check, shared by the tests.

Every strategy stays inside the domain where its operation is smooth and well scaled, so
a float64 central difference is accurate to far better than the tolerances used here: a
wrong local gradient shows up as a large relative error, never as noise.

Set HYPOTHESIS_PROFILE=thorough for a longer search than the default `microgpt` profile.
"""

import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from microgpt import Value

settings.register_profile(
    "microgpt",
    deadline=None,
    max_examples=30,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("thorough", parent=settings.get_profile("microgpt"), max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "microgpt"))


def floats(lo, hi):
    """Finite floats in $[lo, hi]$."""
    return st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)


def away_from_zero(lo, hi):
    """Floats with $lo \\le |x| \\le hi$, of either sign."""
    return st.one_of(floats(-hi, -lo), floats(lo, hi))


small_floats = floats(-10.0, 10.0)
positive_floats = floats(0.05, 100.0)  # log's domain, kept away from 0
divisors = away_from_zero(0.1, 10.0)  # denominators: 1/b and 1/b^2 stay moderate
relu_inputs = away_from_zero(1e-2, 10.0)  # relu has no derivative at 0
exp_inputs = floats(-20.0, 20.0)
squashing_inputs = floats(-20.0, 20.0)  # tanh and sigmoid
pow_bases = floats(0.2, 5.0)  # any real exponent is defined on a positive base
pow_exponents = st.one_of(st.sampled_from([-2, -1, 0, 1, 2, 3, 0.5, -0.5]), floats(-3.0, 3.0))
int_exponents = st.integers(min_value=1, max_value=4)  # defined on a base of any sign


def vectors(elements=small_floats, min_size=1, max_size=6):
    """Lists of floats, as inputs to the vector functions (dot, norms, softmax)."""
    return st.lists(elements, min_size=min_size, max_size=max_size)


@st.composite
def vector_pairs(draw, elements=small_floats, min_size=1, max_size=6):
    """Two float lists of the same length (the two sides of a dot product)."""
    n = draw(st.integers(min_value=min_size, max_value=max_size))
    xs = draw(st.lists(elements, min_size=n, max_size=n))
    ys = draw(st.lists(elements, min_size=n, max_size=n))
    return xs, ys


@st.composite
def spread_vectors(draw, min_size=2, max_size=6):
    """Vectors whose entries are not all nearly equal: layernorm divides by their spread."""
    xs = draw(vectors(min_size=min_size, max_size=max_size))
    i = draw(st.integers(min_value=0, max_value=len(xs) - 1))
    xs[i] = xs[i - 1] + draw(away_from_zero(0.5, 5.0))
    return xs


# ---- the gradient oracle ----

STEP = 1e-6  # relative step of the central difference
RTOL = 1e-6  # tolerated relative error of a gradient or value
ATOL = 1e-7  # tolerated absolute error, scaled by the size of the function's value


def central_difference(f, xs, i):
    """$\\partial f / \\partial x_i \\approx (f(x + h e_i) - f(x - h e_i)) / 2h$ on plain floats."""
    h = STEP * max(1.0, abs(xs[i]))
    up, down = list(xs), list(xs)
    up[i] += h
    down[i] -= h
    return (f(up) - f(down)) / (up[i] - down[i])


def assert_close(actual, expected, scale=1.0, what="value"):
    """`actual` within RTOL of `expected`, plus ATOL times `scale` (the size of f)."""
    tol = RTOL * max(1.0, abs(actual), abs(expected)) + ATOL * max(1.0, abs(scale))
    assert math.isfinite(actual) and abs(actual - expected) <= tol, (
        f"{what}: expected {expected!r}, got {actual!r} (difference {actual - expected:.3g}, "
        f"tolerance {tol:.3g})"
    )


def derivative_check(fn, reference, xs, name="f"):
    """Check the value and every input gradient of `fn` against `reference` at `xs`.

    `fn` takes a list of `Value`s and returns one `Value` or a list of them; `reference`
    takes a list of floats and returns the float (or list of floats) that `fn` should
    compute. Each output is checked on its own, with a fresh graph: its value against
    `reference`, and the gradient `backward()` gives every input against a central
    difference of `reference`.
    """
    xs = [float(x) for x in xs]
    expected = reference(xs)
    n_out = len(expected) if isinstance(expected, list) else None
    for k in range(n_out or 1):
        leaves = [Value(x) for x in xs]
        out = fn(leaves)
        if n_out is None:
            ref_k = reference
        else:
            assert isinstance(out, list) and len(out) == n_out, (
                f"{name}: expected {n_out} outputs, got {out!r}"
            )
            out = out[k]

            def ref_k(ys, k=k):
                return reference(ys)[k]

        assert isinstance(out, Value), f"{name}: expected a Value, got {out!r}"
        value = ref_k(xs)
        where = f"{name}{'' if n_out is None else f'[{k}]'} at {xs}"
        assert_close(out.data, value, what=f"value of {where}")
        out.backward()
        for i, leaf in enumerate(leaves):
            assert_close(
                leaf.grad,
                central_difference(ref_k, xs, i),
                scale=value,
                what=f"d/dx{i} of {where}",
            )
