"""A grading run's sandbox, as the grading worker plans it: the read-only library every
kernel sees, and for each kernel a folder, a socket folder and the launcher's config.

`Sandbox` is made once per grading run (by `session.grading_session`) and pickled to the
worker processes; `Sandbox.plan` writes one kernel's launch config (`launcher` reads it).
`end_run` and `remove_stale_roots` clear what a run, or a killed one, left behind.
"""

import compileall
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from autograder.grading.answerless import write_answerless
from autograder.kernel.policy import (
    ASSIGNMENT_VARIABLE,
    KERNEL_PACKAGE,
    OUTPUT_VARIABLE,
    SWITCHED_OFF,
)
from autograder.sandbox import bubblewrap
from autograder.sandbox.launcher import FULL, is_launcher
from autograder.sandbox.limits import Limits, SandboxError, isolation_available
from autograder.sandbox.syscalls import MS_NODEV, MS_NOEXEC, MS_NOSUID, mount, umount

# which isolation runs the kernels: "bubblewrap" (`autograder.sandbox.bubblewrap`, the
# default where this machine allows it) or "launcher" (the home-made launcher, the
# fallback while it is retired; issue #26)
ENGINE_VARIABLE = "RESIDUAL_PACK_SANDBOX"
ENGINES = ("launcher", "bubblewrap")
CONN_SPACE = 1 << 20  # bytes a kernel may write in its sockets' folder (a tmpfs)


@dataclasses.dataclass
class KernelPlan:
    """One kernel's sandbox: its launch config and the folders the grading process keeps."""

    folder: Path  # host folder (root only), removed after the kernel
    config: Path  # the launcher's config
    conn: Path  # the ZeroMQ sockets and connection file (the kernel's uid only)
    exit_file: Path  # the launcher writes how the kernel ended
    phases_file: Path = None  # the launcher's timing record (lines "name wall-time")
    bwrap: object = None  # the engine "bubblewrap": (SandboxSpec without argv, Limits, Level)
    process: object = None  # the engine "bubblewrap": the started `SandboxProcess`

    def launcher_phases(self):
        """[name, wall time] the launcher noted as it started the kernel ([] if none)."""
        found = []
        try:
            text = self.phases_file.read_text()[:4096]
        except (OSError, AttributeError):
            return found
        for line in text.splitlines():
            name, _, when = line.rpartition(" ")
            with contextlib.suppress(ValueError):
                found.append([name, float(when)])
        return found

    def ended(self):
        """How the kernel process ended, as the launcher saw it ({} if unknown)."""
        if self.process is not None:
            if self.process.poll() is None:
                return {}
            outcome = self.process.outcome()
            code = outcome.returncode
            if outcome.kind in ("out of memory", "process limit", "killed"):
                return {"message": outcome.message}
            if outcome.kind == "signal":
                ended = {"signal": -code if code < 0 else code - 128}
                if "oom_kills" in (outcome.report or {}):  # a memory cgroup counted it
                    ended["memory_counted"] = True
                return ended
            return {"code": code}
        try:
            return json.loads(self.exit_file.read_text())
        except (OSError, ValueError):
            return {}

    def remove(self):
        if self.process is not None:
            self.process.cleanup()
        _unmount_under(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)


