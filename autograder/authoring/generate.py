"""The generated folders: `exercises/` (student versions) and `solutions/`, from `source/`.

Both are made by nbgrader (`generate_assignment`, `generate_solution`) in a work copy of
the course and copied into place, so the repository never gets a gradebook. The student
versions are reproduced byte for byte. The solutions are run in a kernel for their
outputs; what a rerun would change besides outputs (cell timings) is kept out, so a rerun
reproduces every cell's source and metadata.
"""

import filecmp
import shutil
from pathlib import Path

import nbformat

from autograder.grading.course import (
    EXERCISES,
    SOLUTIONS,
    SOURCE,
    WorkCourse,
    assignments,
    notebook_paths,
    private_jupyter_dirs,
    read_notebook,
    work_folder,
)

# cell metadata a run writes and a rerun changes
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime")


def normalize_solution(path):
    """Drop what a rerun elsewhere changes besides outputs from a generated solution
    notebook (in place): cell run timings and the kernel's exact Python version."""
    nb = read_notebook(path)
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    nb.metadata.get("language_info", {}).pop("version", None)
    nbformat.write(nb, str(path))


def generate_into(course, target, names=None, solutions=True, execute=True, progress=None):
    """Generate `names` (all when empty) from `course`'s source into `target`'s
    `exercises/` and `solutions/` folders (the solutions run unless `execute` is false).
    Returns {step: seconds}."""
    import time

    say = progress or (lambda *_: None)
    target = Path(target)
    seconds = {}
    with work_folder(prefix="residual-pack-generate-") as tmp, \
            private_jupyter_dirs(tmp / "jupyter"):
        work = WorkCourse(course, tmp / "course", names)
        for name in work.names:
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
            for folder in made:
                dest = target / folder.parent.name / name
                if dest.exists():
                    shutil.rmtree(dest)
                shutil.copytree(folder, dest)
    return seconds


def stale_folders(course):
    """Generated folders whose assignment is no longer in `source/`."""
    known = set(assignments(course))
    stale = []
    for kind in (EXERCISES, SOLUTIONS):
        folder = Path(course) / kind
        if folder.is_dir():
            stale += [p for p in sorted(folder.iterdir()) if p.is_dir() and p.name not in known]
    return stale


def generate(course, names=None, progress=None):
    """Rewrite `exercises/` and `solutions/` of `course` for `names` (all when empty;
    then folders of assignments no longer in `source/` are removed too)."""
    seconds = generate_into(course, course, names, progress=progress)
    if not names:
        for folder in stale_folders(course):
            if progress:
                progress(f"removing {folder.relative_to(course)} (not in {SOURCE}/)")
            shutil.rmtree(folder)
    return seconds


def tree_differences(made, committed):
    """Files that differ between two folders, byte for byte (as relative paths)."""
    made, committed = Path(made), Path(committed)

    def files(root):
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


def notebook_cell_differences(made, committed):
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


def drift(course, names=None, progress=None):
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
