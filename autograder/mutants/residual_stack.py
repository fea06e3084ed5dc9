"""Wrong answers to the residual stack assignment (Tasks 1.1 and 1.2) that the tests must catch."""

from . import Mutant

STACK = "task1_1_residual_stack"
GRADIENT = "task1_2_input_gradient"
OUTPUT_TEST = "task1_1_test_output"
GRADIENT_TEST = "task1_1_test_gradient"
INPUT_GRADIENT_TEST = "task1_2_test_input_gradient"
BOTH_TASK_1_1_TESTS = (OUTPUT_TEST, GRADIENT_TEST)


def _stack(body):
    """The whole source of the Task 1.1 cell with `body` as the function's body."""
    return "def residual_stack(x, depth=20):\n" + body


def _gradient(body):
    """The whole source of the Task 1.2 cell with `body` as the function's body."""
    return "def input_gradient(stack, x, depth):\n" + body


MUTANTS = [
    # ---- Task 1.1: residual_stack ----
    Mutant(
        name="plain stack returned as the residual one",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="shortcut added twice per layer",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="shortcut added again after the layer",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x + layer(x) + x\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="hard-coded 6.727, no graph",
        cell=STACK,
        source=_stack("    return Value(6.727)\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="hard-coded 1.1**20, no graph (passes the visible output check)",
        cell=STACK,
        source=_stack("    return Value(1.1**20)\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="shortcut added only once, around the whole plain stack",
        cell=STACK,
        source=_stack(
            "    h = x\n    for _ in range(depth):\n        h = layer(h)\n    return x + h\n"
        ),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="depth ignored: always 20 layers",
        cell=STACK,
        source=_stack("    for _ in range(20):\n        x = x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="one layer too many",
        cell=STACK,
        source=_stack("    for _ in range(depth + 1):\n        x = x + layer(x)\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="multiplies by 1.1 instead (forgets the relu)",
        cell=STACK,
        source=_stack("    for _ in range(depth):\n        x = x * 1.1\n    return x\n"),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="relu applied to the sum instead of inside the layer",
        cell=STACK,
        source=_stack(
            "    for _ in range(depth):\n        x = (x + 0.1 * x).relu()\n    return x\n"
        ),
        loses=BOTH_TASK_1_1_TESTS,
    ),
    Mutant(
        name="right numbers on floats, graph cut from the input",
        cell=STACK,
        source=_stack(
            "    h = x.data\n    for _ in range(depth):\n        h = h + max(0.0, 0.1 * h)\n"
            "    return Value(h)\n"
        ),
        loses=(GRADIENT_TEST,),
    ),
    # ---- Task 1.2: input_gradient ----
    Mutant(
        name="returns the stack's output instead of the gradient",
        cell=GRADIENT,
        source=_gradient("    return stack(Value(float(x)), depth=depth).data\n"),
        loses=(INPUT_GRADIENT_TEST,),
    ),
    Mutant(
        name="reads the gradient without calling backward",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth)\n    return v.grad\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
    ),
    Mutant(
        name="returns the output's gradient (always 1)",
        cell=GRADIENT,
        source=_gradient(
            "    out = stack(Value(float(x)), depth=depth)\n    out.backward()\n"
            "    return out.grad\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
    ),
    Mutant(
        name="formula of the plain stack, 0.1**depth, for every stack",
        cell=GRADIENT,
        source=_gradient("    return 0.1**depth\n"),
        loses=(INPUT_GRADIENT_TEST,),
    ),
    Mutant(
        name="returns the input Value itself instead of its .grad",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth).backward()\n    return v\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
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
    ),
    # ---- shortcuts that give the right numbers on the visible inputs ----
    Mutant(
        name="closed form: x * 1.1**depth for x > 0, x otherwise (the layer never called)",
        cell=STACK,
        source=_stack("    return x * 1.1**depth if x.data > 0 else x\n"),
        loses=BOTH_TASK_1_1_TESTS,
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
    ),
    Mutant(
        name="abs() of the gradient (right whenever the slope is positive)",
        cell=GRADIENT,
        source=_gradient(
            "    v = Value(float(x))\n    stack(v, depth=depth).backward()\n"
            "    return abs(v.grad)\n"
        ),
        loses=(INPUT_GRADIENT_TEST,),
    ),
]