class Sandbox:
    """The sandbox settings of one grading run, shared (pickled) with its worker processes.

    `root` is a fresh root-only folder holding the read-only library the kernels see and,
    per kernel, a folder that is removed when the kernel is done."""

    def __init__(self, limits=None, level=None, root=None, engine=None):
        self.limits = limits or Limits()
        # a `level` is the launcher's (LIMITS, FULL): asking for one asks for the launcher
        self.engine = engine or os.environ.get(ENGINE_VARIABLE) or \
            ("launcher" if level is not None else "")
        if self.engine not in ("", *ENGINES):
            raise SandboxError(f"{ENGINE_VARIABLE}={self.engine!r}: one of {ENGINES}")
        self.bwrap_level = None
        self.bwrap_why = ""  # why the default did not take bubblewrap
        if self.engine in ("", "bubblewrap"):
            self.bwrap_level = bubblewrap.probe()
            if not self.bwrap_level.usable:
                if self.engine == "bubblewrap":
                    raise SandboxError(self.bwrap_level.message)
                self.bwrap_why = self.bwrap_level.message
                self.bwrap_level = None
                self.engine = "launcher"
            else:
                self.engine = "bubblewrap"
        if self.engine == "bubblewrap":
            bubblewrap.remove_stale(self.bwrap_level)  # what killed runs left
            level, why = (FULL if self.bwrap_level.root else "userns"), ""
        if level is None:
            level, why = isolation_available()
        else:
            why = ""
        if level not in (FULL, "userns") and hasattr(os, "geteuid") and os.geteuid() == 0:
            # without namespaces the kernel would run as root: no process limit applies,
            # and a student's os.kill(-1, SIGKILL) ends every process on the machine
            raise SandboxError(
                "refusing to run student code as root without the namespace sandbox "
                f"({why or level}); grade as an unprivileged user, or where root may "
                "unshare namespaces")
        self.level = level
        self.why = why
        # {assignment: {notebook: {grade_id: {"records", "hidden"}}}}: the reference run's
        # expected observations, which the graded test cells are judged against
        self.references = {}
        # {assignment: [[file, path in the working folder]]}: what is released besides the
        # notebooks (see add_release)
        self.support = {}
        # every code cell of every notebook runs (the self-check's --whole-notebooks);
        # by default the course's cells that cannot change a score are left out
        # (`cells.left_out_when_grading`)
        self.whole = False
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="rp-", dir="/tmp"))
        os.chmod(self.root, 0o711)
        (self.root / "owner").write_text(str(os.getpid()))
        self._prepare()

    def describe(self):
        if getattr(self, "bwrap_level", None) is not None:
            return self.bwrap_level.message + "; " + self.limits.describe()
        if getattr(self, "bwrap_why", ""):  # the launcher, as bubblewrap cannot run here
            return f"({self.bwrap_why}; the launcher instead) " + self._launcher_words()
        return self._launcher_words()

    def _launcher_words(self):
        if self.level == FULL:
            return "own uid, private filesystem, no network (namespaces); " + \
                self.limits.describe()
        return f"limits only ({self.why}); " + self.limits.describe()

    def _prepare(self):
        import autograder

        lib = self.root / "lib" / "autograder"
        lib.mkdir(parents=True)
        home = Path(autograder.__file__).parent
        shutil.copy2(home / "__init__.py", lib / "__init__.py")
        kernel = KERNEL_PACKAGE.split(".")[-1]
        shutil.copytree(home / kernel, lib / kernel,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        self.autograder_dir = str(Path(autograder.__file__).resolve().parent)
        self.packages = _our_packages()  # {name: folder}: microgpt, torchtrack, ...
        others = {n: f for n, f in self.packages.items() if n != "autograder"}
        if self.engine == "bubblewrap":
            # bwrap binds one library folder: our other packages are copied beside the
            # kernel-side package
            for name, folder in sorted(others.items()):
                shutil.copytree(folder, lib.parent / name,
                                ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            others = {n: str(lib.parent / n) for n in others}
        # per assignment whose tasks the library answers, a copy of the library with those
        # answers taken out of the source (`answerless`): its kernels get that one
        self.answerless = {}
        for assignment in sorted(SWITCHED_OFF):
            folder = self.root / f"lib-{assignment}"
            if self.engine == "bubblewrap":  # the whole library folder, as bwrap binds it
                shutil.copytree(lib.parent, folder)
            else:  # the launcher binds each package: copies of ours but the grader
                for name, source in sorted(others.items()):
                    shutil.copytree(source, folder / name,
                                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            write_answerless(folder, assignment)
            self.answerless[assignment] = str(folder)
        # compiled once here: a kernel cannot write bytecode (its library is read-only),
        # so a module without an up-to-date .pyc would be compiled again by every kernel
        answerless = [Path(folder) for folder in self.answerless.values()]
        for folder in [lib, *others.values(), *answerless]:
            with contextlib.suppress(OSError):
                compileall.compile_dir(folder, quiet=2, maxlevels=10)
        for top in [lib.parent, *answerless]:
            for p in [top, *top.rglob("*")]:
                os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.lib = str(lib)
        if self.engine == "bubblewrap":
            self._bwrap_base = self._bwrap_parts()
            return
        # the launcher's: where a kernel's Python finds our packages (the install), which
        # is not where this process found them when the course is a checkout: nbgrader
        # puts the course folder first on sys.path, and a kernel does not have it
        self.kernel_finds = _where_a_kernel_finds(self.packages)
        self.mpl_cache = self._matplotlib_cache()
        self.binds = self._binds()
        self.seccomp = self._seccomp_filter()

    def _bwrap_parts(self):
        """What every kernel's `SandboxSpec` shares (all but its folder and environment),
        and its `bubblewrap.Limits`."""
        limits, mib = self.limits, 1 << 20
        bwrap_limits = bubblewrap.Limits(
            memory_mib=max(1, limits.memory // mib), processes=limits.processes,
            tmpfs_mib=max(1, limits.disk // mib), file_size_mib=max(1, limits.file_size // mib),
            run_mib=max(1, CONN_SPACE // mib))
        site = Path(sysconfig.get_paths()["purelib"])
        base = bubblewrap.SandboxSpec(argv=(), writable=self.root, site_packages=site,
                                      library=Path(self.lib).parent)
        _, version = base.python()
        inside = f"{bubblewrap.VENV}/lib/python{version}/site-packages"
        # an installed (not editable) pack has the whole grader in site-packages: the
        # kernel gets its kernel-side part from the library folder and none of the rest
        hide = tuple(f"{inside}/{name}" for name in sorted(self.packages)
                     if (site / name).is_dir())
        return dataclasses.replace(base, hide=hide), bwrap_limits

    def _seccomp_filter(self):
        """The kernels' seccomp filter as a BPF program in a file (read by the launcher):
        `autograder.sandbox.seccomp`'s, with memfd_create and shmget refused too, since
        no memory cgroup counts what they would hold here (the address-space limit does
        not)."""
        from autograder.sandbox import seccomp

        path = self.root / "seccomp.bpf"
        with open(path, "wb") as f:
            seccomp.build(deny_uncounted_memory=True).export_bpf(f)
        os.chmod(path, 0o644)
        return str(path)

    def add_release(self, assignment, folder):
        """Give the kernels of `assignment` the files released with it besides the
        notebooks (from its release `folder`), in their working folder. Once per
        assignment: the grader calls it when the release exists."""
        if assignment in self.support:
            return
        folder = Path(folder)
        self.support[assignment] = [
            [str(path), str(path.relative_to(folder))]
            for path in sorted(folder.rglob("*"))
            if path.is_file() and path.suffix != ".ipynb"
            and ".ipynb_checkpoints" not in path.parts
        ]

    def _matplotlib_cache(self):
        """matplotlib's font list, built once, so that no kernel spends a second on it."""
        folder = self.root / "matplotlib"
        folder.mkdir()
        env = dict(os.environ, MPLCONFIGDIR=str(folder))
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run([sys.executable, "-c", "import matplotlib.font_manager"],
                           env=env, capture_output=True, timeout=120)
        for p in [folder, *folder.iterdir()]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        return str(folder)

    def _binds(self):
        """[source, target] pairs bound read-only into a kernel's root."""
        binds = []
        covered = []

        def add(src, dst=None):
            src = os.path.realpath(src)
            dst = dst or src
            if not os.path.exists(src):
                return
            if any(dst == c or dst.startswith(c + "/") for c in covered) and dst == src:
                return
            binds.append([src, dst])
            covered.append(dst)

        for top in ("/usr", "/etc"):
            add(top)
        for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            path = "/" + name
            if os.path.isdir(path) and not os.path.islink(path):
                add(path)
        add(sys.base_prefix)
        add(sys.prefix)
        add(str(Path(sys.executable).resolve().parent))
        # the code this process grades with, where it found it and where the kernel's
        # Python looks for it
        for name, folder in sorted(self.packages.items()):
            if name != "autograder":
                for target in dict.fromkeys([folder, self.kernel_finds.get(name, folder)]):
                    binds.append([folder, target])
        for target in dict.fromkeys([self.autograder_dir,
                                     self.kernel_finds.get("autograder", self.autograder_dir)]):
            binds.append([self.lib, target])  # the kernel-side modules only
        # the font list matplotlib builds once for the kernels
        binds.append([self.mpl_cache, self.mpl_cache])
        return binds

    def _binds_for(self, assignment):
        """The launcher's binds for a kernel of `assignment`: our packages from the copy
        without its answers, when the library holds some."""
        folder = self.answerless.get(assignment)
        if folder is None:
            return self.binds
        copies = {self.packages[name]: str(Path(folder, name))
                  for name in self.packages if Path(folder, name).is_dir()}
        return [[copies.get(source, source), target] for source, target in self.binds]

    def _kernel_env(self, folder, assignment=""):
        """The environment a kernel gets (all of it: nothing of the grader's is kept)."""
        limits = self.limits
        env = {
            "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
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
            ASSIGNMENT_VARIABLE: assignment,
            OUTPUT_VARIABLE: str(limits.output),
        }
        # nbgrader sets these in the grading process while it runs the notebook; the
        # notebooks read them to pick their small graded configurations
        for name in ("NBGRADER_EXECUTION", "NBGRADER_VALIDATING"):
            if name in os.environ:
                env[name] = os.environ[name]
        home = "/sandbox/home" if self.level == FULL else str(folder / "home")
        env.update({
            "HOME": home,
            "IPYTHONDIR": f"{home}/.ipython",
            "MPLCONFIGDIR": f"{home}/.config/matplotlib",
            "JUPYTER_CONFIG_DIR": f"{home}/.jupyter",
            "JUPYTER_DATA_DIR": f"{home}/.local/share/jupyter",
            "JUPYTER_RUNTIME_DIR": f"{home}/.local/share/jupyter/runtime",
            "TMPDIR": "/tmp" if self.level == FULL else str(folder / "tmp"),
        })
        return env

    def _bwrap_plan(self, label, assignment):
        """One kernel's plan under the engine "bubblewrap": a folder whose `c` is the
        kernel's writable folder (its sockets and connection file; a tmpfs of its own as
        root), and what `SandboxKernelManager` hands to `bubblewrap.start`."""
        folder = Path(tempfile.mkdtemp(prefix="b-", dir=self.root))
        os.chmod(folder, 0o711)
        (folder / "label").write_text(label)  # whose notebook: for a person looking on
        os.chmod(folder / "label", 0o600)
        conn = folder / "c"
        conn.mkdir(mode=0o700)
        env = self._kernel_env(folder, assignment)
        for name in ("PATH", "HOME", "TMPDIR", "IPYTHONDIR", "MPLCONFIGDIR",
                     "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR"):
            env.pop(name, None)  # bubblewrap's own, inside the sandbox
        base, bwrap_limits = self._bwrap_base
        spec = dataclasses.replace(base, writable=conn, env=env)
        if assignment in self.answerless:
            spec = dataclasses.replace(spec, library=Path(self.answerless[assignment]))
        return KernelPlan(folder, folder / "launch.json", conn, folder / "exit.json",
                          bwrap=(spec, bwrap_limits, self.bwrap_level))

    def plan(self, uid, label, assignment=""):
        """Folders and the launch config for one kernel run by `uid` (None: limits only)."""
        if self.engine == "bubblewrap":
            return self._bwrap_plan(label, assignment)
        folder = Path(tempfile.mkdtemp(prefix=f"{uid or 'k'}-", dir=self.root))
        os.chmod(folder, 0o711)
        conn = folder / "c"
        conn.mkdir(mode=0o700)
        if self.level == FULL:
            # the kernel writes its sockets here, in the host's filesystem: a tmpfs of its
            # own keeps what else it writes there to CONN_SPACE, not the host's disk
            mount("tmpfs", str(conn), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  f"size={CONN_SPACE},mode=700")
        plan = KernelPlan(folder, folder / "launch.json", conn, folder / "exit.json",
                          folder / "phases.txt")
        limits = self.limits
        env = self._kernel_env(folder, assignment)
        home = env["HOME"]
        work = "/sandbox/work" if self.level == FULL else str(folder / "work")
        config = {
            "level": self.level,
            "uid": uid,
            "label": label,
            "folder": str(folder),
            "conn": str(conn),
            "newroot": str(folder / "r"),
            "binds": self._binds_for(assignment),
            "support": self.support.get(assignment, []),
            "mpl_cache": self.mpl_cache,
            "home": home,
            "work": work,
            "env": env,
            "exit_file": str(plan.exit_file),
            "phases_file": str(plan.phases_file),
            "limits": dataclasses.asdict(limits),
            "seccomp": self.seccomp,
            "parent": os.getpid(),  # the launcher's parent; it stops the kernel if that goes
        }
        plan.config.write_text(json.dumps(config))
        os.chmod(plan.config, 0o600)
        return plan

    def close(self):
        end_run(self.root)


def _our_packages():
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
    found = {}
    for name in sorted(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is not None and spec.submodule_search_locations:
            found[name] = str(Path(list(spec.submodule_search_locations)[0]).resolve())
    return found


_WHERE = """
import importlib.util, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        continue
    if spec is not None and spec.submodule_search_locations:
        found[name] = list(spec.submodule_search_locations)[0]
print(json.dumps(found))
"""


def _where_a_kernel_finds(packages):
    """{name: folder} where this Python, started as a kernel is (from /, the working
    folder not on sys.path), finds each of `packages`; {} when it cannot say."""
    import json

    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONSAFEPATH": "1",
           "PYTHONNOUSERSITE": "1", "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
    try:
        done = subprocess.run([sys.executable, "-c", _WHERE, *sorted(packages)], cwd="/",
                              env=env, capture_output=True, text=True, timeout=120)
        found = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        return {}
    return {name: os.path.realpath(folder) for name, folder in found.items()}


def _unmount_under(folder):
    """Unmount (lazily) every mount at or below `folder` (the sockets' tmpfs)."""
    folder = os.path.realpath(folder)
    try:
        with open("/proc/self/mounts") as f:
            points = [line.split()[1] for line in f]
    except OSError:
        return
    for point in sorted(points, key=len, reverse=True):
        point = point.replace("\\040", " ")
        if point == folder or point.startswith(folder + "/"):
            with contextlib.suppress(OSError, AttributeError):
                umount(point)


def leftover_launchers(folder):
    """Pids of sandbox launchers whose config lies in `folder` (a run's root)."""
    folder = os.path.realpath(folder) + "/"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        args = [a.decode("utf-8", "replace") for a in args]
        if is_launcher(args):
            i = args.index("launch")
            if i + 1 < len(args) and os.path.realpath(args[i + 1]).startswith(folder):
                found.append(int(entry.name))
    return found


def end_run(folder):
    """End what a grading run left in its sandbox root `folder`: kill its launchers (their
    kernels go with them: each namespace's first process dies with its launcher), unmount
    the sockets' folders, remove the files."""
    for pid in leftover_launchers(folder):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _unmount_under(folder)
    shutil.rmtree(folder, ignore_errors=True)


def abandoned(folders):
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


def remove_stale_roots():
    """End the leftovers of earlier runs whose grading process is gone (a killed run):
    their launchers and kernels, mounts and folders."""
    for folder in abandoned(Path("/tmp").glob("rp-*")):
        end_run(folder)


