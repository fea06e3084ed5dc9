"""Wrong answers to the tiny-GPT residual adds assignment (Tasks 5.1 to 5.3) that the tests
must catch."""

from . import Mutant

PRE = "task5_1_pre_norm_block"
POST = "task5_2_post_norm_block"
NONE = "task5_3_no_residual_block"
PRE_VALUES = "task5_1_test_values"
PRE_GRADIENTS = "task5_1_test_gradients"
PRE_TRAINING = "task5_1_test_training"
ALL_PRE = (PRE_VALUES, PRE_GRADIENTS, PRE_TRAINING)
POST_TEST = "task5_2_test"
NONE_TEST = "task5_3_test"


def _block(name, body):
    """The whole source of a block cell: `name(model, x, layer, cache)` with `body`."""
    return f"def {name}(model, x, layer, cache):\n" + body


def _pre(body):
    return _block("pre_norm_block", body)


def _post(body):
    return _block("post_norm_block", body)


def _none(body):
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
    ),
    Mutant(
        name="calls the model's own block instead of writing one",
        cell=PRE,
        source=_pre("    return model.block(x, layer, cache)\n"),
        loses=ALL_PRE,
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
    ),
    Mutant(
        name="no-residual block with the norms dropped too",
        cell=NONE,
        source=_none("    return model.mlp(model.attention(x, layer, cache), layer)\n"),
        loses=(NONE_TEST,),
    ),
    Mutant(
        name="no-residual block that returns its input (both sublayers skipped)",
        cell=NONE,
        source=_none("    model.attention(rmsnorm(x), layer, cache)\n    return x\n"),
        loses=(NONE_TEST,),
    ),
    # ---- handing the task to the library ----
    Mutant(
        name="microgpt's own block: GPT.block(model, ...)",
        cell=PRE,
        source="from microgpt import GPT\n\n\n" + _pre(
            "    return GPT.block(model, x, layer, cache)\n"),
        loses=ALL_PRE,
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
    ),
    Mutant(
        name="post-norm block that calls the model's own block",
        cell=POST,
        source=_post("    return model.block(x, layer, cache)\n"),
        loses=(POST_TEST,),
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
))
