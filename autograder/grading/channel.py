"""What a batch driver and the steps of one nbgrader autograde call hand each other.

nbgrader builds its preprocessors itself, from config, so a driver cannot pass
`SandboxedExecute` its sandbox, nor get back what a run saw, through nbgrader's calls.
It puts a `Channel` into the config (traitlets hands it to each step), and reads back
each notebook's `NotebookRun`, intake and withholding after the autograde call.
nbgrader's own commands, with no driver, use the one channel of their process
(`nbgrader_steps.process_channel`).
"""

import dataclasses
import time

from autograder.sandbox.limits import SandboxError

__all__ = ["CellRun", "NotebookRun", "Channel", "stamp"]


def stamp(phases, name):
    """Note in `phases` (a list of [name, wall time]) that `name` happened now: the cheap
    timing record of a graded submission (`benchmarks/grade_phases.py` reads it)."""
    phases.append([name, time.time()])


@dataclasses.dataclass
class CellRun:
    index: int
    grade_id: str  # "" for the student's own cells
    kind: str  # "test", "answer", "given" or "own" (`cells.kind`)
    status: str  # ok, error, timeout, stuck, died, not run
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0
    output_dropped: int = 0  # bytes of output left out
    stderr: bool = False  # wrote to stderr (nbgrader fails a test cell that does)
    checks: int = 0  # checks the test makes (from the reference run)
    verdict: str = ""  # why the grader failed the test ("" when it passed)
    hidden: bool = False  # the failed check is a hidden one
    detail: str = ""  # the failed hidden check in full, for the instructor's report only
    restored: list = dataclasses.field(default_factory=list)  # put back before a test
    changed: list = dataclasses.field(default_factory=list)  # changed while a test ran


@dataclasses.dataclass
class NotebookRun:
    cells: list = dataclasses.field(default_factory=list)
    ended: str = ""  # why the kernel stopped early, in words ("" when it did not)
    level: str = ""
    seconds: float = 0.0
    # [name, wall time] as the notebook went through the Execute step: see `stamp`
    phases: list = dataclasses.field(default_factory=list)
    # the course's code cells that grading left out (`cells.left_out_when_grading`)
    left_out: int = 0

    def to_dict(self):
        return dataclasses.asdict(self)


class Channel:
    """What one grading run's steps hand each other and the batch driver, per (student,
    notebook): the sandbox to run kernels in, each notebook's `NotebookRun`, and what
    intake and withholding found.

    nbgrader builds its preprocessors itself, from config: a driver (`Grader`) puts its
    channel in the config it gives nbgrader (`SandboxedExecute.channel`,
    `IntakeRepairs.channel`, `WithholdForReview.channel`), and the steps of that
    autograde call share it. traitlets copies config values into each step: a channel
    copies as itself."""

    def __init__(self, sandbox=None):
        self.sandbox = sandbox
        self.runs = {}  # (student, notebook) -> NotebookRun
        self.intake = {}  # (student, notebook) -> `intake.Intake` of IntakeRepairs
        self.withheld = {}  # (student, notebook) -> (points held back, reasons)

    def __deepcopy__(self, memo):
        return self

    def current(self):
        """The sandbox to grade with (each kernel gets a fresh uid from it, as root)."""
        if self.sandbox is None:
            raise SandboxError("no sandbox in use")
        return self.sandbox

    def record(self, student, notebook, run):
        self.runs[(student, notebook)] = run

    def take(self, student, notebook):
        """The run of `student`'s `notebook` (None if it did not run), forgotten here."""
        return self.runs.pop((student, notebook), None)
