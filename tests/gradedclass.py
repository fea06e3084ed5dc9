"""One graded class per assignment per test run, read by several test files.

`graded_class(assignment, tmp_path_factory)` is the self-check of the assignment
(`autograder.authoring.selfcheck`: the solution, the untouched stub and every registered
mutant, graded in the sandbox under the real nbgrader) with the two attacks on the verdict
of `tests/hostile/test_hostile_every_assignment.py` (`hostile-forger`,
`hostile-machinery`) graded in the same class, where the sandbox isolates fully (root)
and the full hostile class does not already cover the assignment (`FIRST`). It is graded
once per run: the first test process that asks grades it under a lock and keeps it
(pickled, with its work folder) in the run's tmp folder, shared by the xdist workers of
the run; the others wait for it and read it. tests/conftest.py puts the tests that read
it in one scheduling unit per assignment, so that they seldom wait.

Read by `test_pipeline.py` (`test_selfcheck_passes`,
`test_selfcheck_leaves_out_only_the_courses_cells_that_cannot_change_a_score`) and
`tests/hostile/test_hostile_every_assignment.py` (`test_attacks_on_the_verdict_earn_nothing`).
"""

import fcntl
import os
import pickle
import shutil
from pathlib import Path

import nbformat
from isolation import sandbox_level

from autograder.authoring.madeup import filled_in
from autograder.cells import nbgrader_meta
from autograder.grading.course import EXERCISES, SOURCE, notebook_paths, read_notebook

COURSE = Path(__file__).resolve().parents[1]
FIRST = "01_residual_stack"  # tests/hostile's full class covers it
JOBS = 2  # submissions graded at a time

FORGER = '''import sys

def _blank(*args, **kwargs):
    return None

for _name in ("autograder.kernel.checks", "autograder.kernel.gptchecks",
              "autograder.kernel.torchchecks", "autograder.kernel.witness"):
    try:
        __import__(_name)
    except Exception:
        continue
    for _key, _f in list(vars(sys.modules[_name]).items()):
        if callable(_f) and hasattr(_f, "__code__") and (
                _key.startswith(("check_", "observe")) or _key == "settle"):
            try:
                _f.__code__ = _blank.__code__
            except Exception:
                pass
try:
    from autograder.kernel.checks import task
    task.__exit__ = lambda self, *args: True
except Exception:
    pass
print("Every check in this cell passed.")
'''

MACHINERY = '''import json
_kernel = get_ipython().kernel
_real = _kernel.do_execute
_MARK = "#%residual-pack graded test "

async def _fake(code, silent, *args, **kwargs):
    if not code.startswith(_MARK):
        return await _real(code, silent, *args, **kwargs)
    head, _, body = code.partition("\\n")
    header = json.loads(head[len(_MARK):])
    records = [{"line": i, "kind": "number", "observed": {"number": 1.0}}
               for i, line in enumerate(body.splitlines(), 1) if "check_" in line]
    return {"status": "ok", "execution_count": 1, "user_expressions": {}, "payload": [],
            "residual_pack": {"grade_id": header.get("grade_id"),
                              "nonce": header.get("nonce"), "records": records,
                              "restored": [], "changed": []}}

_kernel.do_execute = _fake
'''
# the students of the attacks, as the self-check's class names them
HOSTILE = {"forger": "hostile-forger", "machinery": "hostile-machinery"}


def has_autograded_cells(name: str) -> bool:
    for path in notebook_paths(COURSE / SOURCE / name):
        for cell in read_notebook(path).cells:
            if nbgrader_meta(cell).get("grade") and cell.cell_type == "code":
                return True
    return False


def with_own_cell(nb, source: str):
    """`nb` with a code cell of the student's own after its first code cell."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=nbformat.NO_CONVERT)  # a copy
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells.insert(first + 1, nbformat.v4.new_code_cell(source))
    return nb


def attack_class(name: str) -> dict:
    """{forger, machinery, honest: notebook} for the (one-notebook) assignment `name`."""
    [release_path] = notebook_paths(COURSE / EXERCISES / name)
    [source_path] = notebook_paths(COURSE / SOURCE / name)
    release, source = read_notebook(release_path), read_notebook(source_path)
    return {"forger": with_own_cell(release, FORGER),
            "machinery": with_own_cell(release, MACHINERY),
            "honest": filled_in(release, source)}


def attacks_graded_with(name: str) -> bool:
    """Whether the class of `name` holds the attacks on the verdict."""
    return name != FIRST and sandbox_level().root and has_autograded_cells(name)


def _run_folder(tmp_path_factory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' folders share a parent
        base = base.parent
    return base / "graded-classes"


_IN_THIS_PROCESS: dict = {}


def graded_class(assignment: str, tmp_path_factory):
    """(the AssignmentCheck, its work folder) of `assignment`, graded once per run."""
    from autograder.authoring.selfcheck import selfcheck

    if assignment in _IN_THIS_PROCESS:
        return _IN_THIS_PROCESS[assignment]
    folder = _run_folder(tmp_path_factory)
    folder.mkdir(parents=True, exist_ok=True)
    kept, workdir = folder / f"{assignment}.pickle", folder / assignment
    with open(folder / f"{assignment}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if kept.is_file():
            check = pickle.loads(kept.read_bytes())
        else:
            extra = None
            if attacks_graded_with(assignment):
                [release_path] = notebook_paths(COURSE / EXERCISES / assignment)
                attacks = attack_class(assignment)
                extra = {assignment: {student: {release_path.stem: attacks[kind]}
                                      for kind, student in HOSTILE.items()}}
            shutil.rmtree(workdir, ignore_errors=True)  # what a failed attempt left
            [check] = selfcheck(COURSE, [assignment], workdir=workdir, jobs=JOBS, extra=extra)
            kept.write_bytes(pickle.dumps(check))
    _IN_THIS_PROCESS[assignment] = check, workdir
    return _IN_THIS_PROCESS[assignment]
