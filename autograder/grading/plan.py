"""A grading run's sandbox, as the grading worker plans it: the read-only library every
kernel sees, and for each kernel a folder and the `bubblewrap.SandboxSpec` it runs in.

`Sandbox` is made once per grading run (by `session.grading_session`) and pickled to the
worker processes; `Sandbox.plan` makes one kernel's folder and spec, which
`execute.SandboxKernelManager` hands to `bubblewrap.start`. `end_run` and
`remove_stale_roots` clear what a run, or a killed one, left behind.
"""

import compileall
import contextlib
import dataclasses
import os
import shutil
import sysconfig
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from autograder.grading.answerless import SWITCHED_OFF, write_answerless
from autograder.kernel.policy import OUTPUT_VARIABLE
from autograder.sandbox import bubblewrap
from autograder.sandbox.limits import Limits, SandboxError

# the allowlist is a package: a graded kernel gets `autograder/__init__.py` (which imports
# nothing) and this package, nothing else of `autograder`
KERNEL_PACKAGE = "autograder.kernel"


def kernel_side(name: str) -> bool:
    """Whether the module `name` (dotted) is in a graded kernel's copy of `autograder`."""
    return name in ("autograder", KERNEL_PACKAGE) or name.startswith(KERNEL_PACKAGE + ".")


# "limits": run kernels with limits only, no sandbox, even where bubblewrap could run
# (never as root); "bubblewrap": fail rather than fall back to limits only; unset: the
# sandbox where this machine allows it, else limits only (not as root)
ENGINE_VARIABLE = "RESIDUAL_PACK_SANDBOX"
ENGINES = ("bubblewrap", "limits")
# `Sandbox.level`: a fresh uid per kernel in bubblewrap (root), bubblewrap as the grading
# user (an unprivileged user namespace), or no sandbox (limits only)
FULL, USERNS, LIMITS = "namespaces", "userns", "limits"


@dataclasses.dataclass
class KernelPlan:
    """One kernel's sandbox: its folders, and what `bubblewrap.start` is given."""

    folder: Path  # host folder, removed after the kernel
    conn: Path  # the ZeroMQ sockets and connection file (the kernel's writable folder)
    bwrap: Any = None  # (SandboxSpec without argv, Limits, bubblewrap.Level)
    process: Any = None  # the started `SandboxProcess`

    def ended(self) -> dict[str, Any]:
        """How the kernel process ended ({} if unknown, or still running)."""
        if self.process is not None:
            if self.process.poll() is None:
                return {}
            outcome = self.process.outcome()
            code = outcome.returncode
            if outcome.kind in ("out of memory", "process limit", "killed"):
                return {"message": outcome.message}
            if outcome.kind == "signal":
                ended: dict[str, Any] = {"signal": -code if code < 0 else code - 128}
                if "oom_kills" in (outcome.report or {}):  # a memory cgroup counted it
                    ended["memory_counted"] = True
                return ended
            return {"code": code}
        return {}

    def remove(self) -> None:
        if self.process is not None:
            self.process.cleanup()
        shutil.rmtree(self.folder, ignore_errors=True)


