"""Wrong answers to the tiny-GPT residual adds assignment (Tasks 5.1 to 5.3) that the tests
must catch."""

from autograder.answers.mutants import Mutant, Slip

PRE = "task5_1_pre_norm_block"
POST = "task5_2_post_norm_block"
NONE = "task5_3_no_residual_block"
PRE_VALUES = "task5_1_test_values"
PRE_GRADIENTS = "task5_1_test_gradients"
PRE_TRAINING = "task5_1_test_training"
ALL_PRE = (PRE_VALUES, PRE_GRADIENTS, PRE_TRAINING)
POST_TEST = "task5_2_test"
NONE_TEST = "task5_3_test"


def _block(name: str, body: str) -> str:
    """The whole source of a block cell: `name(model, x, layer, cache)` with `body`."""
    return f"def {name}(model, x, layer, cache):\n" + body


def _pre(body: str) -> str:
    return _block("pre_norm_block", body)


def _post(body: str) -> str:
    return _block("post_norm_block", body)


def _none(body: str) -> str:
    return _block("no_residual_block", body)


MUTANTS = [
    # ---- Task 5.1: the pre-norm block ----
    Mutant(
        name="residual added twice (x + x + f)",
        cell=PRE,
        source=_pre(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [xi + xi + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return [xi + xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint=(
            "the stream seems to be added twice at each residual add: count how many times x "
            "appears in the sum."
        ),
    ),
    Mutant(
        name="norm on the main path: x = norm(x) + f(norm(x))",
        cell=PRE,
        source=_pre(
            "    x = rmsnorm(x)\n"
            "    a = model.attention(x, layer, cache)\n"
            "    x = rmsnorm([xi + ai for xi, ai in zip(x, a)])\n"
            "    m = model.mlp(x, layer)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint=(
            "the stream itself seems to be normalised: in pre-norm, only what a sublayer reads is "
            "normalised, and the stream is carried on unchanged."
        ),
    ),
    Mutant(
        name="pre-norm keeps only the attention shortcut",
        cell=PRE,
        source=_pre(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    return model.mlp(rmsnorm(x), layer)\n"
        ),
        loses=ALL_PRE,
        hint="the MLP's output seems to replace the stream instead of being added to it.",
    ),
    Mutant(
        name="pre-norm keeps only the MLP shortcut",
        cell=PRE,
        source=_pre(
            "    x = model.attention(rmsnorm(x), layer, cache)\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint="the attention's output seems to replace the stream instead of being added to it.",
    ),
    Mutant(
        name="parallel sublayers: the MLP reads the stream before the attention add",
        cell=PRE,
        source=_pre(
            "    h = rmsnorm(x)\n"
            "    a = model.attention(h, layer, cache)\n"
            "    m = model.mlp(h, layer)\n"
            "    return [xi + ai + mi for xi, ai, mi in zip(x, a, m)]\n"
        ),
        loses=ALL_PRE,
        hint=(
            "the MLP seems to read the block's input, before the attention's output was added: the "
            "sublayers run one after the other."
        ),
    ),
    Mutant(
        name="sublayer outputs normalised before the add: x + norm(f(norm(x)))",
        cell=PRE,
        source=_pre(
            "    a = rmsnorm(model.attention(rmsnorm(x), layer, cache))\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = rmsnorm(model.mlp(rmsnorm(x), layer))\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint=(
            "the sublayers' outputs seem to be normalised before they are added: in pre-norm, only "
            "their inputs are."
        ),
    ),
    Mutant(
        name="weights of block 0 used in every block",
        cell=PRE,
        source=_pre(
            "    a = model.attention(rmsnorm(x), 0, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(rmsnorm(x), 0)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint=(
            "every block seems to use the first block's weights: pass the block's own layer index "
            "to the sublayers."
        ),
    ),
    Mutant(
        name="MLP reads the raw stream: no norm before the MLP",
        cell=PRE,
        source=_pre(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(x, layer)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=ALL_PRE,
        hint="the MLP seems to read the stream without a norm in front of it.",
    ),
    Mutant(
        name="pre-norm written as post-norm: norm(x + f(x))",
        cell=PRE,
        source=_pre(
            "    a = model.attention(x, layer, cache)\n"
            "    x = rmsnorm([xi + ai for xi, ai in zip(x, a)])\n"
            "    m = model.mlp(x, layer)\n"
            "    return rmsnorm([xi + mi for xi, mi in zip(x, m)])\n"
        ),
        loses=ALL_PRE,
        hint=(
            "this is the post-norm block (Task 5.2's): the norm comes after each add, on the "
            "stream itself. In pre-norm, what does the norm act on, and what is added to the "
            "stream?"
        ),
    ),
    Mutant(
        name="right numbers, shortcut cut from the graph (adds .data)",
        cell=PRE,
        source=_pre(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [Value(xi.data) + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return [Value(xi.data) + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=(PRE_GRADIENTS, PRE_TRAINING),
        hint=(
            "the values are right but the shortcut adds copies made from .data, so no gradient "
            "flows back along the stream."
        ),
    ),
    Mutant(
        name="calls the model's own block instead of writing one",
        cell=PRE,
        source=_pre("    return model.block(x, layer, cache)\n"),
        loses=ALL_PRE,
        hint=(
            "the block calls model.block, the library's own block, instead of building one from "
            "the sublayers and the norm."
        ),
    ),
    # ---- Task 5.2: the post-norm block ----
    Mutant(
        name="post-norm written as pre-norm",
        cell=POST,
        source=_post(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=(POST_TEST,),
        hint="this is the pre-norm block: in post-norm, where does the norm go?",
    ),
    Mutant(
        name="post-norm with the norm inside the branch: x + norm(f(x))",
        cell=POST,
        source=_post(
            "    a = rmsnorm(model.attention(x, layer, cache))\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = rmsnorm(model.mlp(x, layer))\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=(POST_TEST,),
        hint=(
            "the norm seems to sit on the sublayer's output before the add: in post-norm it comes "
            "after the add."
        ),
    ),
    Mutant(
        name="post-norm with only the last norm",
        cell=POST,
        source=_post(
            "    a = model.attention(x, layer, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    m = model.mlp(x, layer)\n"
            "    return rmsnorm([xi + mi for xi, mi in zip(x, m)])\n"
        ),
        loses=(POST_TEST,),
        hint=(
            "only the block's end seems to be normalised: post-norm normalises after each of the "
            "two adds."
        ),
    ),
    Mutant(
        name="post-norm whose sublayers also read a normed copy: norm(x + f(norm(x)))",
        cell=POST,
        source=_post(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = rmsnorm([xi + ai for xi, ai in zip(x, a)])\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return rmsnorm([xi + mi for xi, mi in zip(x, m)])\n"
        ),
        loses=(POST_TEST,),
        hint=(
            "the sublayers seem to read a normalised copy too: in post-norm, they read the stream "
            "itself."
        ),
    ),
    # ---- Task 5.3: no residual ----
    Mutant(
        name="no-residual block that silently keeps the MLP shortcut",
        cell=NONE,
        source=_none(
            "    x = model.attention(rmsnorm(x), layer, cache)\n"
            "    m = model.mlp(rmsnorm(x), layer)\n"
            "    return [xi + mi for xi, mi in zip(x, m)]\n"
        ),
        loses=(NONE_TEST,),
        hint="the block still adds a shortcut around the MLP: this block has none.",
    ),
    Mutant(
        name="no-residual block that silently keeps the attention shortcut",
        cell=NONE,
        source=_none(
            "    a = model.attention(rmsnorm(x), layer, cache)\n"
            "    x = [xi + ai for xi, ai in zip(x, a)]\n"
            "    return model.mlp(rmsnorm(x), layer)\n"
        ),
        loses=(NONE_TEST,),
        hint="the block still adds a shortcut around the attention: this block has none.",
    ),
    Mutant(
        name="no-residual block with the norms dropped too",
        cell=NONE,
        source=_none("    return model.mlp(model.attention(x, layer, cache), layer)\n"),
        loses=(NONE_TEST,),
        hint="the norms in front of the sublayers seem to be dropped too: only the shortcuts go.",
    ),
    Mutant(
        name="no-residual block that returns its input (both sublayers skipped)",
        cell=NONE,
        source=_none("    model.attention(rmsnorm(x), layer, cache)\n    return x\n"),
        loses=(NONE_TEST,),
        hint=(
            "the block returns its input unchanged: the sublayers' outputs must become the new "
            "stream."
        ),
    ),
    # ---- handing the task to the library ----
    Mutant(
        name="microgpt's own block: GPT.block(model, ...)",
        cell=PRE,
        source="from microgpt import GPT\n\n\n" + _pre(
            "    return GPT.block(model, x, layer, cache)\n"),
        loses=ALL_PRE,
        hint=(
            "the block is microgpt's own GPT.block, which the graded run switches off: build it "
            "from the sublayers and the norm yourself."
        ),
    ),
    Mutant(
        name="microgpt's own block through a fresh GPT of the model's sizes",
        cell=PRE,
        source="from microgpt import GPT\n\n\n" + _pre(
            "    c = model.config\n"
            "    ref = GPT(n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head,\n"
            "              vocab_size=c.vocab_size, block_size=c.block_size)\n"
            "    ref.state_dict = model.state_dict\n"
            "    return ref.block(x, layer, cache)\n"),
        loses=ALL_PRE,
        hint=(
            "the block borrows microgpt's own GPT.block through a model of your own, which the "
            "graded run switches off: build it yourself."
        ),
    ),
    Mutant(
        name="microgpt's own block laundered through BlockGPT(GPT.block, ...)",
        cell=PRE,
        source="from microgpt import GPT\n\n\n" + _pre(
            "    c = model.config\n"
            "    ref = BlockGPT(GPT.block, layout='pre', n_layer=c.n_layer, n_embd=c.n_embd,\n"
            "                   n_head=c.n_head, vocab_size=c.vocab_size,\n"
            "                   block_size=c.block_size)\n"
            "    ref.state_dict = model.state_dict\n"
            "    return ref.block(x, layer, cache)\n"),
        loses=ALL_PRE,
        hint=(
            "the block borrows microgpt's own GPT.block through BlockGPT, which the graded run "
            "switches off: build it yourself."
        ),
    ),
    Mutant(
        name="post-norm block that calls the model's own block",
        cell=POST,
        source=_post("    return model.block(x, layer, cache)\n"),
        loses=(POST_TEST,),
        hint=(
            "the block calls model.block, the library's own block, instead of building the "
            "post-norm block from the sublayers and the norm."
        ),
    ),
    Mutant(
        name="microgpt's own block through a post-norm GPT of the model's sizes and weights",
        cell=POST,
        source="from microgpt import GPT\n\n\n" + _post(
            "    c = model.config\n"
            "    ref = GPT(layout='post', n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head,\n"
            "              vocab_size=c.vocab_size, block_size=c.block_size)\n"
            "    ref.state_dict = model.state_dict\n"
            "    return GPT.block(ref, x, layer, cache)\n"),
        loses=(POST_TEST,),
        hint=(
            "the block borrows microgpt's own GPT.block through a post-norm model of your own, "
            "which the graded run switches off: build it yourself."
        ),
    ),
    Mutant(
        name="microgpt's own block through a no-residual GPT of the model's sizes and weights",
        cell=NONE,
        source="from microgpt import GPT\n\n\n" + _none(
            "    c = model.config\n"
            "    ref = GPT(layout='none', n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head,\n"
            "              vocab_size=c.vocab_size, block_size=c.block_size)\n"
            "    ref.state_dict = model.state_dict\n"
            "    return GPT.block(ref, x, layer, cache)\n"),
        loses=(NONE_TEST,),
        hint=(
            "the block borrows microgpt's own GPT.block through a model of your own, which the "
            "graded run switches off: build it yourself."
        ),
    ),
]

# the library's block run where no notebook frame calls it: on a worker thread
MUTANTS.append(Mutant(
    name="GPT.block on a worker thread (a thread pool calls it, not the notebook)",
    cell=PRE,
    source=("from concurrent.futures import ThreadPoolExecutor\n\n"
            "from microgpt import GPT\n\n\n"
            "def pre_norm_block(model, x, layer, cache):\n"
            "    c = model.config\n"
            "    ref = GPT(n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head,\n"
            "              vocab_size=c.vocab_size, block_size=c.block_size)\n"
            "    ref.state_dict = model.state_dict\n"
            "    with ThreadPoolExecutor(1) as pool:\n"
            "        return pool.submit(GPT.block, ref, x, layer, cache).result()\n"),
    loses=ALL_PRE,
    hint=(
        "the block borrows microgpt's own GPT.block (on a worker thread), which the graded run "
        "switches off: build it yourself."
    ),
))

# ---- slips: answers that raise, and what each test they fail shows ----

def _engine_line(text: str) -> int:
    """The number of the line of microgpt/engine.py that holds `text` (a crash report
    shows it; it moves when the engine does)."""
    from microgpt import engine

    with open(engine.__file__, encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


_LINEAR_RAISES = _engine_line('raise ValueError(f"linear: a row of')
_JOINED_TAIL = (
    "Cell In[@task5_1_pre_norm_block], line 3, in pre_norm_block:\n"
    "      1 def pre_norm_block(model, x, layer, cache):\n"
    "      2     x = x + model.attention(rmsnorm(x), layer, cache)\n"
    "----> 3     m = model.mlp(rmsnorm(x), layer)\n"
    f"microgpt/engine.py, line {_LINEAR_RAISES}, in linear, where the error was raised:\n"
    f'----> {_LINEAR_RAISES}             raise ValueError(f"linear: a row of {{len(row)}} '
    'weights for {len(x)} inputs")\n'
    "Hint: the model's layer got 32 numbers where its rows of weights have 16: twice as "
    "many. `+` on two Python lists joins them end to end ([a, b] + [c, d] is [a, b, c, d]); "
    "it does not add them number by number. Is a list of Values added to another list with "
    "`+`?")
_JOINED = "ValueError in your answer: linear: a row of 16 weights for 32 inputs"

SLIPS = [
    Slip(
        name="lists joined with + instead of added",
        cell=PRE,
        source=_pre("    x = x + model.attention(rmsnorm(x), layer, cache)\n"
                    "    m = model.mlp(rmsnorm(x), layer)\n"
                    "    return [xi + mi for xi, mi in zip(x, m)]\n"),
        shows=(
            (PRE_VALUES, f"{_JOINED}\nCell In[@{PRE_VALUES}], line 7, the test:\n"
                         f'----> 7     check_block_values(pre_norm_block, "pre")\n{_JOINED_TAIL}'),
            (PRE_GRADIENTS, f"{_JOINED}\nCell In[@{PRE_GRADIENTS}], line 7, the test:\n"
                            f'----> 7     check_block_gradients(pre_norm_block, "pre")\n'
                            f"{_JOINED_TAIL}"),
            (PRE_TRAINING, f"{_JOINED}\nCell In[@{PRE_TRAINING}], line 7, the test:\n"
                           f'----> 7     check_block_training(pre_norm_block, "pre", steps=8, '
                           f"seed=0)\n{_JOINED_TAIL}"),
        ),
    ),
    Slip(
        name='a misspelt name: rmsnrom for rmsnorm',
        cell=PRE,
        source=('def pre_norm_block(model, x, layer, cache):\n'
                '    a = model.attention(rmsnorm(x), layer, cache)\n'
                '    x = [xi + ai for xi, ai in zip(x, a)]\n'
                '    m = model.mlp(rmsnrom(x), layer)\n'
                '    return [xi + mi for xi, mi in zip(x, m)]\n'),
        shows=(
            ('task5_1_test_values',
             "NameError in your answer: name 'rmsnrom' is not defined\n"
             'Cell In[@task5_1_test_values], line 7, the test:\n'
             '----> 7     check_block_values(pre_norm_block, "pre")\n'
             'Cell In[@task5_1_pre_norm_block], line 4, in pre_norm_block:\n'
             '      2     a = model.attention(rmsnorm(x), layer, cache)\n'
             '      3     x = [xi + ai for xi, ai in zip(x, a)]\n'
             '----> 4     m = model.mlp(rmsnrom(x), layer)\n'
             "Hint: Did you mean 'rmsnorm'?"),
            ('task5_1_test_gradients',
             "NameError in your answer: name 'rmsnrom' is not defined\n"
             'Cell In[@task5_1_test_gradients], line 7, the test:\n'
             '----> 7     check_block_gradients(pre_norm_block, "pre")\n'
             'Cell In[@task5_1_pre_norm_block], line 4, in pre_norm_block:\n'
             '      2     a = model.attention(rmsnorm(x), layer, cache)\n'
             '      3     x = [xi + ai for xi, ai in zip(x, a)]\n'
             '----> 4     m = model.mlp(rmsnrom(x), layer)\n'
             "Hint: Did you mean 'rmsnorm'?"),
        ),
    ),
]
