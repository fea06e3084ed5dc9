"""Runaway code in a student's kernel (`autograder/kernel/runaway.py`, the interrupt's
rendering in `crash.interrupted`) and in Validate's report (`autograder/student/validate.py`).

Cells are made as in test_crash.py: code compiled under `<In[n]>` (Jupyter's "Cell
In[n]") with its source in `linecache`. The kernel, the server and the browser are those
of tests/browser/test_runaway_browser.py and tests/integration/test_student_validate.py.
"""

import json
import linecache
from pathlib import Path

import nbformat
import pytest

from autograder.kernel import checks, crash, runaway
from autograder.kernel.checks import task
from autograder.student import validate
from microgpt import Value

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def notebook():
    namespace = {"task": task, "checks": checks, "Value": Value, "__name__": "__main__"}
    made = []

    def run(number, source):
        filename = f"<In[{number}]>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        made.append(filename)
        exec(compile(source, filename, "exec"), namespace)  # noqa: S102 (a made-up cell)

    yield namespace, run
    for filename in made:
        linecache.cache.pop(filename, None)


STOPPED = '''def residual_stack(x, depth=20):
    while depth > 0:
        x = x + 1
        raise KeyboardInterrupt  # where Stop found it
    return x
'''
TEST = '''with task("Task 1.1"):
    checks.check_gradient(lambda x: residual_stack(x, depth=20), 1.0, what="grad")
'''


def interrupted_text(run):
    run(3, STOPPED)
    with pytest.raises(KeyboardInterrupt) as info:
        run(4, TEST)
    return "\n".join(info.value._render_traceback_())


def test_an_interrupt_in_a_test_shows_the_test_and_the_students_line_only(notebook,
                                                                         monkeypatch):
    monkeypatch.delenv(crash.BUDGET_VARIABLE, raising=False)
    _, run = notebook
    text = interrupted_text(run)
    assert text.startswith("Interrupted: Task 1.1's test was stopped while it ran.\n")
    assert "Cell In[4], line 2, the test:" in text
    assert "Cell In[3], line 4, in residual_stack, where your code was running:" in text
    assert "x = x + 1" in text and "while depth > 0:" in text
    # none of the checks' frames (check_gradient calls the test's lambda)
    assert "autograder" not in text and "checks.py" not in text
    assert "in check_gradient" not in text and "<lambda>" not in text
    assert "File " not in text and "Traceback" not in text


def test_an_interrupt_under_validate_says_how_long_the_cell_had(notebook, monkeypatch):
    monkeypatch.setenv(crash.BUDGET_VARIABLE, "15")
    _, run = notebook
    text = interrupted_text(run)
    assert text.startswith("Interrupted: Task 1.1's test did not finish in 15 s, so "
                           "Validate stopped it.\n")


class Stream:
    def __init__(self):
        self.parts = []

    def write(self, text):
        self.parts.append(text)
        return len(text)

    def text(self):
        return "".join(self.parts)


def test_a_cells_output_past_the_limit_is_cut_with_one_line(notebook):
    stream = Stream()
    cap = runaway._OutputCap(100)
    cap.wrap(stream)
    namespace, run = notebook
    namespace["out"] = stream
    run(5, "def flood():\n    for _ in range(50):\n        out.write('x' * 10)\n"
           "flood()\nout.write('done')\n")
    text = stream.text()
    assert text.startswith("x" * 100 + "\n[your code printed more than 100 characters in "
                           "this cell: the rest of its output was cut.")
    assert text.count(runaway.CUT_MARK) == 1
    # the cell's own line after the cut still shows (a test's success line), the
    # function's prints do not
    assert text.endswith("]\ndone")
    cap.start_cell()  # the next cell starts from nothing
    stream.write("y" * 50)
    assert stream.text().endswith("y" * 50)


def test_the_cap_does_not_wrap_a_stream_twice():
    stream = Stream()
    cap = runaway._OutputCap(10)
    cap.wrap(stream)
    first = stream.write
    cap.wrap(stream)
    assert stream.write is first


def test_the_size_is_said_in_mb():
    assert runaway.size_text(runaway.OUTPUT_LIMIT) == "1 MB"
    assert runaway.size_text(250_000) == "250 kB"


def test_outside_a_kernel_nothing_is_installed():
    assert runaway.install() is False


# ---------------------------------------------------------------- Validate's report


def code(source, grade=False, grade_id="c"):
    cell = nbformat.v4.new_code_cell(source)
    cell.metadata["nbgrader"] = {"grade": grade, "grade_id": grade_id, "solution": False}
    return cell


