"""autograder/grading/nbgrader_steps.py's guards that need no kernel: symbolic links in
what nbgrader would read, log records that a student's text cannot split, and
nbgrader's checksum warnings left out after intake."""

import io
import logging
import os

from nbgrader.coursedir import CourseDirectory

from autograder.grading.nbgrader_steps import (
    guard_log,
    hidden_tests_put_back,
    symbolic_link,
)


def _coursedir(root):
    return CourseDirectory(root=str(root))


def test_a_symbolic_link_to_a_notebook_or_a_folder_is_named(tmp_path):
    coursedir = _coursedir(tmp_path)
    honest = tmp_path / "submitted" / "ann" / "01"
    honest.mkdir(parents=True)
    (honest / "nb.ipynb").write_text("{}")
    assert symbolic_link(coursedir, "ann", "01", "nb") == ""
    (tmp_path / "source" / "01").mkdir(parents=True)
    (tmp_path / "source" / "01" / "nb.ipynb").write_text("{}")
    linked = tmp_path / "submitted" / "bob" / "01"
    linked.mkdir(parents=True)
    (linked / "nb.ipynb").symlink_to(tmp_path / "source" / "01" / "nb.ipynb")
    assert symbolic_link(coursedir, "bob", "01", "nb") == "the notebook is a symbolic link"
    os.symlink(honest.parent, tmp_path / "submitted" / "eve")  # the student's folder
    assert symbolic_link(coursedir, "eve", "01", "nb") == "the folder eve is a symbolic link"


def test_a_students_text_cannot_start_a_log_record(tmp_path):
    stream = io.StringIO()
    logger = logging.getLogger("test-nbgrader-steps")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
    logger.addHandler(handler)
    guard_log(logger)
    guard_log(logger)  # once is enough
    assert len(logger.filters) == 1 and len(handler.filters) == 1
    logger.error("cell failed: %s", "oops\n[ERROR] bob copied from ann\r\x1b[2K")
    logger.warning("plain line")
    lines = stream.getvalue().splitlines()
    assert lines == ["[ERROR] cell failed: oops", "    | [ERROR] bob copied from ann\\r\\x1b[2K",
                     "[WARNING] plain line"]


def test_nbgraders_checksum_warning_is_left_out_after_intake():
    """Issue #28, trap 4: nbgrader's OverwriteCells says "Attribute 'checksum' for cell
    ... has changed!" for every test cell with hidden tests, for untouched notebooks too
    (three lines per student on the first assignment), burying the lines that matter.
    After intake has put the locked cells back, those lines are left out; the others stay."""
    from nbgrader.preprocessors import OverwriteCells

    stream = io.StringIO()
    logger = logging.getLogger("test-nbgrader-steps-checksum")
    logger.propagate = False
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    quiet = hidden_tests_put_back(logger)
    assert hidden_tests_put_back(logger) is quiet and len(logger.filters) == 1
    nbgraders = OverwriteCells()
    nbgraders.log = logger
    nbgraders.report_change("t1", "checksum", "aa", "bb")  # intake did not run: kept
    quiet.after_intake = True
    nbgraders.report_change("t2", "checksum", "aa", "bb")  # hidden tests put back
    nbgraders.report_change("t3", "points", 2.0, 9.0)
    assert stream.getvalue().splitlines() == [
        "Attribute 'checksum' for cell t1 has changed! (should be: aa, got: bb)",
        "Attribute 'points' for cell t3 has changed! (should be: 2.0, got: 9.0)"]
