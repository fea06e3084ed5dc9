"""A grading run killed with SIGKILL leaves no process behind, whenever it is killed.

`residual-pack grade` starts, in turn: the reference run (a kernel of the instructor's
solution), worker processes, and per student a kernel in bubblewrap. Each of them
must notice when the process above it dies, even if that happened before it started: the
run is killed here (the coordinating process alone, the worst case: its children are not
signalled) at several moments, and every process the run started must be gone a few
seconds later. A new run then clears what is left on disk.
"""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile import ASSIGNMENT, Context, build_class  # noqa: F401 (the class's notebooks)

from autograder.authoring.madeup import filled_in
from autograder.grading.course import EXERCISES, SOURCE, read_notebook
from autograder.sandbox import bubblewrap

COURSE = Path(__file__).resolve().parents[2]
VENV = str(Path(sys.executable).parent)  # this checkout's Python: its processes only
BWRAP = shutil.which("bwrap") or "/usr/bin/bwrap"
INSIDE = bubblewrap.PYTHON  # the kernel's Python as bubblewrap shows it
pytestmark = [pytest.mark.slow,
              pytest.mark.alone,  # counts every process of this checkout's Python
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]


def _ours(before):
    """Processes of the pack's grading (kernels, workers) not running before."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in before:
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if args.startswith(BWRAP) or args.startswith(INSIDE):
            # a kernel in bubblewrap (bwrap and the Python it runs, at the sandbox's own
            # paths): `alone` tests run by themselves, so every one is this run's
            found[int(entry.name)] = args[:200]
            continue
        if not args.startswith(VENV):  # another checkout's run on the same machine
            continue
        if "autograder." in args or "residual-pack" in args or "multiprocessing" in args:
            found[int(entry.name)] = args[:200]
    return found


def _kernels(before):
    """Kernels being started or running in bubblewrap."""
    return _processes(f"{INSIDE} -m autograder.kernel.gradekernel", before)


def _wait_for(predicate, within):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def _class(folder):
    release = read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    source = read_notebook(COURSE / SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    import nbformat

    solution = filled_in(release, source)
    for student in ("ann", "bob", "cy", "dee", "eve", "fay", "gus"):
        path = folder / student / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(solution, str(path))


def _processes(pattern, before):
    return [p for p, args in _ours(before).items() if pattern in args]


MOMENTS = {
    # while the reference run's kernel runs (no student kernel yet)
    "reference run": lambda before: bool(_processes("autograder.kernel.gradekernel", before)),
    # the moment a student's kernel exists (it is being started)
    "kernel start": lambda before: bool(_kernels(before)),
    # a kernel has been running for a while (a notebook is being graded)
    "mid-notebook": lambda before: len(_kernels(before)) >= 2,
}


@pytest.mark.parametrize("moment", sorted(MOMENTS))
def test_a_killed_run_leaves_no_process(tmp_path, moment):
    from isolation import cli, require_isolation

    require_isolation()
    submissions, out = tmp_path / "s", tmp_path / "out"
    _class(submissions)
    before = set(_ours(set()))
    run = subprocess.Popen([*cli(), "grade", ASSIGNMENT, str(submissions), "--out", str(out),
                            "-j", "2"], cwd=COURSE, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        reached = _wait_for(lambda: MOMENTS[moment](before), 240)
        assert reached, f"the run never reached the moment {moment!r}"
        if moment == "mid-notebook":
            time.sleep(1.0)
        os.kill(run.pid, signal.SIGKILL)  # the coordinator only: its children live on
        run.wait(10)
        gone = _wait_for(lambda: not _ours(before), 20)
        assert gone, f"still running 20 s after the kill at {moment!r}: {_ours(before)}"
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
        for pid in _ours(before):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_a_new_run_clears_what_a_killed_one_left(tmp_path):
    from isolation import require_isolation

    from autograder.grading.plan import Sandbox, remove_stale_roots

    require_isolation()
    # a run whose grading process is gone: its root, with a kernel's folder in it (the
    # mounts and cgroups of its kernels: tests/sandbox/test_bwrap_lifetime.py)
    helper = subprocess.run([sys.executable, "-c", (
        "from autograder.grading.plan import Sandbox; b = Sandbox(); "
        "b.plan('x'); print(b.root)")], capture_output=True, text=True,
        timeout=120, cwd=COURSE)
    root = Path(helper.stdout.strip().splitlines()[-1])
    assert root.is_dir() and list(root.glob("b-*/c")), helper.stderr
    remove_stale_roots()
    assert not root.exists()
    del Sandbox
