"""Our grading as steps of nbgrader's own autograde, for instructors who run nbgrader.

`nbgrader_config.py` names these classes in nbgrader's lists of preprocessors, so that
`nbgrader autograde` (the command, `NbGraderAPI.autograde`, formgrader's autograde
button) grades the way `residual-pack grade` does:

- `IntakeRepairs`, first of the sanitize steps: the handed-in notebook is repaired against
  the release (`intake.take_in`: deleted, moved, retyped and pasted cells, damaged nbgrader
  metadata); a notebook that is not the assignment's is refused with the reason;
- `execute.SandboxedExecute`, in place of nbgrader's `Execute`: the kernel runs in the
  sandbox and the test cells are judged against the reference run. Its sandbox is the
  one its config names (`SandboxedExecute.sandbox_root`, which `residual-pack grade` sets),
  else this process's own, made on first use: the same decision as `residual-pack grade`
  (full isolation as root where namespaces work; "limits only", said once in nbgrader's
  log with the reason, as any other user; refused as root without namespaces);
- `WithholdForReview`, after nbgrader's `SaveAutoGrades`: a notebook whose code reached
  into the grader or the interpreter, or changed what the tests rely on, gets its
  autograded points set to zero with nbgrader's "needs manual grade" mark, which
  formgrader lists (the reason goes into the gradebook as the cell's comment);
- feedback: `feedback.FEEDBACK_PREPROCESSORS` (no hidden test on the page);
- `StripQuoteLists`, last of `generate_assignment`'s steps: the student version carries
  no list of the figures the model answer prints (see `course.strip_quote_lists`).

Each step writes what it saw into the notebook it hands on (`record`: intake's repairs
and flags, the run of every cell, what was held back), so the autograded notebook nbgrader
writes carries it to whatever reads it next: withholding, the feedback, `residual-pack
grade`'s report, the class report export (`report_export.ClassReport`).

`residual-pack grade` is a batch driver around the same autograde, with the same lists
(`WorkCourse.config`): it copies each hand-in into nbgrader's `submitted/` (refusing,
with the reason, bytes nbgrader could not read: `intake.read_handed_in`), calls
nbgrader's autograde once per student and reads the autograded notebooks.
"""

import contextlib
import json
import logging
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import nbformat
from nbgrader.preprocessors.base import NbGraderPreprocessor

from autograder.cells import grade_id, is_autograded_test
from autograder.grading.gradebook import flag_in_gradebook
from autograder.grading.notebook_record import KEY, forget, read_seen, write_intake, write_withheld
from autograder.grading.pipeline import (  # noqa: F401 (the lists, named here too)
    AUTOGRADE_STEPS,
    FEEDBACK_STEPS,
    GENERATE_STEPS,
    SANITIZE_STEPS,
)
from autograder.grading.report import plain

__all__ = ["IntakeRepairs", "WithholdForReview", "StripQuoteLists", "NotGradableError",
           "withhold_grades", "SANITIZE_STEPS", "AUTOGRADE_STEPS",
           "GENERATE_STEPS",
           "FEEDBACK_STEPS"]



def coursedir_of(preprocessor: Any) -> Any:
    """nbgrader's CourseDirectory of the converter running `preprocessor` (its parent's
    parent), else one made from the config."""
    obj = preprocessor
    while obj is not None:
        found = getattr(obj, "coursedir", None)
        if found is not None:
            return found
        obj = getattr(obj, "parent", None)
    from nbgrader.coursedir import CourseDirectory

    return CourseDirectory(config=preprocessor.config)


# ---------------------------------------------------------------- intake


class NotGradableError(ValueError):
    """A handed-in notebook that is not graded (another assignment's, or read through a
    symbolic link): nbgrader's autograde of the student stops with it, and its message
    (`student: reason`) is how the batch driver learns the reason (`student.refusals`)."""


