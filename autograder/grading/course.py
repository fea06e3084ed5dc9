"""The course directory, and the throwaway copies of it that every nbgrader run works in.

The repository is the course: `nbgrader_config.py` at its root, the instructor notebooks
in `source/<assignment>/`. nbgrader writes a gradebook and `submitted/`, `autograded/`,
`feedback/` folders into its course root, so no run of ours points nbgrader at the
repository: each run copies the config and `source/` into a work folder and points
nbgrader there. The Jupyter and IPython folders nbgrader and its kernels write
(normally under $HOME) are sent to the work folder too.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from autograder.compat import check_schemas_once, read_alembic_head_in_process

if TYPE_CHECKING:
    from nbgrader.apps import NbGraderAPI
    from traitlets.config import Config

    from autograder.grading.plan import Sandbox

CONFIG_FILE = "nbgrader_config.py"
SOURCE = "source"
EXERCISES = "exercises"  # nbgrader's release folder (CourseDirectory.release_directory)
SOLUTIONS = "solutions"  # nbgrader's solution folder (CourseDirectory.solution_directory)
# where `residual-pack grade` and a work course's own config read a gradebook URL with its
# password (kept off command lines and out of files)
DB_URL_VARIABLE = "RESIDUAL_PACK_DB_URL"

# Arguments for every kernel nbgrader starts: the working directory (the student's
# submission folder at autograde time) is not put on sys.path, so a student's
# `autograder.py` or `microgpt/` cannot stand in for the installed packages.
KERNEL_ARGUMENTS = ["--IPKernelApp.ignore_cwd=True", "--IPKernelApp.log_level=ERROR"]
# per-cell time limit (s) when generate_solution runs a solution's full experiments
SOLUTION_CELL_TIMEOUT = 1200

log = logging.getLogger("residual_pack")
NBGRADER_LOG = "residual_pack.nbgrader"  # the logger nbgrader's API writes to (`api()`)


class CourseError(Exception):
    """The course directory or an assignment in it is missing or malformed."""


def find_course(start: str | os.PathLike[str] | None = None) -> Path:
    """The course root: `start` if given, else the first folder up from the working
    directory holding `nbgrader_config.py` and `source/`, else the checkout this package
    was installed from."""
    if start is not None:
        root = Path(start).resolve()
        if not (root / CONFIG_FILE).is_file():
            raise CourseError(f"{root} has no {CONFIG_FILE}: not a course directory")
        return root
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / CONFIG_FILE).is_file() and (folder / SOURCE).is_dir():
            return folder
    checkout = Path(__file__).resolve().parents[2]  # autograder/grading/course.py -> the checkout
    if (checkout / CONFIG_FILE).is_file() and (checkout / SOURCE).is_dir():
        return checkout
    raise CourseError(
        f"no course directory ({CONFIG_FILE} next to {SOURCE}/) above {here}; pass --course"
    )


def assignments(course: str | os.PathLike[str]) -> list[str]:
    """Names of the assignments: the folders of `source/`, sorted."""
    source = Path(course) / SOURCE
    if not source.is_dir():
        return []
    return sorted(
        p.name for p in source.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
    )


def check_assignments(course: str | os.PathLike[str], names: Sequence[str]) -> list[str]:
    """`names` if all are assignments of the course (all of them when empty), else an error."""
    known = assignments(course)
    if not names:
        if not known:
            raise CourseError(f"no assignments in {Path(course) / SOURCE}")
        return known
    unknown = [n for n in names if n not in known]
    if unknown:
        raise CourseError(f"unknown assignment(s) {unknown}; the course has {known}")
    return list(names)


def notebook_paths(folder: str | os.PathLike[str]) -> list[Path]:
    """The notebooks directly in `folder`, sorted (checkpoints are not notebooks)."""
    return sorted(p for p in Path(folder).glob("*.ipynb") if p.is_file())


def read_notebook(path: str | os.PathLike[str]) -> nbformat.NotebookNode:
    return nbformat.read(str(path), as_version=nbformat.NO_CONVERT)


@contextlib.contextmanager
def private_jupyter_dirs(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Point HOME and the Jupyter, IPython and matplotlib folders at `folder` meanwhile
    (so that nbgrader and its kernels write nothing under the user's HOME; this isolates
    nothing: the sandbox is `sandbox`).

    Kernels started meanwhile inherit these variables; so does PYTHONSAFEPATH, which
    keeps the working directory off a kernel's sys.path (IPython >= 9.7 honours it; the
    kernel argument in KERNEL_ARGUMENTS does the same for older ones)."""
    folder = Path(folder)
    env: dict[str, Any] = {
        "HOME": folder / "home",
        "IPYTHONDIR": folder / "ipython",
        "JUPYTER_CONFIG_DIR": folder / "jupyter" / "config",
        "JUPYTER_DATA_DIR": folder / "jupyter" / "data",
        "JUPYTER_RUNTIME_DIR": folder / "jupyter" / "runtime",
        "MPLCONFIGDIR": folder / "matplotlib",
    }
    for path in env.values():
        path.mkdir(parents=True, exist_ok=True)
    env = {k: str(v) for k, v in env.items()}
    env["PYTHONSAFEPATH"] = "1"
    env["JUPYTER_PLATFORM_DIRS"] = "0"
    # nbgrader runs `alembic` and jupyter runs kernels by name: find this environment's
    bindir = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "")
    if bindir not in path.split(os.pathsep):
        env["PATH"] = bindir + os.pathsep + path if path else bindir
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield folder
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def quiet_nbgrader(verbose: bool = False) -> None:
    """Keep nbgrader's log out of this process's output (on stderr with `verbose`), and
    its known harmless warning (nbgrader 0.9, a student's first autograde)."""
    nb_log = logging.getLogger(NBGRADER_LOG)
    nb_log.propagate = False
    nb_log.handlers.clear()
    if verbose:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[nbgrader %(levelname)s] %(message)s"))
        nb_log.addHandler(handler)
    else:
        nb_log.addHandler(logging.NullHandler())
    warnings.filterwarnings("ignore", message=".*not in session.*")


