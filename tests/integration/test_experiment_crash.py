"""A crash in an experiment cell reads like one in a test (issue #27: "a crash goes through
the grader's insides"; the same kind, in the cells that train with a student's answer).

A real kernel runs four cells: an answer that joins two lists with `+` (a registered slip
of 05), then three cells that train a model with it through the library: one that calls
`needs_answer` as the course's experiment cells do, one that does not (IPython's own
traceback: the control, so that the test can fail), and one that calls `needs_answer` but
fails in its own code (no student code in the traceback: IPython's own as well).
"""

import re

import nbformat

from autograder.runner import run_notebook

ANSWER = '''\
from microgpt import rmsnorm


def pre_norm_block(model, x, layer, cache):
    a = model.attention(rmsnorm(x), layer, cache)
    x = x + a
    m = model.mlp(rmsnorm(x), layer)
    return [xi + mi for xi, mi in zip(x, m)]
'''

EXPERIMENT = '''\
from autograder.kernel.gptchecks import BlockGPT
from autograder.kernel.ready import needs_answer

needs_answer("Task 5.1", pre_norm_block)
model = BlockGPT(pre_norm_block, seed=0)
loss = model.loss([0, 1, 2, 0])
'''

WITHOUT = '''\
model = BlockGPT(pre_norm_block, seed=0)
loss = model.loss([0, 1, 2, 0])
'''

ITS_OWN = '''\
needs_answer("Task 5.1", pre_norm_block)
settings = {}
steps = settings["steps"]
'''

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _shown(cell):
    [error] = [o for o in cell.outputs if o.output_type == "error"]
    return _ANSI.sub("", "\n".join(error.traceback))


def test_a_crash_in_an_experiment_shows_the_students_lines_and_the_hint(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in (ANSWER, EXPERIMENT, WITHOUT, ITS_OWN)]
    _, stopped = run_notebook(nb, tmp_path)
    assert not stopped, stopped
    with_it, without, its_own = (_shown(c) for c in nb.cells[1:])

    # as a test shows it: the error, this cell's line, the student's line, where it was
    # raised, the hint of the slip; none of the library's frames in between
    assert with_it.startswith("ValueError in your answer: linear: a row of 16 weights for "
                              "32 inputs"), with_it
    assert ", this cell:" in with_it and "loss = model.loss" in with_it
    assert "in pre_norm_block:" in with_it and "x = x + a" in with_it
    assert "where the error was raised:" in with_it
    assert "Hint: " in with_it and "joins them" in with_it
    assert "microgpt/model.py" not in with_it and "gptchecks" not in with_it
    assert len(with_it.splitlines()) < 25, with_it

    # the control: IPython's own traceback goes through the library's frames
    assert "model.py" in without and "Hint: " not in without, without
    # an error of the cell's own code, with no student code in it: IPython's own
    assert "KeyError" in its_own and "in your answer" not in its_own, its_own
