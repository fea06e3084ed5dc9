"""A class graded into a PostgreSQL gradebook: a private server (Debian's binaries, started
here on 127.0.0.1 and a socket in a temporary folder, password authentication) is
nbgrader's db_url for `residual-pack grade --cluster local`. Only the coordinating
process writes it; the students' kernels never see its credentials: a student who prints
the environment and tries the server's port finds neither.
"""

import csv
import os
import subprocess

import nbformat
import pytest
from clusterparts import (
    ASSIGNMENT,
    BIN,
    COURSE,
    PostgresServer,
    cli,
    make_class,
    require_dask,
    require_postgres,
)

from autograder.authoring.madeup import filled_in
from autograder.grading.course import EXERCISES, SOURCE, read_notebook

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]

SNOOP = """\
import os, socket
print(sorted(os.environ.items()))
for path in ('/proc/1/environ', '/proc/self/environ'):
    try:
        print(path, open(path, 'rb').read())
    except OSError as exc:
        print(path, exc)
s = socket.socket()
s.settimeout(2)
print('port', {port}, s.connect_ex(('127.0.0.1', {port})))
"""


def test_a_class_graded_into_postgresql(tmp_path):
    require_postgres()
    require_dask()
    from isolation import require_isolation

    require_isolation()
    server = PostgresServer()
    try:
        server.start()
        release = read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        source = read_notebook(COURSE / SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        snoop = filled_in(release, source)
        snoop.cells.append(nbformat.v4.new_code_cell(SNOOP.format(port=server.port)))
        submissions, out = tmp_path / "class", tmp_path / "out"
        expected = make_class(submissions, {"ann": "solution", "bob": "stub", "cy": snoop,
                                            "dee": "empty"})
        env = dict(os.environ, RESIDUAL_PACK_DB_URL=server.url())
        run = subprocess.run(
            [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
             "--cluster", "local", "-j", "2"],
            cwd=COURSE, env=env, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout + run.stderr
        assert server.password not in run.stdout + run.stderr

        # the gradebook is the server's: nothing in SQLite, every student there once
        assert not (out / "gradebook.db").exists()
        from nbgrader.api import Gradebook

        with Gradebook(server.url()) as gb:
            assert {s.id for s in gb.students} == set(expected)
            for student, score in expected.items():
                if score is None:
                    with pytest.raises(Exception):  # noqa: B017 (nbgrader's MissingEntry)
                        gb.find_submission(ASSIGNMENT, student)
                    continue
                sub = gb.find_submission(ASSIGNMENT, student)
                auto = sum(g.auto_score or 0 for nb in sub.notebooks for g in nb.grades)
                assert auto == score, (student, auto, run.stdout)
            assert len(gb.assignment_submissions(ASSIGNMENT)) == 3

        # the snooping student ran, and saw no credential
        graded = (out / "autograded" / "cy" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
        assert "port" in graded and "'PATH'" in graded
        for path in out.rglob("*"):
            if path.is_file() and path.suffix in (".ipynb", ".html", ".txt", ".json", ".csv"):
                text = path.read_text(errors="replace")
                assert server.password not in text, path
                assert "postgresql" not in text, path
    finally:
        server.stop()


def test_nbgrader_run_in_the_output_folder_reads_the_postgresql_gradebook(tmp_path):
    """Issue #28, trap 3: after `residual-pack grade` into PostgreSQL, `nbgrader db student
    list` and `nbgrader export` run from --out (as formgrader would be) see the class; the
    password is not in the folder's config, but comes from $RESIDUAL_PACK_DB_URL or from
    libpq's $PGPASSWORD."""
    require_postgres()
    from isolation import require_isolation

    require_isolation()
    server = PostgresServer()
    try:
        server.start()
        submissions, out = tmp_path / "class", tmp_path / "out"
        make_class(submissions, {"ann": "solution", "bob": "stub"})
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # as in an activated venv
        run = subprocess.run(
            [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out), "-j", "1"],
            cwd=COURSE, env=dict(env, RESIDUAL_PACK_DB_URL=server.url()),
            capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, run.stdout + run.stderr
        config = (out / "nbgrader_config.py").read_text()
        assert server.password not in config

        nbgrader = str(BIN / "nbgrader")
        for given in ({"RESIDUAL_PACK_DB_URL": server.url()}, {"PGPASSWORD": server.password}):
            listed = subprocess.run([nbgrader, "db", "student", "list"], cwd=out,
                                    env=dict(env, **given), capture_output=True, text=True,
                                    timeout=120)
            assert listed.returncode == 0, listed.stdout + listed.stderr
            text = listed.stdout + listed.stderr
            assert "There are 2 students in the database" in text, (given.keys(), text)
            assert "ann (None, None)" in text and "bob (None, None)" in text, text
        assert not (out / "gradebook.db").exists()  # nbgrader made no SQLite one here

        exported = subprocess.run([nbgrader, "export", "--to", "exported.csv"], cwd=out,
                                  env=dict(env, PGPASSWORD=server.password),
                                  capture_output=True, text=True, timeout=120)
        assert exported.returncode == 0, exported.stdout + exported.stderr
        rows = {r["student_id"]: r for r in csv.DictReader(open(out / "exported.csv"))}
        assert {s: float(r["score"]) for s, r in rows.items()} == {"ann": 6.0, "bob": 0.0}
    finally:
        server.stop()
