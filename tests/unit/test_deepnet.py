"""microgpt.deepnet: the teacher task, the nets, training and gradient norms."""

import gc
import math
import random

import pytest

from microgpt import Value, cross_entropy, layernorm, linear
from microgpt.deepnet import (
    Net,
    gradient_norms,
    label_entropy,
    layer_std,
    logits,
    make_net,
    mean_loss,
    plain_params,
    teacher_data,
    train,
)
from microgpt.nn import matrix
from microgpt.studies import INTERACTIVE, data_seed


def plain_layer(h, W):
    return [v.relu() for v in linear(layernorm(h), W)]


def gated_params(width, rng):
    """A layer dict holding a matrix and a vector, like a highway layer's."""
    return {"W": matrix(width, width, rng, layer_std(width)),
            "b": [Value(-2.0) for _ in range(width)]}


def gated_layer(h, W, b):
    return [v.relu() * bi.sigmoid() + hi for v, bi, hi in zip(linear(h, W), b, h)]


# ---- floats, from the definitions ----


def f_layernorm(x, eps=1e-5):
    mu = math.fsum(x) / len(x)
    var = math.fsum((a - mu) ** 2 for a in x) / len(x)
    return [(a - mu) / math.sqrt(var + eps) for a in x]


def f_times(w, x):
    return [math.fsum(a * b for a, b in zip(row, x)) for row in w]


def f_logits(net, x):
    """The plain net's logits on floats."""
    h = f_times([[p.data for p in r] for r in net.w_in], x)
    for params in net.layers:
        W = [[p.data for p in r] for r in params["W"]]
        h = [max(0.0, a) for a in f_times(W, f_layernorm(h))]
    return f_times([[p.data for p in r] for r in net.w_out], f_layernorm(h))


def f_loss(net, X, Y):
    total = []
    for x, y in zip(X, Y):
        z = f_logits(net, x)
        m = max(z)
        total.append(m + math.log(math.fsum(math.exp(a - m) for a in z)) - z[y])
    return math.fsum(total) / len(total)


# ---- the task ----


def test_teacher_data_shapes_labels_and_determinism():
    X, Y = teacher_data(50, d_in=5, n_classes=3, seed=7)
    assert len(X) == len(Y) == 50
    assert all(len(x) == 5 for x in X)
    assert set(Y) <= {0, 1, 2}
    assert (X, Y) == teacher_data(50, d_in=5, n_classes=3, seed=7)
    assert teacher_data(50, d_in=5, n_classes=3, seed=8)[0] != X


def test_teacher_labels_come_from_the_tanh_teacher():
    """Rebuild the teacher from the same seed and check every label is its argmax."""
    n, d_in, n_classes, hidden, seed = 40, 4, 3, 16, 3
    X, Y = teacher_data(n, d_in, n_classes, seed, hidden)
    rng = random.Random(seed)

    def draw(n_out, n_in):
        return [[rng.gauss(0, 1) / math.sqrt(n_in) for _ in range(n_in)] for _ in range(n_out)]

    w1, w2, w3 = draw(hidden, d_in), draw(hidden, hidden), draw(n_classes, hidden)
    for x, y in zip(X, Y):
        z = f_times(w3, [math.tanh(2 * a) for a in f_times(w2, [math.tanh(2 * a) for a in
                                                                 f_times(w1, x)])])
        assert y == max(range(n_classes), key=z.__getitem__)


def test_teacher_data_of_a_study_uses_every_class():
    _, Y = teacher_data(INTERACTIVE.n, seed=data_seed(0))
    assert set(Y) == {0, 1, 2, 3}


def test_label_entropy():
    assert label_entropy([0, 1, 2, 3]) == pytest.approx(math.log(4))
    assert label_entropy([2, 2, 2]) == 0
    assert label_entropy([0, 0, 1]) == pytest.approx(-(2 / 3 * math.log(2 / 3)
                                                       + 1 / 3 * math.log(1 / 3)))


def test_library_code_leaves_the_global_random_state_alone():
    state = random.getstate()
    teacher_data(10, seed=1)
    net = make_net(3, width=4, seed=2)
    X, Y = teacher_data(8, seed=3)
    train(net, X, Y, plain_layer, steps=3, batch=4, seed=4)
    assert random.getstate() == state


# ---- the net ----


def test_layer_std_is_pytorchs_linear_default():
    assert layer_std(12) == pytest.approx(1 / 6)


def test_make_net_shapes_and_draw_order():
    net = make_net(3, width=5, d_in=4, n_classes=2, seed=11)
    assert isinstance(net, Net) and net.depth == 3
    assert len(net.w_in) == 5 and all(len(r) == 4 for r in net.w_in)
    assert len(net.w_out) == 2 and all(len(r) == 5 for r in net.w_out)
    assert all(len(p["W"]) == 5 and len(p["W"][0]) == 5 for p in net.layers)
    rng = random.Random(11)  # W_in, W_out, then the layers, in order
    w_in = matrix(5, 4, rng, 1 / math.sqrt(4))
    w_out = matrix(2, 5, rng, 1 / math.sqrt(5))
    first = plain_params(5, rng)["W"]
    assert [p.data for r in net.w_in for p in r] == [p.data for r in w_in for p in r]
    assert [p.data for r in net.w_out for p in r] == [p.data for r in w_out for p in r]
    assert [p.data for r in net.layers[0]["W"] for p in r] == [p.data for r in first for p in r]


