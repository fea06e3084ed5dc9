"""The graded cells' checks: each passes on right answers and fails, with its message, on wrong."""

import math
import re

import pytest
from hypothesis import given
from strategies import floats

from autograder.answers import mutants as mutant_registry
from autograder.kernel.checks import (
    CheckFailed,
    NotAnswered,
    backward_alone,
    central_difference,
    check_gradient,
    check_gradients,
    check_numbers,
    check_value,
    check_values,
    task,
)
from microgpt import Value


def residual(x, depth):
    """The right answer to Task 1.1, written here as an oracle."""
    for _ in range(depth):
        x = x + (0.1 * x).relu()
    return x


def detached(x, depth):
    """Right numbers, but computed on floats: no path back to the input."""
    h = x.data
    for _ in range(depth):
        h = h + max(0.0, 0.1 * h)
    return Value(h)


def fails_with(message):
    """`pytest.raises(CheckFailed)` whose message must be exactly `message`."""
    return pytest.raises(CheckFailed, match="^" + re.escape(message) + "$")


# ---- the failure classes ----


def test_failures_are_assertion_errors_so_nbgrader_counts_them():
    assert issubclass(CheckFailed, AssertionError)
    assert issubclass(NotAnswered, CheckFailed)


# ---- check_value ----


def test_check_value_passes_on_a_value_and_on_a_number():
    check_value(residual(Value(1.0), 20), 1.1**20, what="residual_stack(Value(1.0), depth=20)")
    check_value(1.1**20, 1.1**20, what="a float")
    check_value(3, 3.0, what="an int")


def test_check_value_message_states_what_expected_and_actual():
    with fails_with("residual_stack(1.0, depth=20): expected 6.7275 (1.1**20), got 1e-20"):
        check_value(
            Value(1e-20), 1.1**20, what="residual_stack(1.0, depth=20)", expected_text="1.1**20"
        )


def test_check_value_without_expected_text():
    with fails_with("y: expected 2, got 3"):
        check_value(3.0, 2.0, what="y")


def test_check_value_shows_all_digits_when_the_short_forms_look_equal():
    with fails_with("y: expected 1.0, got 1.000001"):
        check_value(1.000001, 1.0, what="y")


def test_check_value_tolerance_is_relative_plus_absolute():
    check_value(1.0 + 1e-10, 1.0, what="y")  # inside the default rtol 1e-9
    with pytest.raises(CheckFailed):
        check_value(1.0 + 1e-8, 1.0, what="y")
    check_value(1.0 + 1e-8, 1.0, what="y", rtol=1e-7)
    check_value(1e-13, 0.0, what="y", atol=1e-12)


def test_check_value_default_atol_tells_1e_20_from_0():
    with fails_with("g: expected 1e-20 (0.1**20), got 0"):
        check_value(0, 0.1**20, what="g", expected_text="0.1**20")
    check_value(0, 0.0, what="g")


def test_check_value_fails_on_nan_and_inf():
    with fails_with("y: expected 1, got nan"):
        check_value(math.nan, 1.0, what="y")
    with fails_with("y: expected 1, got inf"):
        check_value(Value(math.inf), 1.0, what="y")


def test_check_value_on_none_says_return_is_missing():
    with fails_with(
        "residual_stack(Value(1.0), depth=20): expected a number or a Value, got None. "
        "Does the function end with `return`?"
    ):
        check_value(None, 1.1**20, what="residual_stack(Value(1.0), depth=20)")


def test_check_value_on_a_list_says_it_wants_one_value():
    with fails_with("out: expected a single number or Value, got a list of 2 items: [1.0, 2.0]"):
        check_value([1.0, 2.0], 1.0, what="out")


def test_check_value_on_other_types():
    with fails_with("out: expected a number or a Value, got a str: '6.7275'"):
        check_value("6.7275", 6.7275, what="out")
    with fails_with("out: expected a number or a Value, got a bool: True"):
        check_value(True, 1.0, what="out")
    with fails_with(
        "out: expected a Value holding a number, got a Value whose .data is a str: 'a'"
    ):
        check_value(Value("a"), 1.0, what="out")


def test_check_value_cuts_long_reprs():
    with pytest.raises(CheckFailed) as info:
        check_value(list(range(1000)), 1.0, what="out")
    assert len(str(info.value)) < 150
    assert str(info.value).endswith("...")


def test_check_value_can_insist_on_a_plain_number():
    check_value(0.001, 0.1**3, what="g", value_ok=False)
    with pytest.raises(CheckFailed, match=r"^g: expected a plain number, got a Value \(Value\("):
        check_value(Value(0.001), 0.1**3, what="g", value_ok=False)


