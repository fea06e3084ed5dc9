"""experiments/: each command on a tiny configuration, its JSON, its provenance and its table."""

import json
import math

import pytest

from experiments import depth_search, lr_stress, numpy_mirror
from experiments.common import coarse_curve, dumps
from microgpt.deepnet import make_net, mean_loss, teacher_data, train

PROVENANCE_KEYS = {"command", "commit", "uncommitted_changes", "versions", "threads", "cpu",
                   "cores", "load_average", "date", "wall_seconds"}


def run_command(main, tmp_path, args):
    out = tmp_path / "result.json"
    main([*args, "--out", str(out), "--quiet"])
    result = json.loads(out.read_text(encoding="utf-8"))
    table = out.with_suffix(".md").read_text(encoding="utf-8")
    return result, table


def check_provenance(result, module, args):
    prov = result["provenance"]
    assert PROVENANCE_KEYS <= set(prov), f"missing: {PROVENANCE_KEYS - set(prov)}"
    assert prov["command"].startswith(f"python -m experiments.{module} ")
    assert " ".join(args) in prov["command"]
    assert prov["wall_seconds"] >= 0


# ---- depth_search and its numpy mirror ----

DEPTH_ARGS = ["--width", "6", "--d-in", "5", "--classes", "3", "--n", "24", "--batch", "4",
              "--steps", "6", "--depths", "1", "2", "4", "--seeds", "0", "1"]


def test_depth_search_writes_json_with_provenance_and_a_matching_table(tmp_path):
    result, table = run_command(depth_search.main, tmp_path, DEPTH_ARGS)
    check_provenance(result, "depth_search", DEPTH_ARGS)
    assert result["seeds"] == [0, 1]
    assert result["config"]["width"] == 6 and result["config"]["depths"] == [1, 2, 4]
    assert table == depth_search.render(result)
    for p in result["per_seed"]:
        assert set(p["runs"]) == {"plain 1", "plain 2", "plain 4",
                                  "residual 1", "residual 2", "residual 4"}
        row = next(line for line in table.splitlines() if line.startswith(f"| {p['seed']} |"))
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == f"{p['entropy']:.3f}"
        assert cells[2:8] == [f"{r['loss']:.3f}" for r in p["runs"].values()]
        assert p["effects"] == depth_search.effects(p["runs"], p["entropy"],
                                                    depth_search.DepthConfig(depths=(1, 2, 4)))
    # the run agrees with the deepnet pieces it is made of
    config = depth_search.DepthConfig(width=6, d_in=5, n_classes=3, n=24, batch=4, steps=6,
                                      depths=(1, 2, 4))
    X, Y = depth_search.task(config, 1)
    from autograder.answers.reference import residual_layer
    net = make_net(4, 6, 5, 3, 1)
    train(net, X, Y, residual_layer, 6, 0.01, 4, 1)
    assert result["per_seed"][1]["runs"]["residual 4"]["loss"] == mean_loss(
        net, X, Y, residual_layer).data


def test_the_default_teacher_is_deepnets():
    assert depth_search.teacher(40, seed=5) == teacher_data(40, seed=5)
    X, Y = depth_search.teacher(30, d_in=4, n_classes=5, seed=2, hidden=7, depth=4, gain=1.5)
    assert len(X) == 30 and len(X[0]) == 4 and set(Y) <= set(range(5))


def test_effects_judge_each_seed_by_the_stated_criteria():
    config = depth_search.DepthConfig(depths=(3, 10, 30))

    def runs(plain, residual):
        out = {f"plain {d}": {"loss": v} for d, v in zip((3, 10, 30), plain)}
        out.update({f"residual {d}": {"loss": v} for d, v in zip((3, 10, 30), residual)})
        return out

    entropy = 2.0
    shown = depth_search.effects(runs((0.4, 0.3, 1.9), (0.6, 0.07, 0.09)), entropy, config)
    assert shown == {"a": True, "b": True}
    # plain 10 worse than plain 3; residual 30 not far enough below residual 3
    missed = depth_search.effects(runs((0.3, 0.4, 1.9), (0.6, 0.07, 0.31)), entropy, config)
    assert missed == {"a": False, "b": False}
    # the deepest plain net must fail: at least FAIL_FRACTION of H(y)
    trained = depth_search.effects(runs((0.4, 0.3, 0.5), (0.6, 0.07, 0.09)), entropy, config)
    assert trained["a"] is False


