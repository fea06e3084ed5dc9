"""Where a student's code runs at grading time: a throwaway sandbox per notebook.

The grading process (nbgrader's autograde, our `Grader`) never runs student code itself.
nbgrader's Execute step is replaced by `SandboxedExecute`, which starts the kernel through
this module's launcher (`python -m autograder.grader.sandbox launch CONFIG -- KERNEL...`):

- **Its own user and a private view of the machine** (`namespaces`, when the grading
  process runs as root on Linux): the kernel runs under a numeric uid of its own (a slot
  held by the grading worker, never shared with another kernel running at the same time)
  in new mount, pid, network and IPC namespaces. Its root is an empty tmpfs holding,
  read-only, only the system (/usr, /etc), Python and the virtual environment, `microgpt`
  and the kernel-side modules of `autograder` (checks, reference; not the grader). The
  course folder (source/, solutions/, the gradebook, the work course, every submission)
  does not exist there. It has no network. Its only writable space is a tmpfs of
  `Limits.disk` bytes (HOME, the working folder, /tmp). Killing the pid namespace's first
  process kills everything the student started.
- **Limits** (every level): address space, processes (per uid, so they only count
  against this kernel), CPU seconds, file size, open files, no core dumps; a time limit per
  cell and per notebook, enforced from outside; a cap on the output kept and on the size
  of any message the kernel sends.
- **No shared files with other students**: the kernel gets its cells over ZeroMQ (a
  socket in a folder that only its uid can enter), never the notebook file; nothing of a
  submission but its notebook is handed to nbgrader at all.

When the grading process is not root (a laptop), the level is `limits`: resource limits, a
throwaway folder and a clean environment only. `residual-pack grade` says which level
ran; the README's threat model lists what each one defends.
"""

import contextlib
import ctypes
import dataclasses
import fcntl
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..policy import (
    ASSIGNMENT_VARIABLE,
    OUTPUT_NOTE,
    OUTPUT_VARIABLE,
    REPORT_KEY,
    test_cell_code,
)

MiB = 1 << 20
GiB = 1 << 30
CONN_SPACE = 1 << 20  # bytes a kernel may write in its sockets' folder (a tmpfs)

FULL = "namespaces"
LIMITS = "limits"


class SandboxError(Exception):
    """The sandbox could not be set up (or would not be safe)."""


@dataclasses.dataclass(frozen=True)
class Limits:
    """What one notebook may use while it is graded."""

    cell_timeout: int = 120  # seconds of wall time per cell (the course config's Execute.timeout)
    notebook_timeout: int = 900  # seconds of wall time for the whole notebook
    memory: int = 2 * GiB  # address space of each process
    processes: int = 256  # processes and threads of the kernel's uid
    file_size: int = 64 * MiB  # largest file it may write
    disk: int = 256 * MiB  # all it may write (HOME, working folder, /tmp), in memory
    output: int = 8 * MiB  # output kept per notebook; more is left out
    message: int = 64 * MiB  # largest message accepted from the kernel
    notebook_bytes: int = 64 * MiB  # largest notebook file graded
    grace: int = 10  # seconds an interrupted cell has to stop before the kernel is killed

    def describe(self):
        return (f"{self.cell_timeout} s per cell, {self.notebook_timeout} s per notebook, "
                f"{_size(self.memory)} memory, {self.processes} processes, "
                f"{_size(self.disk)} disk, {_size(self.output)} output kept")


def _size(n):
    for unit, size in (("GiB", GiB), ("MiB", MiB)):
        if n >= size:
            return f"{n / size:g} {unit}"
    return f"{n} bytes"


# ---------------------------------------------------------------- can we isolate?


def _uid_range():
    text = os.environ.get("RESIDUAL_PACK_SANDBOX_UIDS", "64000-64999")
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


@functools.cache
def isolation_available():
    """(level, why not full): `namespaces` when a probe kernel launcher could unshare,
    mount and change uid; else `limits` and the reason."""
    forced = os.environ.get("RESIDUAL_PACK_ISOLATION", "")
    if forced == LIMITS:
        return LIMITS, "RESIDUAL_PACK_ISOLATION=limits"
    if not sys.platform.startswith("linux"):
        return LIMITS, "namespaces need Linux"
    if os.geteuid() != 0:
        return LIMITS, "the grading process is not root (own uid and namespaces need root)"
    lo, _ = _uid_range()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "autograder.grader.sandbox", "probe", str(lo)],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return LIMITS, f"the namespace probe failed ({exc})"
    if run.returncode != 0:
        lines = (run.stderr or run.stdout).strip().splitlines() or ["no output"]
        return LIMITS, f"the namespace probe failed: {lines[-1]}"
    return FULL, ""


