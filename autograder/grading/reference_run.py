"""The reference run: the instructor's solution, run once per assignment on the grader's
side, to say what every graded check must observe.

Each source notebook (solutions and hidden tests in place) runs the cells a submission runs
while grading (`cells.as_graded`: up to its last graded test cell, without the experiments
tagged `skip-when-grading`; a test that needs one of those fails here, and the grading stops
with the reason) in a kernel of
`autograder.kernel.gradekernel`, as nbgrader runs a submission at grading time (with
`NBGRADER_EXECUTION` set, so the experiments take their small graded configurations; the
library's model answers stay on, as the tests call them to compute what is expected). Its
graded test cells run in the grader against that kernel (`remote`), in their reference
version (`testsource`) and in the `reference` mode (`records`): each check
computes its expected observation, makes sure the solution meets it, and records it with
its tolerances. The records of every test cell are what `judge` compares a student's
observations with.

The solution is the instructor's code, so this kernel is not sandboxed; it runs with a
throwaway HOME and working folder. A solution that fails one of its own checks, or a test
cell that makes no check at all (its verdict would have to come from the kernel), stops
the grading with the reason: nothing can be graded against a broken reference.
"""

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.cells import as_graded, is_autograded_test, nbgrader_meta, skipped_when_grading
from autograder.grading.course import CourseError, notebook_paths, read_notebook
from autograder.grading.testsource import GradedCellError, prepare

__all__ = ["ReferenceError", "run_reference", "reference_records", "fingerprint",
           "cached_reference", "REFERENCE_CACHE_VARIABLE"]

FORMAT = 2  # of the records file; a new format is a new fingerprint


class ReferenceError(CourseError):
    """The reference run could not say what the checks must observe."""


def fingerprint(source_dir: str | os.PathLike[str], assignment: str) -> str:
    """What the reference records depend on: the source notebooks, the code of the packages
    the kernel uses, and this file's format."""
    import importlib.util

    digest = hashlib.sha256(f"{FORMAT} {assignment}".encode())
    for path in notebook_paths(source_dir):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    for package in ("autograder", "microgpt", "torchtrack"):
        # found, not imported: importing torchtrack imports torch (seconds)
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        folder = Path(list(spec.submodule_search_locations)[0])
        for path in sorted(folder.rglob("*.py")):  # subpackages too: autograder.kernel
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    digest.update(Path(__file__).read_bytes())  # how the run is made (grader/, not above)
    return digest.hexdigest()[:20]


