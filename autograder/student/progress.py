"""A student's progress: the visible tests of every notebook they have, task by task.

`residual-pack progress [FOLDER]` runs each assignment notebook under FOLDER (default:
`exercises/` of the course, or the folder itself when it holds notebooks) top to bottom
in a fresh kernel, as saved on disk, and prints per assignment and graded test cell:
passed, failing (with the check's message), not started (the task still raises
`NotImplementedError`) or not run, with the cell's points. It runs what the student's
notebook holds, so it never runs a hidden test (the released notebooks have none), and it
runs the experiments at their graded sizes (`NBGRADER_EXECUTION=validate`, as nbgrader's
Validate does), so a whole course takes minutes, not hours.

Two kinds of task are listed without a run: the written answers (graded by hand: "to
write" while the cell still holds its stub), and, where torch is not installed, the tasks
of the optional torch track ("needs the torch extra"; that notebook is not run).

What makes it quick: each notebook runs only up to its last visible test (the cells after
it cannot change a test's result), two notebooks at a time (`jobs`), and a notebook whose
cells up to that test, folder and code (the engine, the checks, the torch track) are the
same as at an earlier run is not run again: its result is kept in the user's cache folder
(`cache_folder()`, keyed by a digest of all of that; `--fresh` runs everything).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import re
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

import nbformat

from autograder.cells import (
    is_autograded_test,
    is_grade,
    is_solution,
    left_out_when_grading,
    nbgrader_meta,
    skipped_when_grading,
)
from autograder.installs import install_it_with
from autograder.kernel.diagnosis import LEAD

__all__ = ["TaskStatus", "notebook_progress", "find_notebooks", "progress", "format_table",
           "add_arguments", "unanswered", "not_found", "no_folder"]

PASSED, FAILING, NOT_STARTED, NOT_RUN = "passed", "failing", "not started", "not run"
NEEDS_TORCH = "needs PyTorch"
# a test that stopped on `<package>.solved.NotReleased`: it uses an earlier assignment's
# answer, neither released yet nor handed over by the student (`microgpt.earlier`)
WAITING = "waits for an earlier answer"
TO_WRITE, WRITTEN = "to write, graded by hand", "written, graded by hand"
STATUSES = (PASSED, FAILING, NOT_STARTED, NOT_RUN, NEEDS_TORCH, WAITING)
# with the line that adds PyTorch to the environment running this (a student's `.venv`),
# last; the student README's section 6 also gives the CPU-only build's line
TORCH_HINT = ("the optional torch track (on Linux, your README's section 6 has the smaller "
              f"CPU-only build); to run it, {install_it_with('torch==2.13.0')}")
TEXT_STUB = "_Write your answer here._"  # nbgrader_config.py's ClearSolutions.text_stub
# the line a written answer's cell opens with (outside the solution, so a student has it:
# Validate's "You did not provide a response" then shows which task it is)
ANSWER_LEAD = re.compile(r"\A\s*\*\*Your answer to Task \d+\.\d+:\*\*[ \t]*$", re.MULTILINE)
IMPORTS_TORCH = re.compile(r"^\s*(?:import|from)\s+(?:torch|torchtrack)\b", re.MULTILINE)
ASSIGNMENT_NAME = re.compile(r"\d\d_\w+$")  # the course's names: 01_residual_stack
STUB_WORDS = "is not done yet"  # what checks.task says about a stub's NotImplementedError


@dataclass
class TaskStatus:
    assignment: str
    grade_id: str
    points: float
    status: str
    message: str = ""


def _is_test(cell: Any) -> bool:
    return is_autograded_test(cell)


def _status(cell: Any, timeout: int | None = None) -> tuple[str, str]:
    if cell.get("execution_count") is None:
        return NOT_RUN, ""
    for out in cell.get("outputs", []):
        if out.get("output_type") == "error":
            text = f"{out.get('ename', '')}: {out.get('evalue', '')}".strip(": ")
            if NotImplementedError.__name__ in text or STUB_WORDS in text:
                return NOT_STARTED, ""
            if out.get("ename") == "NotReleased":  # whole: it ends with what to do
                return WAITING, " ".join(text.split())
            if out.get("ename") == KeyboardInterrupt.__name__:  # the run's time limit
                return FAILING, _stopped(out.get("traceback", []), timeout)
            return FAILING, _short(text) if text else "the cell raised"
    return PASSED, ""


RUNNING = ", where your code was running:"  # crash.interrupted_lines's heading of that line
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _stopped(traceback: Sequence[str], timeout: int | None) -> str:
    """A cell stopped at the time limit of the run: how long it had, and the student's line
    that was running (from the kernel's rendering of the interrupt, `crash.interrupted`)."""
    limit = f"{timeout} s" if timeout else "its time"
    said = f"it ran past {limit}, so progress stopped it (--timeout S gives a cell longer)"
    lines = [ANSI.sub("", line) for text in traceback for line in str(text).splitlines()]
    at = next((i for i, line in enumerate(lines) if line.endswith(RUNNING)), None)
    if at is None:
        return said
    code = next((line.split(None, 2)[-1] for line in lines[at + 1:]
                 if line.startswith("---->")), "")
    return (f"{said}; your code was running at {lines[at][:-len(RUNNING)]}"
            + (f": `{code.strip()}`" if code else "") + ". A loop whose condition never "
            "becomes false, or one that runs far more times than it should?")


def _short(text: str) -> str:
    """A failure in a line: the check's message cut to 300 characters, then the known
    mistake it looks like when the diagnosis named one (what a student most needs, and it
    comes last)."""
    lines = text.splitlines()
    named = next((line for line in lines if LEAD in line), "")
    head = lines[0].partition(LEAD)[0].strip()
    short = head if len(head) <= 300 else head[:299] + "\u2026"
    if named:
        short = f"{short} {LEAD}{named.partition(LEAD)[2][:400]}".strip()
    return short


def unanswered(source: str) -> bool:
    """Is a written answer's cell still as released: its lead, if any, and the placeholder?"""
    return ANSWER_LEAD.sub("", source, count=1).strip() in ("", TEXT_STUB)


def _is_written(cell: Any) -> bool:
    """An answer graded by hand (nbgrader: a solution cell that is graded)."""
    return is_solution(cell) and is_grade(cell) and not _is_test(cell)


def _needs_torch(nb: Any) -> bool:
    return any(c.cell_type == "code" and IMPORTS_TORCH.search(c.source) for c in nb.cells) \
        and importlib.util.find_spec("torch") is None


def cache_folder() -> Path:
    """Where results of earlier runs are kept: the user's cache folder (XDG_CACHE_HOME, or
    ~/.cache), never the student's assignment folder (nbgrader submit would hand it in)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "residual-pack" / "progress"


@functools.cache
def _code_digest() -> str:
    """A digest of the code a notebook's tests run on: the engine, the kernel-side checks,
    the torch track (when installed) and whether torch is there."""
    digest = hashlib.sha256()
    for name in ("microgpt", "autograder.kernel", "torchtrack"):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            digest.update(f"{name}: absent\n".encode())
            continue
        folder = Path(next(iter(spec.submodule_search_locations)))
        for path in sorted(folder.rglob("*.py")):
            digest.update(f"{name}/{path.relative_to(folder)}\n".encode())
            digest.update(path.read_bytes())
    digest.update(f"torch: {importlib.util.find_spec('torch') is not None}".encode())
    return digest.hexdigest()


def _run_key(cells: Sequence[Any], folder: str | os.PathLike[str], timeout: int) -> str:
    """What a notebook's test results depend on: the cells up to its last visible test,
    the other files beside it (by name, size and time), the code, the cell timeout."""
    files = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns)
                   for p in Path(folder).iterdir() if p.is_file() and p.suffix != ".ipynb")
    text = json.dumps({"cells": [(c.cell_type, c.source) for c in cells], "files": files,
                       "code": _code_digest(), "timeout": timeout})
    return hashlib.sha256(text.encode()).hexdigest()


def _cached(key: str) -> Any:
    try:
        return json.loads((cache_folder() / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None


def _keep(key: str, tests: dict[str, Any]) -> None:
    folder = cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f"{key}.json.tmp{os.getpid()}"
        tmp.write_text(json.dumps(tests))
        tmp.replace(folder / f"{key}.json")
    except OSError:  # a read-only home: no cache, the next run runs again
        pass


def _run_tests(nb: Any, folder: str | os.PathLike[str], timeout: int,
               fresh: bool) -> dict[str, Any]:
    """{grade_id: [status, message]} of the visible tests of `nb`, run up to its last one
    (or taken from the cache). The cells' saved outputs never count: they are cleared
    before the run, so a test the run does not reach is "not run"."""
    from autograder.runner import run_notebook

    # up to the last visible test, without the experiments tagged skip-when-grading:
    # the cells grading leaves out (`cells.left_out_when_grading`)
    last = max(i for i, c in enumerate(nb.cells) if _is_test(c))
    skip = set(skipped_when_grading(nb, strict=False))
    cells = [nbformat.from_dict(c) for i, c in enumerate(nb.cells[: last + 1])
             if c.get("cell_type") != "code" or not left_out_when_grading(c, i, last, skip)]
    key = _run_key(cells, folder, timeout)
    if not fresh:
        found = _cached(key)
        if found is not None:
            return found
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    run = nbformat.from_dict({**nb, "cells": cells})
    # graded sizes, as nbgrader's Validate runs them
    _, stopped = run_notebook(run, Path(folder), env={"NBGRADER_EXECUTION": "validate"},
                              timeout=timeout, prefix="residual-pack-progress-")
    tests = {}
    for cell in run.cells:
        if _is_test(cell):
            status, message = _status(cell, timeout)
            if status == NOT_RUN and stopped:
                message = f"the run stopped before this cell ({stopped})"
            tests[nbgrader_meta(cell).get("grade_id", "?")] = [status, message]
    if not stopped:  # a dead kernel or a timeout may not happen again: run it next time
        _keep(key, tests)
    return tests


def notebook_progress(path: str | os.PathLike[str], assignment: str, timeout: int = 300,
                      fresh: bool = False) -> list[TaskStatus]:
    """Run one notebook and say how each of its graded cells fared: the visible tests
    (run, up to the last one, or from the cache unless `fresh`), the written answers
    (read)."""
    nb = nbformat.read(str(path), as_version=4)
    skip = _needs_torch(nb)
    tests = {}
    if not skip and any(_is_test(c) for c in nb.cells):
        tests = _run_tests(nb, Path(path).parent, timeout, fresh)
    rows = []
    for cell in nb.cells:
        meta = nbgrader_meta(cell)
        points = float(meta.get("points", 0) or 0)
        if _is_written(cell):
            rows.append(TaskStatus(assignment, meta.get("grade_id", "?"), points,
                                   TO_WRITE if unanswered(cell.source) else WRITTEN))
            continue
        if not _is_test(cell):
            continue
        if skip:
            status, message = NEEDS_TORCH, TORCH_HINT
        else:
            status, message = tests.get(meta.get("grade_id", "?"), (NOT_RUN, ""))
        rows.append(TaskStatus(assignment, meta.get("grade_id", "?"), points, status,
                               message))
    return rows


def find_notebooks(folder: str | os.PathLike[str]) -> list[tuple[str, Path]]:
    """[(assignment, notebook path)] under `folder`: its subfolders' notebooks (one
    assignment each), or its own notebooks (named by their file)."""
    folder = Path(folder)
    found = []
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
        found += [(sub.name, nb) for nb in sorted(sub.glob("*.ipynb"))
                  if not nb.name.startswith(".")]
    if not found:
        found = [(nb.stem, nb) for nb in sorted(folder.glob("*.ipynb"))]
    return found


def no_folder(folder: str | os.PathLike[str], default: bool) -> str:
    """What to do when `folder` is not a folder: the student's release folder holds
    assignments/, the default (`default`: none was given), or an assignment's name was
    given where the folder goes."""
    folder = Path(folder)
    if default:
        return (f"no folder {folder} in {Path.cwd()}: run residual-pack progress in your "
                f"release folder (the one that holds README.md and {folder}/), or name the "
                f"folder: residual-pack progress PATH/TO/{folder}")
    if folder.parent == Path(".") and ASSIGNMENT_NAME.match(folder.name):
        return (f"{folder} is not a folder here; for one assignment: residual-pack progress "
                f"-a {folder.name}")
    return f"{folder} is not a folder"


def not_found(folder: str | os.PathLike[str], assignments: Sequence[str] | None) -> str | None:
    """Why some of `assignments` (`-a`) cannot run from `folder`: the names it does not
    hold and those it does (a typo, or another folder); None when every one is there."""
    have = [a for a, _ in find_notebooks(folder)]
    missing = [a for a in assignments or () if a not in have]
    if not missing:
        return None
    return (f"no assignment {', '.join(missing)} under {folder} (it has "
            f"{', '.join(have) if have else 'none'})")


def progress(folder: str | os.PathLike[str], assignments: Sequence[str] | None = None,
             timeout: int = 300, say: Callable[[str], object] = print, jobs: int = 2,
             fresh: bool = False) -> list[TaskStatus]:
    """The rows of every assignment notebook under `folder` (or of `assignments`), `jobs`
    notebooks at a time, in the order of the folder."""
    chosen = [(a, p) for a, p in find_notebooks(folder)
              if not assignments or a in assignments]

    lock = threading.Lock()  # one line at a time: print's text and newline can interleave

    def one(item: tuple[str, Path]) -> list[TaskStatus]:
        assignment, path = item
        with lock:
            say(f"running {path} ...")
        return notebook_progress(path, assignment, timeout, fresh)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [row for rows in pool.map(one, chosen) for row in rows]


def add_arguments(parser: argparse.ArgumentParser, default_folder: str | None = None) -> None:
    """The `progress` command's arguments, for the instructor's `residual-pack` and the
    student release's alike."""
    parser.add_argument("folder", nargs="?", default=default_folder)
    parser.add_argument("-a", "--assignment", action="append", dest="assignments",
                        metavar="ASSIGNMENT", help="only this assignment (repeatable)")
    parser.add_argument("--timeout", type=int, default=300, metavar="S",
                        help="seconds a cell may run (default: %(default)s)")
    parser.add_argument("-j", "--jobs", type=int, default=2,
                        help="notebooks run at a time (default: %(default)s)")
    parser.add_argument("--fresh", action="store_true",
                        help="run every notebook, even one unchanged since an earlier run "
                             "(whose results are otherwise kept in ~/.cache/residual-pack)")