# ---------------------------------------------------------------- uid slots


_HELD_UIDS = []  # open lock files: a uid stays ours while its file is locked


def acquire_uid():
    """A uid no other sandboxed kernel uses now (held until this process exits)."""
    lo, hi = _uid_range()
    locks = Path(tempfile.gettempdir()) / "residual-pack-uids"
    locks.mkdir(mode=0o700, exist_ok=True)
    busy = _uids_in_use()
    for uid in range(lo, hi + 1):
        if uid in busy:
            continue
        f = open(locks / f"{uid}.lock", "a+")  # noqa: SIM115 (kept open: it is the lock)
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.close()
            continue
        _HELD_UIDS.append(f)
        return uid
    raise SandboxError(f"no free sandbox uid in {lo}-{hi}")


def _uids_in_use():
    uids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                uids.add(entry.stat().st_uid)
    return uids


# ---------------------------------------------------------------- a run's sandbox


@dataclasses.dataclass
class KernelPlan:
    """One kernel's sandbox: its launch config and the folders the grading process keeps."""

    folder: Path  # host folder (root only), removed after the kernel
    config: Path  # the launcher's config
    conn: Path  # the ZeroMQ sockets and connection file (the kernel's uid only)
    exit_file: Path  # the launcher writes how the kernel ended

    def ended(self):
        """How the kernel process ended, as the launcher saw it ({} if unknown)."""
        try:
            return json.loads(self.exit_file.read_text())
        except (OSError, ValueError):
            return {}

    def remove(self):
        _unmount_under(self.folder)
        shutil.rmtree(self.folder, ignore_errors=True)


