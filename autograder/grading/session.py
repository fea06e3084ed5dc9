"""One grading session, set up in one place for `grade`, `demo` and `selfcheck`.

A session is, in this order: the limits (from the course config, `course_limits`); the
leftovers of killed runs cleared; the sandbox; private Jupyter and IPython folders; the
work course; a `Grader` per assignment. Leaving the session closes the sandbox (its
kernels, mounts and files) whatever happened inside.

    with grading_session(course, out, [assignment]) as session:
        grader = session.grader(assignment)
        ...
"""

import atexit
import contextlib
import logging
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from autograder.grading.course import (
    WorkCourse,
    course_cell_timeout,
    private_jupyter_dirs,
    work_folder,
)
from autograder.grading.plan import (
    LIMITS,
    Sandbox,
    close_sandbox,
    remove_stale_roots,
)
from autograder.grading.student import Grader
from autograder.sandbox.limits import Limits, SandboxError

__all__ = ["course_limits", "new_sandbox", "own_sandbox", "GradingSession",
           "grading_session"]


def course_limits(course: str | os.PathLike[str], **overrides: Any) -> Limits:
    """The limits of a grading run of `course`: the course config's per-cell time limit
    (`Execute.timeout`), `Limits`' defaults for the rest, then `overrides` (those that
    are None are left out)."""
    settings = {"cell_timeout": course_cell_timeout(course, default=Limits.cell_timeout)}
    settings.update({k: v for k, v in overrides.items() if v is not None})
    return Limits(**settings)


def new_sandbox(course: str | os.PathLike[str], limits: Limits | None = None) -> Sandbox:
    """The sandbox of a grading run of `course` (`limits`, default `course_limits`), once
    the leftovers of killed runs are cleared. The caller closes it (`grading_session`
    does; nbgrader's own autograde closes its one at exit)."""
    remove_stale_roots()
    return Sandbox(limits or course_limits(course))


# this process's own sandbox (nbgrader's own commands: `own_sandbox`), or
# why it could not be made
_OWN: dict = {}


def own_sandbox(course: str | Path, log: logging.Logger | None = None) -> Sandbox:
    """The sandbox of a `SandboxedExecute` whose config names none (`sandbox_root` empty:
    nbgrader's own commands): this process's own, made once from the limits of `course`
    and closed at exit, with a line in nbgrader's log on how kernels are isolated. Raises
    `SandboxError` (every time) when the machine must not run student code (root without
    bubblewrap)."""
    say = log or logging.getLogger("residual_pack")
    if "error" in _OWN:
        raise SandboxError(_OWN["error"])
    if "sandbox" in _OWN:
        return _OWN["sandbox"]
    try:
        sandbox = new_sandbox(course)
    except SandboxError as exc:
        _OWN["error"] = str(exc)
        say.error("residual-pack: %s", exc)
        raise
    atexit.register(sandbox.close)
    _OWN["sandbox"] = sandbox
    if sandbox.level != LIMITS:
        say.info("residual-pack: student kernels run in the sandbox: %s", sandbox.describe())
    else:
        say.warning(
            "residual-pack: FALLING BACK to no sandbox: %s. Scores are still the grader's "
            "verdict. For the sandbox, mend the cause this line starts with (bubblewrap "
            "installed, unprivileged user namespaces allowed); as root, grading needs it too "
            "(it refuses to run student code without it).", sandbox.describe())
    return sandbox


class GradingSession:
    """What a session holds: the course, the work course's folder, the sandbox (None when
    not isolating) and the work course itself, made on first use so that a caller may
    clear the folder first (a run that does not resume)."""

    def __init__(self, course: str | os.PathLike[str], root: str | os.PathLike[str],
                 names: Sequence[str] | None, sandbox: Sandbox | None,
                 db_url: str | None = None) -> None:
        self.db_url = db_url
        self.course = Path(course).resolve()
        self.root = Path(root)
        self.names = names
        self.sandbox = sandbox
        self._work: WorkCourse | None = None

    @property
    def work(self) -> WorkCourse:
        if self._work is None:
            self._work = WorkCourse(self.course, self.root, self.names, db_url=self.db_url)
        return self._work

    def grader(self, assignment: str, generate: bool = True) -> Grader:
        """A `Grader` of `assignment` in the work course (its release generated unless
        `generate` is false: a resumed run has it), grading in the sandbox."""
        return Grader(self.work, assignment, generate=generate, sandbox=self.sandbox)

    def describe(self) -> str:
        """How the kernels are isolated, in words ("" without a sandbox)."""
        return self.sandbox.describe() if self.sandbox is not None else ""


@contextlib.contextmanager
def grading_session(course: str | os.PathLike[str], root: str | os.PathLike[str],
                    names: Sequence[str] | None = None, *, limits: Limits | None = None,
                    isolate: bool = True, jupyter: str | os.PathLike[str] | None = None,
                    db_url: str | None = None) -> Iterator[GradingSession]:
    """A `GradingSession` of `course` whose work course is `root` (assignments `names`,
    all when None). With `isolate` (the default) student code runs in a sandbox with
    `limits` (default: `course_limits(course)`); the stale roots of killed runs are
    cleared first. The Jupyter and IPython folders are `jupyter` (kept) or a temporary
    folder (removed). The gradebook is nbgrader's `db_url` (default: SQLite in `root`)."""
    sandbox = None
    if isolate:
        sandbox = new_sandbox(course, limits)
    try:
        with work_folder(jupyter, prefix="residual-pack-jupyter-") as folder, \
                private_jupyter_dirs(folder):
            yield GradingSession(course, root, names, sandbox, db_url=db_url)
    finally:
        if sandbox is not None:
            close_sandbox(sandbox)
