"""What `execute.SandboxedExecute` knows of the one notebook it is running: `NotebookState`,
made for each notebook and dropped after it, and `OutputBudget`, the one place that decides
how much of the kernel's output the graded notebook keeps.

The output limit, on the grader's side, is decided and enforced here only:

- per notebook, `Limits.output` characters of all that reaches the notebook from the
  kernel (new outputs, display updates written into earlier outputs): `OutputBudget.admit`,
  asked by `SandboxedExecute.output` and `SandboxedExecute._update_display_id`;
- per cell, nbgrader's `LimitOutput` rule at its default settings (1,000 lines of printed
  output, tracebacks of 100 lines): `OutputBudget.trim`, applied to every cell once the
  notebook is done (`SandboxedExecute.limit_cells`), the grader's own lines in it, as
  `LimitOutput` did after the Execute step (it is no longer in
  `pipeline.AUTOGRADE_STEPS`).

The kernel keeps a cap of its own on printed text (`kernel.gradekernel._cap_streams`, at
the same `Limits.output`, passed through `policy.OUTPUT_VARIABLE` by `plan.Sandbox.plan`).
It stays as the kernel's defence against one oversized message: a student's single
`print` of a gigabyte would otherwise leave the kernel as one message above
`Limits.message`, which the grader's socket refuses by dropping the connection, so that
the notebook could not go on. That cap decides nothing the graded notebook keeps: the
note it prints (`policy.OUTPUT_NOTE`) is counted here as output left out of its cell.
"""

from __future__ import annotations

import dataclasses
import json
import time
from typing import TYPE_CHECKING, Any

from nbformat import NotebookNode

from autograder.kernel.policy import OUTPUT_NOTE
from autograder.sandbox.limits import Limits, size_words

if TYPE_CHECKING:
    from autograder.grading.notebook_record import NotebookRun
    from autograder.grading.plan import KernelPlan

__all__ = ["MAX_LINES", "MAX_TRACEBACK", "OutputBudget", "NotebookState", "message_size"]

# nbgrader's LimitOutput defaults, which the course never changed: lines of printed output
# kept per cell, lines of each traceback
MAX_LINES = 1000
MAX_TRACEBACK = 100


def message_size(msg: dict[str, Any]) -> int:
    """What an output message would add to the graded notebook, all of its content
    counted (text, data, traceback, and the metadata a student's display may carry)."""
    content = msg.get("content", {})
    try:
        return len(json.dumps(content, default=str, ensure_ascii=False)) + 200
    except (TypeError, ValueError, RecursionError):
        return len(str(content)) + 200


