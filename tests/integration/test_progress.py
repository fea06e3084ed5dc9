"""`residual-pack progress`: a student's visible tests, task by task, in a real kernel."""

import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.madeup import filled_in
from autograder.cells import nbgrader_meta
from autograder.grading.course import EXERCISES, SOURCE, read_notebook
from autograder.student.progress import (
    FAILING,
    NEEDS_TORCH,
    NOT_RUN,
    NOT_STARTED,
    PASSED,
    TO_WRITE,
    format_table,
    progress,
)

COURSE = Path(__file__).resolve().parents[2]
NAME = "01_residual_stack"


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test starts with an empty progress cache of its own."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
TESTS = ["task1_1_test_output", "task1_1_test_gradient", "task1_2_test_input_gradient"]


def _release():
    return read_notebook(COURSE / EXERCISES / NAME / f"{NAME}.ipynb")


def _answered(changes):
    nb = filled_in(_release(), read_notebook(COURSE / SOURCE / NAME / f"{NAME}.ipynb"))
    for cell in nb.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in changes:
            cell.source = changes[gid]
    return nb


def _run(tmp_path, nb, **options):
    folder = tmp_path / "mine" / NAME
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / f"{NAME}.ipynb"))
    rows = progress(tmp_path / "mine", say=lambda _: None, **options)
    return {r.grade_id: r for r in rows}


@pytest.mark.slow
def test_the_released_stub_is_not_started(tmp_path):
    rows = _run(tmp_path, _release())
    assert list(rows) == [*TESTS, "task1_3_answer"]
    assert {rows[t].status for t in TESTS} == {NOT_STARTED}
    assert rows["task1_3_answer"].status == TO_WRITE
    table = format_table(list(rows.values()))
    assert "0 of 6 points on the visible tests; 2 points of written answers, graded by " \
           "hand" in table
    assert "1 to write, graded by hand" in table


@pytest.mark.slow
def test_a_wrong_answer_fails_with_the_checks_message_and_the_rest_pass(tmp_path):
    rows = _run(tmp_path, _answered({
        "task1_2_input_gradient": "def input_gradient(stack, x, depth):\n    return 0.0\n"}))
    assert [rows[t].status for t in TESTS] == [PASSED, PASSED, FAILING]
    assert "input_gradient(plain_stack, 1.0, 3)" in rows[TESTS[2]].message
    assert "4 of 6 points" in format_table(list(rows.values()))


def test_written_answers_are_read_not_run(tmp_path, monkeypatch):
    """Notebook 07 has written answers only: nothing runs, each answer is "to write" while
    it holds its stub and "written" after, with its points graded by hand."""
    from autograder.student.progress import WRITTEN

    monkeypatch.setattr("autograder.runner.run_notebook",
                        lambda *a, **k: pytest.fail("the notebook was run"))
    name = "07_check_understanding"
    nb = read_notebook(COURSE / EXERCISES / name / f"{name}.ipynb")
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == "task7_1_answer":
            cell.source = "The shortcut carries the gradient past the layer."
    folder = tmp_path / "mine" / name
    folder.mkdir(parents=True)
    nbformat.write(nb, str(folder / f"{name}.ipynb"))
    rows = {r.grade_id: r for r in progress(tmp_path / "mine", say=lambda _: None)}
    assert {g: r.status for g, r in rows.items()} == {
        "task7_1_answer": WRITTEN, "task7_2_answer": TO_WRITE, "task7_3_answer": TO_WRITE}
    assert format_table(list(rows.values())).startswith(
        "07_check_understanding: 6 points of written answers, graded by hand")


