"""The instructors' pipeline under the real nbgrader and real kernels.

Fast tests cover the mutant registry and the command line (the other pieces have test
files of their own: test_submissions, test_intake, test_feedback, ...). The slow ones run
what CI must show: the committed generated folders are reproduced; the self-check passes
(validator on sources and, inverted, on exercises; solution full marks, stub zero, every
mutant caught; no hidden test in any feedback page) and fails once a graded test is
weakened; the demo's table; a broken notebook or a shadowing `autograder` module handed in
among good ones.
"""

import copy
import csv
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from gradedclass import HOSTILE, graded_class

from autograder.answers import mutants as mutant_registry
from autograder.authoring.demo import default_assignment
from autograder.authoring.madeup import filled_in
from autograder.authoring.selfcheck import selfcheck
from autograder.cells import is_autograded_test, is_solution, nbgrader_meta
from autograder.grading import course as course_module
from autograder.grading.classrun import run_grading
from autograder.grading.course import (
    CONFIG_FILE,
    EXERCISES,
    SOURCE,
    WorkCourse,
    assignments,
    notebook_paths,
    private_jupyter_dirs,
    read_notebook,
)
from autograder.grading.feedback import hidden_test_lines, leaked_lines
from autograder.grading.intake import TORCH_ASSIGNMENTS
from autograder.grading.student import Grader

COURSE = Path(__file__).resolve().parents[2]
# the torch track's notebooks need the optional torch extra (CI installs it)
ASSIGNMENTS = [a for a in assignments(COURSE)
               if a not in TORCH_ASSIGNMENTS or importlib.util.find_spec("torch")]
FIRST = default_assignment(COURSE)  # the demo's assignment
JOBS = 2

needs_assignment = pytest.mark.skipif(FIRST is None, reason="no assignment in source/ yet")


def source_notebook(assignment, name=None):
    paths = notebook_paths(COURSE / SOURCE / assignment)
    path = next(p for p in paths if name in (None, p.stem))
    return path.stem, read_notebook(path)


def release_notebook(assignment, name):
    return read_notebook(COURSE / EXERCISES / assignment / f"{name}.ipynb")


def solution_and_stub(assignment):
    name, source = source_notebook(assignment)
    release = release_notebook(assignment, name)
    return name, filled_in(release, source), release


def hidden_lines(assignment):
    return [
        line
        for path in notebook_paths(COURSE / SOURCE / assignment)
        for cell in read_notebook(path).cells
        for line in hidden_test_lines(cell.source)
    ]


# a student's own `autograder` that makes every check pass: every check is a no-op and
# `task(...)` swallows whatever goes wrong inside it
SHADOW_CHECKS = '''
class _Swallow:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def __getattr__(name):
    return lambda *args, **kwargs: _Swallow()
'''
SHADOW_MODULE = (
    "import sys, types\n"
    "__path__ = []  # a package, as far as the import system asks\n"
    "kernel = types.ModuleType('autograder.kernel')\n"
    "kernel.__path__ = []\n"
    "checks = types.ModuleType('autograder.kernel.checks')\n"
    "exec(compile(" + repr(SHADOW_CHECKS) + ", 'checks', 'exec'), checks.__dict__)\n"
    "kernel.checks = checks\n"
    "sys.modules['autograder.kernel'] = kernel\n"
    "sys.modules['autograder.kernel.checks'] = checks\n"
)


# ---------------------------------------------------------------- fast: the pieces


@needs_assignment
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_mutant_registry_names_real_cells(assignment):
    registered = mutant_registry.load(assignment)
    cells = {}
    for path in notebook_paths(COURSE / SOURCE / assignment):
        for cell in read_notebook(path).cells:
            cells[(path.stem, nbgrader_meta(cell).get("grade_id"))] = cell
    names = [p.stem for p in notebook_paths(COURSE / SOURCE / assignment)]
    for m in registered:
        nb = m.notebook.removesuffix(".ipynb") or names[0]
        assert is_solution(cells[(nb, m.cell)]), f"{m.name}: {m.cell} is not an answer cell"
        assert m.loses, f"{m.name} loses nothing"
        for gid in m.loses:
            assert is_autograded_test(cells[(nb, gid)]), f"{m.name}: {gid} is not a test cell"
    assert mutant_registry.load("no_such_assignment") == []