def test_parameters_lists_matrices_and_vectors_once_each_in_order():
    net = make_net(2, width=3, d_in=2, n_classes=2, seed=0, layer_params=gated_params)
    params = net.parameters()
    assert len(params) == 3 * 2 + 2 * (9 + 3) + 2 * 3
    assert len({id(p) for p in params}) == len(params)
    assert params[0] is net.w_in[0][0] and params[-1] is net.w_out[-1][-1]
    assert params[6] is net.layers[0]["W"][0][0]


def test_logits_match_the_net_on_floats():
    net = make_net(4, width=5, d_in=3, n_classes=3, seed=5)
    x = [0.4, -1.1, 2.0]
    z = logits(net, x, plain_layer)
    assert [v.data for v in z] == pytest.approx(f_logits(net, x), rel=1e-12, abs=1e-12)


def test_logits_call_each_layer_with_its_own_keyword_arguments():
    net = make_net(3, width=3, d_in=2, n_classes=2, seed=6, layer_params=gated_params)
    seen = []

    def spy(h, W, b):
        seen.append((W, b))
        return gated_layer(h, W, b)

    logits(net, [1.0, -1.0], spy)
    assert [(p["W"], p["b"]) for p in net.layers] == seen


def test_mean_loss_value_and_gradient():
    net = make_net(2, width=4, d_in=3, n_classes=3, seed=8)
    X, Y = teacher_data(5, d_in=3, n_classes=3, seed=9)
    loss = mean_loss(net, X, Y, plain_layer)
    assert loss.data == pytest.approx(f_loss(net, X, Y), rel=1e-12)
    expected = sum(cross_entropy(logits(net, x, plain_layer), y).data for x, y in zip(X, Y)) / 5
    assert loss.data == pytest.approx(expected, rel=1e-12)
    loss.backward()
    p, h = net.layers[1]["W"][2][1], 1e-6
    grad, keep = p.grad, p.data
    p.data = keep + h
    up = f_loss(net, X, Y)
    p.data = keep - h
    down = f_loss(net, X, Y)
    p.data = keep
    assert grad == pytest.approx((up - down) / (2 * h), rel=1e-5, abs=1e-9)


# ---- training ----


def test_train_is_deterministic_and_lowers_the_loss():
    X, Y = teacher_data(32, seed=1)
    histories, losses = [], []
    for _ in range(2):
        net = make_net(2, width=8, seed=2)
        before = mean_loss(net, X, Y, plain_layer).data
        histories.append(train(net, X, Y, plain_layer, steps=60, lr=0.02, batch=8, seed=3))
        losses.append(mean_loss(net, X, Y, plain_layer).data)
    assert histories[0] == histories[1] and len(histories[0]) == 60
    assert losses[0] == losses[1] < before - 0.2


def test_train_restores_the_garbage_collector_and_clears_gradients():
    assert gc.isenabled()
    net = make_net(1, width=4, seed=0)
    X, Y = teacher_data(8, seed=0)
    train(net, X, Y, plain_layer, steps=2, batch=4)
    assert gc.isenabled()
    assert all(p.grad == 0 for p in net.parameters())


def test_train_advances_a_shared_progress_bar():
    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    X, Y = teacher_data(8, seed=0)
    train(make_net(1, width=4, seed=0), X, Y, plain_layer, steps=5, batch=2, progress=bar)
    assert bar.n == 5


def test_train_with_its_own_bar_writes_nothing_to_stdout(capsys):
    X, Y = teacher_data(8, seed=0)
    train(make_net(1, width=4, seed=0), X, Y, plain_layer, steps=3, batch=2, progress=True)
    assert capsys.readouterr().out == ""


def test_train_takes_another_forward():
    calls = []

    def forward(net, x, layer):
        calls.append(1)
        return logits(net, x, layer)

    X, Y = teacher_data(8, seed=0)
    train(make_net(1, width=4, seed=0), X, Y, plain_layer, steps=2, batch=3, forward=forward)
    assert len(calls) == 6


# ---- gradient norms ----


def test_gradient_norms_against_central_differences_and_left_at_zero():
    net = make_net(3, width=3, d_in=2, n_classes=2, seed=4)
    X, Y = teacher_data(4, d_in=2, n_classes=2, seed=5)
    norms = gradient_norms(net, X, Y, plain_layer)
    assert all(p.grad == 0 for p in net.parameters())
    h = 1e-6
    for params, norm in zip(net.layers, norms):
        squares = []
        for row in params["W"]:
            for p in row:
                keep = p.data
                p.data = keep + h
                up = f_loss(net, X, Y)
                p.data = keep - h
                down = f_loss(net, X, Y)
                p.data = keep
                squares.append(((up - down) / (2 * h)) ** 2)
        assert norm == pytest.approx(math.sqrt(math.fsum(squares)), rel=1e-5, abs=1e-10)
    assert gradient_norms(net, X, Y, plain_layer) == norms  # nothing carried over


def test_gradient_norms_of_another_key():
    net = make_net(2, width=3, d_in=2, n_classes=2, seed=1, layer_params=gated_params)
    X, Y = teacher_data(3, d_in=2, n_classes=2, seed=2)
    by_w = gradient_norms(net, X, Y, gated_layer)
    by_b = gradient_norms(net, X, Y, gated_layer, key="b")
    assert len(by_w) == len(by_b) == 2 and by_w != by_b


# ---- configurations and studies ----
