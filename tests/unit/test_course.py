"""The work course's own nbgrader_config.py names the gradebook the run wrote (issue #28,
trap 3): nbgrader's commands and formgrader run from `--out` then read that gradebook, and
no password is written into the file."""

from pathlib import Path

import pytest

from autograder.grading.course import CONFIG_FILE, WorkCourse

COURSE = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_residual_stack"
DB_URL_VARIABLE = "RESIDUAL_PACK_DB_URL"
SERVER = "postgresql+psycopg2://grader:{}@127.0.0.1:5999/gradebook"


def db_url_read_there(folder):
    """CourseDirectory.db_url as nbgrader reads it from `folder`'s config (None: unset)."""
    from traitlets.config.loader import PyFileConfigLoader

    cfg = PyFileConfigLoader(CONFIG_FILE, path=str(folder)).load_config()
    return cfg.CourseDirectory.get("db_url")


@pytest.fixture
def with_postgres(tmp_path, monkeypatch):
    monkeypatch.delenv(DB_URL_VARIABLE, raising=False)
    WorkCourse(COURSE, tmp_path, [ASSIGNMENT], db_url=SERVER.format("s3cret-pw"))
    return tmp_path


def test_the_config_names_the_gradebook_without_its_password(with_postgres):
    assert "s3cret-pw" not in (with_postgres / CONFIG_FILE).read_text()
    assert db_url_read_there(with_postgres) == \
        "postgresql+psycopg2://grader@127.0.0.1:5999/gradebook"


def test_the_password_comes_from_the_variable_when_it_names_that_gradebook(
        with_postgres, monkeypatch):
    monkeypatch.setenv(DB_URL_VARIABLE, SERVER.format("s3cret-pw"))
    assert db_url_read_there(with_postgres) == SERVER.format("s3cret-pw")


def test_a_variable_naming_another_gradebook_is_not_used(with_postgres, monkeypatch):
    monkeypatch.setenv(DB_URL_VARIABLE, SERVER.format("pw").replace("/gradebook", "/other"))
    assert db_url_read_there(with_postgres) == \
        "postgresql+psycopg2://grader@127.0.0.1:5999/gradebook"
    monkeypatch.setenv(DB_URL_VARIABLE, "not a url")
    assert db_url_read_there(with_postgres) == \
        "postgresql+psycopg2://grader@127.0.0.1:5999/gradebook"


def test_without_a_gradebook_given_nbgrader_keeps_its_default(tmp_path):
    WorkCourse(COURSE, tmp_path, [ASSIGNMENT])
    assert db_url_read_there(tmp_path) is None  # nbgrader's: gradebook.db in the folder