def test_the_torch_track_without_torch_is_listed_not_run(tmp_path, monkeypatch):
    """Without the torch extra, notebook 08 is not run (no kernel, no ModuleNotFoundError
    per task): its tasks say what to install, and they count as no failure."""
    import importlib.util

    from autograder.student import progress as module

    real = importlib.util.find_spec
    monkeypatch.setattr(module.importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    monkeypatch.setattr("autograder.runner.run_notebook",
                        lambda *a, **k: pytest.fail("the notebook was run"))
    name = "08_torch_mlp"
    folder = tmp_path / "mine" / name
    folder.mkdir(parents=True)
    release = COURSE / EXERCISES / name / f"{name}.ipynb"
    (folder / f"{name}.ipynb").write_bytes(release.read_bytes())
    rows = progress(tmp_path / "mine", say=lambda _: None)
    tests = [r for r in rows if r.status != TO_WRITE]
    assert tests and {r.status for r in tests} == {NEEDS_TORCH}
    assert "pip install torch==2.13.0" in tests[0].message
    table = format_table(rows)
    assert "failing" not in table.split("\n")[-1].replace("0 failing", "")
    # the hint once, on the first test, not on every row (08 has several)
    assert table.count("pip install torch==2.13.0") == 1 and len(tests) > 1, table
    assert table.count("(as above)") == len(tests) - 1, table


@pytest.mark.slow
def test_a_loop_that_never_ends_says_how_long_it_had_and_where_it_ran(tmp_path):
    """A student tried it: the row said only "KeyboardInterrupt", after 300 s. It says the
    limit, how to give more, and the student's line that was running."""
    loop = ("def input_gradient(stack, x, depth):\n"
            "    while True:\n"
            "        pass\n")
    rows = _run(tmp_path, _answered({"task1_2_input_gradient": loop}), timeout=10)
    said = rows[TESTS[2]]
    assert said.status == FAILING, said
    assert said.message.startswith("it ran past 10 s, so progress stopped it (--timeout S"), said
    assert "in input_gradient: `while True:`. A loop whose condition never" in said.message


@pytest.mark.slow
def test_a_dead_kernel_leaves_the_later_tests_not_run(tmp_path):
    rows = _run(tmp_path, _answered({
        "task1_2_input_gradient": "import os\nos._exit(3)\n"}))
    assert [rows[t].status for t in TESTS] == [PASSED, PASSED, NOT_RUN]
    assert "stopped" in rows[TESTS[2]].message


@pytest.mark.slow
def test_the_command_prints_the_table(tmp_path):
    folder = tmp_path / "mine" / NAME
    folder.mkdir(parents=True)
    nbformat.write(_release(), str(folder / f"{NAME}.ipynb"))
    script = Path(sys.executable).parent / "residual-pack"
    done = subprocess.run([str(script), "progress", str(tmp_path / "mine")], cwd=COURSE,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "task1_1_test_output" in done.stdout and "not started" in done.stdout


def test_outside_any_course_the_checkout_is_the_course(tmp_path, monkeypatch):
    """A student who runs `residual-pack progress` from a folder of their own (say an
    `exercises/` folder handed out alone) gets the course the pack was installed from."""
    from autograder.grading.course import find_course

    monkeypatch.chdir(tmp_path)
    assert find_course() == COURSE


def test_a_long_failure_keeps_the_known_mistake_it_looks_like():
    from autograder.kernel.diagnosis import LEAD
    from autograder.student.progress import _short

    message = "CheckFailed: " + "x" * 500 + ". " + LEAD + "did you build the stack from .data?"
    short = _short(message + "\nmore lines of the message")
    assert short.endswith(LEAD + "did you build the stack from .data?")
    assert len(short) < 400 and "more lines" not in short
    assert _short("CheckFailed: short\nsecond line") == "CheckFailed: short"


@pytest.mark.slow
def test_an_unchanged_notebook_is_not_run_again_and_a_changed_one_is(tmp_path, monkeypatch):
    from autograder import runner

    first = _run(tmp_path, _answered({}))
    assert {first[t].status for t in TESTS} == {PASSED}
    started = []
    real = runner.run_notebook
    monkeypatch.setattr(runner, "run_notebook",
                        lambda *a, **k: started.append(1) or real(*a, **k))
    again = {r.grade_id: r for r in progress(tmp_path / "mine", say=lambda _: None)}
    assert started == [] and again == first  # from the cache: no kernel started
    fresh = {r.grade_id: r for r in progress(tmp_path / "mine", say=lambda _: None,
                                              fresh=True)}
    assert started == [1] and fresh == first
    path = tmp_path / "mine" / NAME / f"{NAME}.ipynb"
    nb = _answered({"task1_1_residual_stack": "def residual_stack(x, depth=20):\n"
                                              "    return x * 2\n"})
    nbformat.write(nb, str(path))
    changed = {r.grade_id: r for r in progress(tmp_path / "mine", say=lambda _: None)}
    assert started == [1, 1] and changed[TESTS[0]].status == FAILING


@pytest.mark.slow
def test_saved_outputs_never_count_and_cells_after_the_last_test_do_not_run(tmp_path):
    """A test cell saved with a clean output, which the run does not reach (the kernel
    dies before it), is "not run"; a cell after the last visible test never runs."""
    nb = _answered({"task1_2_input_gradient": "import os\nos._exit(3)\n"})
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == TESTS[2]:
            cell.outputs = [nbformat.v4.new_output("stream", text="all good\n")]
            cell.execution_count = 12
    rows = _run(tmp_path, nb)
    assert [rows[t].status for t in TESTS] == [PASSED, PASSED, NOT_RUN]

    after = _answered({})
    after.cells.append(nbformat.v4.new_code_cell("open('ran-after.txt', 'w').close()\n"))
    rows = _run(tmp_path / "after", after)
    assert [rows[t].status for t in TESTS] == [PASSED, PASSED, PASSED]
    assert not (tmp_path / "after" / "mine" / NAME / "ran-after.txt").exists()