class IntakeRepairs(NbGraderPreprocessor):
    """The handed-in notebook repaired against the release before nbgrader's own sanitize
    steps (see `intake.take_in`); each repair is a line in nbgrader's log. What the
    student's notebook carried under our metadata key is dropped first (`notebook_record.forget`:
    only grading writes there); the intake (repairs, flags, reasons to withhold the score
    for review) goes into the notebook's metadata for `WithholdForReview` and whatever
    reads the autograded notebook; a notebook that cannot be graded stops the student's
    autograde with the reason (`NotGradableError`). Once every locked cell is back as
    released, nbgrader's checksum warnings are left out of the log (see
    `_HiddenTestsPutBack`)."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from autograder.compat import check_schemas_once
        from autograder.grading.intake import take_in

        check_schemas_once()  # nbgrader's own steps that come next validate every cell
        guard_log(self.log)
        quiet = hidden_tests_put_back(self.log)
        quiet.after_intake = False
        info = resources.get("nbgrader", {})
        student, assignment = info.get("student", ""), info.get("assignment", "")
        name = info.get("notebook", "")
        coursedir = coursedir_of(self)
        linked = symbolic_link(coursedir, student, assignment, name)
        if linked:
            problem = f"{name}.ipynb: {linked}; it was not followed"
            raise NotGradableError(f"{student}: {plain(problem)}")
        if forget(nb):
            self.log.warning("residual-pack: %s/%s: the handed-in notebook carried grading "
                             "records of its own (metadata %r): ignored", student, name, KEY)
        release_path = Path(coursedir.format_path(
            coursedir.release_directory, ".", assignment)) / f"{name}.ipynb"
        if not release_path.is_file():  # nothing to repair against: nbgrader's own checks
            self.log.warning("residual-pack: no release %s to repair %s against",
                             release_path, name)
            write_intake(nb, [], [], [])
            return nb, resources
        release = nbformat.read(str(release_path), as_version=nbformat.NO_CONVERT)
        # as JSON text escaped to ASCII: a lone surrogate in it (which JSON may carry)
        # reaches intake as the student wrote it, not as bytes that are not UTF-8
        data = json.dumps(nb, ensure_ascii=True).encode("ascii")
        intake = take_in(data, f"{name}.ipynb", release, assignment,
                         foreign_ids(coursedir, assignment))
        if intake.problem:
            raise NotGradableError(f"{student}: {plain(intake.problem)}")
        forget(intake.notebook)
        write_intake(intake.notebook, intake.notes, intake.flags, intake.withhold)
        quiet.after_intake = True  # its locked cells are the release's now
        for note in intake.notes:
            self.log.warning("residual-pack: %s/%s: repaired: %s", student, name, plain(note))
        for flag in intake.flags:
            self.log.warning("residual-pack: %s/%s: for a human to look at: %s",
                             student, name, plain(flag))
        return intake.notebook, resources


def symbolic_link(coursedir: Any, student: str, assignment: str, name: str) -> str:
    """Why `student`'s handed-in `name` must not be read ("" when it may): the notebook,
    or a folder nbgrader found it through, is a symbolic link. nbgrader would follow it
    (to another student's work, or to the instructor's source notebook)."""
    folder = Path(coursedir.format_path(coursedir.submitted_directory, student, assignment))
    top = Path(coursedir.format_path(coursedir.submitted_directory, ".", "."))
    path = folder / f"{name}.ipynb"
    for part in (path, folder, *folder.parents):
        if part == top or top not in part.parents:
            break
        if part.is_symlink():
            what = "the notebook" if part == path else f"the folder {part.name}"
            return f"{what} is a symbolic link"
    return ""


class _OneLinePerRecord(logging.Filter):
    """A log record's lines after its first are indented: text from a student's notebook
    (an exception, a flag) cannot start a line that reads as a record of its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "one_line_per_record", False):  # the logger's filter did it
            return True
        record.one_line_per_record = True
        text = record.getMessage()
        if "\n" in text or "\r" in text or "\x1b" in text:
            text = text.replace("\r\n", "\n").replace("\r", "\\r").replace("\x1b", "\\x1b")
            record.msg, record.args = text.replace("\n", "\n    | "), ()
        return True


# nbgrader's OverwriteCells, for a locked cell whose checksum is not the gradebook's
OVERWRITE_WARNING = "Attribute '%s' for cell %s has changed! (should be: %s, got: %s)"


class _HiddenTestsPutBack(logging.Filter):
    """nbgrader's "Attribute 'checksum' for cell ... has changed!" left out after intake:
    a test cell with hidden tests never has the gradebook's checksum (the release has them
    cut out), so nbgrader says it for each such cell of every student, untouched notebooks
    too (issue #28, trap 4: three lines per student that bury the ones that matter). Once
    `IntakeRepairs` has put every locked cell back as released (a line of its own when a
    student had changed one), the warning only means nbgrader put the hidden tests back.
    Other warnings of OverwriteCells (cell type, points, locked) are kept."""

    after_intake = False

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.after_intake and record.msg == OVERWRITE_WARNING
                    and tuple(record.args or ())[:1] == ("checksum",))


def hidden_tests_put_back(logger: logging.Logger) -> _HiddenTestsPutBack:
    """The `_HiddenTestsPutBack` filter on `logger` and its handlers (put there once)."""
    found = next((f for f in logger.filters if isinstance(f, _HiddenTestsPutBack)), None)
    if found is None:
        found = _HiddenTestsPutBack()
        logger.addFilter(found)
    for handler in getattr(logger, "handlers", []):
        if found not in handler.filters:
            handler.addFilter(found)
    return found


