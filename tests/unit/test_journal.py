"""autograder/grading/journal.py: a killed run resumes from its journal, a changed run does not."""

from types import SimpleNamespace

from autograder.grading.journal import Journal, run_fingerprint
from autograder.grading.student import CellScore, StudentResult
from autograder.sandbox.limits import Limits

HEADER = {"assignment": "hw", "fingerprint": "abc"}


def _result(student, score=1.0):
    return StudentResult(student, graded=True, cells=[CellScore("nb", "t", score, 2.0, True)],
                         notes=["a note"])


def test_what_was_appended_is_read_back(tmp_path):
    journal = Journal(tmp_path, HEADER)
    journal.start()
    journal.append(_result("ann"), "h1")
    journal.append(_result("bob", 2.0), "h2")
    again = Journal(tmp_path, HEADER)
    assert again.load()
    assert set(again.done) == {"ann", "bob"}
    digest, result = again.done["bob"]
    assert digest == "h2" and result.score() == (2.0, 2.0) and result.notes == ["a note"]


def test_a_line_cut_short_by_the_kill_is_dropped(tmp_path):
    journal = Journal(tmp_path, HEADER)
    journal.start()
    journal.append(_result("ann"), "h1")
    with open(journal.path, "a", encoding="utf-8") as f:
        f.write('{"student": "bob", "ha')  # the kill came here
    again = Journal(tmp_path, HEADER)
    assert again.load() and set(again.done) == {"ann"}
    assert journal.path.read_text(encoding="utf-8").endswith("\n")


def test_another_runs_journal_is_not_resumed(tmp_path):
    journal = Journal(tmp_path, HEADER)
    journal.start()
    journal.append(_result("ann"), "h1")
    other = Journal(tmp_path, HEADER | {"fingerprint": "changed"})
    assert not other.load() and other.done == {}
    assert not Journal(tmp_path / "none", HEADER).load()


def test_the_fingerprint_follows_the_source_limits_and_level(tmp_path):
    source = tmp_path / "source" / "hw"
    source.mkdir(parents=True)
    (source / "nb.ipynb").write_text("one")
    box = SimpleNamespace(limits=Limits(), level="namespaces")
    first = run_fingerprint(tmp_path, "hw", box)
    assert first == run_fingerprint(tmp_path, "hw", box)
    assert first != run_fingerprint(tmp_path, "hw", SimpleNamespace(
        limits=Limits(notebook_timeout=60), level="namespaces"))
    assert first != run_fingerprint(tmp_path, "hw", SimpleNamespace(
        limits=Limits(), level="limits"))
    assert first != run_fingerprint(tmp_path, "hw", None)
    (source / "nb.ipynb").write_text("two")
    assert first != run_fingerprint(tmp_path, "hw", box)


def test_a_run_is_not_resumed_into_another_gradebook(tmp_path):
    """Graded into PostgreSQL, then the same command without the database URL: the run
    stops and says which gradebook it wrote, rather than leave an empty SQLite gradebook
    and a grades.csv with only its header (issue #28, trap 2)."""
    import pytest

    from autograder.grading.classrun import gradebook_name
    from autograder.grading.course import CourseError
    from autograder.grading.journal import Journal

    postgres = gradebook_name("postgresql+psycopg2://grader:secret@db.example/course")
    assert "secret" not in postgres and "db.example/course" in postgres
    first = Journal(tmp_path, {"assignment": "A", "gradebook": postgres})
    first.start()
    with open(first.path, "a", encoding="utf-8") as f:
        f.write('{"student": "ada", "hash": "h", "result": {}}\n')
    again = Journal(tmp_path, {"assignment": "A", "gradebook": gradebook_name(None)})
    with pytest.raises(CourseError, match="--db-url"):
        again.load()
    same = Journal(tmp_path, {"assignment": "A", "gradebook": postgres})
    assert same.load()