def test_numpy_mirror_matches_the_value_engine_and_writes_the_same_result(tmp_path):
    from autograder.answers.reference import plain_layer, residual_layer

    X, Y = teacher_data(40, 8, 4, 1003)
    for residual, layer in ((False, plain_layer), (True, residual_layer)):
        net = make_net(5, 8, 8, 4, 3)
        history = train(net, X, Y, layer, 12, 0.01, 8, 3)
        params = numpy_mirror.init(5, 8, 8, 4, 3)
        mirrored = numpy_mirror.train(params, X, Y, residual, 12, 0.01, 8, 3)
        assert max(abs(a - b) for a, b in zip(history, mirrored)) < 1e-10
        assert math.isclose(numpy_mirror.full_loss(params, X, Y, residual),
                            mean_loss(net, X, Y, layer).data, rel_tol=1e-10)
    args = [a for a in DEPTH_ARGS]
    result, table = run_command(numpy_mirror.main, tmp_path, args)
    check_provenance(result, "numpy_mirror", args)
    assert result["engine"] != "Value" and "numpy mirror" in table.splitlines()[0]
    assert table == depth_search.render(result)


@pytest.mark.parametrize("bias,head_norm,residual", [(True, False, False), (True, True, True),
                                                    (False, False, True)])
def test_numpy_variants_gradients_match_central_differences(bias, head_norm, residual):
    import numpy as np

    X, Y = teacher_data(6, 4, 3, 1004)
    X, Y = np.asarray(X), np.asarray(Y)
    params = numpy_mirror.init(3, 5, 4, 3, 2, bias=bias)
    _, grads = numpy_mirror.forward_backward(params, X, Y, residual, head_norm)
    flat, flat_grads = numpy_mirror._flatten(params), numpy_mirror._flatten(grads)
    assert len(flat) == (10 if bias else 5)
    for p, g in zip(flat, flat_grads):
        for i in range(p.size):
            old = p.flat[i]
            p.flat[i] = old + 1e-6
            up = numpy_mirror.full_loss(params, X, Y, residual, head_norm)
            p.flat[i] = old - 1e-6
            down = numpy_mirror.full_loss(params, X, Y, residual, head_norm)
            p.flat[i] = old
            assert abs((up - down) / 2e-6 - g.flat[i]) < 1e-6


def test_numpy_variant_flags_are_recorded(tmp_path):
    args = [*DEPTH_ARGS[:-3], "--seeds", "0", "--bias", "--no-head-norm"]
    result, table = run_command(numpy_mirror.main, tmp_path, args)
    assert "biases, no LayerNorm before the head" in result["engine"]
    assert "--bias --no-head-norm" in result["provenance"]["command"]
    assert numpy_mirror.VARIANT == {"bias": False, "head_norm": True}  # left as found


# ---- lr_stress ----

LR_ARGS = ["--n-layer", "2", "--n-embd", "8", "--n-head", "2", "--steps", "4", "--batch", "2",
           "--val-seqs", "6", "--window", "2", "--settings", "0.01:0.5", "0.05:0",
           "--seeds", "0", "1"]


def test_lr_stress_writes_json_with_provenance_and_a_matching_table(tmp_path):
    result, table = run_command(lr_stress.main, tmp_path, LR_ARGS)
    check_provenance(result, "lr_stress", LR_ARGS)
    assert table == lr_stress.render(result)
    assert result["config"]["n_layer"] == 2 and result["config"]["settings"] == [[0.01, 0.5],
                                                                               [0.05, 0.0]]
    assert f"unigram loss {result['unigram_loss']:.3f}" in table
    assert f"position-only loss {result['position_loss']:.3f}" in table
    for p in result["per_seed"]:
        assert list(p["runs"]) == ["post, lr 0.01, warmup 50%", "pre, lr 0.01, warmup 50%",
                                   "post, lr 0.05, no warmup", "pre, lr 0.05, no warmup"]
        for n, r in p["runs"].items():
            row = f"| {p['seed']} | {n} | {r['val_loss']:.3f} | {r['train_loss']:.3f} |"
            assert row in table
        stress = {"post": p["runs"]["post, lr 0.05, no warmup"],
                  "pre": p["runs"]["pre, lr 0.05, no warmup"]}
        assert p["c"] == lr_stress.verdict(stress, result["position_loss"])


