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

While it is graded, the grading processes log the fingerprint of every failing check
they judge (`diagnosis.RECORD_VARIABLE`, the log `residual-pack fingerprints` reads from a
student's kernel; in the grader, `judge` compares with the same `compare` and `diagnose`):
`graded_outcomes` reads the class back as each submission's visible tests would run in a
student's kernel, with that log, for `test_diagnosis.py`.

Read by `test_pipeline.py` (`test_selfcheck_passes`,
`test_selfcheck_leaves_out_only_the_courses_cells_that_cannot_change_a_score`),
`tests/hostile/test_hostile_every_assignment.py` (`test_attacks_on_the_verdict_earn_nothing`)
and `tests/integration/test_diagnosis.py`
(`test_every_mutant_a_visible_test_catches_is_named_when_graded`).
"""

import fcntl
import json
import os
import pickle
import re
import shutil
from pathlib import Path

import nbformat
from isolation import sandbox_level

from autograder.authoring.madeup import filled_in
from autograder.cells import nbgrader_meta
from autograder.grading.course import EXERCISES, SOURCE, notebook_paths, read_notebook
from autograder.kernel import diagnosis

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
            log = _log_path(workdir)
            log.unlink(missing_ok=True)
            before = os.environ.get(diagnosis.RECORD_VARIABLE)
            os.environ[diagnosis.RECORD_VARIABLE] = str(log)  # the grading processes' too
            try:
                [check] = selfcheck(COURSE, [assignment], workdir=workdir, jobs=JOBS,
                                    extra=extra)
            finally:
                if before is None:
                    os.environ.pop(diagnosis.RECORD_VARIABLE, None)
                else:
                    os.environ[diagnosis.RECORD_VARIABLE] = before
            kept.write_bytes(pickle.dumps(check))
    _IN_THIS_PROCESS[assignment] = check, workdir
    return _IN_THIS_PROCESS[assignment]


def _log_path(workdir: Path) -> Path:
    """The fingerprint log of the class graded in `workdir` (beside it)."""
    return workdir.parent / f"{workdir.name}.fingerprints.jsonl"


def _tasks_of_test_cells(assignment: str) -> dict:
    """{grade_id: the task ids its `with task("...")` names} of the source's test cells."""
    tasks = {}
    for path in notebook_paths(COURSE / SOURCE / assignment):
        for cell in read_notebook(path).cells:
            grade_id = nbgrader_meta(cell).get("grade_id")
            if grade_id:
                tasks[grade_id] = set(re.findall(r'task\("([^"]+)"\)', cell.source))
    return tasks


def graded_outcomes(assignment: str, tmp_path_factory) -> tuple:
    """(the solution's `fingerprints.Run`, [`fingerprints.Outcome`] of the registered wrong
    answers, the names of those set apart because they `needs_a_model_answer`) of the
    graded class of `assignment`, each submission as its visible tests would end in a
    student's kernel (`fingerprints.graded_run`). Each failing cell's
    fingerprint is the logged record with its error (one log for the class: an error
    raised in the student's code is matched within the cell's task too, as its
    fingerprint names the task)."""
    from autograder.answers import mutants as mutant_registry
    from autograder.authoring.fingerprints import Outcome, graded_run, needs_a_model_answer

    check, workdir = graded_class(assignment, tmp_path_factory)
    log = _log_path(workdir)
    records = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()
               if line.strip()] if log.is_file() else []
    tasks = _tasks_of_test_cells(assignment)
    registered = {m.name: m for m in mutant_registry.load(assignment)}
    solution, outcomes, apart = None, [], []
    for result in check.results:
        label = check.labels[result.student]
        run = graded_run(result, workdir)
        if result.student == "solution":
            solution = run
        if not label.startswith("mutant: "):
            continue
        mutant = registered[label[len("mutant: "):]]
        if needs_a_model_answer(result):
            apart.append(mutant.name)
            continue
        outcome = Outcome(mutant, run)
        for grade_id, message in outcome.failing.items():
            record = next((r for r in records if r.get("error") == message and (
                r.get("kind") != diagnosis.RAISED or r.get("what") in tasks.get(grade_id, ()))),
                None)
            if record is None:
                outcome.unnamed[grade_id] = message
                continue
            run.records.append(record)  # the table's `fails` reads each failing check's
            if record.get("exact", True) is False:
                outcome.training[grade_id] = message
            else:
                outcome.keys[grade_id] = record["key"]
                outcome.fine[grade_id] = record.get("fine")
        outcomes.append(outcome)
    return solution, outcomes, sorted(apart)
