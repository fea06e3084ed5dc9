"""A crash is a wrong answer (`autograder/kernel/crash.py`, through `checks.task`): what a
notebook shows when the student's code raises in a test, a misspelt name, an answer cell
that does not compile.

Cells are made here as a kernel makes them: code compiled under a name of its own (here
`<In[n]>`, shown as "Cell In[n]" the way Jupyter names a cell) with its source in
`linecache`, run in one namespace. The rendering compared is the list of lines IPython
shows (`_render_traceback_`).
"""

import linecache

import pytest

from autograder.kernel import checks, crash
from autograder.kernel.checks import BrokenAnswer, NotAnswered, task
from microgpt import Value, engine, linear

# the line of microgpt/engine.py that raises the error the crash test makes
LINEAR_RAISES = next(n for n, line in enumerate(open(engine.__file__, encoding="utf-8"), 1)
                     if 'raise ValueError(f"linear: a row of' in line)


@pytest.fixture
def notebook():
    """A namespace and `run(number, source)`, which runs a cell in it."""
    namespace = {"task": task, "checks": checks, "Value": Value, "linear": linear,
                 "__name__": "__main__"}
    made = []

    def run(number, source):
        filename = f"<In[{number}]>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        made.append(filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (a made-up cell)

    yield namespace, run
    for filename in made:
        linecache.cache.pop(filename, None)


def shown(exc):
    """What a notebook shows for `exc`: IPython renders `_render_traceback_` when an
    exception has it, else the usual traceback (None here)."""
    render = getattr(exc, "_render_traceback_", None)
    return "\n".join(render()) if render else None


JOINED_BLOCK = '''def block(x, W):
    """a residual add written on lists"""
    x = x + [2 * v for v in x]
    return linear(x, W)
'''

JOINED_TEST = '''with task("Task 5.1"):
    checks.check_gradients(lambda vs: Value.sum(block(vs, W)), [1.0, 2.0], what="block")
'''


def test_a_crash_shows_the_error_the_students_lines_and_the_line_that_raised(notebook):
    namespace, run = notebook
    namespace["W"] = [[0.5, -0.5], [1.0, 2.0]]
    run(5, JOINED_BLOCK)
    with pytest.raises(ValueError) as caught:
        run(7, JOINED_TEST)
    # the error stays what it is: nbgrader and the grader read its type and message
    assert type(caught.value) is ValueError
    assert str(caught.value) == "linear: a row of 2 weights for 4 inputs"
    assert shown(caught.value) == "\n".join([
        "ValueError in your answer: linear: a row of 2 weights for 4 inputs",
        "Cell In[7], line 2, the test:",
        '----> 2     checks.check_gradients(lambda vs: Value.sum(block(vs, W)), [1.0, 2.0], '
        'what="block")',
        "Cell In[5], line 4, in block:",
        '      2     """a residual add written on lists"""',
        "      3     x = x + [2 * v for v in x]",
        "----> 4     return linear(x, W)",
        f"microgpt/engine.py, line {LINEAR_RAISES}, in linear, where the error was raised:",
        f'----> {LINEAR_RAISES}             raise ValueError(f"linear: a row of {{len(row)}} '
        'weights for '
        '{len(x)} inputs")',
        "Hint: the model's layer got 4 numbers where its rows of weights have 2: twice as "
        "many. `+` on two Python lists joins them end to end ([a, b] + [c, d] is "
        "[a, b, c, d]); it does not add them number by number. Is a list of Values added "
        "to another list with `+`?",
    ])


def test_no_frame_of_the_checks_is_shown(notebook):
    namespace, run = notebook
    namespace["W"] = [[0.5, -0.5], [1.0, 2.0]]
    run(5, JOINED_BLOCK)
    with pytest.raises(ValueError) as caught:
        run(7, JOINED_TEST)
    text = shown(caught.value)
    assert "autograder" not in text and "checks.py" not in text
    assert "<lambda>" not in text  # the test's own lambda is the test's line, shown once


