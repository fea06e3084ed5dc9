"""The generated folders: `exercises/` (student versions) and `solutions/`, from `source/`.

Both are made by nbgrader (`generate_assignment`, `generate_solution`) in a work copy of
the course and copied into place, so the repository never gets a gradebook. The student
versions are reproduced byte for byte. The solutions are run in a kernel for their
outputs; what a rerun would change besides what the code prints is kept out (cell timings,
the kernel's Python version, progress-bar widgets and their ids, how a kernel happened to
split printed text into messages), so a rerun reproduces every cell's source and
metadata, and the whole file wherever the code prints the same.

`generate` writes only what can be committed (`generation_record.py` says how it decides):

- an assignment whose notebooks import a module this Python lacks (torch, for 08 and 09)
  and that must be generated (changed, or forced) is refused by name, with the line that
  installs it, before anything runs; nothing of it is written (an unchanged one is
  skipped as any other, with a note that the module is missing);
- a solution whose run shows what the notebook guard calls broken (an error, a timed-out
  cell, a machine path, a data fallback: `notebook_guard.output_problems`) is not
  written, nor its student version: the committed ones stay;
- an assignment unchanged since its last generation (`solutions/generated.json`) is
  skipped, unless forced.
"""

import filecmp
import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat

from autograder.grading.course import (
    EXERCISES,
    SOLUTIONS,
    SOURCE,
    CourseError,
    WorkCourse,
    assignments,
    check_assignments,
    notebook_paths,
    private_jupyter_dirs,
    read_notebook,
    work_folder,
)

# cell metadata a run writes and a rerun changes
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"  # an output showing a widget
WIDGET_STATE = "widgets"  # the notebook metadata holding the widgets' saved state


def merge_streams(outputs: list) -> list:
    """`outputs` with each run of consecutive stream outputs of one name (stdout,
    stderr) made one: a kernel may send one printed line in two messages, or two lines in
    one, as timing has it."""
    merged: list[Any] = []
    for output in outputs:
        previous = merged[-1] if merged else None
        if (output.get("output_type") == "stream" and previous is not None
                and previous.get("output_type") == "stream"
                and previous.get("name") == output.get("name")):
            previous["text"] = "".join(previous["text"]) + "".join(output["text"])
        else:
            merged.append(output)
    return merged


def normalize_solution(path: str | os.PathLike[str]) -> None:
    """Drop what a rerun changes besides what the code prints from a generated solution
    notebook (in place): cell run timings, the kernel's exact Python version, widgets (the
    notebooks' only ones are tqdm's progress bars: a new model id every run, and in the
    saved state the run's timings), and the split of printed text into stream messages."""
    nb = read_notebook(path)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
        if cell.cell_type == "code":
            outputs = [o for o in cell.outputs if WIDGET_VIEW not in o.get("data", {})]
            cell.outputs = merge_streams(outputs)
    nb.metadata.get("language_info", {}).pop("version", None)
    nb.metadata.pop(WIDGET_STATE, None)
    nbformat.write(nb, str(path))


def solution_problems(folder: str | os.PathLike[str]) -> list[str]:
    """What the notebook guard finds broken in the outputs of the solution notebooks in
    `folder` (errors, timed-out cells, machine paths, data fallbacks): [] when none."""
    from autograder.authoring.notebook_guard import output_problems

    return [f"{path.name}: {problem}" for path in notebook_paths(folder)
            for problem in output_problems(read_notebook(path))]


