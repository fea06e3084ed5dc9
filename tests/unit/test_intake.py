"""autograder/grading/intake.py on notebooks made here (the hostile class hands in many
more, graded for real in test_hostile)."""

import copy

import nbformat

from autograder.grading.intake import review_flags, take_in, too_big


def _release():
    nb = nbformat.v4.new_notebook()
    answer = nbformat.v4.new_code_cell("x = 1")
    answer.metadata["nbgrader"] = {"grade_id": "answer", "solution": True, "grade": False,
                                   "locked": False, "schema_version": 3}
    test = nbformat.v4.new_code_cell("assert x == 1")
    test.metadata["nbgrader"] = {"grade_id": "test", "solution": False, "grade": True,
                                 "locked": True, "points": 2, "schema_version": 3}
    nb.cells = [answer, test]
    return nb


def test_broken_notebooks_are_named_with_a_reason():
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["nbgrader"] = {"grade_id": "answer", "solution": True, "grade": False,
                                 "locked": False, "schema_version": 3}
    nb.cells = [cell]
    assert "not a readable notebook" in take_in(b'{"cells": [', "bad.ipynb", nb, "a").problem
    doubled = copy.deepcopy(nb)
    doubled.cells.append(copy.deepcopy(cell))
    doubled.cells[1].id = "copied"
    got = take_in(nbformat.writes(doubled).encode(), "doubled.ipynb", nb, "a")
    assert not got.problem and any("more than once" in n for n in got.notes)
    assert [c.metadata.get("nbgrader", {}).get("grade_id") for c in got.notebook.cells] == \
        ["answer", None]  # the copy runs as a cell of the student's own


def test_what_cannot_be_graded_says_why():
    release = _release()
    assert take_in(b"", "e.ipynb", release, "a").problem == "e.ipynb is empty (0 bytes)"
    assert "not a notebook" in take_in(b"[1, 2]", "l.ipynb", release, "a").problem
    big = take_in(b"x" * 2048, "b.ipynb", release, "a", max_bytes=1024).problem
    assert big == "b.ipynb is 2048 bytes, more than the 1024 bytes a notebook may be"
    assert too_big("n.ipynb", 70 << 20, 64 << 20) == (
        "n.ipynb is 70.0 MiB, more than the 64 MiB a notebook may be")
    assert too_big("n.ipynb", 64 << 20, 64 << 20) == too_big("n.ipynb", 1, None) == ""


def test_a_test_cell_is_put_back_as_released():
    release = _release()
    handed = copy.deepcopy(release)
    handed.cells[1].source = "pass"
    handed.cells[1].metadata["nbgrader"]["points"] = 99
    del handed.cells[0].metadata["nbgrader"]["locked"]
    got = take_in(nbformat.writes(handed).encode(), "nb.ipynb", release, "a")
    assert got.notebook.cells[1].source == "assert x == 1"
    assert got.notebook.cells[1].metadata["nbgrader"]["points"] == 2
    notes = " | ".join(got.notes)
    assert "the test cell test had been edited" in notes and "points: 99, the release's 2" in notes


def test_a_deleted_test_cell_is_put_back_and_damaged_metadata_removed():
    release = _release()
    handed = copy.deepcopy(release)
    del handed.cells[1]
    own = nbformat.v4.new_code_cell("y = 2")
    own.metadata["nbgrader"] = ["not", "a", "dict"]
    handed.cells.append(own)
    got = take_in(nbformat.writes(handed).encode(), "nb.ipynb", release, "a")
    kinds = [c.metadata.get("nbgrader", {}).get("grade_id") for c in got.notebook.cells]
    assert kinds == ["answer", None, "test"]
    notes = " | ".join(got.notes)
    assert "damaged nbgrader metadata" in notes and "put back: test" in notes


def test_code_that_reaches_into_the_grader_is_withheld_on_the_torch_track_only():
    """The torch track's observations are made in the student's kernel: code that reaches
    into the interpreter or the grader is held back there. On the microgpt track the tests
    run in the grader, and such code cannot change a verdict: nothing is held back."""
    release = _release()
    handed = copy.deepcopy(release)
    handed.cells[0].source = "import autograder.answers.reference\nimport gc\nx = 1"
    got = take_in(nbformat.writes(handed).encode(), "nb.ipynb", release, "08_torch_mlp")
    assert any("imports the grader's own modules" in f for f in got.withhold)
    assert any("reaches into the interpreter" in f for f in got.withhold)
    assert review_flags(release) == []  # the given test cell is not the student's code
    got = take_in(nbformat.writes(handed).encode(), "nb.ipynb", release, "02_degradation")
    assert got.withhold == [] and got.flags == []


