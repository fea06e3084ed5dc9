"""`grading/answerless.py`: the library's model answers taken out of the source a graded
kernel loads (issue #26: a guard around an attribute leaves the answer in the kernel, and
running the module again gave it back)."""

import contextlib
import runpy
import sys
from pathlib import Path

import pytest

from autograder.grading.answerless import SWITCHED_OFF, strip_answers, write_answerless
from autograder.kernel.policy import AnswerSwitchedOff

ROOT = Path(__file__).resolve().parents[2]


def _copy_of(package, into):
    import shutil

    shutil.copytree(ROOT / package, into / package,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


@contextlib.contextmanager
def answerless_microgpt(tmp_path, monkeypatch, assignment):
    """A copy of microgpt without the answers of `assignment`, imported from tmp_path in
    place of the real one (put back after)."""
    _copy_of("microgpt", tmp_path)
    write_answerless(tmp_path, assignment)
    saved = {k: v for k, v in sys.modules.items() if k == "microgpt" or k.startswith("microgpt.")}
    for k in saved:
        del sys.modules[k]
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import microgpt

        assert microgpt.__file__.startswith(str(tmp_path))
        yield tmp_path
    finally:
        for k in [k for k in sys.modules if k == "microgpt" or k.startswith("microgpt.")]:
            del sys.modules[k]
        sys.modules.update(saved)


def test_every_answer_the_table_names_is_taken_out_and_the_rest_kept():
    for assignment, entries in SWITCHED_OFF.items():
        for module in {e[0] for e in entries}:
            path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
            before = path.read_text()
            after = strip_answers(before, module, assignment)
            assert after != before
            for _, owner, name, task, _ in (e for e in entries if e[0] == module):
                label = f"{module}.{owner + '.' if owner else ''}{name}"
                assert (f"{label} is the model answer to {task}, and grading runs "
                        "without it") in after
                assert "refuse_unless_library" not in after
            compile(after, str(path), "exec")
            # the lines of the module outside the answers are all still there
            kept = set(after.splitlines())
            lost = [line for line in before.splitlines() if line not in kept]
            assert len(lost) < len(before.splitlines()) // 3, (module, lost)
        # another assignment's answers stay
        for module in {e[0] for e in entries}:
            path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
            assert strip_answers(path.read_text(), module, "01_residual_stack") == \
                path.read_text()


def test_a_table_entry_the_source_lacks_stops_the_grading():
    with pytest.raises(LookupError, match="GPT.block is not in"):
        strip_answers("class GPT:\n    pass\n", "microgpt.model", "05_gpt_residual_adds")


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_the_answer_is_gone_however_the_module_is_loaded(tmp_path, monkeypatch):
    with answerless_microgpt(tmp_path, monkeypatch, "05_gpt_residual_adds") as folder:
        _block_is_gone(folder)


def _block_is_gone(folder):
    from microgpt import GPT

    model = GPT(seed=0)
    with pytest.raises(AnswerSwitchedOff, match="Tasks 5.1 to 5.3"):
        model.block(model.embed(1, 0), 0, model.new_cache()[0])
    assert GPT.block.__doc__ == "One transformer block in the configured residual layout."
    # run anew from its file: the same stub, no answer anywhere to get back
    fresh = runpy.run_module("microgpt.model")["GPT"]
    with pytest.raises(AnswerSwitchedOff):
        fresh(seed=0).block(model.embed(1, 0), 0, model.new_cache()[0])
    source = (folder / "microgpt" / "model.py").read_text()
    assert "zip(x, a)" not in source  # the residual add of the block is not in the file
    # what the library needs besides the answer still works: embed, attention, mlp
    assert len(model.mlp(model.embed(1, 0), 0)) == len(model.embed(1, 0))


def test_an_answer_a_later_test_needs_is_gone_too(tmp_path, monkeypatch):
    """GPT.stream_states (Task 6.1's answer), which Task 6.3's tests use, is gone from the
    kernel's library as well: the tests that need it run in the grader, which hands the
    student's code the states as data. GPT.step, the forward step training uses, is no
    answer and stays."""
    with answerless_microgpt(tmp_path, monkeypatch, "06_residual_stream"):
        from microgpt import GPT

        model = GPT(seed=0)
        assert len(model.step(1, 0, model.new_cache())) == 27  # logits, as before
        assert model.loss([0, 1, 2, 0]).data > 0  # training's own use
        with pytest.raises(AnswerSwitchedOff, match="Task 6.1"):
            model.stream_states([0, 1, 2])


@pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")
def test_no_answer_is_kept_for_the_library_either(tmp_path, monkeypatch):
    """deepnet.logits (Task 2.2's answer) is gone whoever calls it, the library's own
    mean_loss included, and in a copy of the module run anew."""
    with answerless_microgpt(tmp_path, monkeypatch, "02_degradation"):
        from microgpt import deepnet
        from microgpt.engine import linear

        def relu_layer(h, W):  # a plain layer, as a notebook would write it
            return [v.relu() for v in linear(h, W)]

        net = deepnet.make_net(2, width=3, d_in=2, n_classes=2, seed=0)
        X, Y = [[0.5, -1.0], [1.0, 0.25]], [0, 1]
        with pytest.raises(AnswerSwitchedOff, match="Task 2.2"):
            deepnet.mean_loss(net, X, Y, relu_layer)
        with pytest.raises(AnswerSwitchedOff, match="Task 2.2"):
            deepnet.logits(net, X[0], relu_layer)
        fresh = runpy.run_module("microgpt.deepnet")
        with pytest.raises(AnswerSwitchedOff, match="Task 2.2"):
            fresh["logits"](net, X[0], relu_layer)
