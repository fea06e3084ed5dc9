"""The tasks of every source notebook come in order: Task N.1, N.2, ... as a student reads
them, N the notebook's own number, and each task's heading carries the grade id of that
task (`taskN_k_...`), the id the gradebook, the mutants and the stored numbers know it by."""

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "source").glob("*/*.ipynb"))
HEADING = re.compile(r"^#+ Task (\d+)\.(\d+)\b", re.MULTILINE)


def _headings(path):
    """(task number, its heading cell's grade id) in the order of the notebook."""
    found = []
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "markdown":
            continue
        for match in HEADING.finditer(cell.source):
            gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            found.append(((int(match[1]), int(match[2])), gid))
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.parent.name)
def test_tasks_come_in_order(path):
    number = int(path.parent.name[:2])
    headings = _headings(path)
    assert headings, f"{path.name} has no task heading"
    tasks = [task for task, _ in headings]
    assert tasks == [(number, k) for k in range(1, len(tasks) + 1)], (
        f"{path.name} runs its tasks as " + ", ".join(f"{n}.{k}" for n, k in tasks))
    for (n, k), gid in headings:
        assert gid.startswith(f"task{n}_{k}_"), f"Task {n}.{k}'s heading has grade id {gid!r}"


def _written_answers(path):
    """The answer cells graded by hand (markdown solution cells with points)."""
    return [cell for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "markdown" and cell.metadata.get("nbgrader", {}).get("solution")
            and cell.metadata.get("nbgrader", {}).get("grade")]


WRITTEN = [p for p in NOTEBOOKS if _written_answers(p)]


@pytest.mark.parametrize("path", WRITTEN, ids=lambda p: p.parent.name)
def test_a_written_answer_names_its_task(path):
    """nbgrader's Validate shows an unanswered written answer as its cell's text and "You
    did not provide a response": the text left after nbgrader clears the model answer must
    say which task it is, so each answer cell opens, outside the solution, with
    "**Your answer to Task N.k:**" (N.k from its grade id)."""
    for cell in _written_answers(path):
        gid = cell.metadata["nbgrader"]["grade_id"]
        n, k = re.match(r"task(\d+)_(\d+)_", gid).groups()
        lead = cell.source.split("\n", 1)[0]
        assert lead == f"**Your answer to Task {n}.{k}:**", (gid, lead)
        assert "### BEGIN SOLUTION" in cell.source.split("\n", 1)[1], gid


@pytest.mark.parametrize("path", WRITTEN, ids=lambda p: p.parent.name)
def test_progress_tells_a_written_answer_from_its_placeholder(path):
    """The released cell (the lead and nbgrader's placeholder) is still to write; the same
    cell with words of the student's is written."""
    from autograder.student.progress import unanswered

    released = ROOT / "exercises" / path.parent.name / path.name
    for cell in _written_answers(released):
        assert unanswered(cell.source), cell.source
        assert not unanswered(cell.source + "\n\nThe shortcut adds 1 to the derivative."), \
            cell.source
        assert not unanswered(cell.source.split("\n", 1)[0] + "\n\nMy answer.")
    assert unanswered("") and unanswered("_Write your answer here._")