@contextlib.contextmanager
def work_folder(path: str | os.PathLike[str] | None = None, prefix: str = "residual-pack-",
                keep: bool = False) -> Iterator[Path]:
    """A folder for one run: `path` (created, kept) or a new temporary one (removed at
    the end unless `keep`)."""
    if path is not None:
        path = Path(path).resolve()
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield tmp
    finally:
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)


_GRADEBOOK_CONFIG = """

# ---- written by residual-pack: the gradebook of this folder ----
# nbgrader's commands and formgrader, run from this folder, read the gradebook the grading
# run wrote. Its password is not kept here: it is taken from ${variable} when that names
# this same gradebook, else libpq finds it ($PGPASSWORD, ~/.pgpass) as for any client.
def _gradebook(recorded):
    import os

    from sqlalchemy.engine import make_url

    given = os.environ.get({variable!r})
    if given:
        try:
            url = make_url(given)
        except Exception:  # not a URL: the recorded one, without a password
            return recorded
        if url._replace(password=None) == make_url(recorded):
            return url.render_as_string(hide_password=False)
    return recorded


c.CourseDirectory.db_url = _gradebook({recorded!r})
"""


def without_password(db_url: str) -> str:
    """`db_url` with its password left out (an URL that does not parse: as given)."""
    from sqlalchemy.engine import make_url

    try:
        url = make_url(db_url)
    except Exception:  # noqa: BLE001 (nbgrader will say what is wrong with it)
        return db_url
    # a named tuple's _replace: registered in autograder/compat.py (PRIVATE_NAMES)
    return url._replace(password=None).render_as_string(hide_password=False)


def gradebook_config(db_url: str) -> str:
    """The lines a work course's `nbgrader_config.py` ends with when its gradebook is
    `db_url` and not nbgrader's default (SQLite in the folder): that URL without its
    password, which the config takes from $RESIDUAL_PACK_DB_URL when it names the same
    gradebook, else libpq does (PGPASSWORD, ~/.pgpass)."""
    return _GRADEBOOK_CONFIG.format(variable=DB_URL_VARIABLE,
                                    recorded=without_password(db_url))


