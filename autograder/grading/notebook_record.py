"""What our nbgrader steps saw of a notebook, written into the graded notebook itself.

nbgrader's own steps keep what they know in the notebook (each cell's `nbgrader`
metadata); ours do the same, under one key of their own (`KEY`), so that whatever reads
the autograded notebook nbgrader writes (`autograded/<student>/<assignment>/`) reads
what grading saw: the batch driver's `StudentResult`, withholding, the report, the class
report export (`report_export.ClassReport`). (Not to be confused with `records`, which
holds what one test cell's checks observe while the test runs; the judge's verdicts on
those end up here, in each cell's `CellRun`.)

- the notebook's metadata[KEY]: {"intake": what `IntakeRepairs` repaired and flagged,
  "run": how the sandboxed run went (`NotebookRun` without its cells), "withheld": what
  `WithholdForReview` held back};
- a run cell's metadata[KEY]: its `CellRun`.

Trust: a student can put anything in a notebook they hand in, this key too. So
`IntakeRepairs`, the first step nbgrader runs on a handed-in notebook, removes the key from
the notebook and every cell before anything is written (`forget`), and each of our steps
writes its part after the work it records: `SandboxedExecute` writes the cells' records
once the kernel is dead, so nothing the kernel sends can land under the key.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

__all__ = ["KEY", "CellRun", "NotebookRun", "Seen", "stamp", "forget", "write_intake",
           "write_run", "write_withheld", "read_seen"]

# the metadata key of our steps' records, in the notebook and in its cells
KEY = "residual_pack_grading"


def stamp(phases: list, name: str) -> None:
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
    # the limits the notebook ran under (`Limits` as a dict), for the words of the report
    limits: dict = dataclasses.field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Seen:
    """What our steps wrote into one autograded notebook."""

    run: dict | None = None  # `NotebookRun.to_dict()`, its cells from the cells' metadata
    notes: list = dataclasses.field(default_factory=list)  # intake's repairs
    flags: list = dataclasses.field(default_factory=list)  # intake's flags
    withhold: list = dataclasses.field(default_factory=list)  # intake's reasons to withhold
    withheld: list = dataclasses.field(default_factory=list)  # why the score was held back
    held: float = 0.0  # the points held back


def _safe(value: Any) -> Any:
    """`value` with every string writable as UTF-8: a lone surrogate (a grade id or an
    error message of the student's may carry one, which JSON allows) as its escape, as
    `report.plain` shows it; nbgrader could not write the notebook otherwise."""
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_safe(k): _safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_safe(v) for v in value]
    return value


def _ours(nb: Any) -> dict:
    if not isinstance(nb.metadata.get(KEY), dict):
        nb.metadata[KEY] = {}
    return nb.metadata[KEY]  # (a NotebookNode copies a dict it is given)


def forget(nb: Any) -> bool:
    """Remove the key from the notebook and each of its cells: what a handed-in notebook
    carries there is the student's, never grading's. True when there was something."""
    found = nb.get("metadata", {}).pop(KEY, None) is not None
    for cell in nb.get("cells", []):
        found = cell.get("metadata", {}).pop(KEY, None) is not None or found
    return found


def write_intake(nb: Any, notes: list, flags: list, withhold: list) -> None:
    """Intake's repairs and flags, into the notebook that goes on to be graded."""
    _ours(nb)["intake"] = _safe({"notes": list(notes), "flags": list(flags),
                                 "withhold": list(withhold)})


def write_run(nb: Any, run: NotebookRun) -> None:
    """The sandboxed run, once its kernel is gone: each run cell's record into that cell
    (any earlier record of the key in a cell goes), the rest into the notebook."""
    for cell in nb.cells:
        cell.metadata.pop(KEY, None)
    for record in run.cells:
        if 0 <= record.index < len(nb.cells):
            nb.cells[record.index].metadata[KEY] = _safe(dataclasses.asdict(record))
    data = run.to_dict()
    data.pop("cells")
    _ours(nb)["run"] = _safe(data)


def write_withheld(nb: Any, held: float, reasons: list) -> None:
    """What `WithholdForReview` held back (nothing: no reasons)."""
    _ours(nb)["withheld"] = {"points": float(held), "reasons": _safe(list(reasons))}


def _strings(value: Any) -> list:
    return [str(x) for x in value] if isinstance(value, list) else []


def read_seen(nb: Any) -> Seen:
    """What our steps wrote into the autograded notebook `nb` (nothing when they did not
    run: a work course without a sandbox runs nbgrader's own Execute)."""
    ours = nb.get("metadata", {}).get(KEY)
    ours = ours if isinstance(ours, dict) else {}
    seen = Seen()
    intake: Any = ours.get("intake") if isinstance(ours.get("intake"), dict) else {}
    seen.notes = _strings(intake.get("notes"))
    seen.flags = _strings(intake.get("flags"))
    seen.withhold = _strings(intake.get("withhold"))
    withheld: Any = ours.get("withheld") if isinstance(ours.get("withheld"), dict) else {}
    seen.withheld = _strings(withheld.get("reasons"))
    seen.held = float(withheld.get("points", 0.0) or 0.0)
    if isinstance(ours.get("run"), dict):
        run = dict(ours["run"])
        run["cells"] = [dict(cell.metadata[KEY]) for cell in nb.get("cells", [])
                        if isinstance(cell.get("metadata", {}).get(KEY), dict)]
        seen.run = run
    return seen
