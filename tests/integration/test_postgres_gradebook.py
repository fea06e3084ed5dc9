"""A class graded into a PostgreSQL gradebook: a private server (Debian's binaries, started
here on 127.0.0.1 and a socket in a temporary folder, password authentication) is
nbgrader's db_url for `residual-pack grade --cluster local`. Only the coordinating
process writes it; the students' kernels never see its credentials: a student who prints
the environment and tries the server's port finds neither.
"""

import os
import subprocess

import nbformat
import pytest
from clusterparts import (
    ASSIGNMENT,
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