def test_a_cell_that_ran_out_of_time_is_said_with_the_students_line_and_what_did_not_run():
    stopped = code('with task("Task 1.1"):\n    check(residual_stack(1))', grade=True)
    stopped.outputs = [nbformat.v4.new_output(
        "error", ename="KeyboardInterrupt", evalue="",
        traceback=["Interrupted: Task 1.1's test did not finish in 15 s, so Validate "
                   "stopped it.", "Cell In[5], line 3, in residual_stack, where your "
                   "code was running:", "----> 3         x = x + layer(x)"])]
    later = [code('"""Task 1.1, gradient"""\nwith task("Task 1.1"):\n    pass', True, "g"),
             code('with task("Task 1.2"):\n    pass', True, "h")]
    nb = nbformat.v4.new_notebook(cells=[code("x = 1"), stopped, *later])
    failed = [{"source": c.source.strip(), "error": "NotRun", "raw_error": "NotRun"}
              for c in [stopped, *later]]
    result = validate._runaway_report(
        {"failed": failed}, nb, {"index": 1, "why": "cell", "seconds": 15},
        {"cell": 15, "total": 600, "output": 1_000_000})
    assert len(result["failed"]) == 1
    text = result["failed"][0]["raw_error"]
    assert text.splitlines()[0] == ("Task 1.1's test cell did not finish in 15 s, so "
                                    "Validate stopped it.")
    assert "----> 3         x = x + layer(x)" in text
    assert "Not run after it: the test cells of Task 1.1 (1) and Task 1.2 (1)." in text
    assert "Interrupted:" not in text  # the kernel's headline is replaced by Validate's


def test_a_failing_cell_whose_output_was_cut_says_so():
    cell = code('with task("Task 1.1"):\n    check()', grade=True)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * 10 + "\n"
                                           + runaway.cut_note(1_000_000))]
    nb = nbformat.v4.new_notebook(cells=[cell])
    result = validate._runaway_report(
        {"failed": [{"source": cell.source, "error": "CheckFailed: no",
                     "raw_error": "CheckFailed: no"}]}, nb, None,
        {"cell": 120, "total": 600, "output": 1_000_000})
    assert result["failed"][0]["raw_error"] == (
        "Your code printed more than 1 MB in this cell: the output was cut.\nCheckFailed: no")


@pytest.mark.parametrize("source, grade, said", [
    ('with task("Task 6.3"):\n    pass', True, "Task 6.3's test cell"),
    ('needs_answer("Task 1.1", residual_stack)\nrun()', False, "the cell that runs Task 1.1"),
    ("\nx = train(model)\n", False, "the cell that starts `x = train(model)`"),
])
def test_a_cell_is_named_as_the_student_knows_it(source, grade, said):
    assert validate.describe_cell(code(source, grade)) == said


def test_the_students_config_runs_our_validate_in_place_of_nbgraders():
    config = json.loads((ROOT / "autograder" / "student" / "jupyter-config"
                         / "jupyter_server_config.d" / "residual-pack-student.json")
                        .read_text(encoding="utf-8"))
    extensions = config["ServerApp"]["jpserver_extensions"]
    assert extensions["nbgrader.server_extensions.validate_assignment"] is False
    assert extensions["autograder.student.validate"] is True
    assert validate._jupyter_server_extension_points() == [
        {"module": "autograder.student.validate"}]
    assert callable(validate._load_jupyter_server_extension)


LENS = '''def logit_lens(model, states, tokens):
    losses = []
    while len(losses) < 3:
        logits = model.head(states[0][0])
        raise KeyboardInterrupt  # Stop, inside the student's loop
    return losses
'''
LENS_TEST = '''with task("Task 6.3"):
    check_logit_lens(logit_lens, "pre", "emma", n_layer=2)
'''


def test_an_interrupt_through_the_gpt_checks_shows_no_handed_in_or_library_frame(
        notebook, monkeypatch):
    """Issue 41's Task 6.3: the checks call the student's lens through `<handed-in code>`
    (gptchecks._call), and the student's code calls the model's own methods."""
    from autograder.kernel.gptchecks import check_logit_lens

    monkeypatch.delenv(crash.BUDGET_VARIABLE, raising=False)
    namespace, run = notebook
    namespace["check_logit_lens"] = check_logit_lens
    run(7, LENS)
    with pytest.raises(KeyboardInterrupt) as info:
        run(8, LENS_TEST)
    text = "\n".join(info.value._render_traceback_())
    assert text.startswith("Interrupted: Task 6.3's test was stopped while it ran.")
    assert "Cell In[8], line 2, the test:" in text
    assert "Cell In[7], line 5, in logit_lens, where your code was running:" in text
    for ours in ("handed-in", "gptchecks", "microgpt/", "model.py", "nn.py", "File "):
        assert ours not in text, text


def test_validate_waits_for_a_cells_output_as_long_as_the_cell_may_run(monkeypatch):
    """After the reply of a cell (an interrupted loop's, say), Validate waits for its
    output as grading does, up to the cell's time, not nbclient's 4 s: on a busy machine
    the interrupted loop's traceback came later than that and Validate said the cell had
    printed too much (a browser test in CI on 7c8fc5e)."""
    from nbgrader.preprocessors import Execute

    execute_class = validate._budgeted_classes().preprocessors[-1]
    waits = []

    def ran(self, cell, resources, index):
        waits.append(self.iopub_timeout)
        return cell, resources

    monkeypatch.setattr(Execute, "preprocess_cell", ran)
    execute = execute_class(timeout=15)
    execute.preprocess_cell(nbformat.v4.new_code_cell("x = 1"), {}, 0)
    assert waits == [15]
