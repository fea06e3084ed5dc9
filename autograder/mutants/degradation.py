"""Wrong answers to the degradation assignment (Tasks 2.1 to 2.3) that the tests must catch."""

from . import Mutant

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


def _layer(body):
    return "def plain_layer(h, W):\n" + body


def _forward(body):
    return "def mlp_logits(net, x, layer):\n" + body


def _norms(body):
    return "def layer_gradient_norms(net, loss):\n" + body


_ZERO = "    for p in net.parameters():\n        p.grad = 0\n"

MUTANTS = [
    # ---- Task 2.1: the plain layer ----
    Mutant(
        name="no LayerNorm: relu(W h)",
        cell=LAYER,
        source=_layer("    return [v.relu() for v in linear(h, W)]\n"),
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="norm after the relu: LayerNorm(relu(W h))",
        cell=LAYER,
        source=_layer("    return layernorm([v.relu() for v in linear(h, W)])\n"),
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="norm after the matrix: relu(LayerNorm(W h))",
        cell=LAYER,
        source=_layer("    return [v.relu() for v in layernorm(linear(h, W))]\n"),
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="RMSNorm instead of LayerNorm (keeps the mean)",
        cell=LAYER,
        source="from microgpt import rmsnorm\n\n\n"
        + _layer("    return [v.relu() for v in linear(rmsnorm(h), W)]\n"),
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="a shortcut slipped in: h + relu(W LayerNorm(h))",
        cell=LAYER,
        source=_layer(
            "    return [a + v.relu() for a, v in zip(h, linear(layernorm(h), W))]\n"
        ),
        loses=ALL_LAYER_TESTS,
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
    ),
    Mutant(
        name="passes only W to the layer (fails on layers with more parameters)",
        cell=FORWARD,
        source=_forward(
            "    h = linear(x, net.w_in)\n"
            "    for params in net.layers:\n"
            "        h = layer(h, params['W'])\n"
            "    return linear(layernorm(h), net.w_out)\n"
        ),
        loses=(LOGITS_TEST,),
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
    ),
    Mutant(
        name="reads the gradients without calling backward",
        cell=NORMS,
        source=_norms(
            "    norms = [math.sqrt(sum(p.grad**2 for row in params['W'] for p in row))\n"
            "             for params in net.layers]\n" + _ZERO + "    return norms\n"
        ),
        loses=(NORMS_TEST,),
    ),
    Mutant(
        name="hands the task to the library: microgpt.deepnet.logits",
        cell=FORWARD,
        source=("from microgpt.deepnet import logits as _library_logits\n\n\n"
                + _forward("    return _library_logits(net, x, layer)\n")),
        loses=ALL_FORWARD_TESTS,
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
    ),
    Mutant(
        name="hands Task 2.1 to the tests' probe layer (autograder.probes.probe_layer)",
        cell=LAYER,
        source="from autograder.probes import probe_layer as plain_layer\n",
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="hands Task 2.2 to the tests' probe forward (autograder.probes.probe_forward)",
        cell=FORWARD,
        source="from autograder.probes import probe_forward as mlp_logits\n",
        loses=ALL_FORWARD_TESTS,
    ),
    Mutant(
        name="imports the model answer of Task 2.1 from autograder.reference (grader-side only)",
        cell=LAYER,
        source="from autograder.reference import plain_layer\n",
        loses=ALL_LAYER_TESTS,
    ),
    Mutant(
        name="imports the model answer of Task 2.2 from autograder.reference (grader-side only)",
        cell=FORWARD,
        source="from autograder.reference import mlp_logits\n",
        loses=ALL_FORWARD_TESTS,
    ),
    Mutant(
        name="imports the model answer of Task 2.3 from autograder.reference (grader-side only)",
        cell=NORMS,
        source="from autograder.reference import layer_gradient_norms\n",
        loses=(NORMS_TEST,),
    ),
    Mutant(
        name="microgpt.deepnet.gradient_norms on the notebook's points, the loss handed in unused",
        cell=NORMS,
        source=("from microgpt.deepnet import gradient_norms as _library_norms\n\n\n"
                + _norms("    return _library_norms(net, X, Y, plain_layer,\n"
                         "                          forward=mlp_logits)\n")),
        loses=(NORMS_TEST,),
    ),
]

# the library's forward under the task's name: the training loop (library code) calls it,
# so only a test that calls it from its own cell refuses it
MUTANTS.append(Mutant(
    name="the library's logits under the name mlp_logits (an alias, no code of one's own)",
    cell=FORWARD,
    source="from microgpt.deepnet import logits as mlp_logits\n",
    loses=ALL_FORWARD_TESTS,
))
