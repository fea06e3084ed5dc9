"""What a graded kernel and the grader agree on: how a graded test cell is sent, how much
printed output a kernel passes on, and the error a model answer raises in a kernel whose
library has it taken out.

The pack is open: `microgpt` and `torchtrack` hold working versions of what several tasks
ask students to write (`GPT.block` is Task 5.1's answer, `GPT.stream_states` Task 6.1's).
While an assignment is graded, the sandbox gives its kernels a copy of the library with
those bodies replaced by a raise of `AnswerSwitchedOff` (`autograder.grading.answerless`
holds the list and writes the copy), so an answer that hands the task to the library
earns nothing, and no copy of the answer is in the kernel to be found.
"""

__all__ = ["MARKER", "OUTPUT_VARIABLE", "OUTPUT_NOTE", "LIFELINE_VARIABLE", "AnswerSwitchedOff"]

# how the grader sends a graded test cell: MARKER and a JSON header (the cell's grade id,
# the socket to answer on), no source (`gradekernel`)
MARKER = "#%residual-pack graded test "
OUTPUT_VARIABLE = "RESIDUAL_PACK_OUTPUT_LIMIT"  # characters of print a kernel passes on
OUTPUT_NOTE = "[grading: the rest of this notebook's printed output was left out]"
# the number of a pipe's reading end that the sandbox hands the kernel
# (`autograder.sandbox.bubblewrap.LIFELINE_VARIABLE`); its writing end is the grader's
LIFELINE_VARIABLE = "RESIDUAL_PACK_LIFELINE"


class AnswerSwitchedOff(Exception):
    """A task's model answer, called from a notebook while that task is graded."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]