def test_lr_schedule_warms_up_then_decays():
    lrs = [lr_stress.lr_at(s, 10, 1.0, 0.2) for s in range(10)]
    assert lrs[:2] == [0.5, 1.0]  # two warmup steps
    assert lrs[2] == 1.0 and lrs[-1] == pytest.approx(1 / 8)  # linear towards 0
    assert [lr_stress.lr_at(s, 4, 0.1, 0.0, "constant") for s in range(4)] == [0.1] * 4
    cosine = [lr_stress.lr_at(s, 11, 1.0, 0.0, "cosine", 0.1) for s in range(11)]
    assert cosine[0] == 1.0 and all(a > b > 0.1 for a, b in zip(cosine, cosine[1:]))
    assert cosine[-1] == pytest.approx(0.1 + 0.45 * (1 + math.cos(math.pi * 10 / 11)))


def test_the_reference_losses_of_the_names():
    config = lr_stress.StressConfig()
    train_seqs, val, vocab = lr_stress.load_data(config)
    assert vocab == 27 and len(train_seqs) + len(val) == 5163
    unigram = lr_stress.unigram_loss(train_seqs, val[:100], 16)
    position = lr_stress.position_loss(train_seqs, val[:100], 16, vocab)
    assert position < unigram < math.log(27)


def test_verdict_needs_collapse_and_training():
    def run(v):
        return {"val_loss": v}

    assert lr_stress.verdict({"post": run(2.8), "pre": run(2.4)}, 2.5) is True
    assert lr_stress.verdict({"post": run(2.45), "pre": run(2.4)}, 2.5) is False
    assert lr_stress.verdict({"post": run(2.8), "pre": run(2.6)}, 2.5) is False
    assert lr_stress.verdict({"pre": run(2.4)}, 2.5) is None


# ---- shared pieces ----


def test_coarse_curve_and_compact_json():
    assert coarse_curve([1.0, 3.0, 5.0, 7.0], points=2) == [2.0, 6.0]
    assert coarse_curve([1.0], points=10) == [1.0]
    text = dumps({"a": [1, 2.5, -3e-05], "b": {"c": "x"}})
    assert '"a": [1, 2.5, -3e-05]' in text
    assert json.loads(text) == {"a": [1, 2.5, -3e-05], "b": {"c": "x"}}