def test_cli_rejects_an_unknown_assignment(capsys):
    from autograder.cli import main

    assert main(["--course", str(COURSE), "selfcheck", "no_such_assignment"]) == 2
    assert "unknown assignment" in capsys.readouterr().err


# ---------------------------------------------------------------- slow: the real thing


def run_all(nb, folder, timeout=300):
    """Run All on a copy of `nb` in a real kernel, as JupyterLab does it: a cell that
    raises stops the run unless it is tagged `raises-exception`. Returns the executed
    copy and why the run stopped early ("" when it reached the end)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = copy.deepcopy(nb)
    folder.mkdir(parents=True, exist_ok=True)
    client = NotebookClient(nb, timeout=timeout, allow_errors=False,
                            kernel_name=nb.metadata.get("kernelspec", {}).get("name", "python3"),
                            resources={"metadata": {"path": str(folder)}})
    stopped = ""
    try:
        client.execute()
    except CellExecutionError as exc:
        stopped = str(exc).strip().splitlines()[-1][:200]
    return nb, stopped


def unreached_graded_cells(nb, folder, monkeypatch, errors=None):
    """Run All on `nb` under NBGRADER_EXECUTION (the small experiments): the graded
    test cells it did not execute, and why it stopped early. `errors`, a list, gets
    (grade id, error name, message) of every cell that raised."""
    monkeypatch.setenv("NBGRADER_EXECUTION", "validate")
    with private_jupyter_dirs(folder / "sandbox"):
        ran, stopped = run_all(nb, folder / "work")
    graded = [c for c in ran.cells if is_autograded_test(c)]
    missed = [nbgrader_meta(c)["grade_id"] for c in graded if c.get("execution_count") is None]
    if errors is not None:
        errors += [(nbgrader_meta(c).get("grade_id"), o.ename, o.evalue)
                   for c in ran.cells if c.cell_type == "code"
                   for o in c.get("outputs", []) if o.output_type == "error"]
    return graded, missed, stopped


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_run_all_on_the_released_stub_reaches_every_graded_cell(assignment, tmp_path,
                                                                  monkeypatch):
    """What a student gets, run top to bottom untouched: Run All reaches the end, so every
    graded test cell runs (each cell that fails on the stub is tagged `raises-exception`:
    a graded test, an experiment or plot that uses an answer), and every cell that fails
    says why in its one line (`NotAnswered`: a test's task not done, or a given cell's
    `needs_answer` and `needs_run`), never a traceback through a stub, a NameError or a
    KeyError left by a cell that stopped."""
    for path in notebook_paths(COURSE / EXERCISES / assignment):
        errors = []
        graded, missed, stopped = unreached_graded_cells(read_notebook(path), tmp_path,
                                                         monkeypatch, errors)
        assert not stopped and not missed, f"{path.name}: Run All stopped ({stopped}); " \
                                           f"graded cells not run: {missed}"
        assert all(name == "NotAnswered" for _, name, _ in errors), \
            [e for e in errors if e[1] != "NotAnswered"]


@pytest.mark.slow
def test_run_all_check_fails_when_a_failing_cell_is_not_tagged(tmp_path, monkeypatch):
    """The check above is not vacuous: without its `raises-exception` tags, the first
    assignment's stub stops at its first graded cell and leaves the others unrun."""
    path = notebook_paths(COURSE / EXERCISES / FIRST)[0]
    nb = read_notebook(path)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "raises-exception" in tags:
            tags.remove("raises-exception")
    graded, missed, stopped = unreached_graded_cells(nb, tmp_path, monkeypatch)
    assert stopped and missed, (stopped, missed)
    assert len(graded) - len(missed) <= 1  # it ran the first graded cell, then stopped




