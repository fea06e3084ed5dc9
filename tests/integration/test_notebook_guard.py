"""The notebook guard (autograder/authoring/notebook_guard.py): each rule fails on a copy of a
committed solution with one defect put in, and the committed pack passes."""

import copy
import shutil
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.notebook_guard import (
    check_notebook,
    check_readme,
    check_solutions,
    figure_found,
    output_problems,
    readme_quotes,
)
from autograder.grading.course import CONFIG_FILE, SOURCE, assignments
from autograder.grading.intake import TORCH_ASSIGNMENTS

COURSE = Path(__file__).resolve().parents[2]
ALL = assignments(COURSE)
TORCH = set(TORCH_ASSIGNMENTS)
TORCH_FREE = [a for a in ALL if a not in TORCH]
SAMPLE = "02_degradation"  # the committed solution the defects are put into


def committed(assignment=SAMPLE):
    path = next((COURSE / "solutions" / assignment).glob("*.ipynb"))
    return nbformat.read(str(path), as_version=4)


def first_code_cell(nb):
    return next(c for c in nb.cells if c.cell_type == "code" and c.outputs)


def with_output(output, assignment=SAMPLE):
    nb = committed(assignment)
    first_code_cell(nb).outputs.append(output)
    return nb


def stream(text):
    return nbformat.v4.new_output("stream", name="stdout", text=text)


# ---------------------------------------------------------------- the committed pack


def test_the_committed_pack_passes_the_guard():
    assert TORCH_FREE and len(TORCH_FREE) >= 7 and TORCH <= set(ALL)
    assert check_solutions(COURSE, ALL) == []


def test_the_readme_quotes_pass_the_guard():
    """The figures the README and docs/ list as quoted (the table of what each experiment
    shows is in docs/instructors.md) are in the solutions' outputs or results/."""
    listed = [q for page in [COURSE / "README.md", *(COURSE / "docs").glob("*.md")]
              for q in readme_quotes(page.read_text(encoding="utf-8"))]
    assert len(listed) >= 20, "the pages list few quoted figures: the check would prove little"
    assert check_readme(COURSE, ALL) == []


def test_some_committed_cells_list_quoted_figures():
    """The quote rule is in use: the torch-free solutions list figures to check."""
    listed = 0
    for name in TORCH_FREE:
        for cell in committed(name).cells:
            meta = cell.get("metadata", {}).get("residual_pack", {})
            listed += len(meta.get("quotes", [])) + sum(map(len, meta.get("quotes_from", {})
                                                            .values()))
    assert listed >= 20


# ---------------------------------------------------------------- each rule fails


def test_an_error_output_fails():
    assert check_notebook(committed(), COURSE) == []  # the control: the copy is clean
    nb = with_output(nbformat.v4.new_output(
        "error", ename="ValueError", evalue="bad", traceback=["ValueError: bad"]))
    problems = check_notebook(nb, COURSE)
    assert len(problems) == 1 and "error output (ValueError" in problems[0]


def test_a_timed_out_cell_fails():
    nb = with_output(nbformat.v4.new_output(
        "error", ename="CellTimeoutError", evalue="",
        traceback=["CellTimeoutError: A cell timed out while it was being executed"]))
    assert any("timed out" in p for p in check_notebook(nb, COURSE))
    # also when only the text of the timeout was printed (a wrapper that caught it)
    nb = with_output(stream("nbclient.exceptions.CellTimeoutError: A cell timed out\n"))
    problems = check_notebook(nb, COURSE)
    first = first_code_cell(committed()).id  # the cell with_output printed into
    assert problems == [f"cell {first}: the cell timed out (CellTimeoutError)"]


@pytest.mark.parametrize("text", [
    "/work/wt/notebooks/.venv/lib/python3.12/site-packages/torch/x.py:3: UserWarning\n",
    "  File /usr/lib/python3/dist-packages/foo.py, line 2\n",
    "saved to /tmp/tmpab12/plot.png\n",
    "cache: /root/.cache/microgpt-residuals\n",
    "reading /home/ann/data.txt\n",
    "see .venv/bin/python\n",
    r"C:\Users\ann\course\data.txt" + "\n",
    "loaded /data/shakespeare/input.txt\n",
])
def test_a_machine_path_fails(text):
    problems = check_notebook(with_output(stream(text)), COURSE)
    assert len(problems) == 1 and "path of the machine" in problems[0], problems