class Sandbox:
    """The sandbox settings of one grading run, shared (pickled) with its worker processes.

    `root` is a fresh root-only folder holding the read-only library the kernels see and,
    per kernel, a folder that is removed when the kernel is done."""

    def __init__(self, limits: Limits | None = None, root: str | os.PathLike[str] | None = None,
                 engine: str | None = None) -> None:
        self.limits = limits or Limits()
        asked = engine or os.environ.get(ENGINE_VARIABLE) or ""
        if asked not in ("", *ENGINES):
            raise SandboxError(f"{ENGINE_VARIABLE}={asked!r}: one of {ENGINES}")
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
        if asked == "limits":
            level = bubblewrap.limits_level(f"asked for: {ENGINE_VARIABLE}=limits")
        else:
            level = bubblewrap.probe()
            if not level.usable and asked != "bubblewrap" and not as_root:
                level = bubblewrap.limits_level(level.message.removeprefix("no sandbox: "))
        if not level.usable:
            raise SandboxError(level.message + (
                "; as root, grading refuses to run student code without it (a kernel "
                "would run as root)" if as_root else ""))
        if as_root and not level.sandboxed:
            # without a uid of its own the kernel would run as root: no process limit
            # applies, and a student's os.kill(-1, SIGKILL) ends every process on the machine
            raise SandboxError(
                "refusing to run student code as root without the sandbox "
                f"({level.message}): mend that, or grade as an unprivileged user")
        self.bwrap_level = level
        bubblewrap.remove_stale(level)  # what killed runs left
        # {assignment: {notebook: {grade_id: {"records", "hidden"}}}}: the reference run's
        # expected observations, which the graded test cells are judged against
        self.references: dict[str, dict[str, Any]] = {}
        # every code cell of every notebook runs (the self-check's --whole-notebooks);
        # by default the course's cells that cannot change a score are left out
        # (`cells.left_out_when_grading`)
        self.whole = False
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="rp-", dir="/tmp"))
        os.chmod(self.root, 0o711)
        (self.root / "owner").write_text(str(os.getpid()))
        self._prepare()

    @property
    def level(self) -> str:
        """FULL, USERNS or LIMITS: how this run's kernels are isolated (`bwrap_level`)."""
        level = self.bwrap_level
        return FULL if level.root else USERNS if level.sandboxed else LIMITS

    def describe(self) -> str:
        cpu = self.limits.cpus and bubblewrap.cpu_quota(self.bwrap_level)
        return (self.bwrap_level.message + "; " + self.limits.describe()
                + (f", {self.limits.cpus:g} CPU per kernel" if cpu else ""))

    def _prepare(self) -> None:
        import autograder

        lib = self.root / "lib" / "autograder"
        lib.mkdir(parents=True)
        home = Path(autograder.__file__).parent
        shutil.copy2(home / "__init__.py", lib / "__init__.py")
        kernel = KERNEL_PACKAGE.split(".")[-1]
        shutil.copytree(home / kernel, lib / kernel,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        self.packages = _our_packages()  # {name: folder}: microgpt, torchtrack, ...
        # the kernels get one library folder: our other packages are copied beside the
        # kernel-side package
        folder: str | Path
        for name, folder in sorted(self.packages.items()):
            if name != "autograder":
                shutil.copytree(folder, lib.parent / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        # per assignment whose tasks the library answers, a copy of the library with those
        # answers taken out of the source (`answerless`): its kernels get that one
        self.answerless: dict[str, str] = {}
        for assignment in sorted(SWITCHED_OFF):
            folder = self.root / f"lib-{assignment}"
            shutil.copytree(lib.parent, folder)
            write_answerless(folder, assignment)
            self.answerless[assignment] = str(folder)
        # compiled once here: a kernel cannot write bytecode (its library is read-only),
        # so a module without an up-to-date .pyc would be compiled again by every kernel
        tops = [lib.parent, *(Path(folder) for folder in self.answerless.values())]
        for top in tops:
            with contextlib.suppress(OSError):
                compileall.compile_dir(top, quiet=2, maxlevels=10)
            for p in [top, *top.rglob("*")]:
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.lib = str(lib)
        self._bwrap_base = self._bwrap_parts()

    def _bwrap_parts(self) -> tuple[bubblewrap.SandboxSpec, Limits]:
        """What every kernel's `SandboxSpec` shares (all but its folder and environment),
        and the `Limits` it starts with (this run's own: bubblewrap reads the same class)."""
        site = Path(sysconfig.get_paths()["purelib"])
        base = bubblewrap.SandboxSpec(argv=(), writable=self.root, site_packages=site,
                                      library=Path(self.lib).parent)
        _, version = base.python()
        inside = f"{bubblewrap.VENV}/lib/python{version}/site-packages"
        # an installed (not editable) pack has the whole grader in site-packages: the
        # kernel gets its kernel-side part from the library folder and none of the rest
        hide = tuple(f"{inside}/{name}" for name in sorted(self.packages)
                     if (site / name).is_dir())
        return dataclasses.replace(base, hide=hide), self.limits

    def _kernel_env(self) -> dict[str, str]:
        """The environment a kernel gets besides `bubblewrap.environment`'s (nothing of
        the grader's is kept)."""
        limits = self.limits
        env = {
            "LANG": "C.UTF-8",
            "LC_ALL": "C.UTF-8",
            "USER": "student",
            "LOGNAME": "student",
            "PYTHONSAFEPATH": "1",  # the working folder is not on sys.path
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "JUPYTER_PLATFORM_DIRS": "0",
            OUTPUT_VARIABLE: str(limits.output),
        }
        # nbgrader sets these in the grading process while it runs the notebook; the
        # notebooks read them to pick their small graded configurations
        for name in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING"):
            if name in os.environ:
                env[name] = os.environ[name]
        return env

    def plan(self, label: str, assignment: str = "") -> KernelPlan:
        """One kernel's plan: a folder whose `c` is the kernel's writable folder (its
        sockets and connection file; a tmpfs of its own as root), and what
        `SandboxKernelManager` hands to `bubblewrap.start`. `label`: whose notebook."""
        folder = Path(tempfile.mkdtemp(prefix="b-", dir=self.root))
        os.chmod(folder, 0o711)
        (folder / "label").write_text(label)  # whose notebook: for a person looking on
        os.chmod(folder / "label", 0o600)
        conn = folder / "c"
        conn.mkdir(mode=0o700)
        env = self._kernel_env()
        base, limits = self._bwrap_base
        spec = dataclasses.replace(base, writable=conn, env=env)
        if assignment in self.answerless:
            spec = dataclasses.replace(spec, library=Path(self.answerless[assignment]))
        return KernelPlan(folder, conn, bwrap=(spec, limits, self.bwrap_level))

    def close(self) -> None:
        end_run(self.root)


# the sandboxes open in this process, by their root folder: what
# `SandboxedExecute.sandbox_root` (a plain config value) names
_OPEN: dict = {}


def open_sandbox(sandbox: "Sandbox") -> str:
    """Make `sandbox` (made by this process, or unpickled into it) the one that
    `SandboxedExecute.sandbox_root` = its root names in this process; returns the root."""
    root = str(sandbox.root)
    _OPEN[root] = sandbox
    return root


def sandbox_at(root: str) -> "Sandbox":
    """The sandbox this process opened at `root`; `SandboxError` when none."""
    found = _OPEN.get(str(root))
    if found is None:
        raise SandboxError(f"no sandbox at {root} in this process: SandboxedExecute."
                           f"sandbox_root names a sandbox the grading run opened")
    return found


def close_sandbox(sandbox: "Sandbox") -> None:
    """Close `sandbox` (`Sandbox.close`), no longer named by its root in this process."""
    for root in [root for root, found in _OPEN.items() if found is sandbox]:
        del _OPEN[root]
    sandbox.close()


def _our_packages() -> dict[str, str]:
    """{top-level package: its folder} for the packages this pack installs (the
    distribution that holds `autograder`): the kernels may import them."""
    import importlib.metadata
    import importlib.util

    names = {"autograder", "microgpt"}
    try:
        dist = importlib.metadata.packages_distributions().get("autograder", [None])[0]
        if dist:
            names |= set((importlib.metadata.distribution(dist).read_text("top_level.txt")
                          or "").split())
    except Exception:  # noqa: BLE001 (then the two we know of)
        pass
    found: dict[str, str] = {}
    for name in sorted(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found[name] = str(Path(list(spec.submodule_search_locations)[0]).resolve())
    return found


def end_run(folder: str | os.PathLike[str]) -> None:
    """Remove what a grading run left in its sandbox root `folder` (its kernels die with
    the process that started them: bwrap's --die-with-parent, setpriv's --pdeathsig, the
    lifeline's watcher; the mounts and cgroups of a killed one go with
    `bubblewrap.remove_stale`)."""
    shutil.rmtree(folder, ignore_errors=True)


def abandoned(folders: Iterable[Path]) -> Iterator[Path]:
    """The folders among `folders` whose `owner` file names a process that is gone (a
    killed run's); a folder without a readable owner, or whose owner lives, is kept."""
    for folder in folders:
        try:
            owner = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            yield folder
        except OSError:
            pass


def remove_stale_roots() -> None:
    """Remove the folders of earlier runs whose grading process is gone (a killed run)."""
    for folder in abandoned(Path("/tmp").glob("rp-*")):
        end_run(folder)