@needs_assignment
@pytest.mark.slow
def test_generation_reproduces_the_committed_folders():
    """generate_assignment and generate_solution rerun on a copy: exercises/ byte for
    byte, solutions/ cell for cell (type, id, source, metadata); and the committed
    solutions pass the notebook guard (no error, timeout, machine path or data fallback
    in an output, every quoted figure printed)."""
    from autograder.authoring.generate import drift

    assert drift(COURSE) == []


def selfcheck_of(assignment, tmp_path_factory):
    """The self-check of one assignment, graded once per run (tests/gradedclass.py: with
    the attacks on the verdict of tests/hostile in the same class) and read by the tests
    of that assignment below and by the hostile tests."""
    return graded_class(assignment, tmp_path_factory)


BY_ASSIGNMENT = ASSIGNMENTS


@needs_assignment
@pytest.mark.slow
@pytest.mark.parametrize("assignment", BY_ASSIGNMENT)
def test_selfcheck_passes(assignment, tmp_path_factory):
    from autograder.authoring.selfcheck import report

    check, _ = selfcheck_of(assignment, tmp_path_factory)
    assert check.ok, report([check])
    assert "validate" in check.seconds  # the validator ran on sources and exercises
    by_student = {r.student: r for r in check.results}
    if not any(c.autograded for c in by_student["solution"].cells):
        # graded by hand only (the written questions): every answer listed, unscored
        for student in ("solution", "stub"):
            manual = by_student[student].cells
            assert manual and all(c.max_score > 0 and c.score == 0 for c in manual)
        assert not mutant_registry.load(check.assignment)
        return
    got, top = by_student["solution"].score()
    assert got == top > 0
    assert by_student["stub"].score()[0] == 0
    mutants = [r for r in check.results if r.student.startswith("mutant-")]
    assert len(mutants) == len(mutant_registry.load(check.assignment))
    assert all(r.score()[0] < top for r in mutants)
    assert all(r.feedback for r in check.results)  # and none leaks (part of .ok)


@needs_assignment
@pytest.mark.slow
@pytest.mark.parametrize("assignment", BY_ASSIGNMENT)
def test_selfcheck_leaves_out_only_the_courses_cells_that_cannot_change_a_score(
        assignment, tmp_path_factory):
    """Grading's time saving (`cells.left_out_when_grading`) cuts only what cannot change
    an autograded score: every submission, the solution too, runs every code cell but the
    course's own after the last autograded test and those its source tags
    skip-when-grading (`left_out` counts them; each says why it has no output), and the
    solution still earns full marks (`test_selfcheck_passes`)."""
    from autograder.cells import last_test, left_out_when_grading, skipped_when_grading
    from autograder.grading.execute import LEFT_OUT

    check, workdir = selfcheck_of(assignment, tmp_path_factory)
    for result in check.results:
        if result.student in HOSTILE.values():  # their own cell: not the course's
            continue
        for name, run in result.runs.items():
            skip = set(skipped_when_grading(source_notebook(check.assignment, name)[1]))
            path = workdir / "course" / "autograded" / result.student / check.assignment
            nb = read_notebook(path / f"{name}.ipynb")
            last = last_test(nb)
            code = [i for i, c in enumerate(nb.cells)
                    if c.cell_type == "code" and c.source.strip()]
            cut = [i for i in code if left_out_when_grading(nb.cells[i], i, last, skip)]
            ran = [c["index"] for c in run["cells"]]
            assert ran == [i for i in code if i not in cut], (result.student, name)
            assert run["left_out"] == len(cut), (result.student, name)
            assert all([o.get("text") for o in nb.cells[i].outputs] == [LEFT_OUT]
                       for i in cut), (result.student, name)


