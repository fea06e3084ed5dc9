"""Wrong answers to the residual stack assignment (Tasks 1.1 and 1.2) that the tests must catch."""

from autograder.answers.mutants import Mutant, Slip

STACK = "task1_1_residual_stack"
GRADIENT = "task1_2_input_gradient"
OUTPUT_TEST = "task1_1_test_output"
GRADIENT_TEST = "task1_1_test_gradient"
INPUT_GRADIENT_TEST = "task1_2_test_input_gradient"
BOTH_TASK_1_1_TESTS = (OUTPUT_TEST, GRADIENT_TEST)

# one mistake, one hint: answers that make the same mistake in other words share its hint,
# so that a check they all fail alike names it once
ADDED_TWICE = ("the shortcut seems to be added twice in each layer, so every layer doubles x. "
               "Count how many times x appears in one step.")
CONSTANT = ("the output is a constant number, not a Value built from x by the layers: nothing "
            "in it depends on x, so backward() has nothing to follow, and other inputs and "
            "depths get the same number.")


def _stack(body: str) -> str:
    """The whole source of the Task 1.1 cell with `body` as the function's body."""
    return "def residual_stack(x, depth=20):\n" + body


def _gradient(body: str) -> str:
    """The whole source of the Task 1.2 cell with `body` as the function's body."""
    return "def input_gradient(stack, x, depth):\n" + body


