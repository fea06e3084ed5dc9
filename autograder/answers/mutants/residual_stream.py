"""Wrong answers to the residual stream assignment (Tasks 6.1 to 6.3) that the tests must
catch."""

from autograder.answers.mutants import Mutant, Slip

STATES = "task6_1_stream_states"
PROBES = "task6_2_probes"
LENS = "task6_3_logit_lens"
STATES_VALUES = "task6_1_test_values"
STATES_GRADIENTS = "task6_1_test_gradients"
BOTH_6_1 = (STATES_VALUES, STATES_GRADIENTS)
RMS_TEST = "task6_2_test_rms"
COSINE_TEST = "task6_2_test_cosine"
LENS_VALUES = "task6_3_test_values"
LENS_GRADIENTS = "task6_3_test_gradients"
BOTH_6_3 = (LENS_VALUES, LENS_GRADIENTS)

RIGHT_RMS = "def rms(x):\n    return (dot(x, x) * (1 / len(x))) ** 0.5\n"
RIGHT_COSINE = "def cosine(u, v):\n    return dot(u, v) * (dot(u, u) * dot(v, v)) ** -0.5\n"


# a GPT with the weights of the model the tests hand in, in its layout (found by comparing
# one block's output, as model.block is on): what a delegating answer needs
_SAME_GPT = (
    "from microgpt import GPT\n"
    "\n\n"
    "def _same_gpt(model, **extra):\n"
    "    c = model.config\n"
    "    x = model.embed(1, 0)\n"
    "    want = [v.data for v in model.block(x, 0, {'k': [], 'v': []})]\n"
    "    for layout in ('pre', 'post', 'none'):\n"
    "        gpt = GPT(layout=layout, n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head,\n"
    "                  vocab_size=c.vocab_size, block_size=c.block_size, **extra)\n"
    "        gpt.state_dict = model.state_dict\n"
    "        if [v.data for v in gpt.block(x, 0, {'k': [], 'v': []})] == want:\n"
    "            return gpt\n"
)


def _states(body: str) -> str:
    """The whole source of the Task 6.1 cell with `body` as the function's body."""
    return "def stream_states(model, tokens):\n" + body


def _rms(body: str) -> str:
    """The Task 6.2 cell with a wrong `rms` (this body) and the right `cosine`."""
    return "def rms(x):\n" + body + "\n\n" + RIGHT_COSINE


def _cosine(body: str) -> str:
    """The Task 6.2 cell with the right `rms` and a wrong `cosine` (this body)."""
    return RIGHT_RMS + "\n\ndef cosine(u, v):\n" + body


def _lens(body: str) -> str:
    """The whole source of the Task 6.3 cell with `body` as the function's body."""
    return "def logit_lens(model, states, tokens):\n" + body


def _lens_loop(score: str, n: str = "min(len(states), len(tokens) - 1)",
               mean: str = "Value.sum(terms) * (1 / n)",
               depths: str = "range(len(states[0]))") -> str:
    """A lens that scores state k at position p with `score` (an expression)."""
    return _lens(
        f"    n = {n}\n"
        "    losses = []\n"
        f"    for k in {depths}:\n"
        f"        terms = [{score} for p in range(n)]\n"
        f"        losses.append({mean})\n"
        "    return losses\n"
    )


def _states_loop(first: str = "x = model.embed(tok, pos)\n        states = [x]",
                 cache_line: str = "",
                 store: str = "states.append(x)", cut: str = "tokens[: model.config.block_size]",
                 before: str = "", inner_cache: str = "cache[layer]") -> str:
    return _states(
        "    cache = model.new_cache()\n"
        "    out = []\n"
        f"{before}"
        f"    for pos, tok in enumerate({cut}):\n"
        f"{cache_line}"
        f"        {first}\n"
        "        for layer in range(model.config.n_layer):\n"
        f"            x = model.block(x, layer, {inner_cache})\n"
        f"            {store}\n"
        "        out.append(states)\n"
        "    return out\n"
    )