class WorkCourse:
    """A copy of the course (its config and `source/`) where nbgrader may write freely.

    `api()` is nbgrader's own NbGraderAPI on the copy; every step of the pipeline is one
    of its calls (or one of nbgrader's converters or its Validator), configured by the
    course's `nbgrader_config.py` plus the few overrides in `config()`.
    """

    def __init__(self, course: str | os.PathLike[str], root: str | os.PathLike[str],
                 names: Sequence[str] | None = None, copy: bool = True,
                 db_url: str | None = None) -> None:
        self.course = Path(course).resolve()
        self.root = Path(root).resolve()
        # the gradebook: nbgrader's db_url (SQLite in the work course unless given)
        self.db_url = db_url or f"sqlite:///{self.root / 'gradebook.db'}?timeout=120"
        self.names = check_assignments(self.course, names or [])
        self._api: NbGraderAPI | None = None
        # the sandbox autograde runs kernels in (see use_sandbox)
        self.sandbox: Sandbox | None = None
        if not copy:  # attach to a work course made earlier (by another process)
            return
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copy2(self.course / CONFIG_FILE, self.root / CONFIG_FILE)
        if db_url:  # nbgrader's commands and formgrader run here must find it too
            with open(self.root / CONFIG_FILE, "a", encoding="utf-8") as f:
                f.write(gradebook_config(db_url))
        for name in self.names:
            dest = self.root / SOURCE / name
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(
                self.course / SOURCE / name,
                dest,
                ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", "*.pyc"),
            )

    def path(self, *parts: str) -> Path:
        return self.root.joinpath(*parts)

    def config(self) -> Config:
        """The course's nbgrader config, read from the copy, plus our overrides."""
        from traitlets.config.loader import PyFileConfigLoader

        from autograder.grading.feedback import (
            FEEDBACK_PREPROCESSORS,
            FEEDBACK_TEMPLATE,
            PAGE_SAFETY,
            FeedbackPage,
            template_dirs,
        )

        cfg = PyFileConfigLoader(CONFIG_FILE, path=str(self.root)).load_config()
        # the config sets its root from its own location: make sure that is the copy
        cfg.CourseDirectory.root = str(self.root)
        (self.root / "exchange").mkdir(exist_ok=True)  # nbgrader's (unused) exchange
        cfg.Exchange.root = str(self.root / "exchange")
        course_args = list(cfg.Execute.get("extra_arguments", []))
        cfg.Execute.extra_arguments = course_args + [
            a for a in KERNEL_ARGUMENTS if a not in course_args
        ]
        cfg.Execute.record_timing = False  # no run timings in the committed solutions
        cfg.GenerateFeedback.preprocessors = list(FEEDBACK_PREPROCESSORS)
        # the feedback page's exporter only (its parent is GenerateFeedback): formgrader's
        # own pages use HTMLExporter with nbgrader's templates
        cfg.GenerateFeedback.exporter_class = FeedbackPage  # HTMLExporter, templates compiled once
        cfg.GenerateFeedback.HTMLExporter.template_name = FEEDBACK_TEMPLATE
        cfg.GenerateFeedback.HTMLExporter.extra_template_basedirs = template_dirs()
        # and no script of the student's runs in it, whatever the copied config says
        for name, value in PAGE_SAFETY.items():
            cfg.GenerateFeedback.HTMLExporter[name] = value
        # parallel graders share one SQLite gradebook: wait for a lock rather than fail
        cfg.CourseDirectory.db_url = self.db_url
        # nbgrader's autograde with our steps, the lists nbgrader_config.py sets for
        # nbgrader's own commands (one grading path), whatever the copied config says; our
        # Execute step runs kernels in this run's sandbox (named by its root folder). A
        # work course without a sandbox runs trusted notebooks only (the instructor's, the
        # tests' controls): there nbgrader's own Execute runs them.
        from autograder.grading import pipeline

        cfg.Autograde.sanitize_preprocessors = list(pipeline.SANITIZE_STEPS)
        if self.sandbox is None:
            steps = list(pipeline.TRUSTED_AUTOGRADE_STEPS)
        else:
            steps = list(pipeline.AUTOGRADE_STEPS)
            from autograder.grading.plan import open_sandbox

            cfg.SandboxedExecute.sandbox_root = open_sandbox(self.sandbox)
        cfg.Autograde.autograde_preprocessors = steps
        return cfg

    def use_sandbox(self, sandbox: Sandbox | None) -> None:
        """From now on, autograde runs kernels in `sandbox` (`plan.Sandbox`; None: trusted
        notebooks, in nbgrader's own kernels)."""
        if self.sandbox is not sandbox:
            self.sandbox = sandbox
            self._api = None

    def api(self) -> NbGraderAPI:
        if self._api is None:
            read_alembic_head_in_process()
            check_schemas_once()
            # known harmless noise of nbgrader 0.9 on a student's first autograde
            warnings.filterwarnings("ignore", message=".*not in session.*")
            from nbgrader.apps import NbGraderAPI
            from nbgrader.coursedir import CourseDirectory

            cfg = self.config()
            nb_log = logging.getLogger(NBGRADER_LOG)
            self._api = NbGraderAPI(
                coursedir=CourseDirectory(config=cfg), config=cfg, log=nb_log
            )
        return self._api

    def generate_assignment(self, name: str) -> Path:
        """nbgrader generate_assignment (with the gradebook of the copy), without the
        notebook guard's lists of quoted figures (see strip_quote_lists)."""
        result = self.api().generate_assignment(name, force=True, create=True)
        if not result["success"]:
            raise CourseError(f"generate_assignment {name} failed:\n{failure_text(result)}")
        release = self.path(EXERCISES, name)
        for path in notebook_paths(release):
            strip_quote_lists(path)
        return release

    def generate_solution(self, name: str, execute: bool = True) -> Path:
        """nbgrader generate_solution: the solution notebooks, run in a kernel unless
        `execute` is false. (NbGraderAPI has no method for it; this does what its
        generate_assignment does, with the GenerateSolution converter.)"""
        from nbgrader.converters import GenerateSolution
        from nbgrader.preprocessors import Execute
        from nbgrader.utils import capture_log, temp_attrs

        api = self.api()
        # a solution runs its full interactive experiments, not the small graded
        # configs: give its cells longer than the course's per-cell grading limit
        cfg = copy.deepcopy(api.config)
        cfg.Execute.timeout = max(SOLUTION_CELL_TIMEOUT, cfg.Execute.get("timeout") or 0)
        app = GenerateSolution(coursedir=api.coursedir, config=cfg, log=api.log)
        if not execute:
            app.preprocessors = [p for p in app.preprocessors if p is not Execute]
        app.force = True
        app.create_assignment = True
        with temp_attrs(api.coursedir, assignment_id=name):
            result = capture_log(app)
        if not result["success"]:
            raise CourseError(f"generate_solution {name} failed:\n{failure_text(result)}")
        return self.path(SOLUTIONS, name)


