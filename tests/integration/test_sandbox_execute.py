"""autograder/grading/execute.py: SandboxedExecute as a preprocessor of its own,
configured and exercised without a kernel (whole notebooks run in test_pipeline)."""

import json
import time

import nbformat
import pytest
from traitlets.config import Config

from autograder.grading.execute import SandboxedExecute
from autograder.grading.execute_state import NotebookState, message_size
from autograder.grading.notebook_record import CellRun, NotebookRun
from autograder.sandbox.limits import Limits, SandboxError


def _test_cell(outputs=()):
    cell = nbformat.v4.new_code_cell("check(f(1), 2)")
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True,
                                 "points": 1, "grade_id": "t", "schema_version": 3}
    cell.outputs = [nbformat.from_dict(o) for o in outputs]
    return cell


def test_it_is_configured_like_nbgraders_execute():
    assert SandboxedExecute(config=Config({"Execute": {"timeout": 5}})).timeout == 5
    assert SandboxedExecute(config=Config({"SandboxedExecute": {"timeout": 6}})).timeout == 6


def test_its_sandbox_is_named_in_the_config_and_must_be_open(tmp_path):
    """The sandbox comes through a plain config value (its root folder), which a grading
    run of this process opened; a root it did not open is refused with the reason."""
    assert SandboxedExecute().sandbox_root == ""
    gone = str(tmp_path / "not-opened")
    step = SandboxedExecute(config=Config({"SandboxedExecute": {"sandbox_root": gone}}))
    assert step.sandbox_root == gone
    with pytest.raises(SandboxError, match="no sandbox at .*not-opened"):
        step.preprocess(nbformat.v4.new_notebook(), {})


PRINTED = {"output_type": "stream", "name": "stdout", "text": "all good!\n"}
RESULT = {"output_type": "execute_result", "execution_count": 1, "metadata": {},
          "data": {"text/plain": "0.5"}}


def test_a_passed_test_says_so_and_keeps_no_result():
    cell = _test_cell([PRINTED, RESULT])
    SandboxedExecute._settle_test_cell(cell, CellRun(0, "t", "test", "ok", checks=3))
    assert [o["output_type"] for o in cell.outputs] == ["stream", "stream"]
    assert cell.outputs[-1]["text"] == "graded: all 3 check(s) of this cell passed\n"


def test_a_failed_test_gives_the_verdict_first():
    cell = _test_cell([PRINTED, RESULT])
    record = CellRun(0, "t", "test", "error", "CheckFailed", "expected 2, got 3",
                     verdict="check 1: expected 2, got 3")
    SandboxedExecute._settle_test_cell(cell, record)
    first = cell.outputs[0]
    assert (first["output_type"], first["ename"]) == ("error", "CheckFailed")
    assert first["evalue"] == "check 1: expected 2, got 3"
    assert "execute_result" not in [o["output_type"] for o in cell.outputs]


def _state(limits=None, reference=None, last=100):
    """A notebook's state as `preprocess` makes it, without a sandbox (no kernel runs)."""
    return NotebookState.begin(limits or Limits(), plan=None, run=NotebookRun(),
                               reference=reference or {}, last=last)


def test_a_test_without_expected_observations_fails():
    step = SandboxedExecute()
    step.state = _state()
    record = CellRun(0, "t", "test", "ok")
    step._judge(record, object(), None, {"status": "ok"})
    assert record.status == "error" and record.ename == "CheckFailed"
    assert "no expected observations" in record.verdict


def test_the_time_left_bounds_a_cell():
    step = SandboxedExecute()
    step.state = _state(Limits(cell_timeout=120))
    step.state.deadline = time.monotonic() + 30.2
    assert step._get_timeout(None) == 31
    step.state.deadline = time.monotonic() - 5
    assert step._get_timeout(None) == 1


def test_output_beyond_the_limit_is_left_out_with_a_note():
    step = SandboxedExecute()
    step.state = _state(Limits(output=1000))
    step.state.budget.kept = 900
    outs = []
    big = {"msg_type": "stream", "content": {"name": "stdout", "text": "x" * 500}}
    assert step.output(outs, big, None, 4) is None
    assert step.output(outs, big, None, 4) is None
    assert len(outs) == 1 and "beyond the 1000 bytes kept per notebook" in outs[0]["text"]
    assert step.state.budget.dropped == {4: 2 * message_size(big)}


def test_the_size_of_a_message():
    """All of an output's content as the notebook would hold it (JSON), and 200 bytes for
    what nbformat adds around it."""
    assert message_size({"content": {"text": "abc"}}) == len('{"text": "abc"}') + 200
    content = {"data": {"text/plain": "ab", "x": 1}, "traceback": ["a", "bc"]}
    assert message_size({"content": content}) == len(json.dumps(content)) + 200
    # text counts as characters, not as the six of a JSON escape
    assert message_size({"content": {"text": "\u00e9" * 10}}) == 12 + 10 + 200


def test_an_outputs_metadata_counts_toward_the_output_cap():
    small = {"content": {"data": {"text/plain": "x"}, "metadata": {}}}
    padded = {"content": {"data": {"text/plain": "x"}, "metadata": {"pad": "y" * 10_000}}}
    assert message_size(padded) - message_size(small) >= 10_000


def test_a_cell_grading_leaves_out_gets_a_note_and_no_kernel_time():
    """A course cell the source lists as skipped (`skip`, from the reference run) or
    that follows the last test is answered without the kernel (this step has none here:
    running it would fail) and says why it has no output."""
    from autograder.grading.execute import LEFT_OUT

    step = SandboxedExecute()
    step.state = _state(reference={"skip": ["experiment"]}, last=3)
    experiment = nbformat.v4.new_code_cell("train_for_an_hour()")
    experiment.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True,
                                       "grade_id": "experiment", "schema_version": 3}
    experiment.outputs = [nbformat.from_dict(PRINTED)]  # what the student's copy showed
    closing = nbformat.from_dict(experiment)
    closing.metadata["nbgrader"]["grade_id"] = "closing_plot"
    step.execute_cell(experiment, 1)
    step.execute_cell(closing, 5)
    for cell in (experiment, closing):
        assert [o.get("text") for o in cell.outputs] == [LEFT_OUT]
    assert step.state.run.left_out == 2 and step.state.run.cells == []
    own = nbformat.v4.new_code_cell("print('mine')")  # the student's: always run
    with pytest.raises(AssertionError):  # nbclient asserts it has a kernel client: none here
        step.execute_cell(own, 5)
    assert step.state.run.left_out == 2 and len(step.state.run.cells) == 1
