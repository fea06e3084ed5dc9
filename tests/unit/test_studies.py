"""microgpt.studies: the depth studies' sizes, which one a run takes, and the runs."""

import pytest

from microgpt import deepnet, layernorm, linear
from microgpt.deepnet import label_entropy, mean_loss, teacher_data
from microgpt.studies import (
    GRADING,
    INTERACTIVE,
    Config,
    Variant,
    data_seed,
    grading,
    probe_data,
    run,
    smooth,
    study,
    study_config,
)


def plain_layer(h, W):
    return [v.relu() for v in linear(layernorm(h), W)]


def test_study_config_follows_nbgrader_execution(monkeypatch):
    """The decision is the study module's (as torchtrack.studies.grading), not the net's."""
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert not grading() and study_config() is INTERACTIVE
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert grading() and study_config() is GRADING


def test_the_grading_study_is_smaller():
    for field in ("depth", "n", "steps", "probe_points"):
        assert getattr(GRADING, field) <= getattr(INTERACTIVE, field)
    assert GRADING.budgets[-1] <= INTERACTIVE.budgets[-1]
    for cfg in (GRADING, INTERACTIVE):  # budgets are step counts read in one run, in order
        assert list(cfg.budgets) == sorted(set(cfg.budgets)) and cfg.budgets[0] > 0
    assert len(GRADING.seeds) <= len(INTERACTIVE.seeds) and len(INTERACTIVE.seeds) >= 3


def test_run_reports_the_final_loss_on_all_points():
    cfg = Config(n=24, steps=5, batch=4)
    r = run(Variant(plain_layer, 2), seed=1, config=cfg)
    X, Y = teacher_data(cfg.n, seed=data_seed(1))
    assert r.X == X and len(r.history) == 5
    assert r.loss == pytest.approx(mean_loss(r.net, X, Y, plain_layer).data, rel=1e-12)
    assert r.entropy == pytest.approx(label_entropy(Y))


def test_checkpoints_read_the_loss_of_a_shorter_run_without_changing_training():
    cfg = Config(n=24, steps=6, batch=4)
    r = run(Variant(plain_layer, 2), seed=3, config=cfg, checkpoints=(2, 6))
    plain = run(Variant(plain_layer, 2), seed=3, config=cfg)
    assert r.history == plain.history and r.loss == plain.loss
    assert sorted(r.loss_at) == [2, 6] and r.loss_at[6] == r.loss
    # the learning rate is constant, so the first 2 steps are a 2-step run's
    short = run(Variant(plain_layer, 2, steps=2), seed=3, config=cfg)
    assert r.loss_at[2] == short.loss and r.loss_at[2] != r.loss
    assert plain.loss_at == {}


def test_study_runs_every_variant_for_every_seed():
    cfg = Config(n=16, steps=3, batch=4, seeds=(0, 1))
    variants = {"one": Variant(plain_layer, 1), "two": Variant(plain_layer, 2, steps=4)}
    results = study(variants, cfg, progress=False)
    assert [r.seed for r in results["one"]] == [0, 1]
    assert [len(r.history) for r in results["two"]] == [4, 4]
    again = study(variants, cfg, progress=False)
    assert [r.loss for r in again["two"]] == [r.loss for r in results["two"]]


def test_probe_data_is_the_start_of_the_study_task():
    X, Y = probe_data(INTERACTIVE, 2)
    Xs, Ys = teacher_data(INTERACTIVE.n, seed=data_seed(2))
    assert len(X) == INTERACTIVE.probe_points
    assert X == Xs[: len(X)] and Y == Ys[: len(Y)]


def test_smooth_is_a_running_mean():
    assert smooth([1.0, 3.0, 5.0, 7.0], k=2) == [1.0, 2.0, 4.0, 6.0]
    assert smooth([], k=3) == []


