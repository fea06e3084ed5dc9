"""autograder/grading/notebook_record.py: what our steps write into the graded notebook, read back
as the batch driver and the class report export read it."""

import nbformat

from autograder.grading.notebook_record import (
    KEY,
    CellRun,
    NotebookRun,
    forget,
    read_seen,
    write_intake,
    write_run,
    write_withheld,
)


def _notebook(cells=3):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# title")] + [
        nbformat.v4.new_code_cell(f"x = {i}") for i in range(cells)]
    return nb


def test_what_the_steps_write_is_read_back_through_the_file():
    nb = _notebook()
    write_intake(nb, ["repaired cell 2"], ["a flag"], ["a flag"])
    run = NotebookRun(level="namespaces", ended="", seconds=1.5, left_out=1,
                      limits={"cell_timeout": 120})
    run.cells = [CellRun(1, "", "own", "ok", seconds=0.1),
                 CellRun(3, "t1", "test", "error", "CheckFailed", "expected 2",
                         verdict="expected 2", changed=["microgpt.Value.__add__"])]
    write_run(nb, run)
    write_withheld(nb, 6.0, ["reason one"])
    again = nbformat.reads(nbformat.writes(nb), as_version=4)  # as nbgrader writes it
    seen = read_seen(again)
    assert (seen.notes, seen.flags, seen.withhold) == (["repaired cell 2"], ["a flag"],
                                                       ["a flag"])
    assert (seen.held, seen.withheld) == (6.0, ["reason one"])
    assert seen.run == run.to_dict()  # the cells come back from the cells, in order
    assert KEY not in again.cells[0].metadata and KEY not in again.cells[2].metadata


def test_a_run_replaces_every_record_a_cell_carried_before():
    nb = _notebook()
    for i, cell in enumerate(nb.cells):
        cell.metadata[KEY] = {"index": i, "grade_id": "forged", "status": "ok"}
    write_run(nb, NotebookRun(cells=[CellRun(2, "", "own", "error", "NameError")]))
    assert [c.metadata.get(KEY, {}).get("grade_id") for c in nb.cells] == \
        [None, None, "", None]
    assert [c["status"] for c in read_seen(nb).run["cells"]] == ["error"]


def test_forget_drops_the_key_everywhere_and_says_whether_it_was_there():
    nb = _notebook()
    assert not forget(nb)
    nb.metadata[KEY] = {"withheld": {"points": 0, "reasons": []}}
    nb.cells[1].metadata[KEY] = {"status": "ok"}
    nb.cells[1].metadata["other"] = 1
    assert forget(nb)
    assert KEY not in nb.metadata and KEY not in nb.cells[1].metadata
    assert nb.cells[1].metadata["other"] == 1


def test_a_notebook_our_steps_did_not_grade_has_nothing_to_read():
    seen = read_seen(_notebook())
    assert seen.run is None and not (seen.notes or seen.flags or seen.withheld)
    nb = _notebook()
    nb.metadata[KEY] = "not a dict"
    assert read_seen(nb).run is None


def test_text_that_is_not_utf8_is_written_as_its_escape():
    """A grade id or an error message of the student's may hold a lone surrogate (JSON
    allows one): the notebook must still be written, so the record holds its escape."""
    nb = _notebook()
    write_intake(nb, ["a cell carried the grade id t\ud800"], [], [])
    write_run(nb, NotebookRun(cells=[CellRun(1, "t\udfff", "test", "error", "E", "\ud800")]))
    write_withheld(nb, 1.0, ["why \ud800"])
    seen = read_seen(nbformat.reads(nbformat.writes(nb).encode("utf-8").decode("utf-8"),
                                    as_version=4))
    assert seen.notes == ["a cell carried the grade id t\\ud800"]
    assert seen.run["cells"][0]["grade_id"] == "t\\udfff"
    assert seen.withheld == ["why \\ud800"]