def test_lr_stress_with_one_sequence_a_step_is_microgpt_train():
    """With batch 1, no warmup, clipping or weight decay, a run is `microgpt.train` on the
    training names, so a notebook that splits the names the same way gets the same numbers."""
    import random

    from microgpt import GPT, CharTokenizer, census_names
    from microgpt import train as microgpt_train

    config = lr_stress.StressConfig(n_layer=1, steps=5, beta1=0.9, beta2=0.95)
    data = lr_stress.load_data(config)
    model = GPT(seed=3, vocab_size=data[2], n_layer=1, layout="post")
    ours = lr_stress.train_lm(model, data[0], config, lr=0.03, warmup=0.0, seed=3)

    docs = census_names()
    random.Random(lr_stress.DATA_SEED).shuffle(docs)
    train_docs = docs[len(docs) // 10:]
    model = GPT(seed=3, vocab_size=27, n_layer=1, layout="post")
    theirs = microgpt_train(model, train_docs, CharTokenizer(docs), steps=5, lr=0.03,
                            betas=(0.9, 0.95), seed=3, progress=False)
    assert ours == theirs


def test_provenance_names_the_commit_a_run_started_from(tmp_path):
    from experiments.common import RunClock, save

    clock = RunClock()
    assert set(clock.git) == {"commit", "uncommitted_changes"}
    clock.git = {"commit": "0" * 40, "uncommitted_changes": False}  # as if HEAD moved since
    result = {}
    save(result, tmp_path / "r.json", lambda r: "table\n", "experiments.x", ["--a"], clock)
    prov = result["provenance"]
    assert prov["commit"] == "0" * 40 and prov["commit_at_end"] != "0" * 40
    assert prov["command"] == "python -m experiments.x --a"
    assert (tmp_path / "r.md").read_text(encoding="utf-8") == "table\n"


def test_collapse_probe_writes_json_with_provenance_and_a_matching_table(tmp_path):
    from experiments import collapse_probe

    args = ["--n-layer", "2", "--n-embd", "8", "--n-head", "2", "--steps", "3",
            "--val-seqs", "8", "--settings", "0.03:0", "--seeds", "0"]
    result, table = run_command(collapse_probe.main, tmp_path, args)
    check_provenance(result, "collapse_probe", args)
    assert table == collapse_probe.render(result)
    for layout, r in result["per_seed"][0]["runs"].items():
        assert len(r["dead_mlp_units"]) == 2 and all(0 <= d <= 1 for d in r["dead_mlp_units"])
        assert -1 <= r["head_input_cosine"] <= 1 and r["kl_from_mean"] >= 0
        assert f"| 0 | {layout} | {r['val_loss']:.3f} |" in table


def test_depth_search_run_is_studies_run():
    """A notebook that takes the chosen configuration through `microgpt.studies.run` gets
    the committed numbers: same teacher, net, batches and Adam."""
    from autograder.answers.reference import residual_layer
    from microgpt.studies import Config, Variant, run

    config = depth_search.DepthConfig(width=6, n=20, steps=5, lr=0.002)
    X, Y = depth_search.task(config, 2)
    ours = depth_search.run_net("residual", 4, 2, config, X, Y)
    theirs = run(Variant(residual_layer, 4), seed=2,
                 config=Config(width=6, n=20, steps=5, lr=0.002))
    assert ours["loss"] == theirs.loss


def test_summarize_indexes_every_result_with_its_command(tmp_path):
    from experiments import summarize

    depth, _ = run_command(depth_search.main, tmp_path / "d", DEPTH_ARGS)
    lr, _ = run_command(lr_stress.main, tmp_path / "l", LR_ARGS)
    for sub in ("d", "l"):
        (tmp_path / "all").mkdir(exist_ok=True)
        (tmp_path / "all" / f"{sub}.json").write_text(
            (tmp_path / sub / "result.json").read_text(encoding="utf-8"), encoding="utf-8")
    index = summarize.summarize(tmp_path / "all")
    rows = index.splitlines()
    assert len(rows) == 4 and rows[2].startswith("| d |") and rows[3].startswith("| l |")
    assert depth["provenance"]["command"] in rows[2] and lr["provenance"]["command"] in rows[3]
    assert f"{depth['per_seed'][0]['runs']['plain 1']['loss']:.2f}" in rows[2]
    assert f"position-only {lr['position_loss']:.2f}" in rows[3]


def test_committed_results_carry_provenance_and_their_tables_match():
    """Every committed result under results/pure_python/ has its run's provenance, and its
    markdown table is the one its JSON renders to (no hand-edited numbers)."""
    from pathlib import Path

    from experiments import collapse_probe, deletion_probe

    renderers = {"depth_search": depth_search.render, "lr_stress": lr_stress.render,
                 "collapse_probe": collapse_probe.render, "deletion_probe": deletion_probe.render}
    folder = Path(__file__).resolve().parents[2] / "results" / "pure_python"
    found = sorted(folder.glob("*.json"))
    if not found:
        pytest.skip("no committed results")
    for path in found:
        result = json.loads(path.read_text(encoding="utf-8"))
        assert PROVENANCE_KEYS <= set(result["provenance"]), path.name
        assert result["provenance"]["command"].startswith("python -m experiments."), path.name
        table = path.with_suffix(".md").read_text(encoding="utf-8")
        assert table == renderers[result["experiment"]](result), path.name
    for path in sorted((folder / "search").glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        assert PROVENANCE_KEYS <= set(result["provenance"]), path.name


def test_deletion_probe_measures_what_task_4_3_asks():
    """The probe's deletion losses are the reference answer's, and on floats the equations'."""
    from autograder.answers import reference
    from experiments import deletion_probe

    net = make_net(4, width=5, seed=2)
    X, Y = teacher_data(6, seed=3)
    ours = deletion_probe.deletion_losses(net, X, Y, deletion_probe.residual_layer)
    assert ours == reference.deletion_losses(net, X, Y, reference.residual_layer)
    on_floats = reference.f_deletion_losses(net, X, Y, reference.f_residual_layer)
    assert ours == pytest.approx(on_floats, rel=1e-12)
    assert net.depth == 4  # the net is left as it was


def test_stream_probe_measures_what_notebook_06_measures(tmp_path, monkeypatch):
    """The lens's last depth is the model's own loss, the embedding state has RMS 1, post-norm
    keeps it at 1, the table is what the JSON renders to, and the verdicts follow the criteria."""
    from experiments import stream_probe

    monkeypatch.setattr(stream_probe, "STEPS", 3)
    monkeypatch.setattr(stream_probe, "N_EVAL", 3)
    args = ["--seeds", "0"]
    result, table = run_command(stream_probe.main, tmp_path, args)
    check_provenance(result, "stream_probe", args)
    assert table == stream_probe.render(result)
    runs = result["per_seed"][0]["runs"]
    for layout in ("pre", "post"):
        r = runs[layout]
        assert r["worst_gap"] < 1e-12
        assert r["lens"][-1] == pytest.approx(r["own_loss"], abs=1e-12)
        assert r["rms"][0] == pytest.approx(1, abs=2e-3) and r["cosine"][0] == pytest.approx(1)
        assert r["top1_final"][-1] == 1
    assert all(abs(x - 1) < 2e-3 for x in runs["post"]["rms"])
    fake = {"pre": {"lens": [3.0, 2.2, 2.1, 2.0], "rms": [1, 2, 3, 4], "cosine": [1, .8, .7, .6],
                    "top1_next": [.1, .2, .22, .3]},
            "post": {"lens": [3.0, 2.5, 2.6, 2.4], "rms": [1, 1, 1.005, 1],
                     "cosine": [1, .9, .95, .8]}}
    v = stream_probe.verdicts(fake)
    assert v["E1_pre_lens_falls"] and not v["E1_post_lens_falls"]
    assert v["E2"] and v["E2_first_block_share"] == pytest.approx(0.8)
    assert v["E3"] and v["F1"] and v["F2"] and v["F3_pre"] and not v["F3_post"]
    fake["pre"]["top1_next"] = [.1, .25, .26, .27]
    assert not stream_probe.verdicts(fake)["E3"]


def test_committed_heldout_results_carry_provenance_and_their_tables_match():
    """Every result under results/heldout/ has its run's provenance, ran at or after the commit
    of its criteria, and its markdown table is the one its JSON renders to."""
    import subprocess
    from pathlib import Path

    from experiments import collapse_probe, deletion_probe, stream_probe

    renderers = {"depth_search": depth_search.render, "lr_stress": lr_stress.render,
                 "collapse_probe": collapse_probe.render, "deletion_probe": deletion_probe.render,
                 "stream_probe": stream_probe.render}
    root = Path(__file__).resolve().parents[2]
    found = sorted((root / "results" / "heldout").glob("*.json"))
    assert found, "the held-out results are committed: none found"
    criteria = "10272ff"  # the commit of results/heldout/CRITERIA.md
    for path in found:
        result = json.loads(path.read_text(encoding="utf-8"))
        prov = result["provenance"]
        assert PROVENANCE_KEYS <= set(prov), path.name
        assert all(s >= 100 for s in result["seeds"] if s != 0), path.name
        table = path.with_suffix(".md").read_text(encoding="utf-8")
        assert table == renderers[result["experiment"]](result), path.name
        check = subprocess.run(["git", "merge-base", "--is-ancestor", criteria, prov["commit"]],
                               cwd=root, capture_output=True)
        if check.returncode in (0, 1):  # 128: not a git checkout, or the commit is unknown
            assert check.returncode == 0, f"{path.name} ran before its criteria were committed"
    results_md = root / "results" / "heldout" / "RESULTS.md"
    if results_md.exists():
        from experiments import heldout

        rendered = heldout.main([str(root / "results" / "heldout")])
        assert results_md.read_text(encoding="utf-8") == rendered


def test_heldout_counts_follow_the_criteria():
    """The held-out table counts each criterion of results/heldout/CRITERIA.md as written."""
    from experiments import heldout

    def depth_seed(seed, r3, r10, r30, p3=0.2, p10=0.9, p30=1.3, h=1.35):
        runs = {f"{k} {d}": {"loss": v} for k, d, v in
                [("plain", 3, p3), ("plain", 10, p10), ("plain", 30, p30),
                 ("residual", 3, r3), ("residual", 10, r10), ("residual", 30, r30)]}
        return {"seed": seed, "entropy": h, "runs": runs}

    depth = {"per_seed": [depth_seed(100, 0.2, 0.03, 0.02), depth_seed(101, 0.2, 0.08, 0.3),
                          depth_seed(102, 0.2, 0.05, 0.06, p10=0.1), depth_seed(0, 1, 2, 3)]}
    rows = dict(heldout.depth_counts(depth))
    assert rows["B1: residual 10 and 30 below residual 3"] == "2 of 3"
    assert rows["B2: both at most half of residual 3 (the pack's criterion)"] == "2 of 3"
    assert rows["B3: both at most a fifth of residual 3 (notebook 04's wording)"] == "1 of 3"
    assert rows["residual 30 below residual 10"] == "1 of 3"
    assert rows["P2: plain 10 below plain 3 (moderate depth helps)"] == "1 of 3"
    c = dict(heldout._c_rows([(2.60, 2.40), (2.53, 2.514), (2.70, 2.45)], P=2.516, U=2.802))
    assert c["C1: lr 0.03, post >= P and pre < P (the pack's criterion)"] == "3 of 3"
    assert c["C2: lr 0.03, post > U - 0.1 and pre < U - 0.3 (the criterion of 432c0d3)"] == \
        "0 of 3"
    assert c["C3: C1 with both margins >= 0.05"] == "2 of 3"


def test_heldout_torch_runs_follow_their_criteria_commit_and_count_as_written():
    """The torch track's held-out runs (results/heldout/torchtrack/) ran at or after the
    commit of their criteria (the torch addendum of CRITERIA.md), on held-out seeds only;
    `torch_counts` counts T1-T9 as written."""
    import copy
    import subprocess
    from pathlib import Path

    from experiments import heldout

    root = Path(__file__).resolve().parents[2]
    runs = heldout.load_torch(root / "results" / "heldout")
    criteria = "1d3059d"  # the commit of the torch addendum of results/heldout/CRITERIA.md
    for study in ("mlp", "transformer"):
        assert sorted(runs.get(study, {})) == [100, 101, 102], study
        for result in runs[study].values():
            commit = result["provenance"]["commit"]
            check = subprocess.run(["git", "merge-base", "--is-ancestor", criteria, commit],
                                   cwd=root, capture_output=True)
            if check.returncode in (0, 1):
                assert check.returncode == 0, f"{study} {result['seed']} ran before its criteria"
    # the counts, on a copy of the runs with one seed changed to fail T7a and T8
    changed = copy.deepcopy(runs)
    lm = changed["transformer"][100]["final"]
    before = dict(heldout.torch_counts(runs))
    lm["post-norm, lr 3e-2 with warmup"] = lm["post-norm, lr 3e-2 no warmup"] - 1.5
    lm["post-norm"] = lm["pre-norm"] + 0.01
    after = dict(heldout.torch_counts(changed))
    label_7a = "T7a: post-norm lr 3e-2 with warmup >= 1.0 below without"
    label_8 = "T8: lr 3e-3 with warmup: post-norm < pre-norm"
    hits = lambda row: int(row.split(" of ")[0])  # noqa: E731
    assert hits(after[label_7a]) == hits(before[label_7a]) + 1
    assert hits(after[label_8]) == hits(before[label_8]) - 1
    assert all(row.endswith(")") and " of 3 (" in row for row in after.values())