def test_a_misspelt_name_in_the_answer_is_a_nameerror_with_its_line(notebook):
    namespace, run = notebook
    run(3, "def layer(x):\n    return (0.1 * x).relu()\n")
    run(5, "def residual_stack(x, depth=20):\n    for _ in range(depth):\n"
           "        x = x + layr(x)\n    return x\n")
    with pytest.raises(NameError) as caught:
        run(8, 'with task("Task 1.1"):\n    residual_stack(Value(1.0), depth=20)\n')
    assert not isinstance(caught.value, NotAnswered)
    assert shown(caught.value) == "\n".join([
        "NameError in your answer: name 'layr' is not defined",
        "Cell In[8], line 2, the test:",
        "----> 2     residual_stack(Value(1.0), depth=20)",
        "Cell In[5], line 3, in residual_stack:",
        "      1 def residual_stack(x, depth=20):",
        "      2     for _ in range(depth):",
        "----> 3         x = x + layr(x)",
        "Hint: Did you mean 'layer'?",
    ])


def test_a_misspelt_local_name_is_matched_against_the_functions_own_names(notebook):
    """06: `out.append(state)` for `states`, a variable of the function: its locals are where
    the right spelling is, not the notebook's names."""
    namespace, run = notebook
    run(5, "def stream(xs):\n    states = []\n    for x in xs:\n        states.append(x)\n"
           "    return state\n")
    with pytest.raises(NameError) as caught:
        run(8, 'with task("Task 6.1"):\n    stream([Value(1.0)])\n')
    assert shown(caught.value).splitlines()[-1] == "Hint: Did you mean 'states'?"


def test_a_comprehensions_frame_on_its_functions_line_is_shown_once(notebook):
    """Python before 3.12 runs a list comprehension in a frame of its own, on the very line of
    the function that holds it: the student sees that line once (as 3.12 shows it)."""
    namespace, run = notebook
    run(5, "def f(xs):\n    return [v.data.relu() for v in xs]\n")
    with pytest.raises(AttributeError) as caught:
        run(6, 'with task("Task 2.1"):\n    f([Value(1.0)])\n')
    assert shown(caught.value) == "\n".join([
        "AttributeError in your answer: 'float' object has no attribute 'relu'",
        "Cell In[6], line 2, the test:",
        "----> 2     f([Value(1.0)])",
        "Cell In[5], line 2, in f:",
        "      1 def f(xs):",
        "----> 2     return [v.data.relu() for v in xs]",
        f"Hint: {crash.FLOAT_VALUE.format(kind='float', attr='relu')}",
    ])


def test_a_name_from_a_cell_not_run_says_to_run_it(notebook):
    namespace, run = notebook
    run(5, "def residual_stack(x, depth=20):\n    for _ in range(depth):\n"
           "        x = x + layer(x)\n    return x\n")
    with pytest.raises(NameError) as caught:
        run(8, 'with task("Task 1.1"):\n    residual_stack(Value(1.0), depth=20)\n')
    assert shown(caught.value).splitlines()[-1] == (
        "Hint: Check its spelling; if 'layer' is defined in another cell, run that cell first.")


@pytest.mark.parametrize("source, kind, line, text", [
    ("def residual_stack(x, depth=20):\n    for _ in range(depth):\n    x = x + layer(x)\n"
     "    return x\n", "IndentationError", 3,
     "expected an indented block after 'for' statement on line 2"),
    ("def residual_stack(x, depth=20):\n    for _ in range(depth)\n        x = x + layer(x)\n"
     "    return x\n", "SyntaxError", 2, "expected ':'"),
])
def test_an_answer_cell_that_does_not_compile_says_which_error_and_where(
        notebook, monkeypatch, source, kind, line, text):
    namespace, run = notebook
    # the kernel's history: cell 4 ran (and failed to compile), then the test, cell 5
    test = 'with task("Task 1.1"):\n    residual_stack(Value(1.0), depth=20)\n'
    monkeypatch.setattr(crash, "_history", lambda: ["", "import x", "", "", source, test])
    with pytest.raises(BrokenAnswer) as caught:
        run(5, test)
    bad_line = source.splitlines()[line - 1]
    assert shown(caught.value) == "\n".join([
        f"{kind} in your answer (Cell In[4], line {line}): {text}",
        f"----> {line} {bad_line}",
        "The cell did not run, so it defined nothing: fix that line and run the cell again, "
        "then this test.",
    ])
    assert "is not defined" not in shown(caught.value)


