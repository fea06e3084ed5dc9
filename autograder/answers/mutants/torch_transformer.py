"""Wrong answers to the torch transformer assignment (Tasks 9.1, 9.2) that the tests catch."""

from autograder.answers.mutants import Mutant, Slip

BLOCK = "task9_1_block_forward"
LENS = "task9_2_logit_lens"
BLOCK_TESTS = ("task9_1_test_layouts", "task9_1_test_training")
LENS_TEST = ("task9_2_test_logit_lens",)

_PRE = (
    "    if block.layout == 'pre':\n"
    "        x = x + block.attn(block.norm1(x))\n"
    "        return x + block.ffn(block.norm2(x))\n"
)
_POST = (
    "    if block.layout == 'post':\n"
    "        x = block.norm1(x + block.attn(x))\n"
    "        return block.norm2(x + block.ffn(x))\n"
)
_NONE = "    return block.ffn(block.norm2(block.attn(block.norm1(x))))\n"


def _block(body: str) -> str:
    return "def block_forward(block, x):\n" + body


def _lens(body: str) -> str:
    return "def logit_lens(model, idx, targets):\n" + body


def _lens_of(decode: str, states: str = "stream_states(model, idx)") -> str:
    return _lens(
        "    out = []\n"
        f"    for x in {states}:\n"
        f"        logits = {decode}\n"
        "        out.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)),\n"
        "                                   targets.reshape(-1)).item())\n"
        "    return out\n"
    )


MUTANTS = [
    # ---- Task 9.1 ----
    Mutant("pre-norm for every layout", BLOCK,
           _block("    x = x + block.attn(block.norm1(x))\n"
                  "    return x + block.ffn(block.norm2(x))\n"), BLOCK_TESTS,
           hint="every layout seems to run the pre-norm block: look at block.layout."),
    Mutant("pre-norm: the add outside the norm is inside: norm(x + f(x))", BLOCK,
           _block("    if block.layout == 'pre':\n"
                  "        x = block.norm1(x + block.attn(x))\n"
                  "        return block.norm2(x + block.ffn(x))\n" + _POST + _NONE),
           ("task9_1_test_layouts",),
           hint=(
               "the pre-norm block seems to normalise after the add: in pre-norm, the norm comes "
               "before each sublayer."
           )),
    Mutant("post-norm written as pre-norm", BLOCK,
           _block(_PRE + "    if block.layout == 'post':\n"
                  "        x = x + block.attn(block.norm1(x))\n"
                  "        return x + block.ffn(block.norm2(x))\n" + _NONE), BLOCK_TESTS,
           hint=(
               "the post-norm layout seems to run the pre-norm block: in post-norm, where does the "
               "norm go?"
           )),
    Mutant("post-norm: the norm on the branch only, x + norm(f(x))", BLOCK,
           _block(_PRE + "    if block.layout == 'post':\n"
                  "        x = x + block.norm1(block.attn(x))\n"
                  "        return x + block.norm2(block.ffn(x))\n" + _NONE), BLOCK_TESTS,
           hint=(
               "in post-norm the norm seems to sit on the branch's output before the add: it comes "
               "after the add."
           )),
    Mutant("norms swapped: norm2 with attention, norm1 with the feed-forward", BLOCK,
           _block("    if block.layout == 'pre':\n"
                  "        x = x + block.attn(block.norm2(x))\n"
                  "        return x + block.ffn(block.norm1(x))\n" + _POST + _NONE),
           ("task9_1_test_layouts",),
           hint=(
               "the two norms seem swapped between the sublayers: norm1 goes with attention, norm2 "
               "with the feed-forward."
           )),
    Mutant("no residual: keeps a shortcut around the feed-forward", BLOCK,
           _block(_PRE + _POST + "    x = block.attn(block.norm1(x))\n"
                  "    return x + block.ffn(block.norm2(x))\n"), ("task9_1_test_layouts",),
           hint="the no-residual layout still adds a shortcut around the feed-forward."),
    Mutant("no residual: the norms left out", BLOCK,
           _block(_PRE + _POST + "    return block.ffn(block.attn(x))\n"),
           ("task9_1_test_layouts",),
           hint="the no-residual layout seems to drop the norms too: only the shortcuts go."),
    Mutant("pre-norm: the second sublayer reads the block's input (parallel block)", BLOCK,
           _block("    if block.layout == 'pre':\n"
                  "        return x + block.attn(block.norm1(x)) + block.ffn(block.norm2(x))\n"
                  + _POST + _NONE), BLOCK_TESTS,
           hint=(
               "the feed-forward seems to read the block's input instead of the stream after the "
               "attention add."
           )),
    Mutant("feed-forward before attention", BLOCK,
           _block("    if block.layout == 'pre':\n"
                  "        x = x + block.ffn(block.norm2(x))\n"
                  "        return x + block.attn(block.norm1(x))\n" + _POST + _NONE),
           BLOCK_TESTS,
           hint="the sublayers seem to run in the other order: attention comes first."),
    Mutant("hands the task to the library: Block.forward(block, x)", BLOCK,
           "from torchtrack.transformer import Block\n\n"
           + _block("    return Block.forward(block, x)\n"), BLOCK_TESTS,
           hint=(
               "the answer calls torchtrack's own Block.forward, which the graded run switches "
               "off: write the block yourself."
           )),
    # ---- Task 9.2 ----
    Mutant("the head without the final norm", LENS, _lens_of("model.head(x)"), LENS_TEST,
           hint=(
               "the states seem to go to the head without the final norm the model applies first "
               "(model.decode does both)."
           )),
    Mutant("the embedding state left out", LENS,
           _lens_of("model.decode(x)", "stream_states(model, idx)[1:]"), LENS_TEST,
           hint=(
               "the losses seem to start after the first block: the embedding state gets a loss "
               "too."
           )),
    Mutant("the final state decoded every time", LENS,
           _lens_of("model.decode(stream_states(model, idx)[-1])"), LENS_TEST,
           hint=(
               "every depth gets the same loss: each state must be decoded, not only the last one."
           )),
    Mutant("a norm without its gain: x / rms(x)", LENS,
           _lens_of("model.head(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))"),
           LENS_TEST,
           hint=(
               "the norm seems to leave out its learned gain: decode with the model's own final "
               "norm."
           )),
    Mutant("hands the task to the library: torchtrack's own logit_lens", LENS,
           "from torchtrack import transformer as _library\n\n"
           + _lens("    return _library.logit_lens(model, idx, targets)\n"), LENS_TEST,
           hint=(
               "the answer calls torchtrack's own logit_lens, which the graded run switches off: "
               "write it yourself."
           )),
    Mutant("targets not shifted against the inputs: scored against idx", LENS,
           _lens("    out = []\n"
                 "    for x in stream_states(model, idx):\n"
                 "        logits = model.decode(x)\n"
                 "        out.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)),\n"
                 "                                   idx.reshape(-1)).item())\n"
                 "    return out\n"), LENS_TEST,
           hint="the states seem to be scored against the inputs instead of the targets."),
]


