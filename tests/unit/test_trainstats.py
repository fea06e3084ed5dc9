"""microgpt.trainstats: per-layer statistics read while a net trains, without changing the run."""

import math

import pytest

from microgpt import layernorm, linear
from microgpt.studies import Config, Variant, run
from microgpt.trainstats import (
    LayerStats,
    layer_rms,
    layer_stats,
    plot_layer_stats,
    stats_table,
    watched_run,
)

SMALL = Config(depth=6, width=6, d_in=4, n_classes=3, n=24, batch=4, steps=12, lr=0.01)


def plain(h, W):
    return [v.relu() for v in linear(layernorm(h), W)]


def residual(h, W):
    return [a + b for a, b in zip(h, plain(h, W))]


def test_reading_the_statistics_leaves_the_training_run_as_it_was():
    variant = Variant(residual, SMALL.depth)
    watched = watched_run(variant, seed=1, config=SMALL, at=(4, 12), probe_points=8)
    plain_run = run(variant, seed=1, config=SMALL)
    assert watched.history == plain_run.history  # the same numbers, step by step
    assert sorted(watched.rms) == sorted(watched.grad) == [0, 4, 12]
    for step in watched.rms:
        assert len(watched.rms[step]) == SMALL.depth + 1  # h_0 .. h_L
        assert len(watched.grad[step]) == SMALL.depth  # W_1 .. W_L
        assert all(math.isfinite(x) and x >= 0 for x in watched.rms[step] + watched.grad[step])
    assert watched.grad[0] != watched.grad[12]  # the weights moved


def test_layer_rms_is_the_root_mean_square_of_each_layer_output():
    from microgpt.deepnet import make_net, teacher_data

    X, Y = teacher_data(5, 4, 3, seed=0)
    net = make_net(3, 6, 4, 3, seed=0)
    rms = layer_rms(net, X, plain)
    h = [linear(x, net.w_in) for x in X]
    by_hand = [math.sqrt(sum(v.data ** 2 for hx in h for v in hx) / (5 * 6))]
    for params in net.layers:
        h = [plain(hx, **params) for hx in h]
        by_hand.append(math.sqrt(sum(v.data ** 2 for hx in h for v in hx) / (5 * 6)))
    assert rms == pytest.approx(by_hand, rel=1e-12)
    # a residual stack keeps what the plain one loses: h_L's RMS does not collapse
    assert layer_rms(net, X, residual)[-1] > layer_rms(net, X, plain)[-1] * 0.999
    assert len(layer_stats(net, X, Y, plain)[1]) == 3


def test_a_net_with_its_own_forward_is_refused():
    variant = Variant(plain, 3, forward=lambda net, x, layer: [])
    with pytest.raises(ValueError, match="own forward"):
        watched_run(variant, seed=0, config=SMALL, at=(2,))


def test_the_plot_has_a_row_per_net_and_a_line_per_step():
    import matplotlib

    matplotlib.use("Agg")
    stats = LayerStats(rms={0: [1.0, 0.5, 0.25], 5: [1.0, 0.9, 0.8]},
                       grad={0: [0.1, 0.01], 5: [0.2, 0.1]})
    fig = plot_layer_stats({"plain": stats, "residual": stats})
    axes = fig.axes
    assert len(axes) == 4 and all(len(ax.lines) == 2 for ax in axes)
    assert list(axes[1].lines[0].get_xdata()) == [1, 2]  # gradients of W_1, W_2


def test_the_table_gives_first_and_last_gradient_and_the_rms_range_per_step():
    plain_stats = LayerStats(rms={0: [1.0, 0.5, 0.25], 5: [1.0, 0.9, 0.8]},
                             grad={0: [0.4, 0.01], 5: [0.000123, 0.2]})
    residual_stats = LayerStats(rms={0: [1.0, 1.5, 2.5], 5: [1.0, 3.0, 7.0]},
                                grad={0: [0.3, 0.1], 5: [0.25, 0.5]})
    text = stats_table({"plain 2": plain_stats, "residual 2": residual_stats})
    lines = text.splitlines()
    assert len(lines) == 1 + 4  # a heading, then one line per net and step
    assert lines[0].split()[:2] == ["net", "step"]
    row = lines[2].split()  # plain 2, step 5
    assert row == ["plain", "2", "5", "0.000123", "0.2", "0.000615", "0.8", "1"]
    row = lines[3].split()  # residual 2, step 0
    assert row == ["residual", "2", "0", "0.3", "0.1", "3", "1", "2.5"]
    # only the steps asked for
    only = stats_table({"plain 2": plain_stats}, steps=(5,)).splitlines()
    assert len(only) == 2 and only[1].split()[2] == "5"


def test_same_scale_gives_every_row_the_same_limits():
    import matplotlib

    matplotlib.use("Agg")
    small = LayerStats(rms={0: [1.0, 0.5, 0.25]}, grad={0: [1e-20, 1e-22]})
    large = LayerStats(rms={0: [1.0, 4.0, 9.0]}, grad={0: [0.5, 0.1]})
    runs = {"plain": small, "residual": large}
    own = plot_layer_stats(runs).axes
    assert own[1].get_ylim() != own[3].get_ylim()  # each row scaled to its own data
    shared = plot_layer_stats(runs, same_scale=True).axes
    for col in (0, 1):
        top, bottom = shared[col].get_ylim(), shared[2 + col].get_ylim()
        assert top == bottom
    low, high = shared[1].get_ylim()
    assert low <= 1e-22 and high >= 0.5  # every value of both rows is inside
    low, high = shared[0].get_ylim()
    assert low <= 0.25 and high >= 9.0
