"""The torch track: data, the MLPs, the transformer, the schedule, training, the seed runner.
Short runs only; skipped when torch is absent."""

import hashlib
import json
import math
import os
import re
from pathlib import Path

import pytest

torch = pytest.importorskip(
    "torch", reason="the torch track is an optional extra: pip install -e '.[torch]'"
)

from autograder.grading.intake import TORCH_ASSIGNMENTS  # noqa: E402
from torchtrack import data, seeds, studies  # noqa: E402
from torchtrack.mlp import (  # noqa: E402
    HighwayLayer,
    PlainLayer,
    ResidualLayer,
    grad_norm_per_layer,
    make_mlp,
    run_variant,
    teacher_task,
)
from torchtrack.train import lr_at, train_lm  # noqa: E402
from torchtrack.transformer import (  # noqa: E402
    Attention,
    Block,
    count_params,
    logit_lens,
    make_lm,
    rope,
    stream_rms,
    stream_states,
)

pytestmark = pytest.mark.torch

# the team's copy: $TINYSHAKESPEARE, else ../shared/data beside the checkout
SHARED = Path(os.environ.get("TINYSHAKESPEARE")
              or Path(__file__).resolve().parents[2].parent / "shared" / "data"
              / "tinyshakespeare.txt")
needs_shared = pytest.mark.skipif(
    not SHARED.is_file(), reason=f"no copy of TinyShakespeare at {SHARED} (team machines only)"
)
CLOSED_PORT_URL = "http://127.0.0.1:9/input.txt"  # the discard port: nothing listens


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """These models are tiny: on a small shared CPU, one thread is many times faster."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ---------------------------------------------------------------- data


@needs_shared
def test_tinyshakespeare_from_a_path_is_checked_and_complete():
    text = data.tinyshakespeare(SHARED)
    assert len(text) == data.TINYSHAKESPEARE_CHARS
    assert text.startswith("First Citizen:\nBefore we proceed")
    vocab, train_ids, val_ids = data.split_ids(text)
    assert vocab.size == 65
    assert (len(train_ids), len(val_ids)) == (1_003_854, 111_540)


def test_a_wrong_file_fails_its_checksum(tmp_path):
    fake = tmp_path / "input.txt"
    fake.write_text("To be, or not to be\n")
    with pytest.raises(ValueError, match="checksum mismatch"):
        data.tinyshakespeare(fake)


def test_a_missing_path_says_what_to_pass(tmp_path):
    with pytest.raises(FileNotFoundError, match="input.txt"):
        data.tinyshakespeare(tmp_path / "nowhere.txt")


def test_no_network_and_no_copy_is_a_clear_error(tmp_path):
    with pytest.raises(data.DownloadError) as info:
        data.tinyshakespeare(cache_dir=tmp_path, url=CLOSED_PORT_URL, timeout=2)
    message = str(info.value)
    assert "tinyshakespeare(path=" in message and "--data" in message
    assert list(tmp_path.iterdir()) == []  # nothing half-written in the cache


def test_the_cache_is_used_without_the_network(tmp_path, monkeypatch):
    text = "ROMEO:\nBut soft!\n"
    (tmp_path / "tinyshakespeare.txt").write_text(text)
    monkeypatch.setattr(data, "TINYSHAKESPEARE_SHA256", hashlib.sha256(text.encode()).hexdigest())
    assert data.tinyshakespeare(cache_dir=tmp_path, url=CLOSED_PORT_URL, timeout=2) == text


def test_find_tinyshakespeare_offline_returns_none(tmp_path, monkeypatch):
    monkeypatch.delenv(data.ENV_PATH, raising=False)
    assert data.find_tinyshakespeare([tmp_path / "absent.txt"], download=False) is None


def test_the_vocabulary_comes_from_the_text():
    vocab = data.CharVocab("hello world")
    assert vocab.chars == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert vocab.decode(vocab.encode("low door")) == "low door"
    offline, _, _ = data.split_ids(data.offline_text())
    assert offline.size == 27  # a-z and the newline: nothing assumes 65
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.encode("HELLO")


def test_batches_are_shifted_windows_from_the_generator():
    ids = torch.arange(100)
    x, y = data.get_batch(ids, 4, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal(y, x + 1)  # ids are positions here, so "shifted by one" is +1
    x2, _ = data.get_batch(ids, 4, 8, torch.Generator().manual_seed(0))
    x3, _ = data.get_batch(ids, 4, 8, torch.Generator().manual_seed(1))
    assert torch.equal(x, x2) and not torch.equal(x, x3)


# ---------------------------------------------------------------- the MLPs


def test_the_teacher_task_is_seeded():
    X, Y = teacher_task(256, seed=0)
    X2, Y2 = teacher_task(256, seed=0)
    assert X.shape == (256, 32) and Y.shape == (256,)
    assert torch.equal(X, X2) and torch.equal(Y, Y2)
    assert not torch.equal(teacher_task(256, seed=1)[1], Y)
    assert len(set(Y.tolist())) >= 8  # the labels use most of the 10 classes


def test_the_three_layers():
    torch.manual_seed(0)
    h = torch.randn(5, 16)
    plain = PlainLayer(16)
    residual = ResidualLayer(16)
    residual.load_state_dict(plain.state_dict())
    assert torch.allclose(residual(h), h + plain(h))
    assert (plain(h) >= 0).all()
    highway = HighwayLayer(16)
    gate = torch.sigmoid(highway.gate(h))
    assert torch.allclose(highway.gate.bias, torch.full((16,), -2.0))
    assert gate.mean().item() < 0.3  # mostly carrying its input at the start
    assert torch.allclose(highway(h), gate * highway.branch(h) + (1 - gate) * h)


def test_gradient_per_layer_plain_grows_towards_the_input_residual_stays_level():
    X, Y = teacher_task(512, seed=0)
    plain = grad_norm_per_layer(make_mlp("plain", 30, seed=0), X, Y)
    residual_net = make_mlp("residual", 30, seed=0)
    residual = grad_norm_per_layer(residual_net, X, Y)
    assert len(plain) == len(residual) == 30
    assert plain[0] / plain[-1] > 50
    assert residual[0] / residual[-1] < 10
    assert all(p.grad is None for p in residual_net.parameters())


def test_a_short_mlp_run_goes_down_and_repeats():
    config = studies.GRADING_MLP
    X, Y = teacher_task(config.n, config.d_in, config.n_classes, seed=0)
    a = run_variant("residual", 3, 0, config, X, Y)
    b = run_variant("residual", 3, 0, config, X, Y)
    assert a["final"] < a["curve"][0] - 0.2
    assert a["final"] == b["final"] and a["curve"] == b["curve"]


# ---------------------------------------------------------------- the transformer


def test_the_chapter_model_has_303296_parameters():
    assert count_params(make_lm(65)) == 303_296


@pytest.mark.parametrize("layout", ["pre", "post", "none"])
def test_shapes_and_causality(layout):
    model = make_lm(11, layout, dim=16, n_layers=2, n_heads=2, seed=0)
    idx = torch.randint(11, (3, 9), generator=torch.Generator().manual_seed(0))
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 9, 11) and loss.shape == ()
    changed = idx.clone()
    changed[:, 6:] = (changed[:, 6:] + 1) % 11  # change the future only
    with torch.no_grad():
        before, after = model(idx)[0], model(changed)[0]
    assert torch.allclose(before[:, :6], after[:, :6], atol=1e-6)
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_attention_without_the_mask_sees_the_future():
    torch.manual_seed(0)
    attn = Attention(8, 2, causal=False)
    x = torch.randn(1, 5, 8)
    y = x.clone()
    y[:, 4] += 1.0
    assert not torch.allclose(attn(x)[:, 0], attn(y)[:, 0])


def test_rope_keeps_lengths_and_depends_on_relative_position():
    v = torch.randn(1, 1, 1, 8).expand(1, 1, 12, 8)  # the same vector at every position
    r = rope(v)
    assert torch.allclose(r.norm(dim=-1), v.norm(dim=-1), atol=1e-5)
    dots = (r[0, 0, :-3] * r[0, 0, 3:]).sum(-1)  # positions t and t + 3
    assert torch.allclose(dots, dots[0].expand_as(dots), atol=1e-4)
    assert torch.allclose(r[0, 0, 0], v[0, 0, 0])  # position 0 is not rotated


def test_the_layouts_are_different_functions():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 8)
    blocks = {layout: Block(8, 2, layout) for layout in ("pre", "post", "none")}
    state = blocks["pre"].state_dict()
    for b in blocks.values():
        b.load_state_dict(state)
    pre, post, none = (blocks[k](x) for k in ("pre", "post", "none"))
    b = blocks["pre"]
    assert torch.allclose(none, b.ffn(b.norm2(b.attn(b.norm1(x)))))
    mid = x + b.attn(b.norm1(x))
    assert torch.allclose(pre, mid + b.ffn(b.norm2(mid)))
    assert torch.allclose(post.pow(2).mean(-1), torch.ones(2, 4), atol=1e-4)  # post-norm: RMS 1
    with pytest.raises(ValueError, match="layout"):
        Block(8, 2, "sandwich")


@pytest.mark.parametrize("layout", ["pre", "post"])
def test_stream_states_and_the_logit_lens(layout):
    model = make_lm(13, layout, dim=16, n_layers=3, n_heads=2, seed=1)
    idx = torch.randint(13, (2, 10), generator=torch.Generator().manual_seed(2))
    states = stream_states(model, idx)
    assert len(states) == 4 and all(s.shape == (2, 10, 16) for s in states)
    lens = logit_lens(model, idx, idx)
    assert len(lens) == 4
    assert lens[-1] == pytest.approx(model(idx, idx)[1].item(), rel=1e-6)
    rms = stream_rms(states)
    if layout == "post":
        assert rms[1:] == pytest.approx([1.0] * 3, abs=1e-3)


# ---------------------------------------------------------------- the schedule and training


def test_warmup_then_cosine_to_a_tenth():
    steps, lr = 300, 3e-3
    rates = [lr_at(s, steps, lr) for s in range(steps)]
    assert rates[0] == pytest.approx(lr / 30)
    assert rates[29] == pytest.approx(lr)
    assert max(rates) == pytest.approx(lr)
    assert rates[-1] == pytest.approx(0.1 * lr)
    assert all(a >= b for a, b in zip(rates[29:], rates[30:]))  # decays after warmup
    assert rates[:30] == sorted(rates[:30])
    assert lr_at(0, steps, 3e-2, warmup_frac=0.0) == pytest.approx(3e-2)


def _short_run(seed, layout="pre"):
    config = studies.GRADING_LM
    vocab, train_ids, val_ids = data.split_ids(data.offline_text())
    return studies.train_variant(train_ids, val_ids, vocab.size, layout, seed, config)[1]


def test_a_short_lm_run_goes_down_and_repeats_exactly():
    a = _short_run(0)
    assert a["step"] == [0, 20, 40]
    assert a["val"][-1] < a["val"][0] - 0.5
    b = _short_run(0)
    assert a["val"] == b["val"] and a["train"] == b["train"]
    c = _short_run(1)
    assert c["val"] != a["val"]


def test_training_does_not_touch_the_global_generator():
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    _short_run(0, "none")
    assert torch.equal(torch.rand(3), expected)


def test_train_lm_evaluates_at_zero_every_k_and_at_the_end():
    vocab, train_ids, val_ids = data.split_ids(data.offline_text())
    model = make_lm(vocab.size, dim=16, n_layers=1, n_heads=2)
    hist = train_lm(model, train_ids, val_ids, steps=7, batch_size=2, block_size=8,
                    eval_every=3, eval_iters=1)
    assert hist["step"] == [0, 3, 6, 7]
    assert len(hist["train"]) == len(hist["lr"]) == 7


# ---------------------------------------------------------------- the seed runner


def test_the_seed_runner_prints_mean_and_sd_and_resumes(tmp_path, capsys):
    out = tmp_path / "runs"
    argv = ["--seeds", "0", "1", "--studies", "mlp", "--size", "small", "--out", str(out)]
    assert seeds.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| plain 3 |" in printed and "+-" in printed and "wall time" in printed
    saved = json.loads((out / "mlp" / "seed1.json").read_text())
    assert saved["seed"] == 1 and "plain 30" in saved["final"]
    assert (out / "mlp" / "seed0.png").is_file() and (out / "table.md").is_file()
    assert seeds.main(argv) == 0  # the second time it loads the saved runs
    assert "loaded" in capsys.readouterr().out


def test_the_warmup_cure_is_one_more_run_at_the_high_rate_with_warmup():
    plain, cured = studies.lm_runs(), studies.lm_runs(cure=True)
    assert set(cured) - set(plain) == {"post-norm, lr 3e-2 with warmup"}
    layout, lr, warmup = cured["post-norm, lr 3e-2 with warmup"]
    assert (layout, lr, warmup) == ("post", studies.FULL_LM.high_lr, studies.FULL_LM.warmup_frac)
    assert cured["post-norm, lr 3e-2 no warmup"][2] == 0.0 < warmup


PROVENANCE_KEYS = {"command", "commit", "uncommitted_changes", "versions", "threads", "cpu",
                   "cores", "load_average", "date", "wall_seconds"}


def test_the_seed_runner_records_the_run_behind_each_result(tmp_path):
    out = tmp_path / "runs"
    argv = ["--seeds", "3", "--studies", "mlp", "--size", "small", "--out", str(out),
            "--threads", "1", "--no-plots"]
    assert seeds.main(argv) == 0
    saved = json.loads((out / "mlp" / "seed3.json").read_text())
    prov = saved["provenance"]
    assert PROVENANCE_KEYS <= set(prov), f"missing: {PROVENANCE_KEYS - set(prov)}"
    assert prov["command"] == "python -m torchtrack.seeds " + " ".join(argv)
    assert prov["threads"] == 1 and prov["versions"]["torch"] == torch.__version__
    assert len(prov["commit"]) == 40 or prov["commit"].startswith("unknown")
    assert (prov["study"], prov["seed"], prov["size"]) == ("mlp", 3, "small")
    assert prov["wall_seconds"] == round(saved["wall"], 1) and prov["wall_seconds"] > 0
    # the table shows it, and is drawn from the JSON alone
    table_md = (out / "table.md").read_text()
    assert "- seed 3: `python -m torchtrack.seeds --seeds 3" in table_md
    assert prov["cpu"] in table_md and "torch 2" in table_md
    assert table_md == seeds.render(out)
    # the curves are saved as window means, not per step
    assert len(saved["curves"]["plain 3"]) == -(-studies.GRADING_MLP.steps // seeds.CURVE_WINDOW)


def test_a_data_path_is_recorded_by_its_name_and_checksum_not_the_machine_path():
    shown = seeds._shown_command(["--data", "/home/someone/data/input.txt", "--seeds", "0"])
    assert shown == "python -m torchtrack.seeds --data .../input.txt --seeds 0"
    assert "/home" not in seeds._shown_command(["--data=/home/x/input.txt"])


def test_the_seed_runner_refuses_a_wrong_data_file(tmp_path, capsys):
    fake = tmp_path / "input.txt"
    fake.write_text("not Shakespeare\n")
    argv = ["--seeds", "0", "--studies", "transformer", "--size", "small",
            "--out", str(tmp_path / "runs"), "--data", str(fake)]
    assert seeds.main(argv) == 2
    assert "checksum mismatch" in capsys.readouterr().err


# ---------------------------------------------------------------- the committed seed runs

RESULTS = Path(__file__).resolve().parents[2] / "results" / "torchtrack"
COMMITTED_SEEDS = (0, 1, 2)


def _committed(study, seed):
    return json.loads((RESULTS / study / f"seed{seed}.json").read_text())


@pytest.mark.parametrize("study", ["mlp", "transformer"])
def test_the_committed_seed_runs_are_full_size_with_their_provenance(study):
    for seed in COMMITTED_SEEDS:
        result = _committed(study, seed)
        assert (result["size"], result["seed"]) == ("full", seed)
        prov = result["provenance"]
        assert PROVENANCE_KEYS <= set(prov), f"seed {seed}: missing {PROVENANCE_KEYS - set(prov)}"
        assert prov["uncommitted_changes"] is False, f"seed {seed} ran on an uncommitted tree"
        assert len(prov["commit"]) == 40 and prov["threads"] == 1
        assert prov["command"].startswith("python -m torchtrack.seeds ")
        assert f"--studies {study}" in prov["command"] or "--studies" not in prov["command"]
        assert "--size full" in prov["command"]
        assert not re.search(r"(^|[\s=])/", prov["command"]), "a machine path in the command"
        assert prov["wall_seconds"] == round(result["wall"], 1)
        assert (RESULTS / study / f"seed{seed}.png").is_file()
    if study == "transformer":
        data_used = _committed(study, 0)["provenance"]["data"]
        assert data_used["sha256"] == data.TINYSHAKESPEARE_SHA256  # TinyShakespeare, no fallback
        assert _committed(study, 0)["vocab_size"] == 65


def test_the_committed_results_stay_small():
    total = sum(p.stat().st_size for p in RESULTS.rglob("*") if p.is_file())
    assert total < 300 * 1024, f"results/torchtrack holds {total / 1024:.0f} KiB"


def test_an_install_without_the_checkout_prints_the_table_from_its_own_copy(
        tmp_path, monkeypatch):
    """Outside a checkout (a wheel of the pack, the student's install) the table comes from
    the JSON files the wheel installed (`seeds.INSTALLED`), the same table; with neither
    (the grading sandbox) there is none, and the notebooks say where it is."""
    import shutil
    import sys
    import tomllib

    from autograder.authoring.release import SEED_RUNS

    assert seeds.INSTALLED == Path(sys.prefix) / SEED_RUNS  # where the student wheel puts them
    pyproject = tomllib.loads((RESULTS.parents[1] / "pyproject.toml").read_text())
    installs = pyproject["tool"]["setuptools"]["data-files"]  # where the pack's wheel does
    assert installs == {f"{SEED_RUNS}/{study}": [f"results/torchtrack/{study}/seed*.json"]
                        for study in ("mlp", "transformer")}
    here = seeds.committed_table("mlp")
    copy = tmp_path / "env" / SEED_RUNS
    for path in RESULTS.glob("*/seed*.json"):
        (copy / path.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy / path.parent.name / path.name)
    monkeypatch.setattr(seeds, "RESULTS", tmp_path / "no-checkout")
    monkeypatch.setattr(seeds, "INSTALLED", copy)
    assert seeds.committed_folder() == copy
    assert here is not None and seeds.committed_table("mlp") == here
    monkeypatch.setattr(seeds, "INSTALLED", tmp_path / "nothing-installed")
    assert seeds.committed_folder() is None and seeds.committed_table("mlp") is None


def test_the_committed_table_is_the_committed_json():
    """Every number in a seed column of table.md is the JSON's value for that seed, and the
    mean column is their mean; the whole file is what `render` makes of the JSON."""
    text = (RESULTS / "table.md").read_text()
    sections = {}
    for part in text.split("\n## ")[1:]:
        study = part.split(":", 1)[0]
        sections[study] = {
            line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in part.splitlines() if line.startswith("| ") and "---" not in line
        }
    assert set(sections) == {"mlp", "transformer"}
    for study, rows in sections.items():
        header = rows.pop(study)
        assert header[:4] == ["ours: mean +- sd"] + [f"ours: seed {s}" for s in COMMITTED_SEEDS]
        assert "the chapter's" in header[4]
        for seed in COMMITTED_SEEDS:
            summary = seeds.summarise(study, _committed(study, seed))
            assert set(summary) == set(rows), f"{study}: rows {sorted(rows)}"
            for name, value in summary.items():
                shown = float(rows[name][1 + seed])
                assert shown == pytest.approx(value, abs=0.051 if value >= 10 else 5e-4), \
                    f"{study}, {name}, seed {seed}: table {shown}, JSON {value}"
        for name, cells in rows.items():
            values = [seeds.summarise(study, _committed(study, s))[name] for s in COMMITTED_SEEDS]
            mean = float(cells[0].split("+-")[0])
            assert mean == pytest.approx(sum(values) / 3, abs=0.051 if mean >= 10 else 5e-4)
    assert text == seeds.render(RESULTS)


def test_the_chapter_values_in_the_table_are_labelled_as_the_chapters():
    text = (RESULTS / "table.md").read_text()
    mlp = text.split("\n## mlp")[1].split("\n## ")[0]
    row = next(line for line in mlp.splitlines() if line.startswith("| plain 30 |"))
    cells = [c.strip() for c in row.split("|")[2:-1]]
    assert cells[4] == "2.208"  # the chapter's value, in the chapter's column
    assert "2.208" not in cells[:4]  # and not among ours


# ---------------------------------------------------------------- the torch notebooks

COURSE = Path(__file__).resolve().parents[2]
TORCH_NOTEBOOKS = TORCH_ASSIGNMENTS
# a quoted figure: 0.079, 2.303, 244.9 (not a task number such as 8.3, nor a factor like 0.1)
NUMBER = re.compile(r"(?<![\w.])(?:\d+\.\d{2,}|\d{2,}\.\d)(?![\d])")
# worked out in the text itself: sigmoid(-2), ln 10 and ln 65 to two decimals
ARITHMETIC = {f"{1 / (1 + math.exp(2)):.2f}", f"{math.log(10):.2f}", f"{math.log(65):.2f}"}
MACHINE_PATH = re.compile(r"(/work/|/root/|/home/|/tmp/|site-packages)")


def _notebook(kind, name):
    return json.loads((COURSE / kind / name / f"{name}.ipynb").read_text())


def _printed(nb):
    out = []
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream":
                out.append("".join(o["text"]))
            elif o.get("output_type") == "error":
                out.append(o["ename"] + ": " + o["evalue"] + "\n".join(o.get("traceback", [])))
            else:
                out.append("".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


@pytest.mark.parametrize("name", TORCH_NOTEBOOKS)
def test_the_torch_solution_ran_to_the_end_on_the_data_it_names(name):
    nb = _notebook("solutions", name)
    errors = [(c["id"], o["ename"]) for c in nb["cells"] for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert errors == [], f"error outputs in solutions/{name}: {errors}"
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), "a cell did not run"
    printed = _printed(nb)
    assert not MACHINE_PATH.search(printed), MACHINE_PATH.search(printed).group()
    if name == "09_torch_transformer":
        assert "data: TinyShakespeare, 1,115,394 characters" in printed
        assert "FALLBACK" not in printed and "census names" not in printed


@pytest.mark.parametrize("name", TORCH_NOTEBOOKS)
def test_every_figure_the_torch_notebook_quotes_is_printed_or_committed(name):
    """Each number with two or more decimals in the notebook's text is printed by its
    solution or stands in the committed seed table (ours, or the chapter's column), or is
    one the cell lists as quoted and a committed result file holds (the notebook guard's
    rule: the measured Run All times)."""
    from autograder.authoring.notebook_guard import cell_quotes, figure_found, results_text

    shown = set(NUMBER.findall(_printed(_notebook("solutions", name))))
    shown |= set(NUMBER.findall((RESULTS / "table.md").read_text()))
    shown |= {f"{v:.3f}" for study in seeds.PUBLISHED.values() for v in study.values()}
    nb = _notebook("source", name)
    committed = results_text(RESULTS.parents[1])
    quoted = {(c["id"], n) for c in nb["cells"] if c["cell_type"] == "markdown"
              for n in NUMBER.findall("".join(c["source"]))
              if not (n in cell_quotes(c)[0] and figure_found(n, committed))}
    unsourced = sorted((cid, n) for cid, n in quoted if n not in shown | ARITHMETIC)
    assert unsourced == [], f"figures quoted in source/{name} that nothing prints: {unsourced}"


# ---------------------------------------------------------------- the lens, position by position


def test_the_lens_top1_of_the_last_state_is_the_models_own_guess():
    from torchtrack.transformer import lens_top1

    model = make_lm(13, "pre", dim=16, n_layers=3, n_heads=2, seed=1)
    idx = torch.randint(13, (2, 10), generator=torch.Generator().manual_seed(2))
    top = lens_top1(model, idx)
    assert top.shape == (4, 2, 10)
    assert torch.equal(top[-1], model(idx)[0].argmax(-1))
    assert torch.equal(top[0], model.decode(model.embed(idx)).argmax(-1))


def test_position_stats_and_the_phrase_table_count_what_they_say():
    from torchtrack import lens
    from torchtrack.transformer import lens_top1

    vocab, train_ids, val_ids = data.split_ids(data.offline_text())
    config = studies.GRADING_LM
    model = make_lm(vocab.size, "pre", config.dim, config.n_layers, config.n_heads, seed=3)
    st = lens.position_stats(model, val_ids, 7, config, batches=2)
    n = config.n_layers + 1
    assert st["states"] == ["embedding"] + [f"block {k}" for k in range(1, n)]
    assert st["positions"] == 2 * config.batch_size * config.block_size
    assert st["agreement"][-1] == 1.0 and st["changed"][0] == 0.0
    # the same two batches by hand
    gen = torch.Generator().manual_seed(7)
    both = [data.get_batch(val_ids, config.batch_size, config.block_size, gen) for _ in range(2)]
    tops = torch.cat([lens_top1(model, b[0]).reshape(n, -1) for b in both], dim=1)
    ys = torch.cat([b[1].reshape(-1) for b in both])
    assert st["accuracy"][1] == pytest.approx((tops[1] == ys).float().mean().item())
    assert st["changed"][2] == pytest.approx((tops[2] != tops[1]).float().mean().item())
    assert st["loss"][-1] == pytest.approx(
        sum(model(b[0], b[1])[1].item() for b in both) / 2, rel=1e-6)
    ph = lens.phrase_table(model, vocab, val_ids, config.block_size, start=50, shown=4)
    assert ph["text"] == vocab.decode(val_ids[50:50 + config.block_size])
    assert [r["next"] for r in ph["rows"]] == list(
        vocab.decode(val_ids[50 + config.block_size - 3:50 + config.block_size + 1]))
    assert all(len(r["top1"]) == n for r in ph["rows"])


def test_the_lens_criteria_count_as_written():
    from experiments import heldout

    def result(seed, acc, agree, changed, loss):
        return {"seed": seed, "stats": {"states": ["embedding"] + [f"block {k}" for k in
                                                                   range(1, 7)],
                                        "accuracy": acc, "agreement": agree,
                                        "changed": changed, "loss": loss}}

    good = result(100, [0.10, 0.30, 0.42, 0.45, 0.47, 0.49, 0.50],
                  [0.15, 0.50, 0.70, 0.80, 0.85, 0.90, 1.0],
                  [0.0, 0.60, 0.30, 0.20, 0.15, 0.10, 0.08],
                  [4.0, 2.6, 2.3, 2.2, 2.1, 2.05, 2.0])
    bad = result(101, [0.30, 0.30, 0.30, 0.45, 0.47, 0.49, 0.50],
                 [0.15, 0.50, 0.45, 0.80, 0.85, 0.90, 1.0],
                 [0.0, 0.60, 0.30, 0.40, 0.15, 0.10, 0.08],
                 [4.0, 2.6, 2.3, 2.2, 2.25, 2.05, 2.0])
    searched = result(2, *[bad["stats"][k] for k in ("accuracy", "agreement", "changed",
                                                     "loss")])
    rows = dict(heldout.lens_counts({100: good, 101: bad, 2: searched}))
    assert [row.split(" (")[0] for row in rows.values()] == ["1 of 2"] * 4
    assert "seed 101: 0.300 against 0.500" in rows[
        "L1: accuracy at the embedding <= half the last block's"]
    # and the held-out runs, once committed, ran on held-out seeds after their criteria
    import subprocess

    from torchtrack import lens

    root = Path(__file__).resolve().parents[2]
    folder = root / "results" / "heldout" / "torchtrack" / "lens"
    if folder.is_dir():  # lens.md is what its JSON files render to
        assert (folder / "lens.md").read_text(encoding="utf-8") == lens.render(folder)
    for r in heldout.load_lens(root / "results" / "heldout").values():
        assert r["seed"] >= 100 and r.get("size", "full") == "full"
        check = subprocess.run(["git", "merge-base", "--is-ancestor", "4f3fab2",
                                r["provenance"]["commit"]], cwd=root, capture_output=True)
        if check.returncode in (0, 1):
            assert check.returncode == 0, f"lens seed {r['seed']} ran before its criteria"


def test_the_rounding_measurement_backs_the_training_checks_rtol():
    """results/torchtrack/rounding.txt (`python -m experiments.torch_rounding`), from a
    committed tree: in float64 rounding moved the stored runs far less than the checks'
    rtol of 1e-6, and every wrong answer that moves them lands far outside it."""
    text = (RESULTS / "rounding.txt").read_text()
    moved = re.search(r"largest move from rounding: float32 (\S+), float64 (\S+)\n", text)
    nearest = re.search(r"nearest wrong answer \(float64\): (\S+) away", text)
    assert moved and nearest, "rounding.txt lacks its summary lines"
    assert float(moved.group(2)) < 1e-6 / 1000 < 1e-6 * 100 < float(nearest.group(1))
    provenance = text.strip().splitlines()[-1]
    assert provenance.startswith("# `python -m experiments.torch_rounding` at ")
    assert "uncommitted" not in provenance
