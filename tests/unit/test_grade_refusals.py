"""`residual-pack grade` given what cannot be graded (issue 40, item 8): it is refused
before anything is printed or made (no isolation banner, no course folder left in --out),
in one line that says what is wrong, never with a traceback or with every student "not
graded" for a reason that hides the cause."""

import os
from pathlib import Path

import nbformat
import pytest

from autograder import cli

REPO = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_residual_stack"


def _grade(capsys, *args):
    """(exit status, stdout, stderr) of `residual-pack grade --course REPO ASSIGNMENT
    ARGS...`, run in this process."""
    try:
        code = cli.main(["grade", "--course", str(REPO), *args])
    except SystemExit as exc:  # argparse's refusals
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def a_class(tmp_path):
    """One student folder with a notebook of the assignment (the release)."""
    folder = tmp_path / "class" / "ann"
    folder.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(), str(folder / f"{ASSIGNMENT}.ipynb"))
    return folder.parent


@pytest.fixture(autouse=True)
def _no_gradebook_from_the_environment(monkeypatch):
    monkeypatch.delenv("RESIDUAL_PACK_DB_URL", raising=False)


def _refused(capsys, out, *args, says):
    code, stdout, stderr = _grade(capsys, *args, "--out", str(out))
    assert code == 2, (stdout, stderr)
    assert stdout == "", "nothing is printed before the refusal (no banner)"
    assert says in stderr and "Traceback" not in stderr, stderr
    assert len(stderr.strip().splitlines()) == 1 or stderr.startswith("usage:"), stderr
    assert not out.exists(), "no course folder is left behind"
    return stderr


def test_a_submissions_folder_that_does_not_exist(capsys, tmp_path):
    _refused(capsys, tmp_path / "out", ASSIGNMENT, str(tmp_path / "nope"),
             says=f"the submissions folder {tmp_path / 'nope'} does not exist")


def test_a_file_an_empty_folder_or_no_notebook_of_the_assignment(capsys, tmp_path):
    (tmp_path / "afile").write_text("x")
    _refused(capsys, tmp_path / "out", ASSIGNMENT, str(tmp_path / "afile"),
             says="is a file, not a folder of submissions")
    (tmp_path / "empty").mkdir()
    _refused(capsys, tmp_path / "out", ASSIGNMENT, str(tmp_path / "empty"),
             says=f"no submissions in {tmp_path / 'empty'}: it holds no student folder")
    (tmp_path / "other" / "bob" / "02_degradation").mkdir(parents=True)  # another's layout
    _refused(capsys, tmp_path / "out", ASSIGNMENT, str(tmp_path / "other"),
             says=f"no notebook of {ASSIGNMENT} ({ASSIGNMENT}.ipynb) in")


def test_an_out_that_is_a_file_or_someone_elses_folder(capsys, tmp_path, a_class):
    (tmp_path / "afile").write_text("x")
    code, stdout, stderr = _grade(capsys, ASSIGNMENT, str(a_class), "--out",
                                  str(tmp_path / "afile"))
    assert (code, stdout) == (2, "") and "is a file, not a folder" in stderr, stderr
    assert (tmp_path / "afile").read_text() == "x"
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("x")
    code, stdout, stderr = _grade(capsys, ASSIGNMENT, str(a_class), "--out",
                                  str(tmp_path / "mine"))
    assert (code, stdout) == (2, "") and "not an earlier grading run" in stderr, stderr
    assert [p.name for p in (tmp_path / "mine").iterdir()] == ["thesis.tex"]


@pytest.mark.parametrize("args, says", [
    (["--duedate", "tomorrowish"], "the due date 'tomorrowish' is not a date nbgrader reads"),
    (["--db-url", "foo://bar"], "the gradebook foo://bar cannot be used"),
    (["--db-url", "postgresql://me:secret@db.example/course"],
     "the gradebook postgresql://me:***@db.example/course needs the Python module psycopg"),
    (["-j", "0"], "--jobs 0: grade at least one submission at a time"),
    (["--memory", "5"], "argument --memory: 5 is less than 64"),
    (["--processes", "2"], "argument --processes: 2 is less than 16"),
    (["--notebook-timeout", "0"], "argument --notebook-timeout: 0 is less than 1"),
    (["--cpus", "-1"], "argument --cpus: -1 is less than 0"),
])
def test_options_that_would_fail_every_student(capsys, tmp_path, a_class, args, says):
    stderr = _refused(capsys, tmp_path / "out", ASSIGNMENT, str(a_class), *args, says=says)
    assert "secret" not in stderr


def test_a_cluster_that_is_no_address(capsys, tmp_path, a_class):
    pytest.importorskip("distributed")
    _refused(capsys, tmp_path / "out", ASSIGNMENT, str(a_class), "--cluster", "foo",
             says="--cluster 'foo' is neither 'local' nor a scheduler's address")


def test_an_out_the_user_cannot_write(tmp_path, a_class):
    """As a user who may not write there (root may write anywhere: the check runs in a
    child that has become `nobody`)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    import pwd
    import tempfile

    from autograder.grading.classrun import check_run
    from autograder.grading.course import CourseError

    shared = Path(tempfile.mkdtemp(prefix="refusal-"))  # readable by others, unlike tmp_path
    try:
        (shared / "class").mkdir()
        os.rename(a_class / "ann", shared / "class" / "ann")
        (shared / "locked").mkdir(mode=0o555)
        for path in (shared, shared / "class", shared / "class" / "ann"):
            path.chmod(0o755)
        (shared / "class" / "ann" / f"{ASSIGNMENT}.ipynb").chmod(0o644)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read)
            said = b"not refused"
            try:
                os.setuid(pwd.getpwnam("nobody").pw_uid)
                check_run(REPO, ASSIGNMENT, shared / "class", shared / "locked" / "out")
            except CourseError as exc:
                said = str(exc).encode()
            except BaseException as exc:  # noqa: BLE001
                said = repr(exc).encode()
            os.write(write, said)
            os._exit(0)
        os.close(write)
        os.waitpid(pid, 0)
        with os.fdopen(read, "rb") as f:
            said = f.read().decode()
        assert said == (f"cannot write the output folder {shared / 'locked' / 'out'}: "
                        f"{shared / 'locked'} is not writable by this user; pick another "
                        f"--out"), said
        assert not (shared / "locked" / "out").exists()
    finally:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


@pytest.mark.parametrize("args, says", [
    (["--mutant", "nosuchmutant"], "--mutant 'nosuchmutant': no mutant of 01_residual_stack "
                                   "has that in its name (they are: "),
    (["-j", "0"], "--jobs 0: grade at least one submission at a time"),
])
def test_a_selfcheck_that_would_check_nothing_asked_for_is_refused(capsys, args, says):
    """An instructor's trial: a mistyped --mutant graded only the solution and the stub, and
    printed "self-check passed"; -j 0 was taken."""
    try:
        code = cli.main(["selfcheck", "--course", str(REPO), ASSIGNMENT, *args])
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    assert (code, out.out) == (2, ""), out
    assert says in out.err, out.err
