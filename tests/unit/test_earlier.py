"""`microgpt.earlier`: a student's own earlier answers, used by a student's install until the
model answer is released (issue #41 item 2). The student's install is made here as the
student wheel has it: `microgpt.solved` is the wheel's `SOLVED_INIT`, with no released
module in it."""

import importlib.machinery
import sys
import types

import pytest

from autograder.authoring import withheld
from microgpt import GPT, GPTConfig, earlier, rmsnorm
from microgpt.deepnet import logits, make_net


@pytest.fixture
def student_install(monkeypatch):
    """`microgpt.solved` as the student wheel ships it (no answer released yet)."""
    solved = types.ModuleType("microgpt.solved")
    solved.__path__ = []  # a package with nothing in it: no a<assignment> module
    solved.__spec__ = importlib.machinery.ModuleSpec("microgpt.solved", None, is_package=True)
    exec(compile(withheld.SOLVED_INIT, "microgpt/solved/__init__.py", "exec"), solved.__dict__)
    monkeypatch.setitem(sys.modules, "microgpt.solved", solved)
    monkeypatch.setattr(earlier, "_OWN", {})
    return solved


def test_before_an_answer_is_given_the_call_says_how_to_give_one(student_install):
    with pytest.raises(student_install.NotReleased, match="use_my_answers"):
        student_install.released("02_degradation", "deepnet.logits", "Task 2.2", "logits")


def test_the_students_own_forward_pass_stands_in_until_the_release(student_install, capsys):
    calls = []

    def mlp_logits(net, x, layer):
        calls.append(len(x))
        return logits(net, x, layer)  # (the library's, as the instructor has it)

    earlier.use_my_answers("02_degradation", logits=mlp_logits)
    assert "library uses yours" in capsys.readouterr().out
    own = student_install.released("02_degradation", "deepnet.logits", "Task 2.2", "logits")
    net = make_net(2, width=3, d_in=2, seed=0)
    layer = lambda h, W: [v.relu() for v in h]  # noqa: E731
    assert [v.data for v in own(net, [1.0, 2.0], layer)] == \
        [v.data for v in logits(net, [1.0, 2.0], layer)]
    assert calls == [2]


def test_own_blocks_are_used_by_layout_and_a_missing_one_is_named(student_install, capsys):
    seen = []

    def pre_norm_block(model, x, layer, cache):
        seen.append("pre")
        a = model.attention(rmsnorm(x), layer, cache)
        return [xi + ai for xi, ai in zip(x, a)]

    def post_norm_block(model, x, layer, cache):
        raise NotImplementedError("write your solution here")

    earlier.use_my_answers("05_gpt_residual_adds", pre=pre_norm_block, post=post_norm_block)
    said = capsys.readouterr().out
    assert "post_norm_block (Task 5.2): still raises NotImplementedError" in said
    assert "no_residual_block (Task 5.3): not pasted above yet" in said
    block = student_install.released("05_gpt_residual_adds", "GPT.block", "Tasks 5.1 to 5.3",
                                     "GPT_block")
    model = GPT(GPTConfig(vocab_size=5, n_layer=1, n_embd=8, n_head=2, block_size=4), seed=0)
    out = block(model, model.embed(1, 0), 0, model.new_cache()[0])
    assert seen == ["pre"] and len(out) == 8
    post = GPT(GPTConfig(vocab_size=5, n_layer=1, n_embd=8, n_head=2, block_size=4,
                         layout="post"), seed=0)
    with pytest.raises(LookupError, match="post_norm_block .Task 5.2."):
        block(post, post.embed(1, 0), 0, post.new_cache()[0])


def test_a_released_answer_wins_over_the_students(student_install, monkeypatch, capsys):
    monkeypatch.setattr(earlier, "_released", lambda assignment: True)
    earlier.use_my_answers("02_degradation", logits=lambda net, x, layer: [])
    assert "released answer of 02_degradation is installed" in capsys.readouterr().out


def test_where_the_library_holds_its_answers_nothing_changes(capsys):
    """An instructor's install and the grader: no `microgpt.solved`, the library's own."""
    earlier.use_my_answers("02_degradation", logits=None)
    assert "library has its own deepnet.logits" in capsys.readouterr().out
    assert earlier.own_answer("02_degradation", "logits") is None


def test_wrong_calls_are_named():
    with pytest.raises(ValueError, match="no later notebook builds on '03_highway'"):
        earlier.use_my_answers("03_highway")
    with pytest.raises(TypeError, match="takes pre, post, none, not blocks"):
        earlier.use_my_answers("05_gpt_residual_adds", blocks=print)