# cell metadata holding the figures a markdown cell quotes (autograder/authoring/notebook_guard.py)
QUOTES_METADATA = "residual_pack"


def strip_quote_lists(path: str | os.PathLike[str]) -> None:
    """Drop the notebook guard's lists of quoted figures from a student version (in
    place): they are for the instructors' check of the solutions, and on an answer cell
    they would list the figures of the model answer. nbgrader's cell checksums do not
    cover this metadata."""
    nb = read_notebook(path)
    found = [cell for cell in nb.cells if QUOTES_METADATA in cell.metadata]
    for cell in found:
        del cell.metadata[QUOTES_METADATA]
    if found:
        nbformat.write(nb, str(path))


def course_cell_timeout(course: str | os.PathLike[str], default: int) -> int:
    """The course config's per-cell time limit (Execute.timeout), in seconds; `default`
    when it sets none (see `session.course_limits`)."""
    from traitlets.config.loader import PyFileConfigLoader

    try:
        cfg = PyFileConfigLoader(CONFIG_FILE, path=str(course)).load_config()
        value = int(cfg.Execute.get("timeout", default) or default)
    except Exception:  # noqa: BLE001 (a config we cannot read: the default)
        return default
    return value if value > 0 else default


def failure_text(result: dict[str, Any]) -> str:
    """Why a failed nbgrader API call failed: its error log lines and the exception."""
    lines = [
        line.split("] ", 1)[-1]
        for line in result.get("log", "").splitlines()
        if line.startswith(("[ERROR]", "[CRITICAL]")) and "Traceback" not in line
        and "Please see" not in line
    ]
    reason = failure_reason(result)
    return "\n".join(lines + ([reason] if reason not in lines else []))


def failure_reason(result: dict[str, Any]) -> str:
    """One line saying why a failed nbgrader API call failed."""
    text = (result.get("log", "") + "\n" + result.get("error", "")).splitlines()
    for line in text:  # nbgrader's word on a copied graded cell comes first
        if line.startswith("[WARNING]") and "exists multiple times" in line:
            return line.split("] ", 1)[-1]
    for line in reversed(text):  # else the exception a traceback ended with
        stripped = line.strip()
        head = stripped.split(":", 1)[0]
        if ":" in stripped and "Please see" not in stripped \
                and not stripped.startswith(("[", "File ", "^")) and (
            head.endswith(("Error", "Exception", "Exit")) or head.endswith("Interrupt")
        ):
            return stripped
    for line in reversed(text):
        if line.startswith("[ERROR]") and "Please see" not in line:
            return line.split("] ", 1)[-1]
    return "unknown failure (run with -v to see nbgrader's log)"
