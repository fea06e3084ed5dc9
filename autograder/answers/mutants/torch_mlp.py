"""Wrong answers to the torch MLP assignment (Tasks 8.1 and 8.2) that the tests must catch."""

from autograder.answers.mutants import Mutant, Slip

RESIDUAL = "task8_1_residual_layer"
HIGHWAY = "task8_2_highway_layer"
RESIDUAL_TESTS = ("task8_1_test_layer", "task8_1_test_training")
HIGHWAY_LAYER_TEST = "task8_2_test_layer"
HIGHWAY_TESTS = (HIGHWAY_LAYER_TEST, "task8_2_test_training")


def _residual(body: str) -> str:
    return (
        "class ResidualLayer(PlainLayer):\n"
        "    def forward(self, h):\n" + body
    )


def _highway(body: str) -> str:
    return (
        "class HighwayLayer(PlainLayer):\n"
        "    def __init__(self, width, gate_bias=-2.0):\n"
        "        super().__init__(width)\n"
        "        self.gate = nn.Linear(width, width)\n"
        "        with torch.no_grad():\n"
        "            self.gate.bias.fill_(gate_bias)\n\n"
        "    def forward(self, h):\n" + body
    )


MUTANTS = [
    # ---- Task 8.1 ----
    Mutant("plain layer: the shortcut left out", RESIDUAL,
           _residual("        return self.branch(h)\n"), RESIDUAL_TESTS,
           hint="the output is the branch alone: the shortcut seems to be missing."),
    Mutant("shortcut around the relu only: relu(W LN(h) + b + h)", RESIDUAL,
           _residual("        return torch.relu(self.linear(self.norm(h)) + h)\n"), RESIDUAL_TESTS,
           hint="the shortcut seems to be added inside the relu: add it to the branch's output."),
    Mutant("shortcut from the normalised input: LN(h) + F(h)", RESIDUAL,
           _residual("        return self.norm(h) + self.branch(h)\n"), RESIDUAL_TESTS,
           hint="the shortcut seems to carry the normalised input: it carries h unchanged."),
    Mutant("norm after the add: LN(h + F(h))", RESIDUAL,
           _residual("        return self.norm(h + self.branch(h))\n"), RESIDUAL_TESTS,
           hint=(
               "the sum seems to be normalised after the add: the identity shortcut is left as it "
               "is."
           )),
    Mutant("shortcut doubled: 2 h + F(h)", RESIDUAL,
           _residual("        return 2 * h + self.branch(h)\n"), RESIDUAL_TESTS,
           hint="the input seems to be added twice: count how many times h appears."),
    Mutant("shortcut detached: no gradient through it", RESIDUAL,
           _residual("        return h.detach() + self.branch(h)\n"), ("task8_1_test_layer",),
           hint=(
               "the values are right but the shortcut is detached, so no gradient flows along it."
           )),
    Mutant("hands the task to the library: torchtrack's own ResidualLayer.forward", RESIDUAL,
           "from torchtrack import mlp as _library\n\n"
           + _residual("        return _library.ResidualLayer.forward(self, h)\n"),
           RESIDUAL_TESTS,
           hint=(
               "forward calls torchtrack's own ResidualLayer.forward, which the graded run "
               "switches off: write it yourself."
           )),
    # ---- Task 8.2 ----
    Mutant("gate and carry swapped: (1 - T) F(h) + T h", HIGHWAY,
           _highway("        t = torch.sigmoid(self.gate(h))\n"
                    "        return (1 - t) * self.branch(h) + t * h\n"), HIGHWAY_TESTS,
           hint="the gate and the carry seem swapped: which path does T open?"),
    Mutant("no sigmoid on the gate", HIGHWAY,
           _highway("        t = self.gate(h)\n"
                    "        return t * self.branch(h) + (1 - t) * h\n"), HIGHWAY_TESTS,
           hint="the gate is not squashed into (0, 1): it needs its sigmoid."),
    Mutant("gate reads the normalised input", HIGHWAY,
           _highway("        t = torch.sigmoid(self.gate(self.norm(h)))\n"
                    "        return t * self.branch(h) + (1 - t) * h\n"), (HIGHWAY_LAYER_TEST,),
           hint="the gate seems to read the normalised input: it reads h itself."),
    Mutant("carry path left out: T F(h)", HIGHWAY,
           _highway("        t = torch.sigmoid(self.gate(h))\n"
                    "        return t * self.branch(h)\n"), HIGHWAY_TESTS,
           hint=(
               "the carry path seems to be missing: the input must also pass through, weighted by "
               "1 - T."
           )),
    Mutant("residual instead of highway: h + F(h)", HIGHWAY,
           _highway("        return h + self.branch(h)\n"), HIGHWAY_TESTS,
           hint=(
               "this is the residual layer: the highway layer mixes the two paths with its gate."
           )),
    Mutant("hands the task to the library: torchtrack's own HighwayLayer.forward", HIGHWAY,
           "from torchtrack import mlp as _library\n\n"
           + _highway("        return _library.HighwayLayer.forward(self, h)\n"),
           HIGHWAY_TESTS,
           hint=(
               "forward calls torchtrack's own HighwayLayer.forward, which the graded run switches "
               "off: write it yourself."
           )),
    Mutant("a fixed gate of 0.12, ignoring W_T", HIGHWAY,
           _highway("        t = torch.sigmoid(torch.full_like(h, -2.0))\n"
                    "        return t * self.branch(h) + (1 - t) * h\n"), HIGHWAY_TESTS,
           hint=(
               "the gate seems fixed, the same for every input: it is computed from h by the "
               "gate's linear layer."
           )),
]