def test_grading_leaves_out_an_experiment_before_a_test_and_cells_after_the_last():
    """...so the cut above is not vacuous: some source tags an experiment that a later test
    follows, and some release has code after its last test."""
    from autograder.cells import last_test, skipped_when_grading

    tagged, after = [], []
    for assignment in ASSIGNMENTS:
        for path in notebook_paths(COURSE / SOURCE / assignment):
            nb = read_notebook(path)
            last = last_test(nb)
            skip = skipped_when_grading(nb)
            tagged += [path.name for i, c in enumerate(nb.cells)
                       if i < last and nbgrader_meta(c).get("grade_id") in skip]
            after += [path.name for i, c in enumerate(nb.cells)
                      if i > last and c.cell_type == "code" and c.source.strip()]
    assert tagged and after


@needs_assignment
@pytest.mark.slow
def test_without_our_filter_feedback_would_leak_hidden_tests(tmp_path_factory):
    """The leak check is not vacuous: nbgrader's own ClearHiddenTests, alone, lets the
    traceback of a failing hidden check through for some registered mutant."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.apps import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    check, workdir = selfcheck_of(FIRST, tmp_path_factory)
    hidden = hidden_lines(FIRST)
    leaking = []
    with private_jupyter_dirs(workdir / "sandbox"):
        work = WorkCourse(COURSE, workdir / "course", [FIRST], copy=False)
        cfg = work.config()
        cfg.GenerateFeedback.preprocessors = [
            GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor  # nbgrader's, no filter
        ]
        cfg.CourseDirectory.feedback_directory = "feedback-unfiltered"
        api = NbGraderAPI(coursedir=CourseDirectory(config=cfg), config=cfg, log=work.api().log)
        for result in check.results:
            if not result.student.startswith("mutant-"):
                continue
            assert api.generate_feedback(FIRST, result.student)["success"]
            pages = workdir / "course" / "feedback-unfiltered" / result.student / FIRST
            for page in pages.glob("*.html"):
                if leaked_lines(page.read_text(encoding="utf-8"), hidden):
                    leaking.append(result.student)
            if leaking:
                break
    assert leaking, "no mutant fails inside a hidden test: the leak check proves nothing"


def _course_copy(tmp_path):
    """A course of its own for a test that edits a source notebook: the config and
    source/ copied under tmp_path; returns its root."""
    copy_root = tmp_path / "course"
    copy_root.mkdir()
    shutil.copy2(COURSE / CONFIG_FILE, copy_root / CONFIG_FILE)
    shutil.copytree(COURSE / SOURCE, copy_root / SOURCE)
    return copy_root


@needs_assignment
@pytest.mark.slow
def test_selfcheck_fails_when_a_graded_test_is_weakened(tmp_path):
    registered = mutant_registry.load(FIRST)
    if not registered:
        pytest.skip(f"{FIRST} has no registered mutants")
    mutant = min(registered, key=lambda m: len(m.loses))
    target = mutant.loses[0]
    copy_root = _course_copy(tmp_path)
    name = mutant.notebook.removesuffix(".ipynb") or source_notebook(FIRST)[0]
    path = copy_root / SOURCE / FIRST / f"{name}.ipynb"
    nb = read_notebook(path)
    cell = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == target)
    # a check every answer passes (a cell with no check at all is refused sooner: see
    # the reference run's test below)
    cell.source = ('"""Weakened: every check of this cell replaced by one that always holds."""\n'
                   'from autograder.kernel.checks import check_same\n'
                   'check_same(1, 1, "one")')
    nbformat.write(nb, str(path))

    checks = selfcheck(copy_root, [FIRST], validate=False, feedback=False,
                       only=[mutant.name], jobs=JOBS)
    failures = "\n".join(checks[0].failures)
    assert not checks[0].ok
    assert f"mutant: {mutant.name}: kept" in failures and target in failures, failures


@needs_assignment
@pytest.mark.slow
def test_selfcheck_fails_when_an_extra_submission_earns_points(tmp_path):
    """An extra submission (`selfcheck(extra=...)`, the attacks of tests/gradedclass.py)
    must earn nothing: one that is the solution under another name fails the check, and
    one that is the untouched release passes it."""
    name, solution, release = solution_and_stub(FIRST)
    extra = {FIRST: {"earns-all": {name: solution}, "earns-none": {name: release}}}
    [check] = selfcheck(COURSE, [FIRST], validate=False, feedback=False,
                        only=["(no mutant)"], jobs=JOBS, extra=extra, workdir=tmp_path)
    failures = "\n".join(check.failures)
    assert not check.ok
    assert "earns nothing: earns-all: scored" in failures, failures
    assert "earns-none" not in failures, failures


@needs_assignment
@pytest.mark.slow
def test_selfcheck_refuses_a_graded_cell_that_makes_no_check(tmp_path):
    """A graded cell whose checks were deleted would pass every answer: the reference run
    says which cell, before any student is graded."""
    from autograder.grading.reference_run import ReferenceError

    copy_root = _course_copy(tmp_path)
    path = copy_root / SOURCE / FIRST / f"{source_notebook(FIRST)[0]}.ipynb"
    nb = read_notebook(path)
    cell = next(c for c in nb.cells if nbgrader_meta(c).get("points"))
    target = nbgrader_meta(cell)["grade_id"]
    cell.source = '"""Weakened: every check of this cell deleted."""\npass'
    nbformat.write(nb, str(path))
    with pytest.raises(ReferenceError, match=f"{target} makes no check"):
        selfcheck(copy_root, [FIRST], validate=False, feedback=False, only=["(no mutant)"],
                  jobs=JOBS)


def _table_scores(output):
    """{student: (got, top)} from the autograded column of a printed score table."""
    scores = {}
    for line in output.splitlines():
        m = re.match(r"^(\S+)\s.*?\s(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)\s+\d+\.\d$", line)
        if m:
            scores[m.group(1)] = (float(m.group(2)), float(m.group(3)))
    return scores


@needs_assignment
@pytest.mark.slow
def test_a_test_that_needs_a_cell_grading_leaves_out_stops_the_grading(tmp_path):
    """Tagging skip-when-grading a cell that a test needs (here the given cell that
    defines `layer`) would fail every student: the reference run, which leaves out the
    same cells, says so first."""
    from autograder.cells import SKIP_TAG
    from autograder.grading.reference_run import ReferenceError

    copy_root = _course_copy(tmp_path)
    path = copy_root / SOURCE / FIRST / f"{source_notebook(FIRST)[0]}.ipynb"
    nb = read_notebook(path)
    cell = next(c for c in nb.cells if nbgrader_meta(c).get("grade_id") == "plain_stack")
    cell.metadata.setdefault("tags", []).append(SKIP_TAG)
    nbformat.write(nb, str(path))
    with pytest.raises(ReferenceError, match="the solution fails .*NameError: name 'layer'"):
        selfcheck(copy_root, [FIRST], validate=False, feedback=False, only=["(no mutant)"],
                  jobs=JOBS)


@needs_assignment
@pytest.mark.slow
def test_demo_prints_the_table_and_writes_clean_feedback(tmp_path):
    """The README's main command: solution full, stub zero, partly wrong in between;
    a feedback page for each, without a hidden test."""
    script = Path(sys.executable).parent / "residual-pack"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "autograder.cli"]
    out = tmp_path / "demo"
    run = subprocess.run(
        [*command, "demo", "--out", str(out), "--jobs", str(JOBS)],
        cwd=COURSE, capture_output=True, text=True, timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    scores = _table_scores(run.stdout)
    assert scores["solution"][0] == scores["solution"][1] > 0, run.stdout
    assert scores["stub"][0] == 0, run.stdout
    assert 0 < scores["partly-wrong"][0] < scores["partly-wrong"][1], run.stdout
    hidden = hidden_lines(FIRST)
    for student in ("solution", "stub", "partly-wrong"):
        pages = list((out / "course" / "feedback" / student / FIRST).glob("*.html"))
        assert pages, f"no feedback for {student}"
        for page in pages:
            handed = (out / "submissions" / student / FIRST / f"{page.stem}.ipynb").read_text()
            shown = "\n".join(c.source for c in nbformat.reads(handed, 4).cells)
            assert leaked_lines(page.read_text(encoding="utf-8"), hidden, shown) == []
    assert (out / "course" / "grades.csv").is_file()


@needs_assignment
@pytest.mark.slow
def test_a_class_with_broken_and_shadowing_submissions(tmp_path):
    """A broken notebook costs its student only; an `autograder` package handed in beside
    a wrong answer is left out, so the wrong answer scores zero."""
    name, solution, stub = solution_and_stub(FIRST)
    folder = tmp_path / "submissions"

    def hand_in(student, nb):
        dest = folder / student / FIRST
        dest.mkdir(parents=True)
        nbformat.write(nb, str(dest / f"{name}.ipynb"))
        return dest

    hand_in("good", solution)
    folder.joinpath("broken.ipynb").write_text('{"cells": [', encoding="utf-8")
    doubled = copy.deepcopy(solution)
    answer = next(i for i, c in enumerate(doubled.cells) if is_solution(c))
    doubled.cells.insert(answer + 1, copy.deepcopy(doubled.cells[answer]))
    doubled.cells[answer + 1].id = "pasted-copy"
    hand_in("copied-cell", doubled)
    shadow = hand_in("shadow", stub)
    (shadow / "autograder").mkdir()
    (shadow / "autograder" / "__init__.py").write_text("")
    (shadow / "autograder" / "checks.py").write_text(SHADOW_CHECKS)

    grader, results, grades = run_grading(COURSE, FIRST, folder, tmp_path / "graded", jobs=JOBS)
    by_student = {r.student: r for r in results}
    got, top = by_student["good"].score()
    assert got == top > 0
    assert not by_student["broken"].graded
    assert "not a readable notebook" in by_student["broken"].reason
    # a pasted copy of the answer cell runs as the student's own cell: nothing is lost
    assert by_student["copied-cell"].graded and by_student["copied-cell"].score() == (top, top)
    assert any("more than once" in n for n in by_student["copied-cell"].notes)
    assert by_student["shadow"].graded and by_student["shadow"].score()[0] == 0
    assert any("left out" in n and "autograder" in n for n in by_student["shadow"].notes)
    with open(grades, newline="") as f:
        rows = {row["student_id"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"good", "broken", "copied-cell", "shadow"}
    assert float(rows["good"]["score"]) == top and float(rows["shadow"]["score"]) == 0


@needs_assignment
@pytest.mark.slow
def test_a_shadowing_module_in_the_kernels_folder_is_not_imported(tmp_path, monkeypatch):
    """Even in the folder the kernel runs in, a student's `autograder.py` is not imported:
    the kernel keeps its working directory off sys.path. Control: without that, the
    same file makes the untouched stub pass every check."""
    _, _, stub = solution_and_stub(FIRST)
    with private_jupyter_dirs(tmp_path / "sandbox"):
        work = WorkCourse(COURSE, tmp_path / "course", [FIRST])
        grader = Grader(work, FIRST)
        name = grader.notebooks[0]
        for student in ("defended", "undefended"):
            folder = grader.submit(student, {name: stub})
            (folder / "autograder.py").write_text(SHADOW_MODULE)
        defended = grader.grade("defended", feedback=False)

        monkeypatch.setattr(course_module, "KERNEL_ARGUMENTS", [])
        config = work.root / "nbgrader_config.py"  # the course config asks for it too
        lines = config.read_text().splitlines()
        config.write_text("".join(f"{line}\n" for line in lines if "ignore_cwd" not in line))
        os.environ.pop("PYTHONSAFEPATH", None)  # private_jupyter_dirs puts it back at the end
        unsafe = Grader(WorkCourse(COURSE, work.root, [FIRST], copy=False), FIRST, generate=False)
        undefended = unsafe.grade("undefended", feedback=False)

    assert defended.graded and defended.score()[0] == 0
    got, top = undefended.score()
    assert undefended.graded and got == top > 0, "the shadow module had no effect: no proof"