MUTANTS = [
    # ---- Task 6.1: stream_states ----
    Mutant(
        name="stream states missing the embedding state",
        cell=STATES,
        source=_states_loop(first="x = model.embed(tok, pos)\n        states = []"),
        loses=BOTH_6_1,
        hint="each position seems to miss the first state, the embedding before any block.",
    ),
    Mutant(
        name="a fresh cache at every position: attention sees only the current token",
        cell=STATES,
        source=_states_loop(cache_line="        cache = model.new_cache()\n"),
        loses=BOTH_6_1,
        hint=(
            "the cache seems to start empty at every position, so attention sees only the current "
            "token: keep one cache for the whole sequence."
        ),
    ),
    Mutant(
        name="one cache shared by all layers",
        cell=STATES,
        source=_states_loop(
            before="    shared = {'k': [], 'v': []}\n", inner_cache="shared"
        ),
        loses=BOTH_6_1,
        hint=(
            "all layers seem to share one cache, so each layer's attention reads keys of other "
            "layers: each layer has its own."
        ),
    ),
    Mutant(
        name="states copied out of the graph (Value(v.data))",
        cell=STATES,
        source=_states_loop(
            first="x = model.embed(tok, pos)\n        states = [[Value(v.data) for v in x]]",
            store="states.append([Value(v.data) for v in x])",
        ),
        loses=(STATES_GRADIENTS,),
        hint=(
            "the states are right but were copied from .data, so gradients do not flow back "
            "through them."
        ),
    ),
    Mutant(
        name="states normalised before they are stored",
        cell=STATES,
        source=_states_loop(
            first="x = model.embed(tok, pos)\n        states = [rmsnorm(x)]",
            store="states.append(rmsnorm(x))",
        ).replace("def stream_states", "from microgpt import rmsnorm\n\n\ndef stream_states"),
        loses=BOTH_6_1,
        hint="the stored states seem normalised: the stream's states are stored as they are.",
    ),
    Mutant(
        name="one list of states shared by all positions",
        cell=STATES,
        source=_states_loop(
            first="x = model.embed(tok, pos)\n        states.append(x)",
            before="    states = []\n",
        ),
        loses=BOTH_6_1,
        hint=(
            "one list of states seems to collect every position: each position needs its own list."
        ),
    ),
    Mutant(
        name="positions not cut at block_size",
        cell=STATES,
        source=_states_loop(cut="tokens"),
        loses=(STATES_VALUES,),
        hint=(
            "more positions than the model's block_size seem to be processed: stop at the context "
            "length."
        ),
    ),
    Mutant(
        name="positions cut one short of block_size (block_size - 1)",
        cell=STATES,
        source=_states_loop(cut="tokens[: model.config.block_size - 1]"),
        loses=(STATES_VALUES,),
        hint=(
            "when the name is longer than the context, one position too few seems to be run: the "
            "model runs every position it has room for, block_size of them."
        ),
    ),
    Mutant(
        name="the last position left out (tokens[:-1]), as if it needed a next token",
        cell=STATES,
        source=_states_loop(cut="tokens[:-1][: model.config.block_size]"),
        loses=BOTH_6_1,
        hint=(
            "the last position seems to be left out: every position gets its states, the last "
            "one too (only the lens of Task 6.3 has no next token to score there)."
        ),
    ),
    Mutant(
        name="calls the model's own stream_states",
        cell=STATES,
        source=_states("    return model.stream_states(tokens)\n"),
        loses=BOTH_6_1,
        hint=(
            "the answer calls the model's own stream_states, which the graded run switches off: "
            "collect the states with model.embed and model.block."
        ),
    ),
    # ---- Task 6.2: the probes ----
    Mutant(
        name="rms without the square root (the mean square)",
        cell=PROBES,
        source=_rms("    return dot(x, x) * (1 / len(x))\n"),
        loses=(RMS_TEST,),
        hint="this looks like the mean square: the RMS takes its square root.",
    ),
    Mutant(
        name="rms with the mean subtracted (a standard deviation)",
        cell=PROBES,
        source=_rms(
            "    mu = Value.sum(x) * (1 / len(x))\n"
            "    d = [v - mu for v in x]\n"
            "    return (dot(d, d) * (1 / len(x))) ** 0.5\n"
        ),
        loses=(RMS_TEST,),
        hint=(
            "this looks like a standard deviation, with the mean subtracted: the RMS does not "
            "subtract it."
        ),
    ),
    Mutant(
        name="rms as the Euclidean norm (no mean)",
        cell=PROBES,
        source=_rms("    return dot(x, x) ** 0.5\n"),
        loses=(RMS_TEST,),
        hint=(
            "this looks like the length of the vector: the RMS averages the squares over the "
            "components."
        ),
    ),
    Mutant(
        name="rms with RMSNorm's epsilon inside",
        cell=PROBES,
        source=_rms("    return (dot(x, x) * (1 / len(x)) + 1e-5) ** 0.5\n"),
        loses=(RMS_TEST,),
        hint=(
            "a small epsilon seems to be added inside the root: that is RMSNorm's guard, not part "
            "of the RMS."
        ),
    ),
    Mutant(
        name="rms computed on floats, returned as a plain number",
        cell=PROBES,
        source=_rms("    return (sum(v.data ** 2 for v in x) / len(x)) ** 0.5\n"),
        loses=(RMS_TEST,),
        hint=(
            "the RMS comes back as a float computed from .data: return a Value built from the "
            "inputs so gradients can flow."
        ),
    ),
    Mutant(
        name="cosine divided by the length of u only",
        cell=PROBES,
        source=_cosine("    return dot(u, v) * dot(u, u) ** -0.5\n"),
        loses=(COSINE_TEST,),
        hint="the cosine seems to divide by the length of only one of the two vectors.",
    ),
    Mutant(
        name="cosine as the plain dot product",
        cell=PROBES,
        source=_cosine("    return dot(u, v)\n"),
        loses=(COSINE_TEST,),
        hint="this looks like the plain dot product: the cosine divides by both lengths.",
    ),
    Mutant(
        name="cosine divided by the squared lengths",
        cell=PROBES,
        source=_cosine("    return dot(u, v) * (dot(u, u) * dot(v, v)) ** -1\n"),
        loses=(COSINE_TEST,),
        hint="the cosine seems to divide by the squared lengths instead of the lengths.",
    ),
    Mutant(
        name="cosine made positive (abs)",
        cell=PROBES,
        source=_cosine(
            "    c = dot(u, v) * (dot(u, u) * dot(v, v)) ** -0.5\n"
            "    return c if c.data >= 0 else -c\n"
        ),
        loses=(COSINE_TEST,),
        hint=(
            "the cosine's sign seems to be dropped: vectors pointing apart give a negative cosine."
        ),
    ),
    # ---- Task 6.3: the logit lens ----
    Mutant(
        name="logit lens that skips the final norm",
        cell=LENS,
        source=_lens_loop(
            "cross_entropy(linear(states[p][k], model.state_dict['lm_head']), tokens[p + 1])"
        ).replace("def logit_lens", "from microgpt import linear\n\n\ndef logit_lens"),
        loses=BOTH_6_3,
        hint=(
            "the states seem to go to the output head without the final norm the model applies "
            "first."
        ),
    ),
    Mutant(
        name="logit lens decoding with the token embedding (wte) as the head",
        cell=LENS,
        source=_lens_loop(
            "cross_entropy(linear(rmsnorm(states[p][k]), model.state_dict['wte']), "
            "tokens[p + 1])"
        ).replace("def logit_lens",
                  "from microgpt import linear, rmsnorm\n\n\ndef logit_lens"),
        loses=BOTH_6_3,
        hint=(
            "the states seem to be decoded with the token embedding matrix instead of the model's "
            "output head."
        ),
    ),
    Mutant(
        name="logit lens scoring the current token instead of the next one",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p])"),
        loses=BOTH_6_3,
        hint=(
            "each position seems to be scored against its own token: the model predicts the next "
            "one."
        ),
    ),
    Mutant(
        name="logit lens summing over positions instead of averaging",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          mean="Value.sum(terms)"),
        loses=BOTH_6_3,
        hint="the losses grow with the number of positions: average over them rather than summing.",
    ),
    Mutant(
        name="logit lens dividing by the number of tokens",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          mean="Value.sum(terms) * (1 / len(tokens))"),
        loses=BOTH_6_3,
        hint=(
            "the average seems to divide by the number of tokens, not by the number of positions "
            "scored."
        ),
    ),
    Mutant(
        name="logit lens without the embedding state",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          depths="range(1, len(states[0]))"),
        loses=BOTH_6_3,
        hint="the losses seem to start after the first block: the embedding state gets a loss too.",
    ),
    Mutant(
        name="logit lens scoring every position, the last one too",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[(p + 1) % len(tokens)])",
                          n="len(states)"),
        loses=BOTH_6_3,
        hint="the last position seems to be scored too, though no next token follows it.",
    ),
    Mutant(
        name="logit lens over len(states) - 1 positions (one short when the context cuts)",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          n="len(states) - 1"),
        loses=(LENS_VALUES,),
        hint=(
            "when the context cuts the tokens, the last position of the states seems to be left "
            "out: it has a next token (the tokens go on past the states), so it is scored too."
        ),
    ),
    Mutant(
        name="logit lens counting positions from the tokens (len(tokens) - 1): past the states",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          n="len(tokens) - 1"),
        loses=(LENS_VALUES,),
        hint=(
            "the positions seem to be counted from the tokens: when the context cuts them, there "
            "are fewer states than that (at most block_size positions), so the count runs past "
            "the end of states."
        ),
    ),
    Mutant(
        name="logit lens scoring every position with tokens[p + 1]: past the end of the tokens",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1])",
                          n="len(states)"),
        loses=BOTH_6_3,
        hint="the last position seems to be scored too, though no next token follows it.",
    ),
    Mutant(
        name="logit lens that returns the model's own loss at every depth",
        cell=LENS,
        source=_lens("    return [model.loss(tokens) for _ in states[0]]\n"),
        loses=BOTH_6_3,
        hint="every depth gets the same loss, the full model's: decode each depth's own state.",
    ),
    Mutant(
        name="logit lens on floats: right numbers, no gradient",
        cell=LENS,
        source=_lens_loop("cross_entropy(model.head(states[p][k]), tokens[p + 1]).data",
                          mean="Value(sum(terms) / n)"),
        loses=(LENS_GRADIENTS,),
        hint=(
            "the losses are right but were computed on floats (.data) and wrapped in new Values, "
            "so no gradient flows back."
        ),
    ),
    Mutant(
        name="microgpt's own stream: GPT.stream_states(model, tokens)",
        cell=STATES,
        source="from microgpt import GPT\n\n\n" + _states(
            "    return GPT.stream_states(model, tokens)\n"),
        loses=BOTH_6_1,
        hint=(
            "the answer borrows microgpt's own GPT.stream_states, which the graded run switches "
            "off: collect the states yourself."
        ),
    ),
    Mutant(
        name="microgpt's own stream of a GPT with the pieces' weights and layout",
        cell=STATES,
        source=_SAME_GPT + "\n\n" + _states(
            "    return GPT.stream_states(_same_gpt(model), tokens)\n"),
        loses=BOTH_6_1,
        hint=(
            "the answer borrows microgpt's own stream_states through a model of your own, which "
            "the graded run switches off: collect the states yourself."
        ),
    ),
    Mutant(
        name="logit lens from microgpt's own loss of the first k blocks (GPT.loss)",
        cell=LENS,
        source=_SAME_GPT + "\n\n" + _lens(
            "    gpt = _same_gpt(model, final_norm=True)\n"
            "    losses = []\n"
            "    for k in range(len(states[0])):\n"
            "        ref = GPT(gpt.config, n_layer=k)\n"
            "        ref.state_dict = gpt.state_dict\n"
            "        losses.append(ref.loss(tokens))\n"
            "    return losses\n"),
        loses=BOTH_6_3,
        hint=(
            "the losses come from microgpt's own model loss of truncated models, not from decoding "
            "the states handed in: decode each state."
        ),
    ),
]