def guard_log(logger: logging.Logger) -> None:
    """Put `_OneLinePerRecord` on `logger` and each of its handlers (once)."""
    for holder in (logger, *getattr(logger, "handlers", [])):
        if not any(isinstance(f, _OneLinePerRecord) for f in holder.filters):
            holder.addFilter(_OneLinePerRecord())


def foreign_ids(coursedir: Any, assignment: str) -> dict[str, set[Any]]:
    """{other assignment: its grade ids}, from the course's source folder."""
    source = Path(coursedir.root) / coursedir.source_directory
    found: dict[str, set[Any]] = {}
    if not source.is_dir():
        return found
    for folder in sorted(p for p in source.iterdir() if p.is_dir()):
        if folder.name == assignment or folder.name.startswith((".", "_")):
            continue
        ids = set()
        for path in sorted(folder.glob("*.ipynb")):
            with contextlib.suppress(Exception):
                nb = nbformat.read(str(path), as_version=nbformat.NO_CONVERT)
                ids |= {grade_id(c) for c in nb.cells}
        ids.discard(None)
        found[folder.name] = ids
    return found


# ---------------------------------------------------------------- withholding


def withhold_grades(gradebook: Any, assignment: str, student: str,
                    autograded: Mapping[tuple[str, str | None], bool],
                    notebooks: Collection[str] | None = None, comment: str = "") -> float:
    """Set every autograded cell of `student`'s submission that scored to zero, marked as
    needing a manual grade (formgrader lists it; a person gives the points back there),
    and the notebook `flagged` (nbgrader's own mark for "look at this", which formgrader
    shows and `nbgrader export` users filter on), whatever it scored;
    `autograded`: {(notebook, grade_id): True for test cells}; only `notebooks` when
    given. With a `comment`, it goes on each such cell. Returns the points held back."""
    held = 0.0
    submission = gradebook.find_submission(assignment, student)
    for notebook in submission.notebooks:
        if notebooks is not None and notebook.name not in notebooks:
            continue
        notebook.flagged = True
        for grade in notebook.grades:
            if autograded.get((notebook.name, grade.name)) and grade.auto_score:
                held += float(grade.auto_score)
                grade.auto_score = 0.0
                grade.needs_manual_grade = True
        if comment and held:  # test cells carry no comment: the answers' do
            for found in notebook.comments:
                found.auto_comment = comment[:4000]
    gradebook.db.commit()
    return held


class WithholdForReview(NbGraderPreprocessor):
    """After `SaveAutoGrades`: what intake flagged goes into the gradebook (`flagged`, and
    the reasons as comments); when intake or the sandboxed run saw code that reached into
    the grader or changed what the tests rely on, the notebook's autograded points are
    held back for a person (`withhold_grades`), with the reasons in nbgrader's log and as
    the cells' comments. Intake's findings and the run are read from the notebook's
    metadata (`record`); what was held back is written there."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from nbgrader.api import Gradebook

        from autograder.grading.report import tampering_seen

        info = resources.get("nbgrader", {})
        student, assignment = info.get("student", ""), info.get("assignment", "")
        name = info.get("notebook", "")
        seen = read_seen(nb)
        reasons = list(seen.withhold)
        flags = [f for f in seen.flags if f not in reasons]
        if seen.run is not None:
            reasons += tampering_seen(_RunsOf({name: seen.run}))
        write_withheld(nb, 0.0, [])
        if flags:
            with Gradebook(info["db_url"]) as gb:
                flag_in_gradebook(gb, assignment, student, flags, [name])
        if not reasons:
            return nb, resources
        autograded = {(name, grade_id(c)): True for c in nb.cells if is_autograded_test(c)}
        text = "withheld for review: " + "; ".join(reasons)
        with Gradebook(info["db_url"]) as gb:
            held = withhold_grades(gb, assignment, student, autograded, [name],
                                   comment=f"residual-pack: score {text}")
        write_withheld(nb, held, reasons)
        self.log.warning("residual-pack: %s/%s: autograded score (%g) %s", student, name,
                         held, plain(text))
        return nb, resources


class _RunsOf:
    """What `report.tampering_seen` reads: an object with `runs`."""

    def __init__(self, runs: dict[str, Any]) -> None:
        self.runs = runs



# ---------------------------------------------------------------- generate_assignment


class StripQuoteLists(NbGraderPreprocessor):
    """The notebook guard's lists of quoted figures left out of the student version: on an
    answer cell they would list the figures of the model answer (nbgrader's checksums
    do not cover this metadata)."""

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from autograder.grading.course import QUOTES_METADATA

        for cell in nb.cells:
            cell.metadata.pop(QUOTES_METADATA, None)
        return nb, resources
