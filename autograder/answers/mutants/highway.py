"""Wrong answers to the highway assignment (Tasks 3.1 to 3.4) that the tests must catch."""

from autograder.answers.mutants import Mutant, Slip

GATE = "task3_1_highway_gate"
LAYER = "task3_2_highway_layer"
PARAMS = "task3_3_highway_params"
READING = "task3_4_mean_gate_per_layer"
GATE_TEST = "task3_1_test_gate"
VALUES_TEST = "task3_2_test_values"
GRADIENTS_TEST = "task3_2_test_gradients"
PARAMS_TEST = "task3_3_test_params"
TRAINING_TEST = "task3_test_training"
READING_TEST = "task3_4_test_mean_gate"
ALL_LAYER_TESTS = (VALUES_TEST, GRADIENTS_TEST, TRAINING_TEST)


def _gate(body: str) -> str:
    return "def highway_gate(h, W_gate, b_gate):\n" + body


def _layer(body: str) -> str:
    return "def highway_layer(h, W, W_gate, b_gate):\n" + body


def _params(bias: str = "Value(-2.0) for _ in range(width)]", first: str = "W",
            second: str = "W_gate") -> str:
    return (
        "def highway_params(width, rng):\n"
        "    std = layer_std(width)\n"
        f"    params = {{'{first}': matrix(width, width, rng, std)}}\n"
        f"    params['{second}'] = matrix(width, width, rng, std)\n"
        f"    params['b_gate'] = [{bias}\n"
        "    return params\n"
    )


def _reading(loop_body: str, result: str = "[total / len(X) for total in totals]") -> str:
    return (
        "def mean_gate_per_layer(net, X, gate, layer):\n"
        "    totals = [0.0] * len(net.layers)\n"
        "    for x in X:\n"
        "        h = linear(x, net.w_in)\n"
        "        for i, params in enumerate(net.layers):\n" + loop_body + f"    return {result}\n"
    )


_GATE_HERE = "            t = gate(h, params['W_gate'], params['b_gate'])\n"
_STEP = "            h = layer(h, **params)\n"
_ADD = "            totals[i] += sum(v.data for v in t) / len(t)\n"

