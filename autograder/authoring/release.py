"""What a student installs: `residual-pack student-release DIR`.

A clone of this repository holds the model answers (`autograder/answers/`), the
solutions (`solutions/`) and the instructor notebooks with their hidden tests and rubrics
(`source/`). A student gets none of them. The release folder holds:

- `wheels/`: one wheel, `residual-pack-student`, with the engine (`microgpt`), the torch
  track (`torchtrack`), the package a student's kernel loads (`autograder/kernel/`) and
  `residual-pack progress` (`autograder/student/` with `cells.py` and `runner.py`):
  nothing of the answers, the grader, the sandbox or the authoring tools (nor
  `torchtrack.value_mirror`, the tests' rebuilding of the torch models on `Value`, which
  writes the layers and blocks out); and the Jupyter
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

The wheels declare setuptools>=77 as their build backend: an environment with an older
one (Python 3.11's venv brings 65.5, without `bdist_wheel` unless `wheel` is installed)
has pip build them in an isolated environment filled from the package index; a build that
fails says in one line what failed and what to do.

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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from autograder.authoring import withheld
from autograder.authoring.checkout import pack_root
from autograder.grading.answerless import SWITCHED_OFF
from autograder.grading.course import EXERCISES, CourseError, assignments, notebook_paths
from autograder.installs import install_it_with

__all__ = ["PACKAGE", "WHEEL_PREFIXES", "STUDENT_CONFIG", "WITHHELD", "build", "problems",
           "solved_package", "README", "readme"]

PACKAGE = "residual-pack-student"
VERSION = "0.1.0"
# the packages whose answers the student wheel holds back (`withheld`)
WITHHELD = ("microgpt", "torchtrack")
# the packages of the wheel: the engine, the torch track, and the kernel side of autograder
COPIED = ("microgpt", "torchtrack", "autograder/kernel", "autograder/student")
# and the modules `autograder.student.progress` needs (nbgrader's cell kinds, running a
# notebook): neither names an answer nor the grader
COPIED_MODULES = ("autograder/__init__.py", "autograder/cells.py", "autograder/runner.py",
                  "autograder/installs.py")
# a student's JupyterLab without nbgrader's instructor tools: these Jupyter config files
# (also what scripts/lab puts on JUPYTER_CONFIG_PATH) go into the environment's
# etc/jupyter, as data files of the wheel
JUPYTER_CONFIG = "autograder/student/jupyter-config"
# modules of the copied packages that a student's kernel does not use and that would show
# answers: the torch track's models rebuilt on `Value` (the tests' second oracle), with
# the residual and highway layers and the three block layouts written out
LEFT_OUT = ("torchtrack/value_mirror.py",)
# the torch track's committed seed runs (their JSON), whose table notebooks 08 and 09 print:
# in a checkout under results/torchtrack, in an install of the pack's wheel under this
# folder of the environment (pyproject.toml's data-files), where the student wheel puts
# them too (`torchtrack.seeds.INSTALLED`, which a test holds to this)
SEED_RUNS = "share/microgpt-residuals/seed-runs"
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
    "jsonschema>=4.18,<4.25",  # as the instructor's (pyproject.toml says why)
    "nbclient>=0.10",
    "ipykernel>=6.29",
]
# the optional torch track (notebooks 08 and 09): the same extra as the instructor's install
EXTRAS = {"torch": ["torch>=2.1"]}
# in a released notebook: a solution, a hidden test, a model answer
FORBIDDEN_TEXT = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "autograder.answers",
                  "BEGIN MARK SCHEME")
# the course config's settings that Validate uses (`nbgrader_config.py`, which also names
# the grader's steps: a student's install does not have them), and the kernel's sockets
# encrypted (the grader's kernels use IPC sockets in their sandbox, so the course config
# has no such line; the student's JupyterLab does the same, `autograder.student.validate`)
STUDENT_CONFIG = '''\
"""nbgrader's settings for a student's Validate (the course's own, without the grader)."""

c = get_config()  # noqa: F821 (nbgrader provides it)

c.Execute.timeout = 120
c.Execute.startup_timeout = 120
c.Execute.extra_arguments = ["--IPKernelApp.ignore_cwd=True"]

# Validate's kernel talks to nbgrader over CurveZMQ-encrypted sockets where pyzmq has CURVE
# (PyPI's wheels do): over plain TCP, ipykernel 7.4 warns at each start that anyone who
# can listen on the machine reads the code and its outputs
import zmq  # noqa: E402

if zmq.has("curve"):
    c.KernelManager.transport_encryption = "auto"
'''

# the Pythons the student's wheels install on: the pack's own (pyproject.toml), since
# nbgrader 0.9.6, which Validate and `residual-pack progress` run, requires 3.11
REQUIRES_PYTHON = ">=3.11"

# the release's README (`readme`): every command in a ```bash block is one that
# tests/integration/test_student_release.py runs as it stands, in a fresh environment
# (the numbers: results/benchmarks/student-install-2026-12-05.txt and run-all-2026-12-05.txt)
README_TEMPLATE = """\
# Residual connections: the student release

This folder is what you work from: the engine the exercises build on, the checks that the
notebooks' test cells call (in `wheels/`) and the notebooks (in `assignments/`). It holds
no model answers. The commands below are for Linux and macOS, typed in a terminal whose
current folder is this one (the folder with this README).

## 1. Install, once

You need Python 3.11 or later (`python3 --version` says which you have; nbgrader, which
checks your notebooks, needs it). If yours is older, install a newer one (python.org's, or
your system's `python3.12` package) and type its name where the first command below says
`python3` (with an older Python, pip stops with "No matching distribution found for
nbgrader": delete `.venv` and make it again with the newer one). Make a virtual
environment here and install the wheel into it:

```bash
python3 -m venv .venv
.venv/bin/pip install wheels/{wheel}
```

pip downloads JupyterLab, nbgrader, numpy, matplotlib and what they need: about 110
packages, 510 MB on disk. On our 2-core test machine, with a fast connection and
nothing in pip's cache, the install took 74 s; on a slow connection expect several
minutes. If you move or rename this folder later, make `.venv` again (delete it, then run
both commands again). On Debian and Ubuntu the first command can stop with "ensurepip is
not available": install the package it names (`sudo apt install python3.11-venv` for
Python 3.11: its version is yours), delete `.venv`, and run both commands again.

## 2. Work

Start JupyterLab from this folder (Validate reads this folder's `nbgrader_config.py`):

```bash
.venv/bin/jupyter lab
```

It opens in your browser; if not, open the `http://localhost:8888/lab?token=...` address
it prints. Open `assignments/01_residual_stack/01_residual_stack.ipynb` and work through
the notebooks in order (01, 02, ... 09). Leave the terminal open while you work;
Ctrl+C twice in it stops JupyterLab when you are done (save your notebooks first).

Each task leaves a TODO (`raise NotImplementedError`) for you to replace. Run the test
cell under a task to check your answer: a failing test says what it checked, what it
expected and what it got. **Validate**, the button in the notebook's toolbar (nbgrader's,
at the top of the notebook), saves the notebook and runs all its tests the way grading
will; it also reminds you of written answers you have not filled in. The same from the
terminal, and a list of every task as passed, failing or not started:

```bash
.venv/bin/nbgrader validate assignments/01_residual_stack/01_residual_stack.ipynb
.venv/bin/residual-pack progress -a 01_residual_stack
```

(`.venv/bin/residual-pack progress` alone goes through every notebook: save them first.)
Run both from this folder: elsewhere Validate finds no `nbgrader_config.py` and runs with
nbgrader's defaults. `nbgrader validate` prints nothing for a path that does not exist and
exits with 0 even when a test fails, so read what it prints.

## 3. What takes minutes

Most cells take a second or less. The experiments train many small networks in pure
Python, and a few take minutes. What a Run All of a finished notebook took on our 2-core
test machine with nothing else running on it:

{timings}

On the same machine busy with other work, the same Run Alls took four to seven times as
long (03: 8 min, 09: 13.5 min). Validate leaves those experiments out (they say "not run
while grading"): on the quiet machine, Validate of a finished notebook took from 4 s (07)
to 15 s (05). A progress bar under an experiment shows that it is still working.

## 4. When a cell hangs

A cell whose `[*]` stays for much longer than the times above (several times them on a
slow or busy computer) is probably stuck in your code (a loop that never ends, say).
Stop it with **Kernel > Interrupt Kernel** (or the square button in the toolbar). If it
still runs, **Kernel > Restart Kernel...**; a restart forgets every variable, so then
run the cells above again (**Run > Run All Above Selected Cell**) before you go on.
Validate stops each cell that runs for more than 120 s and reports a timeout; every later
cell that calls the same code waits its own 120 s, so a loop in one answer can take
several times that. `residual-pack progress` gives a cell 300 s (`--timeout S` changes
it) and names the line of yours that was running.

## 5. The earlier answers (notebooks 03, 04 and 06)

Notebooks 03 and 04 train deep nets with the forward pass of Assignment 2, and 06 trains
GPTs made of Assignment 5's blocks. Your instructor hands out those answers after each
due date, as a file of its own: `residual_pack_solved_02_degradation-{version}-py3-none-any.whl`
for Assignment 2, `residual_pack_solved_05_gpt_residual_adds-{version}-py3-none-any.whl`
for Assignment 5. Save the file in this folder and install it into the same `.venv`:

```bash
.venv/bin/pip install residual_pack_solved_02_degradation-{version}-py3-none-any.whl
```

(the same with the other file name for Assignment 5), then restart the notebook's kernel
(**Kernel > Restart Kernel...**) so that it finds them. Until then, use your own: 03 and
04 have a cell after "From Assignment 2" where you paste the body of your Task 2.2
`mlp_logits`, and 06 one after "The pieces" for your three blocks of Tasks 5.1 to 5.3.
Run it, and it prints which answer the library will use (a released one, once installed,
wins; grading always uses the released answers, never yours). With neither, a cell that
needs one says which (`NotReleased: deepnet.logits (Task 2.2) is released after
02_degradation's due date ...`), and `residual-pack progress` lists its tests as waiting
for an earlier answer.

## 6. PyTorch, for notebooks 08 and 09

Notebooks 08 and 09 (the torch track) need PyTorch, the version the course is tested
with:

```bash
.venv/bin/pip install torch==2.13.0
```

On our test machine that took 67 s (the CPU-only build: 6 more packages, and `.venv`
grew to 1.4 GB). On Linux, PyPI's torch comes with NVIDIA's GPU libraries, several GB
more; these notebooks need no GPU, and PyTorch's CPU-only build is enough:

```bash
.venv/bin/pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
```

Notebook 09 downloads TinyShakespeare (about 1 MB) the first time; its first cells say
what to do without a connection.

## 7. Hand in

Save the notebook (Ctrl+S), run Validate once more, then hand it in the way your
instructor says:

- on a course server with nbgrader's exchange (your instructor tells you if your course
  has one): **Nbgrader > Assignment List**, then **Submit** next to the assignment;
- otherwise the notebook file itself, for example
  `assignments/01_residual_stack/01_residual_stack.ipynb`, unrenamed, where your
  instructor asks (a course page, an e-mail). Hand in the `.ipynb` only, not `.venv`.
"""

# Run All of each finished notebook: results/benchmarks/run-all-quiet-2026-12-05.txt (the busy
# machine's: run-all-2026-12-05.txt; Validate's: validate-quiet-2026-12-05.txt)
TIMINGS = """\
| notebook | Run All | the cells that take it |
|---|---:|---|
| 01 | 2 s | |
| 02 | 30 s | the experiment that needs Tasks 2.1 and 2.2: 16 s |
| 03 | 1.5 min | the experiment that needs Tasks 3.1 to 3.3: 1.5 min |
| 04 | 1.5 min | the depth study that needs Task 4.1: 75 s; the training watch: 13 s |
| 05 | 70 s | the experiment that needs Tasks 5.1 to 5.3: 37 s; the stress test: 29 s |
| 06 | 31 s | training the models: 22 s |
| 07 | 1 s | |
| 08 | 30 s | the experiment that needs Tasks 8.1 and 8.2: 24 s |
| 09 | 2 min | the five training cells (`train(...)`): 23 s each |"""


def readme(wheel: str) -> str:
    """The release's README.md, for the student wheel named `wheel`."""
    return README_TEMPLATE.format(wheel=wheel, version=VERSION, timings=TIMINGS)


README = readme(f"{PACKAGE.replace('-', '_')}-{VERSION}-py3-none-any.whl")


def _project(name: str, what: str) -> str:
    """The head of a wheel's pyproject.toml, up to its [project] table's dependencies."""
    return textwrap.dedent(f"""\
        [build-system]
        requires = ["setuptools>=77"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "{name}"
        version = "{VERSION}"
        description = "Residual connections exercise pack: {what}"
        requires-python = "{REQUIRES_PYTHON}"
        """)


def _withheld_modules() -> list[str]:
    return sorted({e[0] for entries in SWITCHED_OFF.values() for e in entries
                   if e[0].split(".")[0] in WITHHELD})


def _stage(course: str | os.PathLike[str], stage: Path) -> None:
    """The wheel's project in `stage`: the copied packages (their answers held back) and a
    pyproject.toml. The packages are the installed pack's (`pack_root`), not `course`'s."""
    root = pack_root()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in COPIED:
        shutil.copytree(root / name, stage / name, ignore=ignore)
    for name in COPIED_MODULES:
        shutil.copy2(root / name, stage / name)
    for name in LEFT_OUT:
        (stage / name).unlink()
    for module in _withheld_modules():
        path = stage.joinpath(*module.split(".")).with_suffix(".py")
        path.write_text(withheld.withhold(path.read_text(encoding="utf-8"), module),
                        encoding="utf-8")
    folder: Path | str
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
    data_files: dict[str, list[str]] = {}
    for path in sorted(config.rglob("*.json")):
        folder = "/".join(("etc/jupyter", *path.parent.relative_to(config).parts))
        data_files.setdefault(folder, []).append(path.relative_to(stage).as_posix())
    for path in _seed_runs(root):
        study = path.parent.name
        copy = stage / "seed-runs" / study / path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)
        data_files.setdefault(f"{SEED_RUNS}/{study}", []).append(
            copy.relative_to(stage).as_posix())
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


def _seed_runs(root: Path) -> list[Path]:
    """The committed seed runs' JSON files: the checkout's, else the installed pack's
    (none in an environment made from a wheel older than them)."""
    for folder in (root / "results" / "torchtrack", Path(sys.prefix) / SEED_RUNS):
        found = sorted(folder.glob("*/seed*.json"))
        if found:
            return found
    return []


def solved_package(assignment: str) -> str:
    """The name of the wheel with `assignment`'s released answers."""
    return f"residual-pack-solved-{assignment}"


def _stage_solved(course: str | os.PathLike[str], stage: Path, assignment: str) -> None:
    """The project of `assignment`'s released answers in `stage` (its modules only: the
    package's `__init__.py` is the student wheel's)."""
    packages = [p for p in WITHHELD if assignment in withheld.solved_assignments(p)]
    if not packages:
        raise CourseError(f"{assignment} has no answers that the library builds on: there "
                          f"is nothing to release (those that have: "
                          f"{', '.join(withheld.solved_assignments('microgpt'))})")
    sources = {m: pack_root().joinpath(*m.split(".")).with_suffix(".py").read_text(
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


# the build backend every wheel of the release declares (`_project`); an environment
# whose setuptools is older (Python 3.11's venv brings 65.5, which without the `wheel`
# package has no `bdist_wheel`) builds in an isolated environment that pip fills from the
# package index
BACKEND = "setuptools"
BACKEND_MINIMUM = (77,)


def _backend_here() -> bool:
    """Whether this environment's setuptools is the one the release's wheels declare."""
    from importlib import metadata

    try:
        version = metadata.version(BACKEND)
    except metadata.PackageNotFoundError:
        return False
    parts = []
    for part in version.split(".")[:len(BACKEND_MINIMUM)]:
        digits = "".join(c for c in part if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts) >= BACKEND_MINIMUM


def _pip_error(output: str) -> str:
    """The line of pip's output that says why it failed (pip's own summary, "Failed to
    build ...", and a subprocess's exit say only that it did)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.split(":", 1)[1].strip() for line in lines
              if line.split(":", 1)[0] in ("ERROR", "error")]
    causes = [e for e in errors
              if not e.startswith(("Failed to build", "subprocess-exited-with-error"))]
    return (causes or errors or lines[-1:] or ["pip said nothing"])[0][:300]


def _wheel(stage: Path, out: Path, what: str = "the student wheel") -> Path:
    """The one wheel `pip wheel` builds from the project in `stage`, into `out`."""
    before = set(out.glob("*.whl")) if out.exists() else set()
    isolated = not _backend_here()
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
               "--wheel-dir", str(out), str(stage)]
    if not isolated:
        command.insert(-3, "--no-build-isolation")
    done = subprocess.run(command, cwd=stage, capture_output=True, text=True)
    if done.returncode != 0:
        minimum = ".".join(map(str, BACKEND_MINIMUM))
        if isolated:
            todo = (f"pip builds it in an environment of its own with {BACKEND}>={minimum} "
                    f"from the package index: make the index reachable, or give this "
                    f"environment '{BACKEND}>={minimum}', and run student-release again; "
                    f"{install_it_with(f'{BACKEND}>={minimum}')}")
        else:
            todo = (f"it was built with this environment's {BACKEND}: upgrade it and run "
                    f"student-release again; "
                    f"{install_it_with('--upgrade', f'{BACKEND}>={minimum}')}")
        raise CourseError(f"building {what} failed ({_pip_error(done.stderr + done.stdout)}): "
                          f"{todo}")
    made = sorted(set(out.glob("*.whl")) - before)
    if len(made) != 1:
        raise CourseError(f"building a wheel made {len(made)} wheels in {out}")
    return made[0]


def problems(target: str | os.PathLike[str]) -> list[str]:
    """What in the release folder `target` a student must not get ([] when nothing)."""
    target = Path(target)
    found = []
    for wheel in sorted((target / "wheels").glob("*.whl")):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if not name.startswith(WHEEL_PREFIXES):
                    found.append(f"{wheel.name}: {name} is not the engine or the kernel side")
                elif name in LEFT_OUT:
                    found.append(f"{wheel.name}: {name} is the instructor's only")
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


def _answers_left(wheel: zipfile.ZipFile) -> list[str]:
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


def build(course: str | os.PathLike[str], target: str | os.PathLike[str],
          names: Sequence[str] | None = None, say: Callable[[str], object] = print,
          solved: Iterable[str] = ()) -> Path:
    """Write the student release of `names` (every assignment when empty) into the folder
    `target` (new or empty), with a wheel of released answers for each assignment in
    `solved`; returns the student wheel's path."""
    course, target = Path(course), Path(target)
    if target.exists() and not target.is_dir():
        raise CourseError(f"{target} is a file: the release goes into a new folder")
    if target.exists() and any(target.iterdir()):
        raise CourseError(f"{target} is not empty: the release goes into a new folder")
    names = list(names or assignments(course))
    released = course / EXERCISES
    for name in names:
        if not notebook_paths(released / name):
            raise CourseError(f"{EXERCISES}/{name} has no notebook; run `residual-pack "
                              f"generate {name}` first")
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    try:
        with tempfile.TemporaryDirectory(prefix="residual-pack-release-") as tmp:
            stage = Path(tmp) / "project"
            stage.mkdir()
            _stage(course, stage)
            wheel = _wheel(stage, target / "wheels")
            for assignment in solved:
                stage = Path(tmp) / f"solved-{assignment}"
                stage.mkdir()
                _stage_solved(course, stage, assignment)
                made = _wheel(stage, target / "wheels",
                              f"the wheel of {assignment}'s answers")
                say(f"released answers of {assignment}: {made.relative_to(target)}")
    except BaseException:
        # a half-made release is no release: leave the folder as it was, so that the
        # same command works once the cause is fixed
        if created:
            shutil.rmtree(target, ignore_errors=True)
        else:
            for path in target.iterdir():
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        raise
    say(f"wheel: {wheel.relative_to(target)}")
    for name in names:
        shutil.copytree(released / name, target / "assignments" / name,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        say(f"assignment: assignments/{name}")
    (target / "nbgrader_config.py").write_text(STUDENT_CONFIG, encoding="utf-8")
    (target / "README.md").write_text(readme(wheel.name), encoding="utf-8")
    found = problems(target)
    if found:
        raise CourseError("the student release holds what a student must not get:\n  "
                          + "\n  ".join(found))
    return wheel
