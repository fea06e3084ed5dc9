"""Ctrl-C during `residual-pack grade` (issue 40, item 8): the run stops at once, says in
one line what was kept and how to resume, prints no traceback, leaves no process behind,
and the same command again resumes it. Run for real: the command in a session of its own,
SIGINT to its process group as a terminal sends it, while a student's notebook runs in the
grading process (one at a time: the case where nbgrader's kernel client takes SIGINT for
itself, shuts that one kernel down and the run went on)."""

import os
import signal
import subprocess
import threading
import time

import nbformat
import pytest
from clusterparts import ASSIGNMENT, BIN, COURSE, children, cli, kill_group, make_class

from autograder.authoring.madeup import filled_in
from autograder.grading.course import EXERCISES, SOURCE, read_notebook

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]

SLOW = 30  # seconds bob's extra cell sleeps: the run is inside it when interrupted


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_stops_at_once_says_what_was_kept_and_the_run_resumes(tmp_path):
    from isolation import require_isolation

    require_isolation()
    release = read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    solution = filled_in(release, read_notebook(COURSE / SOURCE / ASSIGNMENT /
                                                f"{ASSIGNMENT}.ipynb"))
    slow = nbformat.from_dict(solution)
    slow.cells.insert(1, nbformat.v4.new_code_cell(f"import time\ntime.sleep({SLOW})"))
    submissions, out = tmp_path / "class", tmp_path / "out"
    make_class(submissions, {"ann": "solution", "bob": slow, "cy": "solution"})
    command = [*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out), "-j", "1"]
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("RESIDUAL_PACK_DB_URL", None)

    run = subprocess.Popen(command, cwd=COURSE, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, start_new_session=True)
    lines, errors = [], []
    readers = [threading.Thread(target=lambda s=s, into=into: into.extend(s), daemon=True)
               for s, into in ((run.stdout, lines), (run.stderr, errors))]
    for reader in readers:
        reader.start()
    try:
        deadline = time.monotonic() + 600
        while not any(line.startswith("  ann: ") for line in lines):
            assert run.poll() is None, "".join(lines + errors)
            assert time.monotonic() < deadline, "".join(lines + errors)
            time.sleep(0.2)
        time.sleep(3)  # bob's notebook is running, in its sleeping cell
        assert run.poll() is None
        tree = children(run.pid)
        assert tree, "the run has its processes (kernel, sandbox)"
        start = time.monotonic()
        os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in the terminal does
        code = run.wait(timeout=60)
        took = time.monotonic() - start
    finally:
        kill_group(run)
    for reader in readers:
        reader.join(10)
    stdout, stderr = "".join(lines), "".join(errors)
    assert code == 130, stdout + stderr
    assert took < 10, f"{took:.1f} s to stop"
    assert "Traceback" not in stdout + stderr and "KeyboardInterrupt" not in stderr, stderr
    said = [line for line in stderr.splitlines() if line.startswith("residual-pack:")]
    assert said == [f"residual-pack: interrupted: 1 of 3 student(s) graded and kept in {out}; "
                    f"run the same command again to grade the other 2 (--fresh grades "
                    f"everyone again)"], stderr
    assert stderr.rstrip().endswith(said[0])
    assert "bob:" not in stdout and "cy:" not in stdout, stdout  # bob was not taken as done
    time.sleep(1)
    left = [pid for pid in tree if _alive(pid)]
    assert left == [], f"processes of the run still there: {left}"

    again = subprocess.run(command, cwd=COURSE, env=env, capture_output=True, text=True,
                           timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "graded before in this folder" in again.stdout
    assert "1 student(s), not graded again" in again.stdout, again.stdout
    graded = [line for line in again.stdout.splitlines() if line.startswith("  ")
              and line.split(":")[0].strip() in ("ann", "bob", "cy") and "/6 (" in line]
    assert sorted(line.split(":")[0].strip() for line in graded) == ["bob", "cy"], again.stdout