MUTANTS = [
    # ---- Task 1.1: residual_stack ----
    Mutant(
        name="plain stack returned as the residual one",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "each layer's output replaces x instead of being added to it: that is the plain stack, "
            "whose gradient vanishes. Where does the skip path go?"
        ),
    ),
    Mutant(
        name="shortcut added twice per layer",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=ADDED_TWICE,
    ),
    Mutant(
        name="shortcut added again after the layer",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + layer(x) + x\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=ADDED_TWICE,
    ),
    Mutant(
        name="hard-coded 6.727, no graph",
        cell=STACK,
        source=_stack("    return Value(6.727)\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=CONSTANT,
    ),
    Mutant(
        name="hard-coded 1.1**20, no graph",
        cell=STACK,
        source=_stack("    return Value(1.1**20)\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=CONSTANT,
    ),
    Mutant(
        name="shortcut added only once, around the whole plain stack",
        cell=STACK,
        source=_stack(
            "    h = x\n    for _ in range(depth):\n        h = layer(h)\n    return x + h\n"
        ),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the shortcut seems to be added once around all the layers instead of around each "
            "layer: the inner layers are still a plain stack."
        ),
    ),
    Mutant(
        name="depth ignored: always 20 layers",
        cell=STACK,
        source=_stack("    for _ in range(20):\n        x = x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the number of layers does not follow the depth argument: is a fixed count written in "
            "the loop?"
        ),
    ),
    Mutant(
        name="one layer too many",
        cell=STACK,
        source=_stack("    for _ in range(depth + 1):\n        x = x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the stack seems to have one layer more than depth asks for: check where the loop "
            "starts and stops."
        ),
    ),
    Mutant(
        name="multiplies by 1.1 instead (forgets the relu)",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x * 1.1\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the result behaves like x * 1.1 per layer, which matches only while x is positive: "
            "the layer is relu(0.1 x), so negative inputs must go through the relu."
        ),
    ),
    Mutant(
        name="relu applied to the sum instead of inside the layer",
        cell=STACK,
        source=_stack(
            "    for _ in range(depth):\n        x = (x + 0.1 * x).relu()\n    return x\n"
        ),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the relu seems to be applied to the sum instead of inside the layer: the shortcut "
            "must carry x through unchanged, negative values included."
        ),
    ),
    Mutant(
        name="right numbers on floats, graph cut from the input",
        cell=STACK,
        source=_stack(
            "    h = x.data\n    for _ in range(depth):\n        h = h + max(0.0, 0.1 * h)\n"
            "    return Value(h)\n"
        ),
        loses=(GRADIENT_TEST,),
        hint=(
            "the numbers are right but they were computed on plain floats (.data), so the output "
            "is a new Value with no path back to the input: backward() cannot reach x."
        ),
    ),
    # ---- Task 1.2: input_gradient ----
    Mutant(
        name="returns the stack's output instead of the gradient",
        cell=GRADIENT,
        source=_gradient("    return stack(Value(float(x)), depth=depth).data\n"),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the function returns the stack's output value, not the gradient of the output with "
            "respect to the input."
        ),
    ),
    Mutant(
        name="reads the gradient without calling backward",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth)\n    return v.grad\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the input's .grad is read before backward() has run, so it is still 0: call "
            "backward() on the output first."
        ),
    ),
    Mutant(
        name="returns the output's gradient (always 1)",
        cell=GRADIENT,
        source=_gradient(
            "    out = stack(Value(float(x)), depth=depth)\n    out.backward()\n"
            "    return out.grad\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "this is the output's own .grad, which backward() sets to 1; the gradient asked for is "
            "on the input Value."
        ),
    ),
    Mutant(
        name="formula of the plain stack, 0.1**depth, for every stack",
        cell=GRADIENT,
        source=_gradient("    return 0.1**depth\n"),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the gradient comes from a formula for one particular stack instead of from backward() "
            "through the stack you are given: a different stack gets the same number."
        ),
    ),
    Mutant(
        name="returns the input Value itself instead of its .grad",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth).backward()\n    return v\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the function returns the input Value itself; the task asks for the number held in its "
            ".grad."
        ),
    ),
    Mutant(
        name="one input Value per x, reused across calls: gradients pile up",
        cell=GRADIENT,
        source=(
            "_inputs = {}\n\n\n"
            + _gradient(
                "    v = _inputs.setdefault(x, Value(float(x)))\n"
                "    stack(v, depth=depth).backward()\n    return v.grad\n"
            )
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "an input Value seems to be reused between calls, so each backward() adds to the .grad "
            "left by the previous one: make a fresh Value for every call."
        ),
    ),
    # ---- shortcuts that give the right numbers on the visible inputs ----
    Mutant(
        name="closed form: x * 1.1**depth for x > 0, x otherwise (the layer never called)",
        cell=STACK,
        source=_stack("    return x * 1.1**depth if x.data > 0 else x\n"),
        loses=BOTH_TASK_1_1_TESTS,
        hint=(
            "the output comes from a closed-form formula instead of applying the layer depth "
            "times: it matches the stack on some inputs only, and other layers would break it."
        ),
    ),
    Mutant(
        name="central differences instead of backward()",
        cell=GRADIENT,
        source=_gradient(
            "    h = 1e-6\n"
            "    up = stack(Value(float(x) + h), depth=depth).data\n"
            "    down = stack(Value(float(x) - h), depth=depth).data\n"
            "    return (up - down) / (2 * h)\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the gradient is estimated with finite differences instead of being read from .grad "
            "after backward(): close, but not what the task asks for."
        ),
    ),
    Mutant(
        name="the input Value made from a numpy array holding x",
        cell=GRADIENT,
        source=(
            "import numpy as np\n\n\n"
            + _gradient(
                "    v = Value(np.array([float(x)]))\n"
                "    stack(v, depth=depth).backward()\n    return float(v.grad)\n"
            )
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint=(
            "the input Value holds an array (or a list) with x in it, not the number x: a "
            "Value is one scalar, so make it from the number itself."
        ),
    ),
    Mutant(
        name="abs() of the gradient (right whenever the slope is positive)",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth).backward()\n"
            "    return abs(v.grad)\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
        hint="the gradient's sign seems to be dropped (abs): gradients can be negative.",
    ),
]

# ---- slips: answers that raise or do not run, and what each test they fail shows ----

_TEST_OUTPUT_LINE = ("Cell In[@task1_1_test_output], line 10, the test:\n"
                     "----> 10     check_value(residual_stack(Value(1.0), depth=20), 1.1**20,")
