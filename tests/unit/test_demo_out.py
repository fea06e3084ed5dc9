"""`residual-pack demo --out DIR` takes a new or empty folder, or an earlier demo's, and
refuses any other: an instructor's trial pointed it at a folder whose submissions/ held a
student's work, and the demo deleted it to write its own class there."""

from pathlib import Path

import pytest

from autograder.authoring.demo import run_demo
from autograder.authoring.madeup import DEMO_STUDENTS
from autograder.grading.course import CourseError

COURSE = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("made", ["someones-submissions", "other-files", "a-file"])
def test_a_folder_that_is_not_an_earlier_demos_is_refused_and_kept(tmp_path, made):
    out = tmp_path / "out"
    if made == "a-file":
        out.write_text("notes", encoding="utf-8")
        kept = {out: "notes"}
    else:
        work = out / "submissions" / "alice" / "01_residual_stack" / "work.ipynb"
        if made == "other-files":
            work = out / "grades-of-last-year.csv"
        work.parent.mkdir(parents=True)
        work.write_text("{}", encoding="utf-8")
        kept = {work: "{}"}
    with pytest.raises(CourseError, match="--out|not an earlier demo's folder"):
        run_demo(COURSE, out=out)
    assert {p: p.read_text(encoding="utf-8") for p in kept} == kept


def test_an_earlier_demos_folder_is_taken(tmp_path, monkeypatch):
    """An earlier demo's folder (its course and its three students) passes the check: the
    run goes on to grade (stopped here, where it would start, to stay fast)."""
    from autograder.authoring import demo

    out = tmp_path / "out"
    for student in DEMO_STUDENTS:
        (out / "submissions" / student).mkdir(parents=True)
    (out / "course").mkdir()

    class Reached(Exception):
        pass

    def stop(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(demo, "prepare_out", stop)
    with pytest.raises(Reached):
        run_demo(COURSE, out=out)