def test_a_task_that_asks_for_a_number_is_not_offered_a_value():
    """Task 1.2 asks for a number (a .grad): its check's messages say "a number", never
    "a number or a Value"; so do those of list checks whose task asks for numbers."""
    with fails_with("g: expected a number, got None. Does the function end with `return`?"):
        check_value(None, 1.0, what="g", value_ok=False)
    with fails_with("g: expected a single number, got a list of 2 items: [1.0, 2.0]"):
        check_value([1.0, 2.0], 1.0, what="g", value_ok=False)
    with fails_with("g: expected a number, got a str: '1'"):
        check_value("1", 1.0, what="g", value_ok=False)
    with fails_with("norms: expected a list of 2 numbers, got 3: [1.0, 2.0, 3.0]"):
        check_values([1, 2, 3], [1.0, 2.0], what="norms", numbers_only=True)
    with fails_with("norms: expected a list of 2 numbers, got None. "
                    "Does the function end with `return`?"):
        check_values(None, [1.0, 2.0], what="norms", numbers_only=True)
    with fails_with("norms, item [1]: expected a number, got a str: 'x'"):
        check_values([1.0, "x"], [1.0, 2.0], what="norms", numbers_only=True)


# ---- central_difference and check_gradient ----


def test_central_difference_on_numbers_and_values():
    assert central_difference(lambda t: t**3, 2.0) == pytest.approx(12.0, rel=1e-8)
    assert central_difference(lambda t: Value(t) ** 3, 2.0) == pytest.approx(12.0, rel=1e-8)


def test_check_gradient_passes_and_returns_the_grad():
    grad = check_gradient(lambda x: residual(x, 20), 1.0, what="d residual/dx")
    assert grad == pytest.approx(1.1**20, rel=1e-12)
    assert check_gradient(lambda x: residual(x, 20), -1.5, what="d residual/dx") == 1.0
    assert check_gradient(lambda x: x, 2.0, what="identity") == 1  # depth 0: the input itself


@given(floats(-5.0, 5.0).filter(lambda t: abs(t) > 1e-3))
def test_check_gradient_passes_on_the_residual_stack_anywhere_off_the_kink(x0):
    check_gradient(lambda x: residual(x, 7), x0, what="d residual/dx")


CUT_GRAPH_HINT = next(m.hint for m in mutant_registry.load("01_residual_stack")
                      if m.name == "right numbers on floats, graph cut from the input")


def test_check_gradient_fails_when_the_graph_is_cut_from_the_input():
    with fails_with(
        "d residual_stack(x, depth=20)/dx at x = 1.0: expected 6.7275 (central difference, "
        "h=1e-06), got 0 (the input's .grad after backward). No path in the output's graph "
        "leads back to the input, so backward() cannot reach it: the output no longer depends "
        "on it. Was a result rebuilt from numbers (Value(... .data ...))? Build it from the "
        "input with Value operations. This looks like a known mistake: " + CUT_GRAPH_HINT
    ):
        # the visible test of Task 1.1 as a student gets it: this is a registered mistake
        check_gradient(
            lambda x: detached(x, 20), 1.0, what="d residual_stack(x, depth=20)/dx at x = 1.0"
        )


def test_check_gradient_fails_on_a_wrong_local_gradient():
    def wrong_square(x):
        return Value(x.data**2, (x,), (x.data,))  # the local gradient should be 2x

    with fails_with("d x**2/dx: expected 6 (central difference, h=1e-06), got 3 "
                    "(the input's .grad after backward)"):
        check_gradient(wrong_square, 3.0, what="d x**2/dx")


def test_check_gradient_fails_when_no_value_comes_back():
    with fails_with(
        "d f/dx: expected a Value built from the input, got a float (2.0), "
        "so there is no graph to run backward on"
    ):
        check_gradient(lambda x: x.data * 2, 1.0, what="d f/dx")
    with fails_with(
        "d f/dx: expected a Value built from the input, got None. "
        "Does the function end with `return`?"
    ):
        check_gradient(lambda x: None, 1.0, what="d f/dx")


def _forged(x, depth=20):
    """The right output on floats (no graph back to x), and x.grad written by hand."""
    def forward(t):
        for _ in range(depth):
            t = t + max(0.0, 0.1 * t)
        return t

    x.grad = (forward(x.data + 1e-6) - forward(x.data - 1e-6)) / 2e-6
    return Value(forward(x.data))


def test_a_grad_written_by_the_function_is_not_read_as_backwards():
    # the attack: it would pass if the check read .grad as the function left it
    assert _forged(Value(1.0)).data == pytest.approx(1.1**20)
    with pytest.raises(CheckFailed, match=r"got 0 \(the input's \.grad after backward\)\. "
                                          r"The input's \.grad was already 6\.7275"):
        check_gradient(_forged, 1.0, what="d residual_stack(x, depth=20)/dx at x = 1.0")
    with pytest.raises(CheckFailed, match=r"was already 6\.7275.*it wrote into \.grad"):
        check_gradients(lambda vs: _forged(vs[0]), [1.0], what="f")


