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
