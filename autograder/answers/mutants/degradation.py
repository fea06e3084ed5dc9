"""Wrong answers to the degradation assignment (Tasks 2.1 to 2.3) that the tests must catch."""

from autograder.answers.mutants import Mutant, Slip

LAYER = "task2_1_plain_layer"
FORWARD = "task2_2_mlp_logits"
NORMS = "task2_3_layer_gradient_norms"
VALUES_TEST = "task2_1_test_values"
GRADIENTS_TEST = "task2_1_test_gradients"
LOGITS_TEST = "task2_2_test_logits"
TRAINING_TEST = "task2_2_test_training"
NORMS_TEST = "task2_3_test_gradient_norms"
ALL_LAYER_TESTS = (VALUES_TEST, GRADIENTS_TEST, TRAINING_TEST)
ALL_FORWARD_TESTS = (LOGITS_TEST, TRAINING_TEST)


def _layer(body: str) -> str:
    return "def plain_layer(h, W):\n" + body


def _forward(body: str) -> str:
    return "def mlp_logits(net, x, layer):\n" + body


def _norms(body: str) -> str:
    return "def layer_gradient_norms(net, loss):\n" + body


_ZERO = "    for p in net.parameters():\n        p.grad = 0\n"

_FIRST_OUT = (
    "    h = layer(linear(x, net.w_in), **net.layers[0])\n"
    "    for params in net.layers[1:]:\n"
    "        h = layer(h, **params)\n"
    "    return linear(layernorm(h), net.w_out)\n"
)
_ONLY_W = (
    "    h = linear(x, net.w_in)\n"
    "    for params in net.layers:\n"
    "        h = layer(h, params['W'])\n"
    "    return linear(layernorm(h), net.w_out)\n"
)