def _client_class() -> type[Any]:
    from nbclient import NotebookClient

    class ReferenceClient(NotebookClient):
        """Runs a source notebook; its graded test cells in their reference version."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.replies: dict[str, dict[str, Any]] = {}

        async def async_execute_cell(self, cell: Any, cell_index: int,
                                     execution_count: int | None = None,
                                     store_history: bool = True) -> Any:
            if not (cell.cell_type == "code" and is_autograded_test(cell)):
                return await super().async_execute_cell(cell, cell_index, execution_count,
                                                        store_history)
            grade_id = nbgrader_meta(cell).get("grade_id", "")
            try:
                source = prepare(cell.source)
            except GradedCellError as exc:
                raise ReferenceError(f"test cell {grade_id}: {exc}") from None
            from autograder.grading.remote import graded_cell

            # the kernel's own folder (`runner.ipc_kernel_manager`)
            folder = self.km.folder  # type: ignore[union-attr]
            outcome = await graded_cell(
                lambda: super(ReferenceClient, self).async_execute_cell(
                    cell, cell_index, execution_count, store_history),
                self.kc, grade_id=grade_id, source=source.reference, mode="reference",
                hidden=source.hidden, host_folder=folder, kernel_folder=folder,
                wait=self.timeout or 120)
            error = outcome.error
            self.replies[grade_id] = {
                "status": "ok" if error is None else "error",
                "error": f"{error[0]}: {error[1]}" if error else "",
                "records": outcome.records,
                "hidden": sorted(source.hidden),
            }
            return cell

    return ReferenceClient


def _run_notebook(path: str | os.PathLike[str], assignment: str, timeout: int,
                  workdir: str | os.PathLike[str], to_end: bool = False,
                  ) -> tuple[Any, dict[str, dict[str, Any]]]:
    from autograder.runner import run_notebook

    nb = read_notebook(path)
    if not to_end:
        nb = as_graded(nb)
    # the grader's own environment's graded kernel, with the model answers on: the
    # reference versions of the test cells call them
    env = {"NBGRADER_EXECUTION": "autograde"}
    kernel = [sys.executable, "-m", "autograder.kernel.gradekernel",
              "--IPKernelApp.ignore_cwd=True"]
    client, stopped = run_notebook(nb, workdir, env=env, timeout=timeout, kernel_cmd=kernel,
                                   client_class=_client_class(),
                                   prefix="residual-pack-reference-kernel-")
    if stopped:
        raise ReferenceError(f"{assignment}/{Path(path).name}: the reference run stopped: "
                             f"{stopped}")
    return nb, client.replies


def run_reference(source_dir: str | os.PathLike[str], assignment: str, timeout: int = 120,
                  to_end: bool = False) -> dict[str, Any]:
    """{notebook: {"tests": {grade_id: {"records": [...], "hidden": [...]}}, "skip":
    [grade_id]}} from running the solution as a submission runs (`cells.as_graded`; every
    cell with `to_end`, the same records); "skip" lists the cells tagged
    `skip-when-grading`. Raises ReferenceError when the solution fails one of its own
    checks."""
    out: dict[str, Any] = {}
    problems = []
    with tempfile.TemporaryDirectory(prefix="residual-pack-reference-") as tmp:
        for path in notebook_paths(source_dir):
            nb = read_notebook(path)
            tests: list[Any] = [nbgrader_meta(c).get("grade_id") for c in nb.cells
                     if is_autograded_test(c)]
            try:
                skip = skipped_when_grading(nb)
            except ValueError as exc:
                raise ReferenceError(f"{assignment}/{path.name}: {exc}") from None
            if not tests:
                out[path.stem] = {"tests": {}, "skip": skip}
                continue
            workdir = Path(tmp) / path.stem
            workdir.mkdir()
            try:
                _, replies = _run_notebook(path, assignment, timeout, workdir, to_end)
            except ReferenceError:
                raise
            except Exception as exc:  # noqa: BLE001 (a kernel that would not start, ...)
                raise ReferenceError(f"{assignment}/{path.name}: the reference run failed: "
                                     f"{type(exc).__name__}: {exc}") from None
            cells: dict[str, Any] = {}
            for grade_id in tests:
                reply = replies.get(grade_id)
                if reply is None:
                    problems.append(f"{path.stem}: {grade_id} did not run")
                    continue
                failed = [r["failed"] for r in reply["records"] if "failed" in r]
                if failed or reply["status"] != "ok":
                    why = failed[0] if failed else reply["error"]
                    problems.append(f"{path.stem}: the solution fails {grade_id}: {why}")
                    continue
                if not reply["records"]:
                    problems.append(
                        f"{path.stem}: {grade_id} makes no check (use the checks of "
                        f"autograder.kernel.checks: the grader does not take a kernel's word)")
                    continue
                cells[grade_id] = {"records": reply["records"], "hidden": reply["hidden"]}
            out[path.stem] = {"tests": cells, "skip": skip}
    if problems:
        raise ReferenceError(f"{assignment}: " + "; ".join(problems))
    return out


def reference_records(source_dir: str | os.PathLike[str], assignment: str,
                      cache_dir: str | os.PathLike[str], timeout: int = 120,
                      say: Callable[[str], object] | None = None) -> dict[str, Any]:
    """The reference records of `assignment`, from `cache_dir` when a run with the same
    fingerprint saved them there, else from a new run (then saved)."""
    cache_dir = Path(cache_dir)
    key = fingerprint(source_dir, assignment)
    path = cache_dir / f"reference-{assignment}-{key}.json"
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    if say:
        say(f"{assignment}: running the solution once for the expected observations")
    records = run_reference(source_dir, assignment, timeout)
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(records), encoding="utf-8")
    os.replace(tmp, path)
    return records


# a folder shared by several work courses for the reference runs' records, instead of
# each work course's own `.grading/` (the test suite sets it: one folder per test run)
REFERENCE_CACHE_VARIABLE = "RESIDUAL_PACK_REFERENCE_CACHE"


def cached_reference(course: str | Path, assignment: str, timeout: int,
                     say: Callable[[str], object] | None = None) -> dict[str, Any]:
    """The reference records of `assignment` for the (work) course at `course`: kept in
    its `.grading/`, or in the folder $RESIDUAL_PACK_REFERENCE_CACHE names, where another
    process may be making the same ones: one makes them, the others wait and read them.
    Either way they are run again when the source or the kernel's code changed (the key
    of `fingerprint`)."""
    import fcntl

    shared = os.environ.get(REFERENCE_CACHE_VARIABLE)
    source = Path(course) / "source" / assignment
    if shared:
        folder = Path(shared)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            lock = open(folder / f"reference-{assignment}.lock", "a")  # noqa: SIM115
        except OSError:  # not this user's to write (a grader run as another user)
            lock = None
        if lock is not None:
            with lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                return reference_records(source, assignment, folder, timeout=timeout,
                                         say=say)
    return reference_records(source, assignment, Path(course) / ".grading",
                             timeout=timeout, say=say)