def test_the_harness_lives_in_studies_only():
    """deepnet no longer hands out the study harness (the lazy alias the notebooks of
    assignments 2 to 4 used is gone), and no instructor notebook asks it for a name it
    does not define: they import the harness from microgpt.studies."""
    import ast
    from pathlib import Path

    import nbformat

    from microgpt import studies

    assert not [name for name in studies.__all__ if hasattr(deepnet, name)]
    asked = set()
    for path in sorted((Path(__file__).resolve().parents[2] / "source").glob("*/*.ipynb")):
        for cell in nbformat.read(str(path), as_version=4).cells:
            if cell.cell_type != "code":
                continue
            for node in ast.walk(ast.parse(cell.source)):
                if isinstance(node, ast.ImportFrom) and node.module == "microgpt.deepnet":
                    asked |= {(path.name, alias.name) for alias in node.names}
    assert asked, "no notebook imports microgpt.deepnet: the check proves nothing"
    assert [(nb, name) for nb, name in sorted(asked) if not hasattr(deepnet, name)] == []


def test_deepnet_does_not_decide_the_study_size():
    import inspect

    assert "NBGRADER" not in inspect.getsource(deepnet)


# ---------------------------------------------------------------- issue 13's configurations


def test_the_new_studies_follow_nbgrader_execution(monkeypatch):
    from microgpt.studies import (
        DEPTH_PAYS,
        DEPTH_PAYS_GRADING,
        STRESS,
        STRESS_GRADING,
        depth_pays_config,
        stress_config,
    )

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert depth_pays_config() is DEPTH_PAYS and stress_config() is STRESS
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert depth_pays_config() is DEPTH_PAYS_GRADING and stress_config() is STRESS_GRADING
    # the interactive sizes are the committed runs' (results/pure_python/SEARCH.md)
    assert (DEPTH_PAYS.width, DEPTH_PAYS.lr, DEPTH_PAYS.steps) == (12, 0.002, 600)
    assert (STRESS.n_layer, STRESS.lr, STRESS.betas, STRESS.steps) == (4, 0.03, (0.9, 0.95), 200)
    assert DEPTH_PAYS_GRADING.steps < DEPTH_PAYS.steps and STRESS_GRADING.steps < STRESS.steps


def test_without_layer_leaves_the_net_alone():
    from microgpt.deepnet import make_net
    from microgpt.studies import without_layer

    net = make_net(4, width=5, seed=3)
    short = without_layer(net, 1)
    assert net.depth == 4 and short.depth == 3
    assert short.layers == [net.layers[0], net.layers[2], net.layers[3]]
    assert short.w_in is net.w_in and short.w_out is net.w_out


def test_the_stress_yardsticks_are_the_committed_runs():
    """The split and the two reference losses of results/pure_python/lr_stress.json."""
    from microgpt import CharTokenizer, census_names
    from microgpt.studies import position_loss, stress_split, unigram_loss

    names = census_names()
    tokenizer = CharTokenizer(names)
    train_names, val_names = stress_split(names)
    assert len(train_names) == 4647 and len(val_names) == 516
    val = val_names[:100]
    assert unigram_loss(train_names, val, tokenizer) == pytest.approx(2.8023989535701666, rel=1e-12)
    assert position_loss(train_names, val, tokenizer) == pytest.approx(2.515542758151067, rel=1e-12)



def _broken_layer(h, W):
    raise RuntimeError("not written yet")  # as an earlier answer not yet released raises


def stopped_red(bar):
    """Closed, and red at the step it stopped at (tqdm's sign that the loop failed)."""
    return bar.disable and bar.n == 0 and bar.container.children[1].bar_style == "danger"


def test_a_study_stopped_by_an_error_leaves_its_bar_red_not_running(notebook_bars):
    cfg = Config(n=16, steps=3, batch=4, seeds=(0,))
    with pytest.raises(RuntimeError, match="not written yet"):
        study({"broken": Variant(_broken_layer, 1)}, cfg, progress=True)
    assert len(notebook_bars) == 1 and stopped_red(notebook_bars[0])


def test_train_stopped_by_an_error_leaves_its_own_bar_red_not_running(notebook_bars):
    X, Y = teacher_data(8, seed=0)
    with pytest.raises(RuntimeError, match="not written yet"):
        deepnet.train(deepnet.make_net(1, width=4, seed=0), X, Y, _broken_layer, steps=3,
                      batch=2, progress=True)
    assert len(notebook_bars) == 1 and stopped_red(notebook_bars[0])