MUTANTS = [
    # ---- Task 2.1: the plain layer ----
    Mutant(
        name="no LayerNorm: relu(W h)",
        cell=LAYER,
        source=_layer("    return [v.relu() for v in linear(h, W)]\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer seems to skip the LayerNorm: the matrix is applied to h itself, not to "
            "LayerNorm(h)."
        ),
    ),
    Mutant(
        name="norm after the relu: LayerNorm(relu(W h))",
        cell=LAYER,
        source=_layer("    return layernorm([v.relu() for v in linear(h, W)])\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the LayerNorm seems to come last, after the relu: in this layer it normalises the "
            "input, before the matrix."
        ),
    ),
    Mutant(
        name="norm after the matrix: relu(LayerNorm(W h))",
        cell=LAYER,
        source=_layer("    return [v.relu() for v in layernorm(linear(h, W))]\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the LayerNorm seems to sit between the matrix and the relu: in this layer it "
            "normalises the input, before the matrix."
        ),
    ),
    Mutant(
        name="RMSNorm instead of LayerNorm (keeps the mean)",
        cell=LAYER,
        source="from microgpt import rmsnorm\n\n\n"
        + _layer("    return [v.relu() for v in linear(rmsnorm(h), W)]\n"),
        loses=ALL_LAYER_TESTS,
        hint="the norm seems to be RMSNorm, which keeps the mean: LayerNorm also subtracts it.",
    ),
    Mutant(
        name="a shortcut slipped in: h + relu(W LayerNorm(h))",
        cell=LAYER,
        source=_layer(
            "    return [a + v.relu() for a, v in zip(h, linear(layernorm(h), W))]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer seems to add its input to its output: that is a residual layer, and this "
            "task is the plain one."
        ),
    ),
    Mutant(
        name="right numbers on floats, graph cut from h and W",
        cell=LAYER,
        source=_layer(
            "    hn = layernorm([Value(v.data) for v in h])\n"
            "    rows = [[w.data for w in row] for row in W]\n"
            "    return [Value(max(0.0, sum(w * a.data for w, a in zip(row, hn)))) "
            "for row in rows]\n"
        ),
        loses=(GRADIENTS_TEST, TRAINING_TEST),
        hint=(
            "the values are right but were computed on floats (.data): the outputs are new Values "
            "with no path back to h or W, so no gradient reaches them."
        ),
    ),
    Mutant(
        name="one output per input: the rows counted by len(h), a square W assumed",
        cell=LAYER,
        source=_layer(
            "    n = layernorm(h)\n"
            "    return [Value.sum([W[i][j] * n[j] for j in range(len(h))]).relu()\n"
            "            for i in range(len(h))]\n"
        ),
        loses=(VALUES_TEST,),
        hint=(
            "the layer gives one output per input, as if W were square: it has one output per "
            "row of W (len(W) of them), whatever the length of h."
        ),
    ),
    # ---- Task 2.2: the forward pass ----
    Mutant(
        name="no LayerNorm before the head",
        cell=FORWARD,
        source=_forward(
            "    h = linear(x, net.w_in)\n"
            "    for params in net.layers:\n"
            "        h = layer(h, **params)\n"
            "    return linear(h, net.w_out)\n"
        ),
        loses=ALL_FORWARD_TESTS,
        hint="the logits seem to skip the norm between the last layer and the output matrix.",
    ),
    Mutant(
        name="passes only W to the layer (fails on layers with more parameters)",
        cell=FORWARD,
        source=_forward(_ONLY_W),
        loses=(LOGITS_TEST,),
        hint=(
            "the layer gets only W: other layers take more parameters (a gate's, say), so pass "
            "each layer all of its own parameters."
        ),
    ),
    Mutant(
        name="the first layer taken out of the loop (a net with no layers fails)",
        cell=FORWARD,
        source=_forward(_FIRST_OUT),
        loses=(LOGITS_TEST,),
        hint=(
            "the first layer seems to be run outside the loop, so a net with no layers (depth 0, "
            "which the task names) has no net.layers[0]: let the loop run every layer, however "
            "many there are, none included."
        ),
    ),
    Mutant(
        name="skips the first layer",
        cell=FORWARD,
        source=_forward(
            "    h = linear(x, net.w_in)\n"
            "    for params in net.layers[1:]:\n"
            "        h = layer(h, **params)\n"
            "    return linear(layernorm(h), net.w_out)\n"
        ),
        loses=ALL_FORWARD_TESTS,
        hint=(
            "the forward pass seems to run one layer fewer than the net has: is the first layer "
            "skipped?"
        ),
    ),
    Mutant(
        name="adds a shortcut around every layer",
        cell=FORWARD,
        source=_forward(
            "    h = linear(x, net.w_in)\n"
            "    for params in net.layers:\n"
            "        h = [a + b for a, b in zip(h, layer(h, **params))]\n"
            "    return linear(layernorm(h), net.w_out)\n"
        ),
        loses=ALL_FORWARD_TESTS,
        hint=(
            "the forward pass seems to add a shortcut around each layer: the layer handed in "
            "decides what one layer does, the forward pass only chains them."
        ),
    ),
    # ---- Task 2.3: the gradient norm per layer ----
    Mutant(
        name="norm of the weights, not of their gradients",
        cell=NORMS,
        source=_norms(
            "    loss.backward()\n"
            "    norms = [math.sqrt(sum(p.data**2 for row in params['W'] for p in row))\n"
            "             for params in net.layers]\n" + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
        hint=(
            "these look like the norms of the weights themselves, not of their gradients after "
            "backward()."
        ),
    ),
    Mutant(
        name="squared norm (no square root)",
        cell=NORMS,
        source=_norms(
            "    loss.backward()\n"
            "    norms = [sum(p.grad**2 for row in params['W'] for p in row)\n"
            "             for params in net.layers]\n" + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
        hint="these look like squared norms: the norm takes the square root of the sum of squares.",
    ),
    Mutant(
        name="leaves the gradients behind (never set back to 0)",
        cell=NORMS,
        source=_norms(
            "    loss.backward()\n"
            "    return [math.sqrt(sum(p.grad**2 for row in params['W'] for p in row))\n"
            "            for params in net.layers]\n"
        ),
        loses=(NORMS_TEST,),
        hint=(
            "the gradients seem to be left on the parameters after the call, so the next "
            "backward() adds to them: set them back to 0 before returning."
        ),
    ),
    Mutant(
        name="last layer first",
        cell=NORMS,
        source=_norms(
            "    loss.backward()\n"
            "    norms = [math.sqrt(sum(p.grad**2 for row in params['W'] for p in row))\n"
            "             for params in reversed(net.layers)]\n" + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
        hint="the norms seem to come in reverse order: the first entry should be the first layer.",
    ),
    Mutant(
        name="counts w_in and w_out as layers too",
        cell=NORMS,
        source=_norms(
            "    loss.backward()\n"
            "    mats = [net.w_in] + [params['W'] for params in net.layers] + [net.w_out]\n"
            "    norms = [math.sqrt(sum(p.grad**2 for row in m for p in row)) for m in mats]\n"
            + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
        hint=(
            "the list seems to include the input and output matrices: only the hidden layers count "
            "here."
        ),
    ),
    Mutant(
        name="reads the gradients without calling backward",
        cell=NORMS,
        source=_norms(
            "    norms = [math.sqrt(sum(p.grad**2 for row in params['W'] for p in row))\n"
            "             for params in net.layers]\n" + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
        hint="the gradients are read before backward() has run on the loss, so they are all 0.",
    ),
    Mutant(
        name="hands the task to the library: microgpt.deepnet.logits",
        cell=FORWARD,
        source=("from microgpt.deepnet import logits as _library_logits\n\n\n"
                + _forward("    return _library_logits(net, x, layer)\n")),
        loses=ALL_FORWARD_TESTS,
        hint=(
            "the forward pass is handed to the library's own version, which the graded run "
            "switches off: write it yourself from the net's matrices and the layer."
        ),
    ),
    # ---- what a test hands in, or what is out of reach, used as the answer ----
    Mutant(
        name="right forward pass, but its cell rebinds plain_layer to the layer a test hands in",
        cell=FORWARD,
        source=(
            "_handed = []\n\n\n"
            + _forward(
                "    if layer is not plain_layer and not _handed:\n"
                "        _handed.append(layer)\n"
                "    h = linear(x, net.w_in)\n"
                "    for params in net.layers:\n"
                "        h = layer(h, **params)\n"
                "    return linear(layernorm(h), net.w_out)\n"
            )
            + "\n\n"
            + _layer(
                "    if _handed:\n"
                "        return _handed[0](h, W)\n"
                "    return [v.relu() for v in linear(h, W)]\n"
            )
        ),
        loses=(TRAINING_TEST,),
        hint=(
            "the cell changes plain_layer as a side effect of mlp_logits: a function should not "
            "redefine another task's answer."
        ),
    ),
    Mutant(
        name="hands Task 2.1 to the tests' probe layer (autograder.kernel.probes.probe_layer)",
        cell=LAYER,
        source="from autograder.kernel.probes import probe_layer as plain_layer\n",
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer is the tests' own probe layer, not yours: the probes compute something else "
            "on purpose. Write the plain layer yourself."
        ),
    ),
    Mutant(
        name="hands Task 2.2 to the tests' probe forward (autograder.kernel.probes.probe_forward)",
        cell=FORWARD,
        source="from autograder.kernel.probes import probe_forward as mlp_logits\n",
        loses=ALL_FORWARD_TESTS,
        hint=(
            "the forward pass is the tests' own probe, not yours: the probes compute something "
            "else on purpose. Write it yourself."
        ),
    ),
    Mutant(
        name=("imports the model answer of Task 2.1 from autograder.answers.reference "
              "(grader-side only)"),
        cell=LAYER,
        source="from autograder.answers.reference import plain_layer\n",
        loses=ALL_LAYER_TESTS,
        hint=(
            "the answer is imported from autograder.answers.reference, which only the grader "
            "has: a graded "
            "run cannot load it. Write your own."
        ),
    ),
    Mutant(
        name=("imports the model answer of Task 2.2 from autograder.answers.reference "
              "(grader-side only)"),
        cell=FORWARD,
        source="from autograder.answers.reference import mlp_logits\n",
        loses=ALL_FORWARD_TESTS,
        hint=(
            "the answer is imported from autograder.answers.reference, which only the grader "
            "has: a graded "
            "run cannot load it. Write your own."
        ),
    ),
    Mutant(
        name=("imports the model answer of Task 2.3 from autograder.answers.reference "
              "(grader-side only)"),
        cell=NORMS,
        source="from autograder.answers.reference import layer_gradient_norms\n",
        loses=(NORMS_TEST,),
        hint=(
            "the answer is imported from autograder.answers.reference, which only the grader "
            "has: a graded "
            "run cannot load it. Write your own."
        ),
    ),
    Mutant(
        name="microgpt.deepnet.gradient_norms on the notebook's points, the loss handed in unused",
        cell=NORMS,
        source=("from microgpt.deepnet import gradient_norms as _library_norms\n\n\n"
                + _norms("    return _library_norms(net, X, Y, plain_layer,\n"
                         "                          forward=mlp_logits)\n")),
        loses=(NORMS_TEST,),
        hint=(
            "the norms seem to come from a loss of your own (the library's on the notebook's data) "
            "instead of the loss handed in: run backward() on that loss."
        ),
    ),
]

# the library's forward under the task's name: the training loop (library code) calls it,
# so only a test that calls it from its own cell refuses it
MUTANTS.append(Mutant(
    name="the library's logits under the name mlp_logits (an alias, no code of one's own)",
    cell=FORWARD,
    source="from microgpt.deepnet import logits as mlp_logits\n",
    loses=ALL_FORWARD_TESTS,
    hint=(
        "mlp_logits is the library's own function under another name, which the graded run "
        "switches off: write the forward pass yourself."
    ),
))


# ---- slips: answers that raise or do not run, and what each test they fail shows ----


def _engine_line(text: str) -> int:
    """The number of the line of microgpt/engine.py that holds `text` (a crash report
    shows it; it moves when the engine does)."""
    from microgpt import engine

    with open(engine.__file__, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


_LINEAR_RAISES = _engine_line('raise ValueError(f"linear: a row of')

SLIPS = [
    # the two wrong answers of Task 2.2 that raise in its visible test (registered as
    # mutants too): depth 0, and layers that take more than W
    Slip(
        name="the first layer taken out of the loop: IndexError with no layers (depth 0)",
        cell=FORWARD,
        source=_forward(_FIRST_OUT),
        shows=(
            (LOGITS_TEST,
             "IndexError in your answer: list index out of range\n"
             "Cell In[@task2_2_test_logits], line 28, the test:\n"
             '----> 28     check_values(mlp_logits(net, x, probe_layer), '
             'stored("2.2 mlp_logits, depth 0"),\n'
             "Cell In[@task2_2_mlp_logits], line 2, in mlp_logits:\n"
             "      1 def mlp_logits(net, x, layer):\n"
             "----> 2     h = layer(linear(x, net.w_in), **net.layers[0])\n"
             "Hint: an index past the end of a list: check the lengths of the lists your code "
             "builds and the range of the loop that indexes them.\n"
             "This looks like a known mistake: the first layer seems to be run outside the "
             "loop, so a net with no layers (depth 0, which the task names) has no "
             "net.layers[0]: let the loop run every layer, however many there are, none "
             "included."),
        ),
    ),
    Slip(
        name="only W passed to the layer: TypeError on a layer of two matrices",
        cell=FORWARD,
        source=_forward(_ONLY_W),
        shows=(
            (LOGITS_TEST,
             "TypeError in your answer: two_matrix_layer() missing 1 required positional "
             "argument: 'U'\n"
             "Cell In[@task2_2_test_logits], line 39, the test:\n"
             "----> 39     check_values(mlp_logits(net, [0.8, -0.4], two_matrix_layer),\n"
             "Cell In[@task2_2_mlp_logits], line 4, in mlp_logits:\n"
             "      2     h = linear(x, net.w_in)\n"
             "      3     for params in net.layers:\n"
             "----> 4         h = layer(h, params['W'])\n"
             "This looks like a known mistake: the layer gets only W: other layers take more "
             "parameters (a gate's, say), so pass each layer all of its own parameters."),
        ),
    ),
    Slip(
        name='a misspelt name: layernrom for layernorm',
        cell='task2_1_plain_layer',
        source=('def plain_layer(h, W):\n'
                '    return [v.relu() for v in linear(layernrom(h), W)]\n'),
        shows=(
            ('task2_1_test_values',
             "NameError in your answer: name 'layernrom' is not defined\n"
             'Cell In[@task2_1_test_values], line 9, the test:\n'
             '----> 9     check_values(plain_layer(as_values(h), as_values(W)),\n'
             'Cell In[@task2_1_plain_layer], line 2, in plain_layer:\n'
             '      1 def plain_layer(h, W):\n'
             '----> 2     return [v.relu() for v in linear(layernrom(h), W)]\n'
             "Hint: Did you mean 'layernorm'?"),
            ('task2_1_test_gradients',
             "NameError in your answer: name 'layernrom' is not defined\n"
             'Cell In[@task2_1_test_gradients], line 10, the test:\n'
             '----> 10     check_gradients(probe.of(plain_layer), probe.xs, '
             'names=probe.names,\n'
             'Cell In[@task2_1_plain_layer], line 2, in plain_layer:\n'
             '      1 def plain_layer(h, W):\n'
             '----> 2     return [v.relu() for v in linear(layernrom(h), W)]\n'
             "Hint: Did you mean 'layernorm'?"),
        ),
    ),
    Slip(
        name='lists joined with +: a shortcut written on lists in the forward pass',
        cell='task2_2_mlp_logits',
        source=('def mlp_logits(net, x, layer):\n'
                '    h = linear(x, net.w_in)\n'
                '    for params in net.layers:\n'
                '        h = h + layer(h, **params)\n'
                '    return linear(layernorm(h), net.w_out)\n'),
        shows=(
            ('task2_2_test_logits',
             'ValueError in your answer: linear: a row of 4 weights for 8 inputs\n'
             'Cell In[@task2_2_test_logits], line 16, the test:\n'
             '----> 16     check_values(mlp_logits(net, x, probe_layer),\n'
             'Cell In[@task2_2_mlp_logits], line 4, in mlp_logits:\n'
             '      2     h = linear(x, net.w_in)\n'
             '      3     for params in net.layers:\n'
             '----> 4         h = h + layer(h, **params)\n'
             f'microgpt/engine.py, line {_LINEAR_RAISES}, in linear, where the error was '
             'raised:\n'
             f'----> {_LINEAR_RAISES}             raise ValueError(f"linear: a row of '
             '{len(row)} weights for '
             '{len(x)} inputs")\n'
             "Hint: the model's layer got 8 numbers where its rows of weights have 4: twice as "
             "many. `+` on two Python lists joins them end to end ([a, b] + [c, d] is [a, b, "
             "c, d]); it does not add them number by number. Is a list of Values added to "
             "another list with `+`?"),
        ),
    ),
    Slip(
        name='the relu applied to .data, a float',
        cell='task2_1_plain_layer',
        source=('def plain_layer(h, W):\n'
                '    return [v.data.relu() for v in linear(layernorm(h), W)]\n'),
        shows=(
            ('task2_1_test_values',
             "AttributeError in your answer: 'float' object has no attribute 'relu'\n"
             'Cell In[@task2_1_test_values], line 9, the test:\n'
             '----> 9     check_values(plain_layer(as_values(h), as_values(W)),\n'
             'Cell In[@task2_1_plain_layer], line 2, in plain_layer:\n'
             '      1 def plain_layer(h, W):\n'
             '----> 2     return [v.data.relu() for v in linear(layernorm(h), W)]\n'
             "Hint: a plain float where a Value belongs: relu is a Value's, not a float's. A "
             "number taken out with .data, or worked out on floats, is no longer part of the "
             "graph: keep working on the Values."),
            ('task2_1_test_gradients',
             "AttributeError in your answer: 'float' object has no attribute 'relu'\n"
             'Cell In[@task2_1_test_gradients], line 10, the test:\n'
             '----> 10     check_gradients(probe.of(plain_layer), probe.xs, '
             'names=probe.names,\n'
             'Cell In[@task2_1_plain_layer], line 2, in plain_layer:\n'
             '      1 def plain_layer(h, W):\n'
             '----> 2     return [v.data.relu() for v in linear(layernorm(h), W)]\n'
             "Hint: a plain float where a Value belongs: relu is a Value's, not a float's. A "
             "number taken out with .data, or worked out on floats, is no longer part of the "
             "graph: keep working on the Values."),
        ),
    ),
]