@pytest.mark.parametrize("text", [
    "training:   0%|          | 0/1200 [00:00<?, ?step/s]\n",
    "see https://docs.python.org/3/library/random.html\n",
    "ratio 872 / 308 / 308, lr 1e-3/step\n",
])
def test_what_is_not_a_machine_path(text):
    assert output_problems(with_output(stream(text))) == []


def test_a_data_fallback_line_fails():
    named = stream("data: TinyShakespeare (1,115,394 characters)\n")
    assert output_problems(with_output(named)) == []
    nb = with_output(stream("model ready\ndata fallback: census names instead of "
                            "TinyShakespeare (the download failed)\n"))
    problems = check_notebook(nb, COURSE)
    assert len(problems) == 1 and "fell back to other data" in problems[0]


def quoting_cell(text, quotes=(), quotes_from=None):
    meta = {"residual_pack": {"quotes": list(quotes)}}
    if quotes_from:
        meta["residual_pack"]["quotes_from"] = quotes_from
    return nbformat.v4.new_markdown_cell(text, metadata=meta)


def test_a_quoted_figure_that_is_nowhere_fails():
    nb = committed()
    nb.cells.append(quoting_cell("the deep net ended at 1.308, the shallow at 0.392",
                                 ["1.308", "0.392"]))
    assert check_notebook(nb, COURSE) == []  # both are printed by the experiment
    nb.cells.append(quoting_cell("and once at 9.8765", ["9.8765"]))
    problems = check_notebook(nb, COURSE)
    assert len(problems) == 1 and "quotes '9.8765'" in problems[0]


def test_a_listed_figure_must_be_in_the_text_that_lists_it():
    nb = committed()
    nb.cells.append(quoting_cell("the deep net ended near H(y)", ["1.308"]))
    problems = check_notebook(nb, COURSE)
    assert len(problems) == 1 and "does not say it" in problems[0]


def test_a_figure_may_come_from_results_or_another_solution(tmp_path):
    nb = committed()
    # the committed notebook itself quotes figures from results/ (its table of the search)
    before = check_notebook(nb, COURSE, results="")
    nb.cells.append(quoting_cell("a full-size run gave 2.145 +- 0.160", ["2.145"]))
    problems = [p for p in check_notebook(nb, COURSE, results="") if p not in before]
    assert len(problems) == 1 and "quotes '2.145'" in problems[0]
    results = '{"plain-30": "2.145 +- 0.160"}'
    assert [p for p in check_notebook(nb, COURSE, results=results) if p not in before] == []

    nb = committed()
    nb.cells.append(quoting_cell("Assignment 1 measured 6.727", quotes_from={
        "01_residual_stack": ["6.727"]}))
    assert check_notebook(nb, COURSE) == []
    nb.cells.append(quoting_cell("and 6.728", quotes_from={"01_residual_stack": ["6.728"]}))
    problems = check_notebook(nb, COURSE)
    assert len(problems) == 1 and "from 01_residual_stack" in problems[0]


def test_figures_match_as_whole_numbers():
    assert figure_found("1.23", "ratios 1.23 to 4.26")
    assert figure_found("1.23", "(1.23)") and figure_found("1.23", "ends at 1.23.")
    assert not figure_found("1.23", "1.234") and not figure_found("1.23", "11.23")
    assert not figure_found("23", "1.23")
    assert figure_found("2,016", "plain 2,016, highway 4,176")
    assert figure_found("1e-20", "output 1e-20,")