@dataclasses.dataclass
class OutputBudget:
    """How much of the kernel's output one notebook has kept, and what was left out of
    each cell (`dropped`: cell index -> characters)."""

    limit: int  # characters kept per notebook (`Limits.output`)
    kept: int = 0
    dropped: dict[int | None, int] = dataclasses.field(default_factory=dict)
    max_lines: int = MAX_LINES
    max_traceback: int = MAX_TRACEBACK

    def admit(self, size: int, cell_index: int | None,
              outs: list[NotebookNode] | None) -> bool:
        """Whether `size` more characters of output fit in the notebook's budget; when not,
        the cell (`outs`, its outputs) says once that some of its output was left out."""
        if self.kept + size <= self.limit:
            self.kept += size
            return True
        first = cell_index not in self.dropped
        self.dropped[cell_index] = self.dropped.get(cell_index, 0) + size
        if first and outs is not None:
            outs.append(NotebookNode(output_type="stream", name="stdout", text=(
                f"\n[grading: this cell's output beyond the {size_words(self.limit)} "
                f"kept per notebook was left out]\n")))
        return False

    def admit_message(self, msg: dict[str, Any], cell_index: int,
                      outs: list[NotebookNode]) -> bool:
        """`admit` for a new output: a message's size; the kernel's own note that it left
        printed text out (see the module doc) counts that cell as cut."""
        text = msg.get("content", {}).get("text")
        if isinstance(text, str) and OUTPUT_NOTE in text:
            self.dropped[cell_index] = self.dropped.get(cell_index, 0) + 1
        return self.admit(message_size(msg), cell_index, outs)

    def dropped_in(self, cell_index: int) -> int:
        return self.dropped.get(cell_index, 0)

    def trim(self, cell: NotebookNode) -> None:
        """nbgrader's `LimitOutput` rule on one cell's final outputs: its printed text
        (all streams together) cut after `max_lines` lines, and any later stream output
        dropped; each traceback longer than `max_traceback` lines shortened in its
        middle."""
        if cell.get("cell_type") != "code":
            return
        if self.max_lines >= 0:
            length, outputs = 0, []
            for output in cell.get("outputs", []):
                if output.get("output_type") == "stream":
                    if length == self.max_lines:
                        continue
                    text = output.get("text", "").split("\n")
                    if len(text) + length > self.max_lines:
                        text = text[:self.max_lines - length - 1] + ["... Output truncated ..."]
                    length += len(text)
                    output["text"] = "\n".join(text)
                outputs.append(output)
            cell.outputs = outputs
        if self.max_traceback >= 0:
            for output in cell.get("outputs", []):
                lines = output.get("traceback") if output.get("output_type") == "error" else None
                if lines is not None and len(lines) > self.max_traceback:
                    head = self.max_traceback // 2
                    tail = self.max_traceback - head - 1
                    output["traceback"] = [*lines[:head], "... Traceback truncated ...",
                                           *lines[-tail:]]


@dataclasses.dataclass
class NotebookState:
    """Everything `SandboxedExecute` keeps while it runs one notebook."""

    limits: Limits
    plan: KernelPlan  # the kernel's sandbox
    run: NotebookRun  # what is written into the graded notebook at the end
    expected: dict[str, Any]  # the reference run's observations, by test grade id
    last: int  # cells after this index are left out (`cells.left_out_when_grading`)
    skip: frozenset[str]  # the course's cells the reference run lists as left out
    deadline: float  # time.monotonic() at which the notebook's time is up
    budget: OutputBudget
    passed: set[str] = dataclasses.field(default_factory=set)  # checks that last passed
    stopped: str = ""  # why the kernel can run no more cells ("" while it can)
    reply: dict[str, Any] | None = None  # the running cell's execute reply
    timed_out: int | bool = False  # the running cell's timeout, once it passed it
    # the cell whose messages are being read: where a display update's note goes
    current: tuple[NotebookNode | None, int | None] = (None, None)

    @classmethod
    def begin(cls, limits: Limits, plan: KernelPlan, run: NotebookRun,
              reference: dict[str, Any], last: int, whole: bool = False) -> NotebookState:
        """The state of a notebook about to run; `reference`: the reference run's record of
        its source notebook; `whole`: every cell runs (none left out)."""
        return cls(limits=limits, plan=plan, run=run, expected=reference.get("tests", {}),
                   last=last,
                   skip=frozenset() if whole else frozenset(reference.get("skip", [])),
                   deadline=time.monotonic() + limits.notebook_timeout,
                   budget=OutputBudget(limits.output))

    def cell_timeout(self) -> int:
        """Seconds the next cell may take: its own limit, or what is left of the
        notebook's, at least 1."""
        remaining = self.deadline - time.monotonic()
        return max(1, int(min(self.limits.cell_timeout, remaining) + 0.999))

    def out_of_time(self) -> bool:
        """Whether the notebook's time is up; the first time it is, the kernel is marked
        stopped."""
        if not self.stopped and time.monotonic() >= self.deadline:
            self.stop(f"the notebook used up its time limit ({self.limits.notebook_timeout} s)")
            return True
        return False

    def stop(self, why: str, ended: str | None = None) -> None:
        """The kernel can run no more cells, for the reason `why`; `ended` is how the
        notebook's record says it (`why` unless given)."""
        self.stopped = why
        self.run.ended = why if ended is None else ended

    def new_cell(self) -> None:
        """Forget what the last cell's run left."""
        self.reply = None
        self.timed_out = False
