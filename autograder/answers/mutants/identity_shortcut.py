"""Wrong answers to the identity shortcut assignment (Tasks 4.1 and 4.2) that the tests must
catch."""

from autograder.answers.mutants import Mutant, Slip

LAYER = "task4_1_residual_layer"
RATIO = "task4_2_first_last_ratio"
VALUES_TEST = "task4_1_test_values"
GRADIENTS_TEST = "task4_1_test_gradients"
TRAINING_TEST = "task4_1_test_training"
RATIO_TEST = "task4_2_test_first_last_ratio"
ALL_LAYER_TESTS = (VALUES_TEST, GRADIENTS_TEST, TRAINING_TEST)


def _layer(body: str) -> str:
    return "def residual_layer(h, W):\n" + body


def _ratio(body: str) -> str:
    return "def first_last_ratio(net, X, Y, layer):\n" + body


MUTANTS = [
    # ---- Task 4.1: the residual layer ----
    Mutant(
        name="residual added twice: h + h + f(h)",
        cell=LAYER,
        source=_layer("    return [a + a + b for a, b in zip(h, plain_layer(h, W))]\n"),
        loses=ALL_LAYER_TESTS,
        hint="the input seems to be added twice: count how many times h appears in the sum.",
    ),
    Mutant(
        name="residual added twice: f(h + f(h)) + h + f(h), the layer applied on top",
        cell=LAYER,
        source=_layer(
            "    y = [a + b for a, b in zip(h, plain_layer(h, W))]\n"
            "    return [a + b for a, b in zip(y, plain_layer(y, W))]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer seems to run twice, once more on its own output: one residual layer applies "
            "f once."
        ),
    ),
    Mutant(
        name="no shortcut: the plain layer",
        cell=LAYER,
        source=_layer("    return plain_layer(h, W)\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the output is the plain layer's: the shortcut that carries h past f seems to be "
            "missing."
        ),
    ),
    Mutant(
        name="norm on the shortcut: LayerNorm(h) + f(h)",
        cell=LAYER,
        source=_layer("    return [a + b for a, b in zip(layernorm(h), plain_layer(h, W))]\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the shortcut seems to carry a normalised copy of h: an identity shortcut carries h "
            "unchanged."
        ),
    ),
    Mutant(
        name="post-norm: LayerNorm(h + f(h))",
        cell=LAYER,
        source=_layer("    return layernorm([a + b for a, b in zip(h, plain_layer(h, W))])\n"),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the sum seems to be normalised after the add: that changes the shortcut, which should "
            "stay the identity."
        ),
    ),
    Mutant(
        name="relu on the sum: relu(h + W LayerNorm(h))",
        cell=LAYER,
        source=_layer(
            "    return [(a + b).relu() for a, b in zip(h, linear(layernorm(h), W))]\n"
        ),
        loses=ALL_LAYER_TESTS,
        hint=(
            "the relu seems to act on the sum, so negative parts of h are cut off: the shortcut "
            "should carry h unchanged."
        ),
    ),
    Mutant(
        name="branch without its norm: h + relu(W h)",
        cell=LAYER,
        source=_layer("    return [a + b.relu() for a, b in zip(h, linear(h, W))]\n"),
        loses=ALL_LAYER_TESTS,
        hint="the branch seems to skip its LayerNorm: f is the plain layer of Task 2.1.",
    ),
    Mutant(
        name="shortcut cut from the graph: h.data + f(h)",
        cell=LAYER,
        source=_layer("    return [a.data + b for a, b in zip(h, plain_layer(h, W))]\n"),
        loses=(GRADIENTS_TEST, TRAINING_TEST),
        hint=(
            "the values are right but the shortcut adds floats (.data), so no gradient flows back "
            "along it."
        ),
    ),
    # ---- Task 4.2: the first/last ratio ----
    Mutant(
        name="last over first",
        cell=RATIO,
        source=_ratio("    norms = gradient_norms(net, X, Y, layer)\n"
                      "    return norms[-1] / norms[0]\n"),
        loses=(RATIO_TEST,),
        hint="the ratio seems upside down: the first layer's gradient norm over the last one's.",
    ),
    Mutant(
        name="ratio of the weights' norms, not the gradients'",
        cell=RATIO,
        source=_ratio(
            "    def size(m):\n"
            "        return math.sqrt(sum(p.data**2 for row in m for p in row))\n"
            "    return size(net.layers[0]['W']) / size(net.layers[-1]['W'])\n"
        ),
        loses=(RATIO_TEST,),
        hint="the ratio seems to compare the weights' norms, not the norms of their gradients.",
    ),
    Mutant(
        name="largest over smallest layer",
        cell=RATIO,
        source=_ratio("    norms = gradient_norms(net, X, Y, layer)\n"
                      "    return max(norms) / min(norms)\n"),
        loses=(RATIO_TEST,),
        hint=(
            "the ratio seems to be the largest norm over the smallest: the task asks for the first "
            "layer's over the last layer's."
        ),
    ),
    Mutant(
        name="always measures the plain layer",
        cell=RATIO,
        source=_ratio("    norms = gradient_norms(net, X, Y, plain_layer)\n"
                      "    return norms[0] / norms[-1]\n"),
        loses=(RATIO_TEST,),
        hint=(
            "the layer handed in seems to be ignored (the plain layer is always used): measure "
            "with the layer given as an argument."
        ),
    ),
    # ---- what a test hands in, or what is out of reach, used as the answer ----
    Mutant(
        name="always measures residual_layer, not the layer handed in",
        cell=RATIO,
        source=_ratio("    norms = gradient_norms(net, X, Y, residual_layer)\n"
                      "    return norms[0] / norms[-1]\n"),
        loses=(RATIO_TEST,),
        hint=(
            "the layer handed in seems to be ignored (your residual layer is always used): measure "
            "with the layer given as an argument."
        ),
    ),
    Mutant(
        name=("hands Task 4.1 to the tests' probe layer "
              "(autograder.kernel.probes.probe_residual_layer)"),
        cell=LAYER,
        source="from autograder.kernel.probes import probe_residual_layer as residual_layer\n",
        loses=ALL_LAYER_TESTS,
        hint=(
            "the layer is the tests' own probe, not yours: the probes compute something else on "
            "purpose. Write the residual layer yourself."
        ),
    ),
    Mutant(
        name=("imports the model answer of Task 4.1 from autograder.answers.reference "
              "(grader-side only)"),
        cell=LAYER,
        source="from autograder.answers.reference import residual_layer\n",
        loses=ALL_LAYER_TESTS,
        hint=(
            "the answer is imported from autograder.answers.reference, which only the grader "
            "has: a graded "
            "run cannot load it. Write your own."
        ),
    ),
    Mutant(
        name=("imports the model answer of Task 4.2 from autograder.answers.reference "
              "(grader-side only)"),
        cell=RATIO,
        source="from autograder.answers.reference import first_last_ratio\n",
        loses=(RATIO_TEST,),
        hint=(
            "the answer is imported from autograder.answers.reference, which only the grader "
            "has: a graded "
            "run cannot load it. Write your own."
        ),
    ),
    # ---- Task 4.3: deleting one layer ----
    Mutant(
        name="deletion: leaves out the layer after l (off by one)",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    out = []\n"
            "    for l in range(net.depth):\n"
            "        shorter = Net(net.w_in, net.layers[:l + 1] + net.layers[l + 2:], net.w_out)\n"
            "        out.append(mean_loss(shorter, X, Y, layer).data)\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            'the layer left out seems to be the next one, not layer l: check the slices around '
            'index l.'
        ),
    ),
    Mutant(
        name="deletion: keeps only the layers before l (cuts the net short)",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    return [mean_loss(Net(net.w_in, net.layers[:l], net.w_out), X, Y, layer).data\n"
            "            for l in range(net.depth)]\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint='the net seems to stop at layer l: only layer l goes, the layers after it stay.',
    ),
    Mutant(
        name="deletion: zeroes the layer's weights instead of leaving it out",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    out = []\n"
            "    for l in range(net.depth):\n"
            "        zero = {k: [[Value(0.0) for _ in row] for row in v]\n"
            "                for k, v in net.layers[l].items()}\n"
            "        layers = net.layers[:l] + [zero] + net.layers[l + 1:]\n"
            "        out.append(mean_loss(Net(net.w_in, layers, net.w_out), X, Y, layer).data)\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            'the layer seems to stay in the net with zero weights; leave it out of the list '
            'instead (a zeroed layer still normalises and adds).'
        ),
    ),
    Mutant(
        name="deletion: the rise over the whole net's loss, not the loss",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    whole = mean_loss(net, X, Y, layer).data\n"
            "    return [mean_loss(Net(net.w_in, net.layers[:l] + net.layers[l + 1:], net.w_out),\n"
            "                      X, Y, layer).data - whole for l in range(net.depth)]\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            "these look like differences from the whole net's loss; the task asks for the loss "
            'itself.'
        ),
    ),
    Mutant(
        name="deletion: pops the layers out of net.layers and never puts them back",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    out = []\n"
            "    for l in range(net.depth):\n"
            "        net.layers.pop(min(l, len(net.layers) - 1))\n"
            "        out.append(mean_loss(net, X, Y, layer).data)\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            'the net handed in seems to lose layers as you go: build a new Net for each deletion '
            'instead of changing net.layers.'
        ),
    ),
    Mutant(
        name="deletion: right losses, but the net handed in loses its last layer",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    out = [mean_loss(Net(net.w_in, net.layers[:l] + net.layers[l + 1:], net.w_out),\n"
            "                     X, Y, layer).data for l in range(net.depth)]\n"
            "    if net.depth > 1:\n"
            "        net.layers.pop()\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint='the net handed in is changed by your function: leave net.layers as it was.',
    ),
    Mutant(
        name="deletion: net.layers reassigned for each deletion, left without the last layer",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    layers = net.layers\n"
            "    out = []\n"
            "    for l in range(len(layers)):\n"
            "        net.layers = layers[:l] + layers[l + 1:]\n"
            "        out.append(mean_loss(net, X, Y, layer).data)\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint='the net handed in is changed by your function: leave net.layers as it was.',
    ),
    Mutant(
        name="deletion: a new Net around net.layers itself, then a layer deleted from it",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    out = []\n"
            "    for l in range(net.depth):\n"
            "        shorter = Net(net.w_in, net.layers, net.w_out)\n"
            "        del shorter.layers[l]\n"
            "        out.append(mean_loss(shorter, X, Y, layer).data)\n"
            "    return out\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            "each shorter net seems to share its list of layers with the net handed in (a new "
            "Net made with net.layers holds that same list), so every deletion also deletes "
            "from net.layers: give each shorter net a new list."
        ),
    ),
    Mutant(
        name="deletion: always measures residual_layer, not the layer handed in",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    return [mean_loss(Net(net.w_in, net.layers[:l] + net.layers[l + 1:], net.w_out),\n"
            "                      X, Y, residual_layer).data for l in range(net.depth)]\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint=(
            'the losses do not change with the layer function passed in: use the argument layer, '
            'not a fixed one.'
        ),
    ),
    Mutant(
        name="deletion: the mean of the losses as one number",
        cell="task4_3_deletion_losses",
        source=(
            "def deletion_losses(net, X, Y, layer):\n"
            "    losses = [mean_loss(Net(net.w_in, net.layers[:l] + net.layers[l + 1:],\n"
            "                            net.w_out), X, Y, layer).data\n"
            "              for l in range(net.depth)]\n"
            "    return sum(losses) / len(losses)\n"
        ),
        loses=("task4_3_test_deletion_losses",),
        hint='one number came back; the task asks for a list with one loss per deleted layer.',
    ),
    Mutant(
        name=("imports the model answer of Task 4.3 from autograder.answers.reference "
              "(grader-side only)"),
        cell="task4_3_deletion_losses",
        source="from autograder.answers.reference import deletion_losses\n",
        loses=("task4_3_test_deletion_losses",),
        hint=(
            "autograder.answers.reference holds the grader's model answers and is not there "
            "when your "
            'notebook is graded: write deletion_losses yourself.'
        ),
    ),
]


# ---- slips, and what each test they fail shows ----

SLIPS = [
    Slip(
        name="lists joined with + instead of added",
        cell=LAYER,
        source="def residual_layer(h, W):\n    return h + plain_layer(h, W)\n",
        shows=(
            (VALUES_TEST,
             "CheckFailed: residual_layer(h, W) at width 8: expected a list of 8 numbers or "
             "Values, got 16: [0.3721417060982223, 2.0702776163019956, 1.76269495955847... "
             "(twice as many: `+` on two Python lists joins them end to end, [a, b] + [c, d] is "
             "[a, b, c, d], instead of adding them item by item)"),
            # the probe weighs the first 8 outputs only: the gradient is wrong, with no hint
            (GRADIENTS_TEST,
             "CheckFailed: residual_layer(h, W) at width 4, d/d h[0]: expected 1.334 (central "
             "difference of h + relu(W LayerNorm(h)), h=1e-06), got 1.3602 (its .grad after "
             "backward)"),
        ),
    ),
    Slip(
        name='a misspelt name: plain_layr for plain_layer',
        cell='task4_1_residual_layer',
        source=('def residual_layer(h, W):\n'
                '    return [a + b for a, b in zip(h, plain_layr(h, W))]\n'),
        shows=(
            ('task4_1_test_values',
             "NameError in your answer: name 'plain_layr' is not defined\n"
             'Cell In[@task4_1_test_values], line 9, the test:\n'
             '----> 9     check_values(residual_layer(as_values(h), as_values(W)),\n'
             'Cell In[@task4_1_residual_layer], line 2, in residual_layer:\n'
             '      1 def residual_layer(h, W):\n'
             '----> 2     return [a + b for a, b in zip(h, plain_layr(h, W))]\n'
             "Hint: Did you mean 'plain_layer'?"),
            ('task4_1_test_gradients',
             "NameError in your answer: name 'plain_layr' is not defined\n"
             'Cell In[@task4_1_test_gradients], line 10, the test:\n'
             '----> 10     check_gradients(probe.of(residual_layer), probe.xs, '
             'names=probe.names,\n'
             'Cell In[@task4_1_residual_layer], line 2, in residual_layer:\n'
             '      1 def residual_layer(h, W):\n'
             '----> 2     return [a + b for a, b in zip(h, plain_layr(h, W))]\n'
             "Hint: Did you mean 'plain_layer'?"),
        ),
    ),
]