@pytest.mark.parametrize("answer, hint", [
    # a float where a Value belongs
    ("def f(x):\n    return x.data.relu()\n", crash.FLOAT_VALUE.format(kind="float", attr="relu")),
    # a whole list where one Value belongs
    ("def f(x):\n    return [x, x].relu()\n", crash.LIST_VALUE.format(attr="relu")),
    # lists of different lengths
    ("def f(x):\n    return linear([x, x, x], [[1.0, 2.0]])[0]\n",
     crash.LENGTHS.format(a=2, b=3)),
    # arithmetic between a list and a Value
    ("def f(x):\n    return [x] * x\n", crash.LIST_ARITHMETIC),
    ("def f(x):\n    return [x] + x\n", crash.LIST_ARITHMETIC),
    # two lists multiplied (03: a gate's list times the layer's list)
    ("def f(x):\n    return ([x] * [x])[0]\n", crash.LIST_ARITHMETIC),
    # an index past the end of a list
    ("def f(x):\n    return [x][1]\n", crash.INDEX),
])
def test_a_crash_that_fits_a_known_slip_gets_its_hint(notebook, answer, hint):
    namespace, run = notebook
    run(5, answer)
    with pytest.raises(Exception) as caught:
        run(6, 'with task("Task 1.1"):\n    checks.check_value(f(Value(1.0)), 1.0, what="f")\n')
    lines = shown(caught.value).splitlines()
    assert lines[0].startswith(f"{type(caught.value).__name__} in your answer: ")
    assert lines[-1] == f"Hint: {hint}"


def test_an_error_the_test_raises_on_what_the_answer_returned_says_so(notebook):
    namespace, run = notebook
    run(5, "def f(x):\n    return 'one'\n")
    with pytest.raises(TypeError) as caught:
        run(6, 'with task("Task 1.1"):\n    checks.central_difference(lambda t: f(t) + 1, 1.0)\n')
    lines = shown(caught.value).splitlines()
    assert lines[0].startswith("TypeError in the test, from what your code gave it: ")
    assert lines[-1] == f"Hint: {crash.TEST_USED}"


def test_a_misspelt_definition_is_pointed_out_instead_of_run_the_cells_above(notebook):
    namespace, run = notebook
    run(5, "def residual_stak(x, depth=20):\n    return x\n")
    with pytest.raises(NotAnswered) as caught:
        run(6, 'with task("Task 1.1"):\n    residual_stack(Value(1.0), depth=20)\n')
    assert str(caught.value) == (
        "Task 1.1: name 'residual_stack' is not defined, but your notebook defines "
        "'residual_stak': is the name misspelt there? The test calls it 'residual_stack'.")


def test_a_magic_in_the_answer_cell_is_not_taken_for_a_syntax_error(notebook, monkeypatch):
    """A cell run as IPython runs it (%time made Python) compiles: the answer is missing
    for another reason (here the cell stopped before its def), not a SyntaxError."""
    from IPython.core.inputtransformer2 import TransformerManager

    namespace, run = notebook
    answer = "%time import a_module_that_is_not_there\ndef residual_stack(x, depth=20):\n" \
             "    return x\n"
    shell = type("Shell", (), {
        "transform_cell": staticmethod(TransformerManager().transform_cell),
        "history_manager": type("History", (), {"input_hist_raw": ["", answer, ""]})(),
        "compile": None})()
    monkeypatch.setattr(crash, "_shell", lambda: shell)
    with pytest.raises(NotAnswered, match=r"^Task 1\.1: name 'residual_stack' is not "
                                          r"defined\. Run the notebook's cells above"):
        run(2, 'with task("Task 1.1"):\n    residual_stack(Value(1.0), depth=20)\n')


# ---------------------------------------------------------------- torch (08, 09)