class Sandbox:
    """The sandbox settings of one grading run, shared (pickled) with its worker processes.

    `root` is a fresh root-only folder holding the read-only library the kernels see and,
    per kernel, a folder that is removed when the kernel is done."""

    def __init__(self, limits=None, release_dir=None, level=None, root=None):
        self.limits = limits or Limits()
        if level is None:
            level, why = isolation_available()
        else:
            why = ""
        if level != FULL and hasattr(os, "geteuid") and os.geteuid() == 0:
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
        self.release_dir = str(release_dir) if release_dir else None
        self.root = Path(root) if root else Path(tempfile.mkdtemp(prefix="rp-", dir="/tmp"))
        os.chmod(self.root, 0o711)
        (self.root / "owner").write_text(str(os.getpid()))
        self._prepare()

    # picklable as plain data: workers rebuild nothing
    def __getstate__(self):
        return dict(self.__dict__)

    def describe(self):
        if self.level == FULL:
            return "own uid, private filesystem, no network (namespaces); " + \
                self.limits.describe()
        return f"limits only ({self.why}); " + self.limits.describe()

    def _prepare(self):
        import autograder

        lib = self.root / "lib" / "autograder"
        lib.mkdir(parents=True)
        from ..policy import KERNEL_SIDE

        for path in Path(autograder.__file__).parent.glob("*.py"):
            name = "autograder" if path.stem == "__init__" else f"autograder.{path.stem}"
            if name in KERNEL_SIDE:
                shutil.copy2(path, lib / path.name)
        for p in [lib.parent, lib, *lib.iterdir()]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        self.autograder_dir = str(Path(autograder.__file__).resolve().parent)
        self.packages = _our_packages()  # {name: folder}: microgpt, torchtrack, ...
        self.lib = str(lib)
        self.support = []  # files released with the assignment, besides notebooks
        if self.release_dir:
            for path in sorted(Path(self.release_dir).rglob("*")):
                if path.is_file() and path.suffix != ".ipynb" \
                        and ".ipynb_checkpoints" not in path.parts:
                    self.support.append([str(path), str(path.relative_to(self.release_dir))])
        self.mpl_cache = self._matplotlib_cache()
        self.binds = self._binds()

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
        for name, folder in sorted(self.packages.items()):
            if name != "autograder":
                binds.append([folder, folder])
        binds.append([self.lib, self.autograder_dir])  # the kernel-side modules only
        return binds

    def plan(self, uid, label, assignment=""):
        """Folders and the launch config for one kernel run by `uid` (None: limits only)."""
        folder = Path(tempfile.mkdtemp(prefix=f"{uid or 'k'}-", dir=self.root))
        os.chmod(folder, 0o711)
        conn = folder / "c"
        conn.mkdir(mode=0o700)
        if self.level == FULL:
            # the kernel writes its sockets here, in the host's filesystem: a tmpfs of its
            # own keeps what else it writes there to CONN_SPACE, not the host's disk
            _mount("tmpfs", str(conn), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                   f"size={CONN_SPACE},mode=700")
        plan = KernelPlan(folder, folder / "launch.json", conn, folder / "exit.json")
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
        if self.level == FULL:
            home, work = "/sandbox/home", "/sandbox/work"
        else:
            home, work = str(folder / "home"), str(folder / "work")
        env.update({
            "HOME": home,
            "IPYTHONDIR": f"{home}/.ipython",
            "MPLCONFIGDIR": f"{home}/.config/matplotlib",
            "JUPYTER_CONFIG_DIR": f"{home}/.jupyter",
            "JUPYTER_DATA_DIR": f"{home}/.local/share/jupyter",
            "JUPYTER_RUNTIME_DIR": f"{home}/.local/share/jupyter/runtime",
            "TMPDIR": "/tmp" if self.level == FULL else str(folder / "tmp"),
        })
        config = {
            "level": self.level,
            "uid": uid,
            "label": label,
            "folder": str(folder),
            "conn": str(conn),
            "newroot": str(folder / "r"),
            "binds": self.binds,
            "support": self.support,
            "mpl_cache": self.mpl_cache,
            "home": home,
            "work": work,
            "env": env,
            "exit_file": str(plan.exit_file),
            "limits": dataclasses.asdict(limits),
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
                _check(_c().umount2(point.encode(), MNT_DETACH), f"umount {point}")


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
        if "autograder.grader.sandbox" in args and "launch" in args:
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


def remove_stale_roots():
    """End the leftovers of earlier runs whose grading process is gone (a killed run):
    their launchers and kernels, mounts and folders."""
    for folder in Path("/tmp").glob("rp-*"):
        try:
            owner = int((folder / "owner").read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
        except ProcessLookupError:
            end_run(folder)
        except OSError:
            pass


# ---------------------------------------------------------------- the worker's slot

_CURRENT = {}  # what this process grades with: {"sandbox": Sandbox, "uid": int or None}
RUNS = {}  # (student, notebook) -> NotebookRun, filled by SandboxedExecute


def use(sandbox):
    """Make this process grade with `sandbox` (taking a uid slot when isolating)."""
    if _CURRENT.get("sandbox") is sandbox:
        return
    uid = _CURRENT.get("uid")
    if sandbox.level == FULL and uid is None:
        uid = acquire_uid()
    _CURRENT.update(sandbox=sandbox, uid=uid)


def current():
    if "sandbox" not in _CURRENT:
        raise SandboxError("no sandbox in use (call sandbox.use first)")
    return _CURRENT["sandbox"], _CURRENT["uid"]


# ---------------------------------------------------------------- the grading side

@dataclasses.dataclass
class CellRun:
    index: int
    grade_id: str  # "" for the student's own cells
    kind: str  # "test", "answer", "given" or "own"
    status: str  # ok, error, timeout, stuck, died, not run
    ename: str = ""
    evalue: str = ""
    seconds: float = 0.0
    output_dropped: int = 0  # bytes of output left out
    stderr: bool = False  # wrote to stderr (nbgrader fails a test cell that does)
    checks: int = 0  # checks the test makes (from the reference run)
    verdict: str = ""  # why the grader failed the test ("" when it passed)
    hidden: bool = False  # the failed check is a hidden one
    restored: list = dataclasses.field(default_factory=list)  # put back before a test
    changed: list = dataclasses.field(default_factory=list)  # changed while a test ran


@dataclasses.dataclass
class NotebookRun:
    cells: list = dataclasses.field(default_factory=list)
    ended: str = ""  # why the kernel stopped early, in words ("" when it did not)
    level: str = ""
    seconds: float = 0.0

    def to_dict(self):
        return dataclasses.asdict(self)


def cell_kind(cell):
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if not meta.get("grade_id"):
        return "own"
    if meta.get("grade") and not meta.get("solution") and cell.cell_type == "code":
        return "test"
    if meta.get("solution"):
        return "answer"
    return "given"


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_end(ended, limits):
    """How a kernel ended, in words, from the launcher's exit record."""
    if not ended:
        return "the kernel died"
    sig = ended.get("signal")
    if sig:
        name = _signal_name(sig)
        hint = {
            "SIGKILL": "killed: most likely it went over the memory limit "
                       f"({_size(limits.memory)})",
            "SIGSEGV": "it crashed (segmentation fault)",
            "SIGBUS": "it crashed (bus error)",
            "SIGABRT": "it aborted (often: out of memory inside a library)",
            "SIGXCPU": "it used up its CPU time",
            "SIGXFSZ": f"it wrote a file bigger than {_size(limits.file_size)}",
        }.get(name, "it was killed")
        return f"the kernel ended on {name}: {hint}"
    code = ended.get("code")
    return f"the kernel exited with code {code} (exit(), sys.exit() outside a cell, or os._exit)"


def _sandboxed_execute_class():
    """SandboxedExecute, made on first use (importing nbgrader is slow)."""
    import asyncio
    from queue import Empty

    import zmq
    import zmq.asyncio
    from jupyter_client.manager import AsyncKernelManager
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbclient.util import run_sync
    from nbformat import NotebookNode
    from nbgrader.preprocessors import Execute

    from ..judge import verdict as judge_cell
    from ..testsource import GradedCellError, prepare

    class SandboxKernelManager(AsyncKernelManager):
        """Starts the kernel through the sandbox launcher, over IPC sockets in the
        kernel's own folder, and refuses messages above the size limit."""

        def __init__(self, plan=None, limits=None, **kwargs):
            super().__init__(**kwargs)
            self.plan = plan
            self.limits = limits
            self.transport = "ipc"
            self.ip = str(plan.conn / "k")
            self.connection_file = str(plan.conn / "kernel.json")
            self.context.setsockopt(zmq.MAXMSGSIZE, limits.message)

        def client(self, **kwargs):
            # the client's sockets come from a context of their own whose sockets refuse
            # (and disconnect) a peer that sends a message above the limit
            if getattr(self, "client_context", None) is None:
                self.client_context = zmq.asyncio.Context()
                self.client_context.setsockopt(zmq.MAXMSGSIZE, self.limits.message)
            kwargs.setdefault("context", self.client_context)
            return super().client(**kwargs)

        def close_client_context(self):
            context, self.client_context = getattr(self, "client_context", None), None
            if context is not None:
                context.destroy(linger=0)

        def format_kernel_cmd(self, extra_arguments=None):
            kernel = [sys.executable, "-m", "autograder.gradekernel", "-f",
                      self.connection_file, *(extra_arguments or [])]
            return [sys.executable, "-m", "autograder.grader.sandbox", "launch",
                    str(self.plan.config), "--", *kernel]

    class SandboxedExecute(Execute):
        """nbgrader's Execute, with the kernel in a sandbox and every failure of the
        student's code (a time limit, a dead or stuck kernel, a flood of output)
        turned into an error in the cell it happened in, the notebook going on when it
        can. Graded test cells go to the kernel's hardened runner (see gradekernel)."""

        def preprocess(self, nb, resources=None, km=None):
            sandbox, uid = current()
            self._limits = sandbox.limits
            info = (resources or {}).get("nbgrader", {})
            key = (info.get("student", ""), info.get("notebook", ""))
            assignment = info.get("assignment", "")
            self._expected = sandbox.references.get(assignment, {}).get(key[1], {})
            self._plan = sandbox.plan(uid, f"{key[0]}/{key[1]}", assignment)
            self._run = NotebookRun(level=sandbox.level)
            self._deadline = time.monotonic() + sandbox.limits.notebook_timeout
            self._stopped = ""  # set once the kernel cannot run more cells
            self._kept = 0
            self._dropped = {}
            self._reply = None
            start = time.monotonic()
            try:
                return super().preprocess(nb, resources, km)
            finally:
                self._run.seconds = time.monotonic() - start
                self._kill_kernel()
                with contextlib.suppress(Exception):
                    self.km.close_client_context()
                self._plan.remove()
                RUNS[key] = self._run

        def create_kernel_manager(self):
            self.km = SandboxKernelManager(plan=self._plan, limits=self._limits,
                                           config=self.config)
            return self.km

        def _kill_kernel(self):
            km = getattr(self, "km", None)
            process = getattr(getattr(km, "provisioner", None), "process", None)
            if process is not None and process.poll() is None:
                with contextlib.suppress(OSError):
                    process.kill()
                with contextlib.suppress(Exception):
                    process.wait(10)

        def _get_timeout(self, cell):
            remaining = self._deadline - time.monotonic()
            return max(1, int(min(self._limits.cell_timeout, remaining) + 0.999))

        async def async_execute_cell(self, cell, cell_index, execution_count=None,
                                     store_history=True):
            if cell.cell_type != "code" or not cell.source.strip():
                return cell
            kind = cell_kind(cell)
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", "")
            record = CellRun(cell_index, grade_id, kind, "ok")
            self._run.cells.append(record)
            if not self._stopped and time.monotonic() >= self._deadline:
                self._stopped = (f"the notebook used up its time limit "
                                 f"({self._limits.notebook_timeout} s)")
                self._run.ended = self._stopped
                self._kill_kernel()
            if self._stopped:
                return self._not_run(cell, record)
            self._reply = None
            self._timed_out = False
            # after its reply, a cell's output may still be arriving (a flood that is being
            # left out): wait for it as long as the cell itself may take
            self.iopub_timeout = max(4, self._limits.cell_timeout)
            start = time.monotonic()
            original = self.kc.execute
            nonce, test = "", None
            if kind == "test":
                try:
                    test = prepare(cell.source)
                    code = test.witness
                except GradedCellError:
                    code = "raise SyntaxError('this test cell could not be prepared')\n"
                nonce = secrets.token_hex(16)
                sent = test_cell_code(code, grade_id, "witness", nonce)

                def execute(_code, *args, **kwargs):
                    return original(sent, *args, **kwargs)
                self.kc.execute = execute
            try:
                await super().async_execute_cell(cell, cell_index, execution_count,
                                                 store_history)
            except DeadKernelError:
                await asyncio.sleep(0.2)
                ended = self._plan.ended()
                why = describe_end(ended, self._limits)
                self._stopped = why
                self._run.ended = f"{why}, in cell {cell_index}"
                record.status = "died"
                record.ename, record.evalue = "KernelDied", why
                self._add_error(cell, "KernelDied", f"{why}; the cells after this one did not run")
            except (CellTimeoutError, Empty, asyncio.TimeoutError) as exc:
                # the kernel did not go quiet after the cell (a flood of output, or a
                # kernel that ignored the interrupt): it cannot be trusted with more cells
                record.status = "stuck"
                why = (f"the kernel did not finish cell {cell_index} within its time limit "
                       f"and did not stop when interrupted")
                if self._timed_out is False:
                    why = f"the kernel stopped answering during cell {cell_index} ({exc})"
                self._stopped = why
                self._run.ended = why
                record.ename, record.evalue = "CellTimeoutError", why
                self._kill_kernel()
                self._add_error(cell, "CellTimeoutError", why)
            finally:
                if kind == "test":
                    with contextlib.suppress(AttributeError):
                        del self.kc.execute
            record.seconds = time.monotonic() - start
            reply = (self._reply or {}).get("content", {})
            if record.status == "ok":
                if self._timed_out:
                    record.status = "timeout"
                    record.ename = "CellTimeoutError"
                    record.evalue = f"stopped after {self._timed_out} s"
                elif reply.get("status") == "error":
                    record.status = "error"
                    record.ename = str(reply.get("ename", ""))[:200]
                    record.evalue = str(reply.get("evalue", ""))[:2000]
                elif self._reply is None:
                    record.status = "error"
                    record.ename = "NoReply"
                    self._add_error(cell, "NoReply", "the kernel sent no reply for this cell")
            extra = reply.get(REPORT_KEY) if kind == "test" else None
            if isinstance(extra, dict):
                record.restored = [str(x)[:200] for x in extra.get("restored", [])][:50]
                record.changed = [str(x)[:200] for x in extra.get("changed", [])][:50]
            if kind == "test":
                self._judge(record, test, extra, reply, nonce)
            record.output_dropped = self._dropped.get(cell_index, 0)
            record.stderr = any(o.get("output_type") == "stream" and o.get("name") == "stderr"
                                for o in cell.get("outputs", []))
            if kind == "test":
                self._settle_test_cell(cell, record)
            return cell

        execute_cell = run_sync(async_execute_cell)

        def _judge(self, record, test, report, reply, nonce):
            """The grader's verdict on a test cell: its observations against the
            reference run's (see `judge`); the kernel's own status can only fail it."""
            expected = self._expected.get(record.grade_id)
            if expected is None or test is None:
                why = ("no expected observations for this test (the reference run did "
                       "not record it)" if test is not None else
                       "this test cell could not be prepared for grading")
                record.checks, record.verdict = 0, why
            else:
                hidden = set(expected.get("hidden", [])) | set(test.hidden)
                kernel_error = (record.ename, record.evalue) if record.status != "ok" else None
                found = judge_cell(report, reply.get("status", ""), kernel_error,
                                   expected["records"], hidden, nonce)
                record.checks, record.hidden = found.checks, found.hidden
                record.verdict = "" if found.passed else found.message
            if record.verdict and record.status == "ok":
                record.status, record.ename = "error", "CheckFailed"
                record.evalue = record.verdict

        def _not_run(self, cell, record):
            record.status = "not run"
            record.ename, record.evalue = "NotRun", self._stopped
            cell.outputs = []
            self._add_error(cell, "NotRun", f"not run: {self._stopped}")
            return cell

        def _add_error(self, cell, name, message):
            if any(o.get("output_type") == "error" and o.get("ename") == name
                   for o in cell.get("outputs", [])):
                return
            cell.setdefault("outputs", []).append(NotebookNode(
                output_type="error", ename=name, evalue=message,
                traceback=[f"{name}: {message}"],
            ))

        @staticmethod
        def _settle_test_cell(cell, record):
            """The score of a test cell comes from the grader's verdict only (nbgrader
            scores a cell with an error output 0). When it failed, the verdict goes first as
            the error (a failed check's message; the kernel's own error when the student's
            code raised); when it passed, a line says so. A result (nbgrader would read
            partial credit from it) is never kept."""
            outputs = [o for o in cell.get("outputs", [])
                       if o.get("output_type") != "execute_result"]
            errors = [o for o in outputs if o.get("output_type") == "error"]
            rest = [o for o in outputs if o.get("output_type") != "error"]
            if record.status != "ok":
                own = [o for o in errors if record.verdict in (
                    f"{o.get('ename', '')}: {o.get('evalue', '')}", o.get("ename", ""))]
                if own:  # the kernel's own error is the reason: it goes first
                    first, errors = own[0], [o for o in errors if o is not own[0]]
                else:
                    message = record.verdict or record.evalue
                    name = "CheckFailed" if record.verdict else (record.ename or "Error")
                    first = NotebookNode(output_type="error", ename=name, evalue=message,
                                         traceback=[f"{name}: {message}"])
                outputs = [first] + rest + errors
            else:
                outputs = rest + [NotebookNode(
                    output_type="stream", name="stdout",
                    text=f"graded: all {record.checks} check(s) of this cell passed\n")]
            cell.outputs = outputs

        def on_cell_executed(self, **kwargs):
            self._reply = kwargs.get("execute_reply")
            super().on_cell_executed(**kwargs)

        async def _async_handle_timeout(self, timeout, cell=None):
            self._timed_out = timeout
            reply = await super()._async_handle_timeout(timeout, cell)
            # did the interrupt stop it? a kernel_info reply comes once the cell is over
            if not await self._answers(self._limits.grace):
                self._kill_kernel()
                raise CellTimeoutError("the kernel did not stop when interrupted")
            return reply

        async def _answers(self, within):
            try:
                msg_id = self.kc.kernel_info()
                if asyncio.iscoroutine(msg_id):
                    msg_id = await msg_id
                deadline = time.monotonic() + within
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return False
                    msg = await self.kc.shell_channel.get_msg(timeout=left)
                    if msg.get("parent_header", {}).get("msg_id") == msg_id:
                        return True
            except (Empty, asyncio.TimeoutError):
                return False
            except Exception:  # noqa: BLE001 (no answer is no answer)
                return False

        def output(self, outs, msg, display_id, cell_index):
            size = _message_size(msg)
            text = msg.get("content", {}).get("text")
            if isinstance(text, str) and OUTPUT_NOTE in text:  # the kernel left some out
                self._dropped[cell_index] = self._dropped.get(cell_index, 0) + 1
            if self._kept + size > self._limits.output:
                first = cell_index not in self._dropped
                self._dropped[cell_index] = self._dropped.get(cell_index, 0) + size
                if first:
                    note = NotebookNode(output_type="stream", name="stdout", text=(
                        f"\n[grading: this cell's output beyond the {_size(self._limits.output)} "
                        f"kept per notebook was left out]\n"))
                    outs.append(note)
                return None
            self._kept += size
            return super().output(outs, msg, display_id, cell_index)

    return SandboxedExecute


def _message_size(msg):
    content = msg.get("content", {})
    size = 0
    for value in (content.get("text"), content.get("evalue")):
        if isinstance(value, str):
            size += len(value)
    for key in ("data", "traceback"):
        value = content.get(key)
        if isinstance(value, dict):
            size += sum(len(v) if isinstance(v, str) else len(str(v)) for v in value.values())
        elif isinstance(value, list):
            size += sum(len(str(v)) for v in value)
    return size + 200


@functools.cache
def sandboxed_execute():
    return _sandboxed_execute_class()


# ---------------------------------------------------------------- the launcher
# Everything below runs in the launcher process (root), then in the namespaces.

_libc = None

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(src, target, fstype, flags, data=None):
    _check(_c().mount(src and src.encode(), target.encode(), fstype and fstype.encode(),
                      ctypes.c_ulong(flags), data and data.encode()), f"mount {target}")


def _prctl(option, value):
    _check(_c().prctl(option, ctypes.c_ulong(value), 0, 0, 0), "prctl")


def _bind(src, target, readonly=True):
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()  # noqa: SIM115
    _mount(src, target, None, MS_BIND | MS_REC)
    if readonly:
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _build_root(cfg):
    """The kernel's view of the machine, built in the new mount namespace."""
    root = cfg["newroot"]
    uid = cfg["uid"]
    os.makedirs(root, mode=0o700, exist_ok=True)
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=755")
    # the only writable space: one tmpfs for HOME, the working folder, /tmp and /dev/shm
    sandbox = root + "/sandbox"
    os.makedirs(sandbox)
    limits = cfg["limits"]
    _mount("tmpfs", sandbox, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={limits['disk']},mode=755")
    for sub in ("home", "work", "tmp", "shm"):
        os.makedirs(f"{sandbox}/{sub}")
        os.chown(f"{sandbox}/{sub}", uid, uid)
        os.chmod(f"{sandbox}/{sub}", 0o700 if sub in ("home", "work") else 0o1777)
    _bind(f"{sandbox}/tmp", root + "/tmp", readonly=False)
    # the read-only binds come after /tmp, so a course (or its venv) that lives under
    # /tmp is bound on top of the writable /tmp instead of being hidden by it
    for src, dst in cfg["binds"]:
        _bind(src, root + dst)
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        if os.path.islink("/" + name):
            os.symlink(os.readlink("/" + name), f"{root}/{name}")
    os.makedirs(root + "/dev")
    _mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for node in ("null", "zero", "full", "random", "urandom"):
        _bind("/dev/" + node, f"{root}/dev/{node}", readonly=False)
    os.makedirs(root + "/dev/shm")
    _bind(f"{sandbox}/shm", root + "/dev/shm", readonly=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc")
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    # the sockets' folder, at the same path as outside
    _bind(cfg["conn"], root + cfg["conn"], readonly=False)
    # a passwd entry for the kernel's uid
    passwd = os.path.join(cfg["folder"], "passwd")
    with open("/etc/passwd") as f:
        lines = [line for line in f if line.startswith("root:")]
    lines.append(f"student:x:{uid}:{uid}:student:/sandbox/home:/bin/sh\n")
    with open(passwd, "w") as f:
        f.writelines(lines)
    group = os.path.join(cfg["folder"], "group")
    with open(group, "w") as f:
        f.write(f"root:x:0:\nstudent:x:{uid}:\n")
    _bind(passwd, root + "/etc/passwd")
    _bind(group, root + "/etc/group")
    _fill_home(cfg, sandbox + "/home", sandbox + "/work", uid)
    old = root + "/.old"
    os.makedirs(old)
    number = SYS_PIVOT_ROOT.get(os.uname().machine)
    if number is not None and _c().syscall(number, root.encode(), old.encode()) == 0:
        os.chdir("/")
        _check(_c().umount2(b"/.old", MNT_DETACH), "umount the old root")
        os.rmdir("/.old")
    else:
        os.chroot(root)
        os.chdir("/")
    _mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _fill_home(cfg, home, work, uid):
    """The working folder gets the assignment's released files; HOME the font cache."""
    for src, rel in cfg["support"]:
        dest = os.path.join(work, rel)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(src, dest)
    mpl = os.path.join(home, ".config", "matplotlib")
    os.makedirs(mpl)
    for entry in os.listdir(cfg["mpl_cache"]):
        src = os.path.join(cfg["mpl_cache"], entry)
        if os.path.isfile(src):
            shutil.copyfile(src, os.path.join(mpl, entry))
    if uid is not None:
        for base in (home, work):
            for folder, dirs, files in os.walk(base):
                for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
                    os.chown(name, uid, uid)


def _set_limits(limits):
    import resource

    cpu = limits["notebook_timeout"] + 30
    pairs = [
        (resource.RLIMIT_AS, limits["memory"]),
        (resource.RLIMIT_NPROC, limits["processes"]),
        (resource.RLIMIT_CPU, cpu),
        (resource.RLIMIT_FSIZE, limits["file_size"]),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_NOFILE, 1024),
    ]
    for which, value in pairs:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(which, (value, value))


def _drop_privileges(uid):
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)


def _exec_kernel(cfg, argv):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.umask(0o077)
    os.chdir(cfg["work"])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the kernel writes past ZeroMQ goes nowhere
        os.dup2(null, fd)
    os.execve(argv[0], argv, cfg["env"])


def _record_end(record, status):
    """Write how the kernel ended to `record` (a file opened before the root changed)."""
    info = {"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else \
        {"code": os.WEXITSTATUS(status)}
    with contextlib.suppress(OSError):
        record.write(json.dumps(info))
        record.close()
    if "signal" in info:
        return 128 + info["signal"]
    return info["code"]


def _wait(child, stop, parent):
    """Wait for `child`; if this process's parent (the grading process, pid `parent`) goes
    away first, kill `child` and leave. (A loop, not a thread: a process that has unshared
    its pid namespace cannot start threads.)"""
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except InterruptedError:
            continue
        if pid == child:
            return status
        if os.getppid() != parent:
            stop()
            os._exit(1)
        time.sleep(0.2)


def launch(cfg, argv):
    """Start the kernel `argv` as `cfg` says; return its exit status (128 + signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for the kernel
    if os.getppid() != cfg["parent"]:  # the grading process died before we started
        return 1
    if cfg["level"] != FULL:
        return _launch_limits_only(cfg, argv)
    # this process stays where it is; its child starts the new pid namespace and makes
    # its own mount, network and IPC namespaces
    _check(_c().unshare(CLONE_NEWPID), "unshare")
    init = os.fork()
    if init == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the launcher gone: all of it goes
            _run_init(cfg, argv)
        except BaseException as exc:  # noqa: BLE001
            print(f"sandbox: {exc}", file=sys.stderr, flush=True)
            os._exit(70)
        os._exit(0)

    def stop(*_):
        with contextlib.suppress(OSError):
            os.kill(init, signal.SIGKILL)

    signal.signal(signal.SIGTERM, lambda *a: (stop(), os._exit(143)))
    signal.signal(signal.SIGHUP, lambda *a: (stop(), os._exit(129)))
    status = _wait(init, stop, cfg["parent"])
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status)


def _run_init(cfg, argv):
    """The first process of the new pid namespace: build the root, start the kernel,
    reap; when the kernel ends, so does everything else in the namespace."""
    record = open(cfg["exit_file"], "w")  # noqa: SIM115 (not inherited by the kernel)
    _check(_c().unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
    for path in [cfg["conn"], *(os.path.join(cfg["conn"], n) for n in os.listdir(cfg["conn"]))]:
        os.chown(path, cfg["uid"], cfg["uid"])  # the connection file: the kernel reads it
    _build_root(cfg)
    uid = cfg["uid"]
    kernel = os.fork()
    if kernel == 0:
        try:
            _drop_privileges(uid)
            _set_limits(cfg["limits"])
            _exec_kernel(cfg, argv)
        except BaseException as exc:  # noqa: BLE001
            print(f"sandbox: could not start the kernel: {exc}", file=sys.stderr, flush=True)
        os._exit(70)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *a: os.kill(kernel, signal.SIGKILL))
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(70)
        except InterruptedError:
            continue
        if pid == kernel:
            os._exit(_record_end(record, status))


def _launch_limits_only(cfg, argv):
    """No namespaces: the kernel gets a throwaway HOME and working folder, a clean
    environment and the limits, and runs as this process's user."""
    folder = cfg["folder"]
    for sub in ("home", "work", "tmp"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    _fill_home(cfg, cfg["home"], cfg["work"], None)
    record = open(cfg["exit_file"], "w")  # noqa: SIM115
    kernel = os.fork()
    if kernel == 0:
        try:
            _set_limits(cfg["limits"])
            _exec_kernel(cfg, argv)
        except BaseException as exc:  # noqa: BLE001
            print(f"sandbox: could not start the kernel: {exc}", file=sys.stderr, flush=True)
        os._exit(70)

    def stop(*_):
        with contextlib.suppress(OSError):
            os.kill(kernel, signal.SIGKILL)

    signal.signal(signal.SIGTERM, lambda *a: (stop(), os._exit(143)))
    return _record_end(record, _wait(kernel, stop, cfg["parent"]))


def probe(uid):
    """Exit 0 when this machine lets us unshare, mount and change uid (as `launch` will)."""
    where = tempfile.mkdtemp(prefix="rp-probe-")
    try:
        _check(_c().unshare(CLONE_NEWPID), "unshare")
        child = os.fork()
    except OSError as exc:
        os.rmdir(where)
        print(f"{exc}", file=sys.stderr, flush=True)
        return 1
    if child == 0:
        try:
            _check(_c().unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC), "unshare")
            _mount(None, "/", None, MS_REC | MS_PRIVATE)
            _mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
            _mount(sys.prefix, where, None, MS_BIND | MS_REC)
            _drop_privileges(uid)
            os._exit(0)
        except BaseException as exc:  # noqa: BLE001
            print(f"{exc}", file=sys.stderr, flush=True)
            os._exit(1)
    _, status = os.waitpid(child, 0)
    os.rmdir(where)
    return 0 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 else 1


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["probe"]:
        return probe(int(argv[1]))
    if argv[:1] == ["launch"] and "--" in argv:
        split = argv.index("--")
        with open(argv[1]) as f:
            cfg = json.load(f)
        return launch(cfg, argv[split + 1:])
    print("usage: python -m autograder.grader.sandbox launch CONFIG -- KERNEL ARGS...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
