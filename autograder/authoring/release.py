"""What a student installs: `residual-pack student-release DIR`.

A clone of this repository holds the model answers (`autograder/answers/`), the
solutions (`solutions/`) and the instructor notebooks with their hidden tests and rubrics
(`source/`). A student gets none of them. The release folder holds:

- `wheels/`: one wheel, `residual-pack-student`, with the engine (`microgpt`), the torch
  track (`torchtrack`), the package a student's kernel loads (`autograder/kernel/`) and
  `residual-pack progress` (`autograder/student/` with `cells.py` and `runner.py`):
  nothing of the answers, the grader, the sandbox or the authoring tools; and the Jupyter
  config that keeps nbgrader's instructor tools (Formgrader, Create Assignment, the
  course list) out of the student's JupyterLab (`autograder/student/jupyter-config/`,
  installed under the environment's `etc/jupyter/`). Its `microgpt` and `torchtrack` hold
  no answer to a task: `deepnet.logits`, `GPT.block`, `GPT.stream_states`, the torch
  layers' and `Block`'s `forward` and `logit_lens` call the released answer instead
  (`withheld`);
- with `solved=[ASSIGNMENT, ...]`, a wheel per assignment, `residual-pack-solved-<name>`,
  with that assignment's answers (`microgpt/solved/a<name>.py` or
  `torchtrack/solved/a<name>.py`), for the instructor to hand out after its due date
  (later notebooks train with those of 02 and 05);
- `assignments/<assignment>/`: the released notebooks (`exercises/`, visible tests only);
- `nbgrader_config.py`: the student side of the course's config (Validate's limits);
- `README.md`: how to install it and work.

`build` checks what it made: a file of the wheel outside that list, an answer left in the
student wheel, or a notebook with a solution, a hidden test or a model answer's name in
it, stops it.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile
from pathlib import Path

from autograder.authoring import withheld
from autograder.grading.course import EXERCISES, CourseError, assignments, notebook_paths
from autograder.kernel.policy import SWITCHED_OFF

__all__ = ["PACKAGE", "WHEEL_PREFIXES", "STUDENT_CONFIG", "WITHHELD", "build", "problems",
           "solved_package"]

PACKAGE = "residual-pack-student"
VERSION = "0.1.0"
# the packages whose answers the student wheel holds back (`withheld`)
WITHHELD = ("microgpt", "torchtrack")
# the packages of the wheel: the engine, the torch track, and the kernel side of autograder
COPIED = ("microgpt", "torchtrack", "autograder/kernel", "autograder/student")
# and the modules `autograder.student.progress` needs (nbgrader's cell kinds, running a
# notebook): neither names an answer nor the grader
COPIED_MODULES = ("autograder/__init__.py", "autograder/cells.py", "autograder/runner.py")
# a student's JupyterLab without nbgrader's instructor tools: these Jupyter config files
# (also what scripts/lab puts on JUPYTER_CONFIG_PATH) go into the environment's
# etc/jupyter, as data files of the wheel
JUPYTER_CONFIG = "autograder/student/jupyter-config"
WHEEL_PREFIXES = ("microgpt/", "torchtrack/", "autograder/kernel/", "autograder/student/",
                  *COPIED_MODULES, "residual_pack_student-", "residual_pack_solved_")
# what a student's install needs (the project's dependencies without the grader's sandbox)
DEPENDENCIES = [
    "tqdm>=4.66",
    "names>=0.3.0",
    "numpy>=1.26",
    "matplotlib>=3.8",
    "nbgrader>=0.9.6,<0.10",
    "jupyterlab>=4.2,<5",
    "nbformat>=5.9",
    "nbclient>=0.10",
    "ipykernel>=6.29",
]
# the optional torch track (notebooks 08 and 09): the same extra as the instructor's install
EXTRAS = {"torch": ["torch>=2.1"]}
# in a released notebook: a solution, a hidden test, a model answer
FORBIDDEN_TEXT = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "autograder.answers",
                  "BEGIN MARK SCHEME")
# the course config's settings that Validate uses (`nbgrader_config.py`, which also names
# the grader's steps: a student's install does not have them)
STUDENT_CONFIG = '''\
"""nbgrader's settings for a student's Validate (the course's own, without the grader)."""

c = get_config()  # noqa: F821 (nbgrader provides it)

c.Execute.timeout = 120
c.Execute.startup_timeout = 120
c.Execute.extra_arguments = ["--IPKernelApp.ignore_cwd=True"]
'''

README = """\
# Residual connections: the student release

This folder is what you work from. It has the engine the exercises build on and the
checks the notebooks' test cells call; it has no model answers.

Install it once, in a folder of your own (Python 3.10 or later):

    python3 -m venv .venv
    .venv/bin/pip install wheels/*.whl
    .venv/bin/jupyter lab

Then open `assignments/01_residual_stack/` and work through the notebooks in order. Some
notebooks build on an earlier assignment's answer (03 and 04 train deep nets with the
forward pass of Assignment 2, 06 trains GPTs made of Assignment 5's blocks): your
instructor hands out those answers after each due date, as a wheel of their own
(`residual_pack_solved_<assignment>-...whl`; install it the same way, into the same
`.venv`). Until then such a cell says which answer it is waiting for. The
test cells under each task check your answer; Validate (in the Assignments menu, or
`.venv/bin/nbgrader validate NOTEBOOK` from this folder, which cuts long lines at 90
characters) runs them all, and `.venv/bin/residual-pack progress` lists every task as
passed, failing (with the check's message) or not started.
Notebooks 08 and 09 need PyTorch: `.venv/bin/pip install torch==2.13.0` (the version
the course is tested with; without a GPU, PyTorch's CPU-only build is enough and much
smaller, see pytorch.org). Hand in the notebooks as your instructor says.
"""


def _project(name, what):
    """The head of a wheel's pyproject.toml, up to its [project] table's dependencies."""
    return textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=77"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{name}"
        version = "{VERSION}"
        description = "Residual connections exercise pack: {what}"
        requires-python = ">=3.10"
        """)


def _withheld_modules():
    return sorted({e[0] for entries in SWITCHED_OFF.values() for e in entries
                   if e[0].split(".")[0] in WITHHELD})


def _stage(course, stage):
    """The wheel's project in `stage`: the copied packages (their answers held back) and a
    pyproject.toml."""
    course = Path(course)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in COPIED:
        shutil.copytree(course / name, stage / name, ignore=ignore)
    for name in COPIED_MODULES:
        shutil.copy2(course / name, stage / name)
    for module in _withheld_modules():
        path = stage.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(withheld.withhold(path.read_text(encoding="utf-8"), module),
                        encoding="utf-8")
    for package in WITHHELD:
        folder = stage / package / withheld.SOLVED
        folder.mkdir()
        (folder / "__init__.py").write_text(withheld.SOLVED_INIT, encoding="utf-8")
    packages = sorted(
        str(p.parent.relative_to(stage)).replace(os.sep, ".")
        for p in stage.rglob("__init__.py"))
    deps = "".join(f'    "{d}",\n' for d in DEPENDENCIES)
    extras = "".join(f"{name} = {json.dumps(reqs)}\n" for name, reqs in EXTRAS.items())
    config = stage / JUPYTER_CONFIG
    data_files = {}
    for path in sorted(config.rglob("*.json")):
        folder = "/".join(("etc/jupyter", *path.parent.relative_to(config).parts))
        data_files.setdefault(folder, []).append(path.relative_to(stage).as_posix())
    data = "".join(f"{json.dumps(k)} = {json.dumps(v)}\n" for k, v in data_files.items())
    (stage / "pyproject.toml").write_text(
        _project(PACKAGE, "the engine and the checks") + "dependencies = [\n" + deps
        + "]\n\n[project.optional-dependencies]\n" + extras + textwrap.dedent(f"""
        [project.scripts]
        residual-pack = "autograder.student.__main__:main"

        [tool.setuptools]
        packages = {packages!r}
        include-package-data = false

        [tool.setuptools.package-data]
        "autograder.kernel" = ["*.json"]
        "autograder.student" = ["jupyter-config/custom/*.css"]

        [tool.setuptools.data-files]
        """) + data, encoding="utf-8")


def solved_package(assignment):
    """The name of the wheel with `assignment`'s released answers."""
    return f"residual-pack-solved-{assignment}"


def _stage_solved(course, stage, assignment):
    """The project of `assignment`'s released answers in `stage` (its modules only: the
    package's `__init__.py` is the student wheel's)."""
    packages = [p for p in WITHHELD if assignment in withheld.solved_assignments(p)]
    if not packages:
        raise CourseError(f"{assignment} has no answers that the library builds on: there "
                          f"is nothing to release (those that have: "
                          f"{', '.join(withheld.solved_assignments('microgpt'))})")
    sources = {m: Path(course).joinpath(*m.split(".")).with_suffix(".py").read_text(
        encoding="utf-8") for m in _withheld_modules()}
    for package in packages:
        path = stage / withheld.solved_path(package, assignment)
        path.parent.mkdir(parents=True)
        path.write_text(withheld.solved_module(sources, package, assignment), encoding="utf-8")
    (stage / "pyproject.toml").write_text(
        _project(solved_package(assignment), f"the released answers of {assignment}")
        + textwrap.dedent(f"""\
        dependencies = ["{PACKAGE}"]

        [tool.setuptools]
        py-modules = {[f"{p}.{withheld.SOLVED}.a{assignment}" for p in packages]!r}
        include-package-data = false
        """), encoding="utf-8")


def _wheel(stage, out):
    before = set(out.glob("*.whl")) if out.exists() else set()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "--no-build-isolation", "--wheel-dir", str(out), str(stage)],
        check=True, cwd=stage, stdout=subprocess.DEVNULL)
    made = sorted(set(out.glob("*.whl")) - before)
    if len(made) != 1:
        raise CourseError(f"building a wheel made {len(made)} wheels in {out}")
    return made[0]


def problems(target):
    """What in the release folder `target` a student must not get ([] when nothing)."""
    target = Path(target)
    found = []
    for wheel in sorted((target / "wheels").glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if not name.startswith(WHEEL_PREFIXES):
                    found.append(f"{wheel.name}: {name} is not the engine or the kernel side")
            if wheel.name.startswith("residual_pack_student-"):
                found += [f"{wheel.name}: {p}" for p in _answers_left(z)]
    for path in sorted(target.rglob("*")):
        parts = set(path.relative_to(target).parts)
        if parts & {"answers", "solutions", "source"}:
            found.append(f"{path.relative_to(target)}: instructor's material")
        if path.suffix == ".ipynb":
            text = path.read_text(encoding="utf-8")
            found += [f"{path.relative_to(target)}: holds {t!r}" for t in FORBIDDEN_TEXT
                      if t in text]
    return found


def _answers_left(wheel):
    """What of the model answers the student wheel (an open ZipFile) still holds."""
    names = set(wheel.namelist())
    found = [f"{n} is a released answer" for n in sorted(names)
             if n.startswith(tuple(f"{p}/{withheld.SOLVED}/a" for p in WITHHELD))]
    for entries in SWITCHED_OFF.values():
        for module, owner, name, _, _ in entries:
            path = module.replace(".", "/") + ".py"
            if module.split(".")[0] not in WITHHELD:
                continue
            if path not in names:
                found.append(f"{path} is missing")
            elif not withheld.is_stub(wheel.read(path).decode("utf-8"), module, owner, name):
                found.append(f"{path} holds the answer {owner + '.' if owner else ''}{name}")
    return found


def build(course, target, names=None, say=print, solved=()):
    """Write the student release of `names` (every assignment when empty) into the folder
    `target` (new or empty), with a wheel of released answers for each assignment in
    `solved`; returns the student wheel's path."""
    course, target = Path(course), Path(target)
    if target.exists() and any(target.iterdir()):
        raise CourseError(f"{target} is not empty: the release goes into a new folder")
    names = list(names or assignments(course))
    released = course / EXERCISES
    for name in names:
        if not notebook_paths(released / name):
            raise CourseError(f"{EXERCISES}/{name} has no notebook; run `residual-pack "
                              f"generate {name}` first")
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="residual-pack-release-") as tmp:
        stage = Path(tmp) / "project"
        stage.mkdir()
        _stage(course, stage)
        wheel = _wheel(stage, target / "wheels")
        for assignment in solved:
            stage = Path(tmp) / f"solved-{assignment}"
            stage.mkdir()
            _stage_solved(course, stage, assignment)
            made = _wheel(stage, target / "wheels")
            say(f"released answers of {assignment}: {made.relative_to(target)}")
    say(f"wheel: {wheel.relative_to(target)}")
    for name in names:
        shutil.copytree(released / name, target / "assignments" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        say(f"assignment: assignments/{name}")
    (target / "nbgrader_config.py").write_text(STUDENT_CONFIG, encoding="utf-8")
    (target / "README.md").write_text(README, encoding="utf-8")
    found = problems(target)
    if found:
        raise CourseError("the student release holds what a student must not get:\n  "
                          + "\n  ".join(found))
    return wheel