def format_table(rows: Sequence[TaskStatus]) -> str:
    """The progress table as text: one line per graded test cell, then totals."""
    lines = []
    by_assignment: dict[str, list[TaskStatus]] = {}
    for row in rows:
        by_assignment.setdefault(row.assignment, []).append(row)
    width = max([len(r.grade_id) for r in rows] + [10])
    for assignment, mine in by_assignment.items():
        tests = [r for r in mine if r.status in STATUSES]
        written = [r for r in mine if r.status in (TO_WRITE, WRITTEN)]
        got = sum(r.points for r in tests if r.status == PASSED)
        top = sum(r.points for r in tests)
        head = f"{assignment}: "
        if tests:
            head += f"{got:g} of {top:g} points on the visible tests"
        if written:
            by_hand = sum(r.points for r in written)
            head += ("; " if tests else "") + f"{by_hand:g} points of written answers, " \
                "graded by hand"
        lines.append(head)
        said = ""
        for r in mine:
            # a message the row above gave (the torch track's hint on every test) once
            tail = "" if not r.message else "  (as above)" if r.message == said \
                else f"  {r.message}"
            said = r.message or said
            lines.append(f"  {r.grade_id:<{width}}  {r.points:>4g}  {r.status}{tail}")
    counts = {s: sum(r.status == s for r in rows) for s in (*STATUSES, TO_WRITE)}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items() if n or s in STATUSES[:4])
                 + " (visible tests only: the graded run adds hidden ones)")
    return "\n".join(lines)