def test_a_function_that_runs_backward_itself_still_gets_its_gradient_once():
    def eager(x):
        out = residual(x, 3)
        out.backward()  # the old check would have added a second 1.1**3 to x.grad
        return out

    assert check_gradient(eager, 1.0, what="f") == pytest.approx(1.1**3, rel=1e-12)


class _Sneaky(Value):
    """A node whose local gradients run code when backward() reads them."""

    __slots__ = ("_kept",)

    @property
    def _local_grads(self):
        self._children[0].grad = 99.0
        return self._kept

    @_local_grads.setter
    def _local_grads(self, local):
        self._kept = local


class _Number(float):
    """A float of the student's: its arithmetic is their code."""

    def __mul__(self, other):
        return 99.0


@pytest.mark.parametrize("make, says", [
    (lambda x: _Sneaky(x.data, (x,), (0.0,)), "a node of the graph is a _Sneaky, not the engine's"),
    (lambda x: Value(x.data, (x,), (_Number(1.0),)),
     "holds a gradient that is not a plain number"),
    (lambda x: Value(x.data, _Tuple((x,)), (1.0,)), "in a _Tuple, not in a tuple"),
    (lambda x: x + _leaf_with_grad(_Number(0.0)), "holds a gradient that is not a plain number"),
])
def test_a_graph_with_parts_of_the_students_own_fails_before_backward_runs(make, says):
    with pytest.raises(CheckFailed, match=re.escape(says)):
        check_gradient(make, 1.0, what="f")
    with pytest.raises(CheckFailed, match=re.escape(says)):
        check_gradients(lambda vs: make(vs[0]), [1.0], what="f")


class _Tuple(tuple):
    pass


def _leaf_with_grad(grad):
    leaf = Value(2.0)
    leaf.grad = grad
    return leaf


def test_backward_alone_leaves_an_honest_graph_as_backward_would():
    x, w = Value(0.5), Value(-1.5)
    out = (x * w).tanh() + Value.sum([x, w, x * x])
    assert backward_alone(out, [x]) is None
    got = (x.grad, w.grad)
    x2, w2 = Value(0.5), Value(-1.5)
    ((x2 * w2).tanh() + Value.sum([x2, w2, x2 * x2])).backward()
    assert got == (x2.grad, w2.grad)


# ---- task: missing and unfinished answers ----


def test_task_turns_a_missing_name_into_a_message_naming_the_task():
    with pytest.raises(NotAnswered, match=r"^Task 1\.1: name 'residual_stack' is not defined\. "
                                          r"Run the notebook's cells above this one, in order"):
        with task("Task 1.1"):
            residual_stack  # noqa: B018, F821 (the missing answer)


def test_task_turns_the_stub_into_a_message_naming_the_task():
    def stub(x, depth=20):
        raise NotImplementedError("write your solution here")

    with pytest.raises(NotAnswered) as info:
        with task("Task 1.2"):
            stub(Value(1.0))
    assert str(info.value) == (
        "Task 1.2 is not done yet: the code still raises NotImplementedError "
        "(write your solution here). Replace the stub in the Task 1.2 cell with your code "
        "and run that cell."
    )
    # the stub's own traceback is dropped: the message is all a student needs
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_task_lets_check_failures_and_other_errors_through_unchanged():
    failure = CheckFailed("y: expected 2, got 3")
    with pytest.raises(CheckFailed) as info:
        with task("Task 1.1"):
            raise failure
    assert info.value is failure
    with pytest.raises(ZeroDivisionError):
        with task("Task 1.1"):
            1 / 0  # noqa: B018


def test_task_is_silent_when_the_block_passes():
    with task("Task 1.1"):
        check_value(residual(Value(2.0), 1), 2.2, what="y")


# ---- check_values and check_gradients: lists of outputs, functions of many inputs ----


def test_check_values_passes_on_values_and_numbers():
    check_values([Value(1.0), 2.0], [1.0, 2.0], what="out")
    check_values((Value(0.5),), [0.5], what="out")


def test_check_values_names_the_first_wrong_item():
    with fails_with("layer(h), item [1]: expected 2 (relu), got 3"):
        check_values([1.0, 3.0, 9.0], [1.0, 2.0, 4.0], what="layer(h)", expected_text="relu")


