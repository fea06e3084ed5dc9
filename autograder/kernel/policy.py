"""A graded kernel's policy: which of our modules it loads, and which model answers the
sandbox's copy of the library lacks, per assignment.

`KERNEL_PACKAGE` is the allowlist: `autograder.kernel` is the only package of `autograder`
that is copied into a student's sandbox and loaded in a graded kernel. The rest (the
grader, the model answers, the report) never reach a student's kernel.

The pack is open: `microgpt` and `torchtrack` hold working versions of what several tasks
ask students to write (`GPT.block` is Task 5.1's answer, `GPT.stream_states` Task 6.1's,
`torchtrack.transformer.Block.forward` and `logit_lens` Task 9.1's and 9.2's).
`SWITCHED_OFF` lists them; while an assignment is graded, the sandbox gives its kernels a
copy of the library with those bodies taken out (`autograder.grading.answerless`), so an
answer that hands the task to the library earns nothing, and no copy of the answer is
in the kernel to be found. The tests that need the library's answers run in the grader
(`autograder.grading.remote`), not in the kernel.
"""

__all__ = ["MARKER", "ASSIGNMENT_VARIABLE", "OUTPUT_VARIABLE", "OUTPUT_NOTE",
           "REFERENCE_VARIABLE", "KERNEL_PACKAGE", "kernel_side", "SWITCHED_OFF",
           "TORCH_ASSIGNMENTS", "AnswerSwitchedOff", "answer_label"]

# how the grader sends a graded test cell: MARKER and a JSON header (the cell's grade id,
# the socket to answer on), no source (`gradekernel`)
MARKER = "#%residual-pack graded test "
ASSIGNMENT_VARIABLE = "RESIDUAL_PACK_ASSIGNMENT"  # in a graded kernel's environment
OUTPUT_VARIABLE = "RESIDUAL_PACK_OUTPUT_LIMIT"  # characters of print a kernel passes on
REFERENCE_VARIABLE = "RESIDUAL_PACK_REFERENCE_RUN"  # set in the reference run's kernel
OUTPUT_NOTE = "[grading: the rest of this notebook's printed output was left out]"

# the allowlist is a package: a graded kernel loads `autograder` (an empty package) and
# what is in `autograder.kernel`, nothing else of ours
KERNEL_PACKAGE = "autograder.kernel"


def kernel_side(name):
    """Whether the module `name` (dotted) may load in a student's kernel."""
    return name in ("autograder", KERNEL_PACKAGE) or name.startswith(KERNEL_PACKAGE + ".")


# assignment -> [(module, class or None, name, task, what to do instead)]
SWITCHED_OFF = {
    "02_degradation": [
        ("microgpt.deepnet", None, "logits", "Task 2.2",
         "compute h_0 = W_in x, the layers and the head yourself"),
    ],
    "05_gpt_residual_adds": [
        ("microgpt.model", "GPT", "block", "Tasks 5.1 to 5.3",
         "build the block from model.attention, model.mlp and rmsnorm"),
    ],
    "06_residual_stream": [
        ("microgpt.model", "GPT", "stream_states", "Task 6.1",
         "collect the states with model.embed and model.block"),
    ],
    "08_torch_mlp": [
        ("torchtrack.mlp", "ResidualLayer", "forward", "Task 8.1",
         "write the shortcut yourself: the layer's input plus what self.branch makes of it"),
        ("torchtrack.mlp", "HighwayLayer", "forward", "Task 8.2",
         "write the gate and the mix yourself"),
    ],
    "09_torch_transformer": [
        ("torchtrack.transformer", "Block", "forward", "Task 9.1",
         "call block.attn, block.ffn, block.norm1 and block.norm2 yourself"),
        ("torchtrack.transformer", None, "logit_lens", "Task 9.2",
         "decode each state of stream_states with model.decode"),
    ],
}

TORCH_ASSIGNMENTS = ("08_torch_mlp", "09_torch_transformer")


class AnswerSwitchedOff(Exception):
    """A task's model answer, called from a notebook while that task is graded."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


def answer_label(module, owner, name):
    """How a switched-off answer is named: module.Class.name, or module.name."""
    return f"{module}.{owner + '.' if owner else ''}{name}"
