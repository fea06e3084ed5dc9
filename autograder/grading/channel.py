"""What a grading worker and nbgrader's Execute step hand each other.

nbgrader builds its preprocessors itself, from config, so the grader cannot pass
`SandboxedExecute` its sandbox, nor get back what a run saw, through nbgrader's calls.
They meet in this process's `Channel` (`CHANNEL`): the grader puts the sandbox in
(`use`, which also takes a uid slot for this process's kernels), the preprocessor takes
it out (`current`) and leaves each notebook's `NotebookRun` (`record`), which the grader
collects after the autograde call (`take`).
"""

import dataclasses
import time

from autograder.sandbox.launcher import FULL
from autograder.sandbox.limits import SandboxError, acquire_uid

__all__ = ["CellRun", "NotebookRun", "Channel", "CHANNEL", "stamp"]


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
    # [name, wall time] as the notebook went through the Execute step, the launcher's
    # own (read from its phases file) merged in: see `stamp`
    phases: list = dataclasses.field(default_factory=list)
    # code cells after the last autograded test that were not run (`Sandbox.stop_after_tests`)
    left_out: int = 0

    def to_dict(self):
        return dataclasses.asdict(self)


class Channel:
    """One process's sandbox in use, its uid slot, and the runs not yet collected."""

    def __init__(self):
        self.sandbox = None
        self.uid = None  # this process's uid slot (full isolation only), kept once taken
        self.runs = {}  # (student, notebook) -> NotebookRun
        # who drives the grading: "grader" (our Grader: intake and withholding are its
        # own) or "nbgrader" (nbgrader's autograde, with our steps: nbgrader_steps)
        self.driver = ""
        self.intake = {}  # (student, notebook) -> reasons to withhold (nbgrader_steps)
        self.flags = {}  # (student, notebook) -> what a human should look at (nbgrader_steps)

    def use(self, sandbox, driver="grader"):
        """Grade with `sandbox` from now on (taking a uid slot when isolating)."""
        self.driver = driver
        if self.sandbox is sandbox:
            return
        if sandbox.level == FULL and self.uid is None:
            self.uid = acquire_uid()
        self.sandbox = sandbox

    def current(self):
        """(sandbox, uid) to grade with."""
        if self.sandbox is None:
            raise SandboxError("no sandbox in use (call Channel.use first)")
        return self.sandbox, self.uid

    def record(self, student, notebook, run):
        self.runs[(student, notebook)] = run

    def take(self, student, notebook):
        """The run of `student`'s `notebook` (None if it did not run), forgotten here."""
        return self.runs.pop((student, notebook), None)


CHANNEL = Channel()  # this process's