def generate_into(course: str | os.PathLike[str], target: str | os.PathLike[str],
                  names: Sequence[str] | None = None, solutions: bool = True,
                  execute: bool = True, progress: Callable[[str], object] | None = None,
                  failed: dict[str, list[str]] | None = None,
                  written: Callable[[str], object] | None = None) -> dict[str, float]:
    """Generate `names` (all when empty) from `course`'s source into `target`'s
    `exercises/` and `solutions/` folders (the solutions run unless `execute` is false).
    With a dict `failed`, an assignment that nbgrader cannot generate, or whose run
    solution the notebook guard finds broken, is not copied: {name: [problems]} goes
    there, and the others go on. Without it, the first failure raises CourseError.
    `written(name)` is called once an assignment's folders are in place. Returns
    {step: seconds}."""
    import time

    say = progress or (lambda *_: None)
    target = Path(target)
    seconds: dict[str, float] = {}
    with work_folder(prefix="residual-pack-generate-") as tmp, \
            private_jupyter_dirs(tmp / "jupyter"):
        work = WorkCourse(course, tmp / "course", names)
        for name in work.names:
            try:
                say(f"{name}: generate_assignment")
                t = time.perf_counter()
                made = [work.generate_assignment(name)]
                seconds[f"{name} generate_assignment"] = time.perf_counter() - t
                if solutions:
                    say(f"{name}: generate_solution" + (" (runs the notebook)" if execute else ""))
                    t = time.perf_counter()
                    solved = work.generate_solution(name, execute=execute)
                    for path in notebook_paths(solved):
                        normalize_solution(path)
                    made.append(solved)
                    seconds[f"{name} generate_solution"] = time.perf_counter() - t
                    problems = solution_problems(solved) if execute else []
                    if problems and failed is not None:
                        failed[name] = problems
                        continue
            except CourseError as e:
                if failed is None:
                    raise
                failed[name] = [str(e)]
                continue
            for folder in made:
                dest = target / folder.parent.name / name
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.copytree(folder, dest)
            if written is not None:
                written(name)
    return seconds


def stale_folders(course: str | os.PathLike[str]) -> list[Path]:
    """Generated folders whose assignment is no longer in `source/`."""
    known = set(assignments(course))
    stale = []
    for kind in (EXERCISES, SOLUTIONS):
        folder = Path(course) / kind
        if folder.is_dir():
            stale += [p for p in sorted(folder.iterdir()) if p.is_dir() and p.name not in known]
    return stale


@dataclass
class Generated:
    """What `generate` did, assignment by assignment."""

    written: list = field(default_factory=list)  # generated and written
    skipped: dict = field(default_factory=dict)  # {name: why}: up to date
    refused: dict = field(default_factory=dict)  # {name: message}: a module is missing
    failed: dict = field(default_factory=dict)  # {name: [problems]}: not written
    removed: list = field(default_factory=list)  # folders of assignments gone from source/
    seconds: dict = field(default_factory=dict)  # {step: seconds}

    @property
    def ok(self) -> bool:
        return not (self.refused or self.failed)


def refusal(name: str, missing: list[str]) -> str:
    """Why `name` is not generated: the modules this Python lacks, and how to add them."""
    import sys

    from autograder.authoring.generation_record import PINS
    from autograder.installs import pip_install, who_may

    what = "it" if len(missing) == 1 else "them"
    return (f"{name}: not generated (nothing of it written): its notebooks import "
            f"{', '.join(missing)}, which this Python ({sys.executable}) does not have. "
            f"Install {what}{who_may()} with:\n"
            f"    {pip_install(*(PINS.get(module, module) for module in missing))}")


def pending(course: str | os.PathLike[str], names: Sequence[str] | None = None) -> dict:
    """{assignment: [why]} for those of `names` (all when empty) whose record is not up to
    date: `generate` would run them again (or refuse them, where a module is missing)."""
    from autograder.authoring import generation_record as rec

    record = rec.read_record(course)
    out = {}
    for name in check_assignments(course, names or []):
        why = rec.changed_parts(record.get(name), rec.digests(course, name))
        if why:
            out[name] = why
    return out


def generate(course: str | os.PathLike[str], names: Sequence[str] | None = None,
             force: bool = False, progress: Callable[[str], object] | None = None) -> Generated:
    """Rewrite `exercises/` and `solutions/` of `course` for `names` (all when empty;
    then folders of assignments no longer in `source/` are removed too): those that
    changed since their last generation, or all of them when `force`; refused or broken
    ones are not written. `solutions/generated.json` records what was made from what."""
    from autograder.authoring import generation_record as rec

    say = progress or (lambda *_: None)
    course = Path(course)
    result = Generated()
    record = rec.read_record(course)
    before = dict(record)
    todo, now = [], {}
    for name in check_assignments(course, names or []):
        needs = rec.needs(course, name)
        now[name] = rec.digests(course, name, needs)
        why = ["--force"] if force else rec.changed_parts(record.get(name), now[name])
        if not why:  # nothing to run, so nothing is missing for it
            lacks = (f"; this Python lacks {', '.join(needs.missing)}, which a new "
                     "generation of it would need" if needs.missing else "")
            result.skipped[name] = (f"unchanged since its last generation ({rec.RECORD})"
                                    + lacks)
            continue
        if needs.missing:
            result.refused[name] = refusal(name, needs.missing)
            continue
        say(f"{name}: to generate: {'; '.join(why)}")
        todo.append(name)

    def written(name: str) -> None:  # recorded at once: an interrupted run keeps what it finished
        record[name] = {**now[name], "written": rec.written_digest(course, name)}
        rec.write_record(course, record)
        result.written.append(name)

    if todo:
        result.seconds = generate_into(course, course, todo, progress=say,
                                       failed=result.failed, written=written)
    if not names:
        for folder in stale_folders(course):
            say(f"removing {folder.relative_to(course)} (not in {SOURCE}/)")
            shutil.rmtree(folder)
            result.removed.append(folder)
        known = set(assignments(course))
        record = {k: v for k, v in record.items() if k in known}
    if record != before:
        rec.write_record(course, record)
    return result