def test_an_index_is_never_glued_to_the_words_of_a_check():
    """"residual_layer(h, W) at width 8[0]" read like a typo: an item's index comes after
    a comma and the word "item", nested indices after it, labelled depths by their label."""
    with fails_with("residual_layer(h, W) at width 8, item [0]: expected 1, got 2"):
        check_values([2.0, 2.0], [1.0, 2.0], what="residual_layer(h, W) at width 8")
    with fails_with("rows, item [1][0]: expected 3, got 4"):
        check_numbers([[1.0, 2.0], [4.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], what="rows")
    with fails_with("states, position 1, item [0]: expected 3, got 4"):
        check_numbers([[1.0, 2.0], [4.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], what="states",
                      labels=("position",))
    with fails_with("states, position 1, component 0: expected 3, got 4"):
        check_numbers([[1.0, 2.0], [4.0, 4.0]], [[1.0, 2.0], [3.0, 4.0]], what="states",
                      labels=("position", "component"))


def test_check_values_wants_a_list_of_the_right_length():
    with fails_with("out: expected a list of 2 numbers or Values, got 3: [1.0, 2.0, 3.0]"):
        check_values([1, 2, 3], [1.0, 2.0], what="out")
    with fails_with("out: expected a list of 2 numbers or Values, got a float: 1.0"):
        check_values(1.0, [1.0, 2.0], what="out")
    with fails_with("out: expected a list of 2 numbers or Values, got None. "
                    "Does the function end with `return`?"):
        check_values(None, [1.0, 2.0], what="out")


def test_a_list_twice_as_long_names_lists_joined_with_plus():
    h, f = [Value(1.0), Value(2.0)], [Value(0.5), Value(0.25)]
    with fails_with("h + f(h): expected a list of 2 numbers or Values, got 4: "
                    "[1.0, 2.0, 0.5, 0.25] (twice as many: `+` on two Python lists joins them "
                    "end to end, [a, b] + [c, d] is [a, b, c, d], instead of adding them item "
                    "by item)"):
        check_values(h + f, [1.5, 2.25], what="h + f(h)")
    with fails_with("out: expected a list of 2 numbers or Values, got 6: "
                    "[1.0, 2.0, 1.0, 2.0, 1.0, 2.0] (three times as many: `+` on two Python "
                    "lists joins them end to end, [a, b] + [c, d] is [a, b, c, d], instead of "
                    "adding them item by item)"):
        check_values(h + h + h, [1.0, 2.0], what="out")


def _product(vs):
    return vs[0] * vs[1] + vs[1].tanh()


def test_check_gradients_passes_and_returns_every_grad():
    grads = check_gradients(_product, [2.0, 0.5], what="f")
    assert grads == pytest.approx([0.5, 2.0 + 1 - math.tanh(0.5) ** 2], rel=1e-12)


def test_check_gradients_names_the_input_whose_grad_is_wrong():
    def wrong(vs):  # the local gradient of the second input is dropped
        return Value(vs[0].data * vs[1].data, (vs[0],), (vs[1].data,))

    with pytest.raises(CheckFailed, match=r"^f, d/d y: expected 2 \(central difference, "
                                          r"h=1e-06\), got 0 \(its \.grad after backward\)$"):
        check_gradients(wrong, [2.0, 3.0], what="f", names=["x", "y"])


def test_check_gradients_against_a_reference_function_of_floats():
    def f_reference(xs):
        return xs[0] * xs[1] + math.tanh(xs[1])

    check_gradients(_product, [2.0, 0.5], what="f", reference=f_reference)
    with pytest.raises(CheckFailed, match=r"^f, d/d input 0: expected 1 \(central difference "
                                          r"of x \+ y, h=1e-06\), got 0\.5"):
        check_gradients(_product, [2.0, 0.5], what="f", reference=lambda xs: xs[0] + xs[1],
                        reference_text="x + y")


def test_check_gradients_wants_a_value_built_from_the_inputs():
    with fails_with("f: expected a Value built from the inputs, got a float (1.0), "
                    "so there is no graph to run backward on"):
        check_gradients(lambda vs: vs[0].data, [1.0], what="f")


def test_a_training_runs_check_is_never_diagnosed(tmp_path, monkeypatch):
    """The numbers of a training run differ in their last digits from one machine to
    another: a check marked reproducible=False names no known mistake (its fingerprint
    would not hold on another machine) and its record says so to the table's generator."""
    import json

    from autograder.kernel import diagnosis

    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(diagnosis.RECORD_VARIABLE, str(log))
    monkeypatch.setattr(diagnosis, "known_hints", lambda key, passed=(): ["a named mistake"])
    with pytest.raises(CheckFailed) as caught:
        check_value(2.5, 2.0, what="final training loss", reproducible=False)
    assert diagnosis.LEAD not in str(caught.value)
    with pytest.raises(CheckFailed) as named:
        check_value(2.5, 2.0, what="a forward value")
    assert diagnosis.LEAD in str(named.value)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r.get("exact", True) for r in records] == [False, True]
    a = diagnosis.fingerprint("number", "w", {"number": 2.2375}, exact=False)
    b = diagnosis.fingerprint("number", "w", {"number": 2.3196}, exact=False)
    assert a == b != diagnosis.fingerprint("number", "w", {"number": 2.2375})
