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


def test_a_resumed_run_says_one_count_and_names_the_changed_submissions(tmp_path, monkeypatch):
    """Trap 7 of issue #28: a resumed run said "N not graded again" from the journal, then
    "M already graded" from the class, and the two differed when a submission had changed
    since. Now one line says both: unchanged (not graded again) and handed in anew."""
    import nbformat

    from autograder.grading import classrun

    submissions = tmp_path / "submitted"
    for student in ("ann", "bob", "cy"):
        folder = submissions / student / "hw"
        folder.mkdir(parents=True)
        nbformat.write(nbformat.v4.new_notebook(), folder / "hw.ipynb")
    first = Journal(tmp_path / "out", HEADER)
    first.start()
    for student in ("ann", "bob"):
        nbs, _ = classrun.find_submissions(submissions, "hw", ["hw"])[student]
        digest = classrun.submission_hash(nbs, classrun.handed_in_at(nbs, submissions))
        first.append(_result(student), digest)
    # bob hands in again after the first run
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, submissions / "bob" / "hw" / "hw.ipynb")

    graded = []
    monkeypatch.setattr(classrun, "grade_all", lambda grader, todo, **kw: (
        graded.extend(todo) or [StudentResult(s, graded=False) for s in todo]))
    grader = SimpleNamespace(assignment="hw", notebooks=["hw"],
                             submit=lambda *a, **k: None, export_csv=lambda path: path,
                             work=SimpleNamespace(path=lambda name: tmp_path / name))
    journal = Journal(tmp_path / "out", HEADER)
    assert journal.load()
    said = []
    results, _ = classrun.grade_folder(grader, submissions, journal=journal, say=said.append)
    assert sorted(graded) == ["bob", "cy"]
    assert [r.student for r in results] == ["ann", "bob", "cy"]
    assert said == ["graded before in this folder (same assignment, sources, limits and "
                    "gradebook): 1 student(s), not graded again: their submission is "
                    "unchanged; 1 handed in anew since: graded again (--fresh grades "
                    "everyone again)"]