@pytest.mark.parametrize("make, detail", [
    (lambda torch: torch.ones(5, 8) + torch.ones(8, 5),
     "8 against 5 in dimension 1, where they are added or multiplied"),
    (lambda torch: torch.ones(5, 8) @ torch.ones(5, 8),
     "a matrix product of 5x8 by 5x8: the first one's columns must be as many as the second "
     "one's rows"),
    (lambda torch: torch.nn.LayerNorm(8)(torch.ones(8, 5)),
     "a norm over the last 8 numbers got a tensor of shape (8, 5)"),
])
def test_a_tensor_shape_mismatch_gets_the_shapes_hint(make, detail):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as caught:
        make(torch)
    assert crash.slip_hint(caught.value) == crash.SHAPES.format(detail=detail)


def test_a_math_function_given_a_whole_tensor_gets_its_hint():
    torch = pytest.importorskip("torch")
    import math

    with pytest.raises((ValueError, TypeError)) as caught:
        math.exp(-torch.ones(5, 8))
    assert crash.slip_hint(caught.value) == crash.WHOLE_TENSOR


def test_a_misspelt_attribute_of_a_module_or_an_object_is_matched():
    torch = pytest.importorskip("torch")
    with pytest.raises(AttributeError) as caught:
        torch.sigmod  # noqa: B018 (the slip)
    assert crash.slip_hint(caught.value) == (
        "Did you mean 'sigmoid'? There is no 'sigmod' in the module torch.")
    layer = torch.nn.Linear(2, 2)
    with pytest.raises(AttributeError) as caught:
        layer.wieght  # noqa: B018
    assert crash.slip_hint(caught.value) == crash.ATTRIBUTE_LIKE.format(
        close="weight", what="a Linear", name="wieght")
    # no close name: no hint of this kind
    with pytest.raises(AttributeError) as caught:
        layer.nothing_like_it  # noqa: B018
    assert crash.slip_hint(caught.value) == ""


def test_a_misspelt_attribute_shows_the_students_line_not_the_librarys_getattr(notebook):
    """torch.sigmod: torch's module __getattr__ raises it; the student sees their own line
    and the hint, not a frame of torch's __init__.py."""
    torch = pytest.importorskip("torch")
    namespace, run = notebook
    namespace["torch"] = torch
    run(5, "def gate(h):\n    return torch.sigmod(h)\n")
    with pytest.raises(AttributeError) as caught:
        run(6, 'with task("Task 8.2"):\n    gate(torch.ones(2))\n')
    assert shown(caught.value) == "\n".join([
        "AttributeError in your answer: module 'torch' has no attribute 'sigmod'",
        "Cell In[6], line 2, the test:",
        "----> 2     gate(torch.ones(2))",
        "Cell In[5], line 2, in gate:",
        "      1 def gate(h):",
        "----> 2     return torch.sigmod(h)",
        "Hint: Did you mean 'sigmoid'? There is no 'sigmod' in the module torch.",
    ])


def test_an_earlier_answer_not_released_shows_its_message_alone(notebook, monkeypatch):
    """A student's install before Assignment 2's answers (issue 41, item 2): the student's
    Task 4.2 calls the library's forward pass, held back until 02's due date. The test
    shows what waits and what to do, not the student's lines nor the library's `raise`
    (which read as a fault in their code)."""
    import importlib.machinery
    import sys
    import types

    from autograder.authoring import withheld
    from microgpt import earlier

    solved = types.ModuleType("microgpt.solved")
    solved.__path__ = []  # as the student wheel ships it: no answer released yet
    solved.__spec__ = importlib.machinery.ModuleSpec("microgpt.solved", None, is_package=True)
    exec(compile(withheld.SOLVED_INIT, "microgpt/solved/__init__.py", "exec"), solved.__dict__)
    monkeypatch.setitem(sys.modules, "microgpt.solved", solved)
    monkeypatch.setattr(earlier, "_OWN", {})
    namespace, run = notebook
    namespace["released"] = solved.released
    run(5, "def first_last_ratio(x):\n"
           "    logits = released('02_degradation', 'deepnet.logits', 'Task 2.2', 'logits')\n"
           "    return logits(x)\n")
    with pytest.raises(solved.NotReleased) as caught:
        run(6, 'with task("Task 4.2"):\n'
               '    checks.check_value(first_last_ratio(1.0), 1.0, what="the ratio")\n')
    assert shown(caught.value) == f"NotReleased: {caught.value}"
    assert str(caught.value).startswith(
        "deepnet.logits (Task 2.2) is released after 02_degradation's due date")