# ---- slips: answers that raise or do not run, and what each test they fail shows ----

SLIPS = [
    Slip(
        name='a misspelt name: blokc for block',
        cell='task9_1_block_forward',
        source=('def block_forward(block, x):\n'
                "    if block.layout == 'pre':\n"
                '        x = x + blokc.attn(block.norm1(x))\n'
                '        return x + block.ffn(block.norm2(x))\n'
                "    if block.layout == 'post':\n"
                '        x = block.norm1(x + block.attn(x))\n'
                '        return block.norm2(x + block.ffn(x))\n'
                '    return block.ffn(block.norm2(block.attn(block.norm1(x))))\n'),
        shows=(
            ('task9_1_test_layouts',
             "NameError in your answer: name 'blokc' is not defined\n"
             'Cell In[@task9_1_test_layouts], line 15, the test:\n'
             '----> 15         check_module(lambda: with_moved_norms(MyBlock(16, 4, '
             'layout).double(), 91),\n'
             'Cell In[@my_block], line 5, in forward:\n'
             '      4     def forward(self, x):\n'
             '----> 5         return block_forward(self, x)\n'
             'Cell In[@task9_1_block_forward], line 3, in block_forward:\n'
             '      1 def block_forward(block, x):\n'
             "      2     if block.layout == 'pre':\n"
             '----> 3         x = x + blokc.attn(block.norm1(x))\n'
             "Hint: Did you mean 'block'?"),
        ),
    ),
    Slip(
        name="attention's output transposed before the add",
        cell='task9_1_block_forward',
        source=('def block_forward(block, x):\n'
                "    if block.layout == 'pre':\n"
                '        x = x + block.attn(block.norm1(x)).transpose(1, 2)\n'
                '        return x + block.ffn(block.norm2(x))\n'
                "    if block.layout == 'post':\n"
                '        x = block.norm1(x + block.attn(x))\n'
                '        return block.norm2(x + block.ffn(x))\n'
                '    return block.ffn(block.norm2(block.attn(block.norm1(x))))\n'),
        shows=(
            ('task9_1_test_layouts',
             'RuntimeError in your answer: The size of tensor a (16) must match the size of '
             'tensor b (5) at non-singleton dimension 2\n'
             'Cell In[@task9_1_test_layouts], line 15, the test:\n'
             '----> 15         check_module(lambda: with_moved_norms(MyBlock(16, 4, '
             'layout).double(), 91),\n'
             'Cell In[@my_block], line 5, in forward:\n'
             '      4     def forward(self, x):\n'
             '----> 5         return block_forward(self, x)\n'
             'Cell In[@task9_1_block_forward], line 3, in block_forward:\n'
             '      1 def block_forward(block, x):\n'
             "      2     if block.layout == 'pre':\n"
             '----> 3         x = x + block.attn(block.norm1(x)).transpose(1, 2)\n'
             'Hint: the shapes of two tensors do not fit: 16 against 5 in dimension 2, where '
             'they are added or multiplied. Print the .shape of the tensors your code builds: '
             'a tensor used transposed (.T, .transpose) has its dimensions swapped.'),
        ),
    ),
]