MUTANTS = [
    # ---- Task 3.1: the gate ----
    Mutant(
        name="gate without its bias: sigmoid(W_gate h)",
        cell=GATE,
        source=_gate("    return [z.sigmoid() for z in linear(h, W_gate)]\n"),
        loses=(GATE_TEST, TRAINING_TEST),
        hint="the gate seems to leave out its bias b_gate.",
    ),
    Mutant(
        name="gate reads LayerNorm(h)",
        cell=GATE,
        source=_gate(
            "    return [(z + b).sigmoid() for z, b in zip(linear(layernorm(h), W_gate), b_gate)]\n"
        ),
        loses=(GATE_TEST, TRAINING_TEST),
        hint="the gate seems to read a normalised copy of h: it reads h itself.",
    ),
    Mutant(
        name="tanh instead of sigmoid",
        cell=GATE,
        source=_gate("    return [(z + b).tanh() for z, b in zip(linear(h, W_gate), b_gate)]\n"),
        loses=(GATE_TEST, TRAINING_TEST),
        hint="the gate's values go below 0, which a sigmoid never gives: is it a tanh?",
    ),
    # ---- Task 3.2: the layer ----
    Mutant(
        name="gate the wrong way round: T*h + (1-T)*H",
        cell=LAYER,
        source=_layer(
            "    t = highway_gate(h, W_gate, b_gate)\n"
            "    return [ti * hi + (1 - ti) * fi for ti, fi, hi in zip(t, plain_layer(h, W), h)]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint="the gate and the carry seem swapped: which of the two paths does T open?",
    ),
    Mutant(
        name="carry not gated: T*H + h",
        cell=LAYER,
        source=_layer(
            "    t = highway_gate(h, W_gate, b_gate)\n"
            "    return [ti * fi + hi for ti, fi, hi in zip(t, plain_layer(h, W), h)]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the input seems to pass through at full weight whatever the gate says: the carry path "
            "is gated too."
        ),
    ),
    Mutant(
        name="H without its norm: T*relu(W h) + (1-T)*h",
        cell=LAYER,
        source=_layer(
            "    t = highway_gate(h, W_gate, b_gate)\n"
            "    f = [v.relu() for v in linear(h, W)]\n"
            "    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f, h)]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint="the transform path seems to skip the LayerNorm: it is the plain layer of Task 2.1.",
    ),
    Mutant(
        name="gate cut from the graph (T.data)",
        cell=LAYER,
        source=_layer(
            "    t = [v.data for v in highway_gate(h, W_gate, b_gate)]\n"
            "    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, plain_layer(h, W), h)]\n"
        ),
        loses=(GRADIENTS_TEST, TRAINING_TEST),
        hint=(
            "the gate's numbers are right but were taken as floats (.data), so no gradient flows "
            "into W_gate and b_gate."
        ),
    ),
    # ---- Task 3.3: the parameters ----
    Mutant(
        name="gate bias with the wrong sign: +2",
        cell=PARAMS,
        source=_params(bias="Value(2.0) for _ in range(width)]"),
        loses=(PARAMS_TEST, TRAINING_TEST),
        hint="the gate bias seems to have the wrong sign, so the gates start mostly open.",
    ),
    Mutant(
        name="one bias Value shared by every unit",
        cell=PARAMS,
        source=_params(bias="Value(-2.0)] * width"),
        loses=(PARAMS_TEST, TRAINING_TEST),
        hint=(
            "every unit seems to share one bias Value ([v] * width repeats the same object): each "
            "unit needs a Value of its own."
        ),
    ),
    Mutant(
        name="W_gate drawn before W",
        cell=PARAMS,
        source=_params(first="W_gate", second="W"),
        loses=(PARAMS_TEST, TRAINING_TEST),
        hint=(
            "the matrices seem to be drawn in the other order from the random generator: the order "
            "in the task fixes which numbers each gets."
        ),
    ),
    Mutant(
        name="keys named after the equation: W, W_T, b_T",
        cell=PARAMS,
        source=(
            "def highway_params(width, rng):\n"
            "    std = layer_std(width)\n"
            "    return {'W': matrix(width, width, rng, std),\n"
            "            'W_T': matrix(width, width, rng, std),\n"
            "            'b_T': [Value(-2.0) for _ in range(width)]}\n"
        ),
        loses=(PARAMS_TEST, TRAINING_TEST),
        hint="the parameter names do not match the ones the layer takes (W, W_gate, b_gate).",
    ),
    # ---- Task 3.4: reading the gates ----
    Mutant(
        name="gate read on the layer's output instead of its input",
        cell=READING,
        source=_reading(_STEP + _GATE_HERE + _ADD),
        loses=(READING_TEST,),
        hint="the gate seems to be read after the layer has run: read it on the layer's input.",
    ),
    Mutant(
        name="every layer's gate read on the first layer's input",
        cell=READING,
        source=_reading(_GATE_HERE + _ADD),
        loses=(READING_TEST,),
        hint=(
            "every layer's gate seems to be read on the same input: h must move on through each "
            "layer."
        ),
    ),
    Mutant(
        name="reads the carry 1 - T",
        cell=READING,
        source=_reading(_GATE_HERE + _ADD + _STEP, "[1 - total / len(X) for total in totals]"),
        loses=(READING_TEST,),
        hint="the values look like 1 - T, the carry, instead of the gate T itself.",
    ),
    Mutant(
        name="sums over the inputs instead of averaging",
        cell=READING,
        source=_reading(_GATE_HERE + _ADD + _STEP, "totals"),
        loses=(READING_TEST,),
        hint="the values grow with the number of inputs: average over them rather than summing.",
    ),
    # ---- what a test hands in, used as the answer ----
    Mutant(
        name="its own highway_gate and highway_layer, not the gate and layer handed in",
        cell=READING,
        source=_reading(
            "            t = highway_gate(h, params['W_gate'], params['b_gate'])\n"
            + _ADD + "            h = highway_layer(h, **params)\n"
        ),
        loses=(READING_TEST,),
        hint=(
            "your own gate and layer seem to be used instead of the gate and layer handed in as "
            "arguments."
        ),
    ),
    # the probes of autograder.kernel.probes, written out (importing them is flagged for review,
    # which would zero the score before the tests had their say)
    Mutant(
        name="the tests' probe gate as the gate: sigmoid(2 (W_gate h + b_gate))",
        cell=GATE,
        source=_gate(
            "    return [(2 * (z + b)).sigmoid() for z, b in zip(linear(h, W_gate), b_gate)]\n"
        ),
        loses=(GATE_TEST, TRAINING_TEST),
        hint=(
            "the gate seems to scale its input before the sigmoid, as the tests' probe gate does: "
            "the highway gate is the plain sigmoid of W_gate h + b_gate."
        ),
    ),
    Mutant(
        name="the tests' probe layer as the layer: T' tanh(W h) + (1 - T') h",
        cell=LAYER,
        source=_layer(
            "    t = [(2 * (z + b)).sigmoid() for z, b in zip(linear(h, W_gate), b_gate)]\n"
            "    f = [a.tanh() for a in linear(h, W)]\n"
            "    return [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f, h)]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer seems to be the tests' probe layer (a tanh path, a scaled gate): write the "
            "highway layer from your own gate and the plain layer."
        ),
    ),
    Mutant(
        name="the tests' probe parameters: W_gate drawn first, gate bias -1",
        cell=PARAMS,
        source=_params(bias="Value(-1.0) for _ in range(width)]", first="W_gate", second="W"),
        loses=(PARAMS_TEST, TRAINING_TEST),
        hint=(
            "the parameters seem to follow the tests' probe (W_gate drawn first, another gate "
            "bias): follow the order and the bias the task gives."
        ),
    ),
]


# ---- slips: answers that raise or do not run, and what each test they fail shows ----

SLIPS = [
    Slip(
        name='a misspelt name: W_gat for W_gate',
        cell='task3_1_highway_gate',
        source=('def highway_gate(h, W_gate, b_gate):\n'
                '    return [(z + b).sigmoid() for z, b in zip(linear(h, W_gat), b_gate)]\n'),
        shows=(
            ('task3_1_test_gate',
             "NameError in your answer: name 'W_gat' is not defined\n"
             'Cell In[@task3_1_test_gate], line 9, the test:\n'
             '----> 9     check_values(highway_gate(as_values(h), as_values(W_gate), '
             'as_values(b_gate)),\n'
             'Cell In[@task3_1_highway_gate], line 2, in highway_gate:\n'
             '      1 def highway_gate(h, W_gate, b_gate):\n'
             '----> 2     return [(z + b).sigmoid() for z, b in zip(linear(h, W_gat), '
             'b_gate)]\n'
             "Hint: Did you mean 'W_gate'?"),
        ),
    ),
    Slip(
        name="the gate's list multiplied as a whole: t * F(h) + (1 - t) * h on lists",
        cell='task3_2_highway_layer',
        source=('def highway_layer(h, W, W_gate, b_gate):\n'
                '    t = highway_gate(h, W_gate, b_gate)\n'
                '    return t * plain_layer(h, W) + (1 - t) * h\n'),
        shows=(
            ('task3_2_test_values',
             "TypeError in your answer: can't multiply sequence by non-int of type 'list'\n"
             'Cell In[@task3_2_test_values], line 9, the test:\n'
             '----> 9     check_values(highway_layer(*as_values([h, W, W_gate, b_gate])),\n'
             'Cell In[@task3_2_highway_layer], line 3, in highway_layer:\n'
             '      1 def highway_layer(h, W, W_gate, b_gate):\n'
             '      2     t = highway_gate(h, W_gate, b_gate)\n'
             '----> 3     return t * plain_layer(h, W) + (1 - t) * h\n'
             'Hint: arithmetic on a whole list (with a number, a Value or another list): '
             'Python does not apply it item by item. Work on each Value of the list (zip the '
             'lists to pair their items).'),
            ('task3_2_test_gradients',
             "TypeError in your answer: can't multiply sequence by non-int of type 'list'\n"
             'Cell In[@task3_2_test_gradients], line 11, the test:\n'
             '----> 11     check_gradients(probe.of(highway_layer), probe.xs, '
             'names=probe.names,\n'
             'Cell In[@task3_2_highway_layer], line 3, in highway_layer:\n'
             '      1 def highway_layer(h, W, W_gate, b_gate):\n'
             '      2     t = highway_gate(h, W_gate, b_gate)\n'
             '----> 3     return t * plain_layer(h, W) + (1 - t) * h\n'
             'Hint: arithmetic on a whole list (with a number, a Value or another list): '
             'Python does not apply it item by item. Work on each Value of the list (zip the '
             'lists to pair their items).'),
        ),
    ),
]
