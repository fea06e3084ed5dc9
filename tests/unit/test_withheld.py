"""`authoring/withheld.py`: microgpt's answers out of the student wheel, and released per
assignment. Each released function must be the library's own, running where the library
runs it; each stub must call it and hold nothing of the answer."""

import ast
import importlib
import sys
import types
from pathlib import Path

import pytest

from autograder.authoring import withheld
from autograder.grading.answerless import SWITCHED_OFF
from microgpt import GPT, deepnet
from microgpt.engine import linear

ROOT = Path(__file__).resolve().parents[2]
MICROGPT = sorted({e[0] for entries in SWITCHED_OFF.values() for e in entries
                   if e[0].startswith("microgpt.")})


def _source(module):
    return ROOT.joinpath(*module.split(".")).with_suffix(".py").read_text(encoding="utf-8")


@pytest.mark.parametrize("module", MICROGPT)
def test_every_answer_becomes_a_call_of_the_released_one_and_the_rest_stays(module):
    before = _source(module)
    after = withheld.withhold(before, module)
    entries = [(o, n) for es in SWITCHED_OFF.values() for m, o, n, _, _ in es if m == module]
    for owner, name in entries:
        assert withheld.is_stub(after, module, owner, name)
        assert not withheld.is_stub(before, module, owner, name)
    removed = [line for line in before.splitlines() if line not in set(after.splitlines())]
    assert removed and len(removed) < 30  # the answers' bodies, nothing else
    for line in removed:
        assert line.startswith("        ") or line.startswith("    "), line


def _released(assignment, module_name, monkeypatch):
    """The released module of `assignment`, imported as microgpt.solved.a<assignment>."""
    sources = {m: _source(m) for m in MICROGPT}
    text = withheld.solved_module(sources, "microgpt", assignment)
    ast.parse(text)
    module = types.ModuleType(module_name)
    exec(compile(text, module_name, "exec"), module.__dict__)
    return module


def test_the_released_functions_are_the_librarys_own(monkeypatch):
    model = GPT(n_layer=2, seed=3, n_embd=8, n_head=2)
    a05 = _released("05_gpt_residual_adds", "microgpt.solved.a05", monkeypatch)
    a06 = _released("06_residual_stream", "microgpt.solved.a06", monkeypatch)
    cache, cache2 = model.new_cache(), model.new_cache()
    x = model.embed(3, 0)
    assert [v.data for v in a05.GPT_block(model, x, 1, cache[1])] == \
        [v.data for v in model.block(x, 1, cache2[1])]
    assert [[[v.data for v in s] for s in p] for p in a06.GPT_stream_states(model, [0, 4, 2])] \
        == [[[v.data for v in s] for s in p] for p in model.stream_states([0, 4, 2])]
    a02 = _released("02_degradation", "microgpt.solved.a02", monkeypatch)
    net = deepnet.make_net(2, width=3, d_in=2, n_classes=2, seed=0)

    def layer(h, W):
        return [v.relu() for v in linear(h, W)]

    assert [v.data for v in a02.logits(net, [0.5, -1.0], layer)] == \
        [v.data for v in deepnet.logits(net, [0.5, -1.0], layer)]


def test_a_stub_waits_for_its_release_and_then_runs_it(tmp_path, monkeypatch):
    """The withheld library as a student's install has it, in a folder of its own: first
    without 05's released answers, then with them."""
    import shutil

    shutil.copytree(ROOT / "microgpt", tmp_path / "microgpt",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for module in MICROGPT:
        path = tmp_path.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(withheld.withhold(path.read_text(), module))
    (tmp_path / "microgpt" / "solved").mkdir()
    (tmp_path / "microgpt" / "solved" / "__init__.py").write_text(withheld.SOLVED_INIT)
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] == "microgpt"}
    for k in saved:
        del sys.modules[k]
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        student = importlib.import_module("microgpt")
        assert student.__file__.startswith(str(tmp_path))
        from microgpt.solved import NotReleased

        model = student.GPT(seed=0)
        with pytest.raises(NotReleased, match=r"GPT.block \(Tasks 5.1 to 5.3\) is released "
                                              r"after 05_gpt_residual_adds's due date"):
            model.loss([0, 1, 2])
        sources = {m: _source(m) for m in MICROGPT}
        (tmp_path / "microgpt" / "solved" / "a05_gpt_residual_adds.py").write_text(
            withheld.solved_module(sources, "microgpt", "05_gpt_residual_adds"))
        assert model.loss([0, 1, 2]).data == GPT(seed=0).loss([0, 1, 2]).data
        with pytest.raises(NotReleased, match="06_residual_stream"):
            model.stream_states([0, 1, 2])
    finally:
        for k in [k for k in sys.modules if k.split(".")[0] == "microgpt"]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_every_assignment_with_answers_in_microgpt_is_released():
    assert withheld.solved_assignments("microgpt") == [
        "02_degradation", "05_gpt_residual_adds", "06_residual_stream"]
    with pytest.raises(LookupError):
        withheld.solved_module({}, "microgpt", "01_residual_stack")


def test_the_released_torch_functions_are_torchtracks_own():
    torch = pytest.importorskip("torch")
    from torchtrack import mlp, transformer

    modules = ("torchtrack.mlp", "torchtrack.transformer")
    sources = {m: _source(m) for m in modules}
    for module in modules:
        assert all(withheld.is_stub(withheld.withhold(sources[module], module), module, o, n)
                   for es in SWITCHED_OFF.values() for m, o, n, _, _ in es if m == module)
    released = {}
    for assignment in withheld.solved_assignments("torchtrack"):
        namespace = {}
        exec(compile(withheld.solved_module(sources, "torchtrack", assignment), assignment,
                     "exec"), namespace)
        released.update(namespace)
    x = torch.randn(3, 5, 8, generator=torch.Generator().manual_seed(0))
    for cls in (mlp.ResidualLayer, mlp.HighwayLayer):
        layer = cls(8)
        assert torch.equal(released[f"{cls.__name__}_forward"](layer, x), layer(x))
    block = transformer.Block(8, 2, "post")
    assert torch.equal(released["Block_forward"](block, x), block(x))
    model = transformer.make_lm(20, "pre", dim=8, n_layers=2, n_heads=2, seed=1)
    idx = torch.randint(0, 20, (2, 6), generator=torch.Generator().manual_seed(1))
    assert released["logit_lens"](model, idx, idx) == transformer.logit_lens(model, idx, idx)