def tree_differences(made: str | os.PathLike[str], committed: str | os.PathLike[str],
                     ) -> list[str]:
    """Files that differ between two folders, byte for byte (as relative paths)."""
    made, committed = Path(made), Path(committed)

    def files(root: Path) -> set[str]:
        return {
            p.relative_to(root).as_posix()
            for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and ".ipynb_checkpoints" not in p.parts
        } if root.is_dir() else set()

    a, b = files(made), files(committed)
    out = [f"{f} is missing" for f in sorted(a - b)]
    out += [f"{f} should not be there" for f in sorted(b - a)]
    out += [
        f"{f} differs"
        for f in sorted(a & b)
        if not filecmp.cmp(made / f, committed / f, shallow=False)
    ]
    return out


def notebook_cell_differences(made: str | os.PathLike[str],
                              committed: str | os.PathLike[str]) -> list[str]:
    """Cells whose type, id, source or metadata differ (outputs are not compared)."""
    a, b = read_notebook(made), read_notebook(committed)
    if len(a.cells) != len(b.cells):
        return [f"{len(b.cells)} cells, regenerated has {len(a.cells)}"]
    out = []
    for i, (x, y) in enumerate(zip(a.cells, b.cells)):
        name = x.get("id") or f"#{i}"
        for key in ("cell_type", "id", "source"):
            if x.get(key) != y.get(key):
                out.append(f"cell {name}: {key} differs")
        mx = {k: v for k, v in x.metadata.items() if k not in VOLATILE_CELL_METADATA}
        my = {k: v for k, v in y.metadata.items() if k not in VOLATILE_CELL_METADATA}
        if mx != my:
            out.append(f"cell {name}: metadata differs")
    return out


GUARD = "guard: "  # the start of a problem the notebook guard found


def drift(course: str | os.PathLike[str], names: Sequence[str] | None = None,
          progress: Callable[[str], object] | None = None) -> list[str]:
    """What `residual-pack generate` would change in the committed folders, a table of
    fingerprints made from other mutants or notebooks than the committed ones
    (`fingerprints.stale`), and what the notebook guard finds in the committed solutions
    (those start with GUARD): [] if nothing."""
    from autograder.authoring.fingerprints import stale as stale_fingerprints
    from autograder.authoring.notebook_guard import check_readme, check_solutions

    course = Path(course)
    problems = []
    with work_folder(prefix="residual-pack-drift-") as tmp:
        # outputs are not compared, so the solutions need not run (the self-check runs them)
        generate_into(course, tmp, names, execute=False, progress=progress)
        for name in names or assignments(course):
            problems += [
                f"{EXERCISES}/{name}/{d}"
                for d in tree_differences(tmp / EXERCISES / name, course / EXERCISES / name)
            ]
            made, committed = tmp / SOLUTIONS / name, course / SOLUTIONS / name
            for d in tree_differences(made, committed):
                if d.endswith(".ipynb differs"):
                    nb = d.removesuffix(" differs")
                    problems += [
                        f"{SOLUTIONS}/{name}/{nb}: {c}"
                        for c in notebook_cell_differences(made / nb, committed / nb)
                    ]
                else:
                    problems.append(f"{SOLUTIONS}/{name}/{d}")
    if not names:
        problems += [
            f"{p.relative_to(course)} has no source" for p in stale_folders(course)
        ]
    checked = names or assignments(course)
    problems += [f"{p} (run `residual-pack fingerprints`)" for p in stale_fingerprints(course,
                                                                                      checked)]
    guarded = check_solutions(course, checked) + check_readme(course, checked)
    problems += [GUARD + p for p in guarded]
    return problems