# the library's classes under the tasks' names, and subclasses that inherit their forward
MUTANTS += [
    Mutant("the library's ResidualLayer under the task's name", RESIDUAL,
           "from torchtrack.mlp import ResidualLayer\n", RESIDUAL_TESTS,
           hint=(
               "the class is torchtrack's own ResidualLayer, whose forward the graded run switches "
               "off: write forward yourself."
           )),
    Mutant("a subclass of the library's ResidualLayer that inherits its forward", RESIDUAL,
           "from torchtrack import mlp as _library\n\n\n"
           "class ResidualLayer(_library.ResidualLayer):\n    pass\n", RESIDUAL_TESTS,
           hint=(
               "the class inherits torchtrack's own forward, which the graded run switches off: "
               "write forward yourself."
           )),
    Mutant("a subclass of the library's HighwayLayer that inherits its forward", HIGHWAY,
           "from torchtrack import mlp as _library\n\n\n"
           "class HighwayLayer(_library.HighwayLayer):\n    pass\n", HIGHWAY_TESTS,
           hint=(
               "the class inherits torchtrack's own forward, which the graded run switches off: "
               "write forward yourself."
           )),
]


# ---- slips: answers that raise or do not run, and what each test they fail shows ----

SLIPS = [
    Slip(
        name='the shortcut added transposed: F(h) + h.T',
        cell='task8_1_residual_layer',
        source=_residual('        return self.branch(h) + h.T\n'),
        shows=(
            ('task8_1_test_layer',
             'RuntimeError in your answer: The size of tensor a (8) must match the size of '
             'tensor b (5) at non-singleton dimension 1\n'
             'Cell In[@task8_1_test_layer], line 13, the test:\n'
             '----> 13     check_module(lambda: ResidualLayer(8).double(), rows(81, 5, 8), '
             'seed=81,\n'
             'Cell In[@task8_1_residual_layer], line 3, in forward:\n'
             '      2     def forward(self, h):\n'
             '----> 3         return self.branch(h) + h.T\n'
             'Hint: the shapes of two tensors do not fit: 8 against 5 in dimension 1, where '
             'they are added or multiplied. Print the .shape of the tensors your code builds: '
             'a tensor used transposed (.T, .transpose) has its dimensions swapped.'),
        ),
    ),
    Slip(
        name='the gate with math.exp on a tensor',
        cell='task8_2_highway_layer',
        source=_highway('        t = 1 / (1 + math.exp(-self.gate(h)))\n'
                '        return t * self.branch(h) + (1 - t) * h\n'),
        shows=(
            ('task8_2_test_layer',
             'ValueError in your answer: only one element tensors can be converted to Python '
             'scalars\n'
             'Cell In[@task8_2_test_layer], line 12, the test:\n'
             '----> 12     check_module(lambda: HighwayLayer(8).double(), rows(91, 5, 8), '
             'seed=91,\n'
             'Cell In[@task8_2_highway_layer], line 9, in forward:\n'
             '      8     def forward(self, h):\n'
             '----> 9         t = 1 / (1 + math.exp(-self.gate(h)))\n'
             "Hint: a function of one number (math.exp, math.sqrt, float()) got a whole "
             "tensor: use torch's own (torch.exp, torch.sigmoid, torch.sqrt), which work on "
             "every element and keep the graph."),
        ),
    ),
    Slip(
        name='a misspelt function: torch.sigmod',
        cell='task8_2_highway_layer',
        source=_highway('        t = torch.sigmod(self.gate(h))\n'
                '        return t * self.branch(h) + (1 - t) * h\n'),
        shows=(
            ('task8_2_test_layer',
             "AttributeError in your answer: module 'torch' has no attribute 'sigmod'\n"
             'Cell In[@task8_2_test_layer], line 12, the test:\n'
             '----> 12     check_module(lambda: HighwayLayer(8).double(), rows(91, 5, 8), '
             'seed=91,\n'
             'Cell In[@task8_2_highway_layer], line 9, in forward:\n'
             '      8     def forward(self, h):\n'
             '----> 9         t = torch.sigmod(self.gate(h))\n'
             "Hint: Did you mean 'sigmoid'? There is no 'sigmod' in the module torch."),
        ),
    ),
]