def test_readme_quotes_are_checked(tmp_path):
    course = tmp_path / "course"
    (course / "solutions").mkdir(parents=True)
    solved = Path("solutions") / "01_residual_stack"
    shutil.copytree(COURSE / solved, course / solved)
    readme = course / "README.md"
    readme.write_text('The gradient: 6.727 residual.\n<!-- quotes 01_residual_stack: "6.727" -->\n')
    assert readme_quotes(readme.read_text()) == [("01_residual_stack", "6.727")]
    assert check_readme(course) == []
    readme.write_text('The gradient: 6.7 residual.\n<!-- quotes 01_residual_stack: "6.7" -->\n')
    assert "neither its solution outputs" in " ".join(check_readme(course))
    readme.write_text('The gradient is large.\n<!-- quotes 01_residual_stack: "6.727" -->\n')
    assert "the text does not say it" in " ".join(check_readme(course))
    readme.write_text("No figures here.\n")
    (course / "docs").mkdir()
    (course / "docs" / "staff.md").write_text(
        'It is 6.7.\n<!-- quotes 01_residual_stack: "6.7" -->\n')
    assert "docs/staff.md: quotes '6.7'" in " ".join(check_readme(course))


@pytest.mark.slow
def test_check_drift_runs_the_guard(tmp_path):
    """`residual-pack check-drift` reports a defect the guard finds in a committed solution
    that is otherwise up to date."""
    from autograder.authoring.generate import GUARD, drift
    from autograder.cli import main

    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(COURSE / CONFIG_FILE, course / CONFIG_FILE)
    name = "01_residual_stack"
    for folder in (SOURCE, "exercises", "solutions"):
        shutil.copytree(COURSE / folder / name, course / folder / name)
    shutil.copytree(COURSE / "results", course / "results")  # what the notebooks quote
    assert drift(course, ["01_residual_stack"]) == []
    path = next((course / "solutions" / "01_residual_stack").glob("*.ipynb"))
    nb = nbformat.read(str(path), as_version=4)
    bad = copy.deepcopy(nb)
    first_code_cell(bad).outputs.append(nbformat.v4.new_output(
        "error", ename="ValueError", evalue="bad", traceback=[]))
    nbformat.write(bad, str(path))
    problems = drift(course, ["01_residual_stack"])
    assert len(problems) == 1 and problems[0].startswith(GUARD) and "error output" in problems[0]
    assert main(["--course", str(course), "check-drift", "01_residual_stack"]) == 1


def test_the_student_versions_carry_no_quote_lists(tmp_path):
    """The lists are the instructors' (an answer cell's would list the model answer's
    figures): every generated release lacks them (generate, selfcheck and grading all
    release through WorkCourse.generate_assignment); solutions/ keeps them."""
    from autograder.grading.course import strip_quote_lists

    for name in TORCH_FREE:
        for path in (COURSE / "exercises" / name).glob("*.ipynb"):
            nb = nbformat.read(str(path), as_version=4)
            assert not [c.get("id") for c in nb.cells if "residual_pack" in c.metadata], path
    # the control: a notebook that has them loses them
    copy_path = tmp_path / "highway.ipynb"
    shutil.copy2(next((COURSE / "solutions" / "03_highway").glob("*.ipynb")), copy_path)
    before = nbformat.read(str(copy_path), as_version=4)
    assert any("residual_pack" in c.metadata for c in before.cells)
    strip_quote_lists(copy_path)
    after = nbformat.read(str(copy_path), as_version=4)
    assert not any("residual_pack" in c.metadata for c in after.cells)
    assert [c.source for c in after.cells] == [c.source for c in before.cells]


def test_a_figure_printed_in_two_stream_messages_is_found():
    """A kernel may send one printed line in two stream messages (the output of 09's lens
    cell came in two); the guard reads a cell's consecutive streams as one text."""
    nb = committed()
    cell = first_code_cell(nb)
    cell.outputs += [stream("a figure split as it was sent: 4.3"), stream("217 nats\n")]
    nb.cells.append(quoting_cell("the split figure, 4.3217", ["4.3217"]))
    assert check_notebook(nb, COURSE) == []
    cell.outputs.insert(len(cell.outputs) - 1, nbformat.v4.new_output(
        "stream", name="stderr", text="a warning between them\n"))
    problems = check_notebook(nb, COURSE)  # not one stream any more: not one figure
    assert len(problems) == 1 and "quotes '4.3217'" in problems[0]
