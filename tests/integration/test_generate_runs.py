"""`residual-pack generate` with the real nbgrader and kernels (issue 40, item 2), on a
copy of 01 (quick to run) in a git repository: forced, it reproduces the committed
folders byte for byte; run again, it skips the unchanged assignment without running it;
a changed source is generated again; a source whose solution raises is not written (the
last good one stays) and the command names the assignment, the cell and the error. And a
notebook with progress bars and text printed in pieces is written the same twice."""

import shutil
import time
from pathlib import Path

import nbformat
from generatecourse import commit, git, make_course, notebook, residual_pack

from autograder.authoring import generation_record as rec
from autograder.grading.course import CONFIG_FILE, SOURCE

COURSE = Path(__file__).resolve().parents[2]
NAME = "01_residual_stack"


def copy_of_01(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(COURSE / CONFIG_FILE, course / CONFIG_FILE)
    for folder in (SOURCE, "exercises", "solutions"):
        shutil.copytree(COURSE / folder / NAME, course / folder / NAME)
    git(course, "init", "-q")
    commit(course)
    return course


def with_cell(course, cell_id, source):
    path = course / SOURCE / NAME / f"{NAME}.ipynb"
    nb = nbformat.read(str(path), as_version=4)
    cell = nbformat.v4.new_code_cell(source)
    cell.id = cell_id
    nb.cells.append(cell)
    nbformat.write(nb, str(path))


def solution_text(course):
    return (course / "solutions" / NAME / f"{NAME}.ipynb").read_bytes()


def test_generate_skips_what_did_not_change_and_never_writes_a_raising_solution(tmp_path):
    course = copy_of_01(tmp_path)
    run = residual_pack(course, "generate", "--force", NAME)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"wrote exercises/ and solutions/ for {NAME}" in run.stdout
    # the committed folders, byte for byte; only the record is new
    assert git(course, "status", "--porcelain") == f"?? {rec.RECORD}\n"
    commit(course)

    start = time.perf_counter()
    run = residual_pack(course, "generate")
    took = time.perf_counter() - start
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{NAME}: skipped: unchanged since its last generation" in run.stdout
    assert "generate_solution" not in run.stdout and took < 60
    assert git(course, "status", "--porcelain") == ""

    with_cell(course, "added-by-the-test", 'print("a line the test added")')
    run = residual_pack(course, "generate")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{NAME}: to generate: {rec.PARTS['source']}" in run.stdout
    assert b"a line the test added" in solution_text(course)
    commit(course)
    good = solution_text(course)

    with_cell(course, "raises", 'raise ValueError("a solution that raises")')
    run = residual_pack(course, "generate", NAME)
    assert run.returncode == 1, run.stdout + run.stderr
    assert f"{NAME}: NOT written" in run.stdout
    assert (f"{NAME}.ipynb: cell raises: error output (ValueError: a solution that raises)"
            in run.stdout)
    assert f"generate FAILED for {NAME}" in run.stdout
    assert solution_text(course) == good
    # only the source changed: the committed exercises/, solutions/ and record stay
    assert git(course, "status", "--porcelain") == f" M {SOURCE}/{NAME}/{NAME}.ipynb\n"


def test_a_rerun_that_prints_the_same_writes_the_same_bytes(tmp_path):
    """Progress bars (a new widget id each run) and text printed in pieces (split into
    stream messages as timing has it)."""
    nb = notebook("import sys, time\nfrom tqdm.auto import tqdm\n"
                  "for i in tqdm(range(3)):\n"
                  "    sys.stdout.write(f'step {i}'); sys.stdout.flush(); time.sleep(0.05)\n"
                  "    print(' done')")
    course = make_course(tmp_path, {"01_bars": nb})
    written = []
    for _ in range(2):
        run = residual_pack(course, "generate", "--force")
        assert run.returncode == 0, run.stdout + run.stderr
        written.append((course / "solutions" / "01_bars" / "01_bars.ipynb").read_bytes())
    assert written[0] == written[1]
    assert b"step 0 done\\n" in written[0] and b"widget" not in written[0]
