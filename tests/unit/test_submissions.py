"""autograder/grading/submissions.py: the layouts a class may hand in, and student ids."""

import os

import pytest

from autograder.grading.course import CourseError
from autograder.grading.submissions import find_submissions, student_id, submission_hash


def _write(path, text="{}"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_the_three_layouts(tmp_path):
    a = _write(tmp_path / "ann" / "hw" / "nb.ipynb")  # nbgrader's own layout
    b = _write(tmp_path / "bob" / "nb.ipynb")  # a folder per student
    c = _write(tmp_path / "cy.ipynb")  # a file per student
    found = find_submissions(tmp_path, "hw", ["nb"])
    assert found == {"ann": ({"nb": a}, []), "bob": ({"nb": b}, []), "cy": ({"nb": c}, [])}


def test_a_lone_notebook_of_another_name_counts(tmp_path):
    _write(tmp_path / "ann" / "nb (1).ipynb")
    files, notes = find_submissions(tmp_path, "hw", ["nb"])["ann"]
    assert list(files) == ["nb"] and notes == ["graded nb (1).ipynb as nb.ipynb"]


def test_other_files_are_left_out_and_said(tmp_path):
    _write(tmp_path / "ann" / "nb.ipynb")
    _write(tmp_path / "ann" / "autograder.py", "x = 1")
    _write(tmp_path / "ann" / "extra.ipynb")
    files, notes = find_submissions(tmp_path, "hw", ["nb"])["ann"]
    assert list(files) == ["nb"]
    assert any("extra.ipynb" in n for n in notes)
    assert any("left out 1 file(s)" in n and "autograder.py" in n for n in notes)


def test_links_are_not_followed(tmp_path):
    target = _write(tmp_path / "ann" / "nb.ipynb")
    (tmp_path / "eve.ipynb").symlink_to(target)
    files, notes = find_submissions(tmp_path, "hw", ["nb"])["eve"]
    assert files == {} and "symbolic link" in notes[0]


def test_one_file_per_student_needs_a_one_notebook_assignment(tmp_path):
    _write(tmp_path / "ann.ipynb")
    files, notes = find_submissions(tmp_path, "hw", ["a", "b"])["ann"]
    assert files == {} and "one-notebook" in notes[0]


def test_hidden_entries_are_skipped_and_a_missing_folder_is_an_error(tmp_path):
    _write(tmp_path / ".ann" / "nb.ipynb")
    _write(tmp_path / "_bob.ipynb")
    assert find_submissions(tmp_path, "hw", ["nb"]) == {}
    with pytest.raises(CourseError):
        find_submissions(tmp_path / "nowhere", "hw", ["nb"])


def test_a_name_that_is_not_plain_text_gets_an_id(tmp_path):
    raw = b"caf\xe9\nx"
    _write(tmp_path / os.fsdecode(raw) / "nb.ipynb")
    (student, (files, notes)), = find_submissions(tmp_path, "hw", ["nb"]).items()
    assert student == student_id(os.fsdecode(raw))[0] and student.startswith("student-")
    assert list(files) == ["nb"] and "is not plain text" in notes[0]
    assert student_id("ann lee") == ("ann lee", "")


def test_the_hash_follows_the_bytes_and_the_names(tmp_path):
    a = _write(tmp_path / "a.ipynb", "one")
    b = _write(tmp_path / "b.ipynb", "one")
    assert submission_hash({"nb": a}) == submission_hash({"nb": b})
    assert submission_hash({"nb": a}) != submission_hash({"other": a})
    b.write_text("two")
    assert submission_hash({"nb": a}) != submission_hash({"nb": b})


def test_submission_layouts_and_left_out_files(tmp_path):
    (tmp_path / "ann" / "a1").mkdir(parents=True)
    (tmp_path / "ann" / "a1" / "nb.ipynb").write_text("{}")
    (tmp_path / "bob").mkdir()
    (tmp_path / "bob" / "nb (1).ipynb").write_text("{}")
    (tmp_path / "bob" / "autograder.py").write_text("")
    (tmp_path / "bob" / "microgpt").mkdir()
    (tmp_path / "bob" / "microgpt" / "__init__.py").write_text("")
    (tmp_path / "cy.ipynb").write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    found = find_submissions(tmp_path, "a1", ["nb"])
    assert sorted(found) == ["ann", "bob", "cy"]
    assert found["ann"][0] == {"nb": tmp_path / "ann" / "a1" / "nb.ipynb"}
    assert found["bob"][0] == {"nb": tmp_path / "bob" / "nb (1).ipynb"}
    assert found["cy"][0] == {"nb": tmp_path / "cy.ipynb"}
    notes = " ".join(found["bob"][1])
    assert "left out 2 file(s)" in notes and "autograder.py" in notes
    # one file per student cannot say which of two notebooks it is
    assert find_submissions(tmp_path, "a1", ["nb", "other"])["cy"][0] == {}


def test_the_runs_own_output_folder_is_not_a_student(tmp_path):
    """`residual-pack grade` run inside the submissions folder writes `runs/...` there:
    that folder is left out, not graded as a student called `runs` (issue #28, trap 7)."""
    from autograder.grading.submissions import find_submissions

    (tmp_path / "ada").mkdir()
    (tmp_path / "ada" / "nb.ipynb").write_text("{}")
    out = tmp_path / "runs" / "grade-A"
    out.mkdir(parents=True)
    assert set(find_submissions(tmp_path, "A", ["nb"], exclude=[out])) == {"ada"}
    assert "runs" in find_submissions(tmp_path, "A", ["nb"])


def test_nbgraders_timestamp_beside_the_notebooks_is_read_not_left_out(tmp_path):
    from autograder.grading.submissions import handed_in_at

    _write(tmp_path / "ann" / "hw" / "nb.ipynb")  # nbgrader's own layout
    _write(tmp_path / "ann" / "hw" / "timestamp.txt", "2026-12-01 18:30:00.000000 UTC\n")
    _write(tmp_path / "bob" / "nb.ipynb")  # a folder per student
    _write(tmp_path / "bob" / "timestamp.txt", "2026-12-01 16:00:00 UTC")
    _write(tmp_path / "cy.ipynb")  # a file per student: the folder is no one's
    _write(tmp_path / "timestamp.txt", "2026-12-01 16:00:00 UTC")
    found = find_submissions(tmp_path, "hw", ["nb"])
    assert found["ann"][1] == [] and found["bob"][1] == []  # not "left out"
    stamps = {s: handed_in_at(files, tmp_path) for s, (files, _) in found.items()}
    assert stamps == {"ann": "2026-12-01 18:30:00.000000 UTC",
                      "bob": "2026-12-01 16:00:00 UTC", "cy": None}


def test_a_linked_or_oversized_timestamp_is_not_read(tmp_path):
    from autograder.grading.submissions import handed_in_at

    elsewhere = _write(tmp_path / "elsewhere.txt", "2026-12-01 16:00:00 UTC")
    nb = _write(tmp_path / "class" / "ann" / "nb.ipynb")
    (nb.parent / "timestamp.txt").symlink_to(elsewhere)
    assert handed_in_at({"nb": nb}, tmp_path / "class") is None
    nb = _write(tmp_path / "class" / "bob" / "nb.ipynb")
    _write(nb.parent / "timestamp.txt", "2026-12-01 16:00:00 UTC" + " " * 1000)
    assert handed_in_at({"nb": nb}, tmp_path / "class") is None


def test_another_hand_in_time_is_another_submission(tmp_path):
    nb = _write(tmp_path / "nb.ipynb")
    plain = submission_hash({"nb": nb})
    assert submission_hash({"nb": nb}, None) == plain
    assert submission_hash({"nb": nb}, "2026-12-01 16:00:00 UTC") != plain


def test_what_nbgraders_exchange_puts_beside_a_submission_is_not_reported(tmp_path,
                                                                          monkeypatch):
    """A class collected through nbgrader's own exchange (release, fetch, submit and
    collect, run here in-process as this user): `nbgrader submit` writes timestamp.txt and
    submission_secret.txt beside the notebooks and `nbgrader collect` keeps both. They
    are the exchange's, not the student's: no "left out" note for every student (issue
    40, item 8), while a file the student did hand in is still named."""
    import logging

    import nbformat
    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from nbgrader.exchange.default import (
        ExchangeCollect,
        ExchangeFetchAssignment,
        ExchangeReleaseAssignment,
        ExchangeSubmit,
    )
    from traitlets.config import Config

    from autograder.compat import read_alembic_head_in_process

    read_alembic_head_in_process()  # collect opens the gradebook: no `alembic` process
    course, home, exchange = tmp_path / "course", tmp_path / "home", tmp_path / "exchange"
    for folder in (course / "release" / "hw", home, exchange):
        folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]),
                   str(course / "release" / "hw" / "nb.ipynb"))

    def run(step, root):
        config = Config()
        config.CourseDirectory.root = str(root)
        config.CourseDirectory.course_id = "c"
        config.CourseDirectory.assignment_id = "hw"
        config.Exchange.root = str(exchange)
        step(coursedir=CourseDirectory(config=config), config=config,
             authenticator=Authenticator(config=config),
             log=logging.getLogger("exchange-test")).start()

    run(ExchangeReleaseAssignment, course)
    monkeypatch.chdir(home)  # the student's side works in the current folder
    run(ExchangeFetchAssignment, home)
    (home / "hw" / "notes.py").write_text("y = 2\n")  # the student's own extra file
    run(ExchangeSubmit, home)
    monkeypatch.chdir(course)
    run(ExchangeCollect, course)
    (student,) = [p.name for p in (course / "submitted").iterdir()]
    collected = course / "submitted" / student / "hw"
    assert {p.name for p in collected.iterdir()} == {
        "nb.ipynb", "notes.py", "timestamp.txt", "submission_secret.txt"}
    files, notes = find_submissions(course / "submitted", "hw", ["nb"])[student]
    assert files == {"nb": collected / "nb.ipynb"}
    assert notes == ["left out 1 file(s) that are not notebooks: notes.py"]


def test_a_notebook_a_folder_too_deep_is_named_not_graded(tmp_path):
    """An instructor's trial: `<student>/extra/<assignment>/<notebook>` was reported as "no
    notebook handed in", naming nothing. The note names the file and where it is read from."""
    _write(tmp_path / "ann" / "extra" / "hw" / "nb.ipynb")
    _write(tmp_path / "ann" / ".ipynb_checkpoints" / "nb-checkpoint.ipynb")
    files, notes = find_submissions(tmp_path, "hw", ["nb"])["ann"]
    assert files == {}
    assert notes == ["not graded, in a folder below ann/: extra/hw/nb.ipynb (a notebook is "
                     "read from <student>/<assignment>/ or <student>/ itself)"], notes