def test_the_red_teams_kinds_of_reach_are_withheld_on_the_torch_track():
    """Issue #26's attacks by kind, each in a plain spelling: a library answer run anew
    (runpy, a module's loader), a finalizer that runs after a check appends its record,
    the running cell's source read from linecache or a traceback's frame. Detection, not
    prevention: code that builds these names at run time needs what is already flagged
    (getattr on frames, __import__, eval, sys.modules)."""
    attacks = [
        "import runpy\nm = runpy.run_module('microgpt.model')",
        "from runpy import run_path",
        "from importlib.machinery import SourceFileLoader",
        "class Sneaky:\n    def __del__(self):\n        pass",
        "import weakref\nweakref.finalize(object(), print)",
        "import linecache\nprint(linecache.cache)",
        "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    f = e.__traceback__.tb_frame",
        # a torch hook changes a gradient inside backward(), where a check reads it
        "def forward(self, x):\n    x.register_hook(lambda g: g * 0 + 1)\n    return x",
        "model.register_full_backward_hook(lambda m, gi, go: gi)",
    ]
    release = _release()
    for code in attacks:
        handed = copy.deepcopy(release)
        handed.cells[0].source = code + "\nx = 1"
        got = take_in(nbformat.writes(handed).encode(), "nb.ipynb", release, "09_torch_transformer")
        assert any("reaches into the interpreter" in f for f in got.withhold), code
    honest = copy.deepcopy(release)
    honest.cells[0].source = ("class A:\n    def __init__(self):\n        self.w = 2\n\n"
                              "    def step(self):\n        return self.w\nx = 1")
    got = take_in(nbformat.writes(honest).encode(), "nb.ipynb", release, "a")
    assert got.withhold == []


def test_a_copy_of_the_source_notebook_is_withheld_for_review():
    """The release has no nbgrader markers; an answer that carries them came from the
    instructor's source notebook, and its score waits for a person."""
    nb = _release()
    nb.cells[0].source = "### BEGIN SOLUTION\nx = 1\n### END SOLUTION"
    got = take_in(nbformat.writes(nb).encode(), "copied.ipynb", _release(), "a")
    assert got.withhold == ["flagged for review: answer carries the instructor's markers, "
                            "as the source notebook does (### BEGIN SOLUTION, "
                            "### END SOLUTION)"]
    written = _release()
    written.cells[0].cell_type = "markdown"
    written.cells[0].source = "=== BEGIN MARK SCHEME ===\nfull marks"
    assert take_in(nbformat.writes(written).encode(), "w.ipynb", _release(), "a").withhold
    honest = _release()
    honest.cells[0].source = "# the solution begins here\nx = 1"
    assert take_in(nbformat.writes(honest).encode(), "h.ipynb", _release(), "a").flags == []


def test_read_handed_in_only_makes_the_bytes_readable():
    from autograder.grading.intake import read_handed_in

    nb = _release()
    nb.cells[1].source = "assert True  # edited test"
    got = read_handed_in(nbformat.writes(nb).encode(), "nb.ipynb")
    assert not got.problem and got.notes == []
    assert [c.source for c in got.notebook.cells] == [c.source for c in nb.cells]  # no repair
    assert "not a notebook" in read_handed_in(b'{"cells": 3}', "nb.ipynb").problem
    assert "empty" in read_handed_in(b"  ", "nb.ipynb").problem
    bad = read_handed_in(nbformat.writes(nb).encode().replace(b"True", b"Tr\xffe"), "nb.ipynb")
    assert "not valid UTF-8" in bad.notes[0] and "\ufffd" in bad.notebook.cells[1].source


def test_an_nbformat_3_notebook_is_converted_and_graded():
    """An instructor's trial: nbformat 3 (cells in worksheets) was refused as "not a
    notebook (no list of cells)", where plain nbgrader reads it. It is converted, and said."""
    import json

    from nbformat import v3

    release = _release()
    old = v3.new_notebook(worksheets=[v3.new_worksheet(cells=[
        v3.new_code_cell(input="x = 1", metadata={"nbgrader": dict(
            release.cells[0].metadata["nbgrader"])}),
        v3.new_code_cell(input="assert x == 1", metadata={"nbgrader": dict(
            release.cells[1].metadata["nbgrader"])})])])
    data = json.dumps(old).encode()
    assert json.loads(data)["nbformat"] == 3 and "cells" not in json.loads(data)
    got = take_in(data, "old.ipynb", release, "a")
    assert not got.problem, got.problem
    assert "old.ipynb is in nbformat 3; it was converted to nbformat 4" in got.notes
    assert [c.source for c in got.notebook.cells] == ["x = 1", "assert x == 1"]
    broken = json.dumps({"nbformat": 3, "worksheets": 7}).encode()
    assert "nbformat 3 notebook that could not be converted" in take_in(
        broken, "b.ipynb", release, "a").problem