# ---- slips: answers that raise or do not run, and what each test they fail shows ----

SLIPS = [
    Slip(
        name='a misspelt name: state for states',
        cell='task6_1_stream_states',
        source=('def stream_states(model, tokens):\n'
                '    cache = model.new_cache()\n'
                '    out = []\n'
                '    for pos, tok in enumerate(tokens[: model.config.block_size]):\n'
                '        x = model.embed(tok, pos)\n'
                '        states = [x]\n'
                '        for layer in range(model.config.n_layer):\n'
                '            x = model.block(x, layer, cache[layer])\n'
                '            states.append(x)\n'
                '        out.append(state)\n'
                '    return out\n'),
        shows=(
            ('task6_1_test_values',
             "NameError in your answer: name 'state' is not defined\n"
             'Cell In[@task6_1_test_values], line 7, the test:\n'
             '----> 7     check_stream_states(stream_states, "pre", "emma", n_layer=2)\n'
             'Cell In[@task6_1_stream_states], line 10, in stream_states:\n'
             '       8             x = model.block(x, layer, cache[layer])\n'
             '       9             states.append(x)\n'
             '----> 10         out.append(state)\n'
             "Hint: Did you mean 'states'?"),
            ('task6_1_test_gradients',
             "NameError in your answer: name 'state' is not defined\n"
             'Cell In[@task6_1_test_gradients], line 7, the test:\n'
             '----> 7     check_stream_states(stream_states, "pre", "ava", n_layer=2, '
             'gradients=True)\n'
             'Cell In[@task6_1_stream_states], line 10, in stream_states:\n'
             '       8             x = model.block(x, layer, cache[layer])\n'
             '       9             states.append(x)\n'
             '----> 10         out.append(state)\n'
             "Hint: Did you mean 'states'?"),
        ),
    ),
    Slip(
        name="cosine's body not indented",
        cell='task6_2_probes',
        source=('def rms(x):\n'
                '    return (dot(x, x) * (1 / len(x))) ** 0.5\n'
                '\n'
                '\n'
                'def cosine(u, v):\n'
                'return dot(u, v) * (dot(u, u) * dot(v, v)) ** -0.5\n'),
        shows=(
            ('task6_2_test_rms',
             'IndentationError in your answer (Cell In[@task6_2_probes], line 6): expected an '
             'indented block after function definition on line 5\n'
             '----> 6 return dot(u, v) * (dot(u, u) * dot(v, v)) ** -0.5\n'
             'The cell did not run, so it defined nothing: fix that line and run the cell '
             'again, then this test.'),
            ('task6_2_test_cosine',
             'IndentationError in your answer (Cell In[@task6_2_probes], line 6): expected an '
             'indented block after function definition on line 5\n'
             '----> 6 return dot(u, v) * (dot(u, u) * dot(v, v)) ** -0.5\n'
             'The cell did not run, so it defined nothing: fix that line and run the cell '
             'again, then this test.'),
        ),
    ),
]