_TEST_GRADIENT_LINE = (
    "Cell In[@task1_1_test_gradient], line 7, the test:\n"
    "----> 7     grad = check_gradient(lambda x: residual_stack(x, depth=20), 1.0, what=what)")


def _both_tests(text_after_the_test_line: str, headline: str) -> tuple[tuple[str, str], ...]:
    """The same text in both Task 1.1 tests, after each one's own line."""
    return tuple((gid, f"{headline}\n{line}\n{text_after_the_test_line}")
                 for gid, line in ((OUTPUT_TEST, _TEST_OUTPUT_LINE),
                                   (GRADIENT_TEST, _TEST_GRADIENT_LINE)))


_BROKEN = ("IndentationError in your answer (Cell In[@task1_1_residual_stack], line 3): "
           "expected an indented block after 'for' statement on line 2\n"
           "----> 3     x = x + layer(x)\n"
           "The cell did not run, so it defined nothing: fix that line and run the cell "
           "again, then this test.")

_MISSPELT_DEF = ("NotAnswered: Task 1.1: name 'residual_stack' is not defined, but your notebook "
                 "defines 'residual_stak': is the name misspelt there? The test calls it "
                 "'residual_stack'.")

SLIPS = [
    Slip(
        name="recursion whose base case is depth == 1 (depth=0 never stops)",
        cell=STACK,
        source=_stack("    if depth == 1:\n        return x + layer(x)\n"
                      "    return residual_stack(x + layer(x), depth - 1)\n"),
        shows=((OUTPUT_TEST,
                "RecursionError in your answer: maximum recursion depth exceeded while calling "
                "a Python object\n"
                "Cell In[@task1_1_test_output], line 13, the test:\n"
                "----> 13     check_value(residual_stack(Value(1.5), depth=0), 1.5,\n"
                "Cell In[@task1_1_residual_stack], line 4, in residual_stack:\n"
                "      2     if depth == 1:\n"
                "      3         return x + layer(x)\n"
                "----> 4     return residual_stack(x + layer(x), depth - 1)\n"
                "Hint: the function calls itself again and again and never stops (Python gives "
                "up after about a thousand calls): the smallest case, depth=0 among them, must "
                "return without calling itself."),),
    ),
    Slip(
        name="the function's name misspelt in its def",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + layer(x)\n    return x\n"
                      ).replace("residual_stack", "residual_stak"),
        shows=((OUTPUT_TEST, _MISSPELT_DEF), (GRADIENT_TEST, _MISSPELT_DEF)),
    ),
    Slip(
        name="a misspelt name: layr for layer",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + layr(x)\n    return x\n"),
        shows=_both_tests(
            "Cell In[@task1_1_residual_stack], line 3, in residual_stack:\n"
            "      1 def residual_stack(x, depth=20):\n"
            "      2     for _ in range(depth):\n"
            "----> 3         x = x + layr(x)\n"
            "Hint: Did you mean 'layer'?",
            "NameError in your answer: name 'layr' is not defined"),
    ),
    Slip(
        name="the loop's body not indented",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n    x = x + layer(x)\n    return x\n"),
        shows=((OUTPUT_TEST, _BROKEN), (GRADIENT_TEST, _BROKEN)),
    ),
    Slip(
        name="the layer applied to x.data, a float",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + layer(x.data)\n    return x\n"),
        shows=_both_tests(
            "Cell In[@task1_1_residual_stack], line 3, in residual_stack:\n"
            "      1 def residual_stack(x, depth=20):\n"
            "      2     for _ in range(depth):\n"
            "----> 3         x = x + layer(x.data)\n"
            "Cell In[@plain_stack], line 3, in layer:\n"
            "      1 def layer(x):\n"
            '      2     """One layer: F(x) = relu(0.1 x) on a `Value`."""\n'
            "----> 3     return (0.1 * x).relu()\n"
            "Hint: a plain float where a Value belongs: relu is a Value's, not a float's. A "
            "number taken out with .data, or worked out on floats, is no longer part of the "
            "graph: keep working on the Values.",
            "AttributeError in your answer: 'float' object has no attribute 'relu'"),
    ),
]
