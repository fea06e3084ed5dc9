"""`autograder.kernel.ready`: the one line a given cell says when it cannot run yet."""

import re
from pathlib import Path

import pytest

from autograder.kernel.ready import STUB_TEXT, holds_stub, needs_answer, needs_run
from autograder.kernel.witness import NotAnswered

REPO = Path(__file__).resolve().parents[2]


def stub_layer(h):
    # YOUR CODE HERE
    raise NotImplementedError("write your solution here")


def half_done(h):
    h = [2 * v for v in h]
    raise NotImplementedError("write your solution here")


def answered(h):
    return [v + 1 for v in h]


def raises_its_own(h):
    raise NotImplementedError("negative depths are not supported")


class StubModule:
    def __init__(self):
        self.width = 3

    def forward(self, x):
        # YOUR CODE HERE
        raise NotImplementedError("write your solution here")


class AnsweredModule:
    def forward(self, x):
        return x

    @staticmethod
    def helper():
        return 1


def test_the_stub_text_is_the_courses():
    config = (REPO / "nbgrader_config.py").read_text()
    stub = re.search(r'raise NotImplementedError\("([^"]*)"\)', config).group(1)
    assert stub == STUB_TEXT


@pytest.mark.parametrize("obj, stub", [
    (stub_layer, True), (half_done, True), (StubModule, True),
    (answered, False), (raises_its_own, False), (AnsweredModule, False),
    (StubModule().forward, True), (len, False), (3, False),
])
def test_a_stub_is_told_from_an_answer(obj, stub):
    assert holds_stub(obj) is stub


def test_needs_answer_names_the_task_and_what_still_raises():
    with pytest.raises(NotAnswered) as caught:
        needs_answer("Tasks 4.1 and 4.2", answered, stub_layer, StubModule)
    message = str(caught.value)
    assert message == ("This cell runs stub_layer and StubModule, which still raise "
                       "NotImplementedError: do Tasks 4.1 and 4.2 first, run their cells, "
                       "then this one.")
    assert "answered" not in message
    # a notebook shows it as one line, no traceback
    assert caught.value._render_traceback_() == [f"NotAnswered: {message}"]


def test_one_missing_answer_reads_in_the_singular():
    with pytest.raises(NotAnswered, match="runs stub_layer, which still raises .* its cell"):
        needs_answer("Task 4.1", stub_layer)


def test_needs_answer_does_nothing_once_answered():
    needs_answer("Task 4.1", answered, AnsweredModule)


results = {"plain": [1.0]}
models = {"pre-norm": object()}


def test_needs_run_says_which_name_is_missing_and_who_makes_it():
    with pytest.raises(NotAnswered) as caught:
        needs_run("the depth study above", "results", "histories", "models['post-norm']")
    message = str(caught.value)
    assert message.startswith("Nothing to show yet: histories and models['post-norm'] "
                              "come from the depth study above")


def test_needs_run_does_nothing_when_everything_is_there():
    needs_run("the cells above", "results", "models['pre-norm']", "results['plain']")


def test_needs_run_refuses_an_expression_it_does_not_read():
    with pytest.raises(ValueError):
        needs_run("the cells above", "results.keys()")
