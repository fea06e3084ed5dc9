"""A kernel process isolated by bubblewrap: the argument list, the start, the end.

Our code only builds an argument list for well-kept tools and runs it:

    /bin/sh -c '(<watch the lifeline>; kill -9 0) & exec "$@"' sh
    /bin/sh -c 'echo $$ > <cgroup.procs>...; exec unshare --mount --propagation private
        -- /bin/sh -c "mount --bind <source> <stage>/<i>...; exec
        prlimit <rlimits> -- setpriv --reuid U --regid U --clear-groups --inh-caps=-all
        --bounding-set=-all --no-new-privs -- bwrap --unshare-all --unshare-user
        --disable-userns --die-with-parent --new-session --seccomp FD ... -- <kernel>"'

- The first shell (root) joins the kernel's cgroups (`cgroups.KernelCgroups`) and is
  replaced by the rest: every process of the kernel is in them from its first instruction.
- `unshare --mount` and the bind mounts (root, in a private mount namespace that only
  this kernel's launch sees) make the Python installation, the site-packages folder, the
  caller's library and writable folders visible at neutral paths (empty files and folders
  in a fresh stage folder) to a uid that could not reach them by their own path: the
  Python here lives under /root (mode 700). bwrap 0.8 resolves the source of
  `--ro-bind-fd` by its path too (`realpath` of /proc/self/fd/N), so passing open file
  descriptors does not get past /root; running bwrap as root with a user namespace would
  map the sandbox to host uid 0. Nothing on the host changes: the stage folder holds only
  empty mount points, and the mounts die with the namespace.
- setpriv drops to a fresh uid (one per kernel, from a high range, `acquire_uid`), clears
  the groups and every capability, and sets no_new_privs; prlimit sets the rlimits.
- As root, the writable folder gets a tmpfs of `Limits.run_space` owned by that uid (the
  host's view, so the caller reads it; unmounted by `cleanup`), which the memory cgroup
  counts too.
- bwrap (unprivileged, in a new user namespace that maps the uid to itself) builds the
  kernel's view: /usr read-only (libc, /bin/sh), the Python binary and standard library at
  /opt/python, the site-packages folder as that of a virtual environment at /opt/venv
  (its pyvenv.cfg handed over on a file descriptor: `--ro-bind-data`), the
  caller's library at /opt/lib (on PYTHONPATH), the writable folder at /run/kernel, a
  tmpfs /tmp and /dev/shm of a fixed size, its own /proc and /dev, and nothing else: no
  /home, /root, /work, no course files, / read-only. All namespaces are new (no network
  but a loopback of its own), the user namespace cannot make another
  (`--disable-userns`, and the seccomp filter), the kernel dies with the grader
  (`--die-with-parent`), it has no controlling terminal (`--new-session`). bwrap's child
  asks for that death signal only after its clone, so a grader killed in that instant
  would leave it waiting for ever. A lifeline covers it: a pipe whose only writing end is
  the grader's. At its end of file a watcher forked before the chain, outside the sandbox
  and its cgroups (`_watched`), SIGKILLs the chain's process group, which holds bwrap's
  child until its --new-session; the kernel holds the reading end too
  (`LIFELINE_VARIABLE`) and exits at its end of file
  (`autograder.kernel.gradekernel.watch_lifeline`).

Without root (an instructor's own account where the machine allows unprivileged user
namespaces) the same bwrap and seccomp filter run as that user, with rlimits for what
the cgroups would have done and memfd_create and shmget refused; `probe()` says in a
sentence what is lost. `remove_stale` clears what a grader killed before its cleanup
left behind (cgroups, mounts, stage folders).

Where bubblewrap cannot run at all and the grader is not root, the level "limits"
(`limits_level`) is no sandbox, and says so: the kernel runs as the grading user, with
host paths, under prlimit's rlimits (memory as address space, processes, file size, open
files, no core), in a clean environment (coreutils' `env -i`) whose HOME and temporary
folders are the kernel's own throwaway folder:

    prlimit <rlimits> -- setpriv --pdeathsig SIGKILL -- env -i -C <folder>/tmp K=V...
        <python> -m ... <host paths>

As root it is refused (`start`): a kernel without a uid of its own would run as root.
"""

import contextlib
import dataclasses
import fcntl
import os
import random
import shlex
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from . import cgroups, seccomp
from .limits import Limits, SandboxError, size_words  # noqa: F401 (Limits: what start reads)

# fixed paths inside the sandbox
PYTHON_HOME = "/opt/python"  # the installation: binary, standard library, libpython
VENV = "/opt/venv"  # a virtual environment over it, whose site-packages is the caller's
PYTHON = VENV + "/bin/python3"  # the kernel's Python
LIBRARY = "/opt/lib"
RUN = "/run/kernel"  # the writable folder (ZeroMQ IPC sockets, connection file)

UID_RANGE_VARIABLE = "SANDBOX_UIDS"  # "lo-hi": the uids kernels get when the grader is root
DEFAULT_UIDS = (2_100_000_000, 2_100_999_999)  # far above login and subordinate uids
LOCKS = Path(tempfile.gettempdir()) / "microgpt-sandbox-uids"
# what installs it, as the messages print it: a command, not the checkout's
# scripts/install-bubblewrap, which an environment made from the wheel does not have
INSTALL = "apt-get update && apt-get install -y bubblewrap"


# ------------------------------------------------------------------ the machine


@dataclasses.dataclass(frozen=True)
class Level:
    """What this machine allows. `kind`: "root" (a fresh uid per kernel and cgroup limits),
    "userns" (bwrap in an unprivileged user namespace and rlimits) or "none" (no
    sandbox). `cgroup`: "v1", "v2" or None; `parents`: where kernels' cgroups are made.
    `message`: one sentence for the log."""

    kind: str
    message: str
    cgroup: str | None = None
    parents: Any = None

    @property
    def root(self) -> bool:
        return self.kind == "root"

    @property
    def usable(self) -> bool:
        return self.kind != "none"

    @property
    def sandboxed(self) -> bool:
        """A sandbox around the kernel (not the level "limits", which has none)."""
        return self.kind in ("root", "userns")


ROOT_MESSAGE = (
    "sandbox: bubblewrap as a fresh uid per kernel, all namespaces new (no network), "
    "seccomp, a read-only view of the Python installation only, and cgroup {version} "
    "limits on memory (anonymous, shared and tmpfs together) and processes")
USERNS_MESSAGE = (
    "sandbox: bubblewrap in an unprivileged user namespace as {user}, all namespaces new "
    "(no network), seccomp, a read-only view of the Python installation only; without a "
    "cgroup ({why}) the limits are rlimits: memory is the address space of each process "
    "(not their sum), memfd_create and System V shared memory are refused because "
    "nothing would count them, files in /tmp and /dev/shm are bounded by the size of "
    "each tmpfs and not by the memory limit, the writable folder only by the file size "
    "limit per file (put it on a tmpfs such as $XDG_RUNTIME_DIR), the process limit "
    "counts every process of {user} on the machine, there is no CPU share, and every "
    "kernel runs as the same uid")
ROOT_NO_CGROUP_MESSAGE = (
    "sandbox: bubblewrap as a fresh uid per kernel, all namespaces new (no network), "
    "seccomp, a read-only view of the Python installation only; without a cgroup ({why}) "
    "the limits are rlimits: memory is the address space of each process (not their sum), "
    "memfd_create and System V shared memory are refused, files in /tmp and /dev/shm are "
    "bounded by the size of each tmpfs only, and there is no CPU share")
USERNS_CGROUP_MESSAGE = (
    "sandbox: bubblewrap in an unprivileged user namespace as the grading user, all "
    "namespaces new (no network), seccomp, a read-only view of the Python installation "
    "only, and limits in a delegated cgroup {version} subtree; every kernel runs as the "
    "same uid (they cannot see each other: each has its own pid namespace and filesystem)")


LIMITS_MESSAGE = (
    "limits only ({why}): no sandbox: the kernel runs as the grading user and can read "
    "whatever that user can, the hidden tests and the model answers included, and reach "
    "the network; it gets rlimits (memory as the address space of each process, "
    "processes counted over every process of the user, file size, open files), a clean "
    "environment and a throwaway HOME and working folder")


def limits_level(why: str) -> Level:
    """The level "limits": no sandbox, only what prlimit and a clean environment give
    (see the module's docstring); `why` says why, in the sentence for the log."""
    return Level("limits", LIMITS_MESSAGE.format(why=why))


def cpu_quota(level: Level) -> bool:
    """Whether kernels at `level` get the CPU quota of their `Limits.cpus` (a cpu cgroup)."""
    if level.cgroup == "v1":
        return "cpu" in level.parents
    if level.cgroup == "v2":
        with contextlib.suppress(OSError):
            return "cpu" in (Path(level.parents) / "cgroup.subtree_control").read_text().split()
    return False


def _bwrap() -> str | None:
    return shutil.which("bwrap")


def _userns_works(as_uid: int | None = None) -> tuple[bool, str]:
    """Whether bwrap can make its namespaces unprivileged (as `as_uid` when root)."""
    argv = [_bwrap(), "--unshare-all", "--unshare-user", "--disable-userns",
            "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin",
            "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
            "--", "/bin/true"]
    if as_uid is not None:
        argv = ["setpriv", f"--reuid={as_uid}", f"--regid={as_uid}", "--clear-groups",
                "--", *argv]
    try:
        run = subprocess.run(argv, capture_output=True, text=True,  # type: ignore[arg-type]
                             timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return run.returncode == 0, (run.stderr.strip().splitlines() or ["no output"])[-1]


def probe() -> Level:
    """The `Level` this machine allows, with its sentence for the log."""
    if not sys.platform.startswith("linux"):
        return Level("none", "no sandbox: bubblewrap needs Linux")
    if _bwrap() is None:
        return Level("none", "no sandbox: bubblewrap is not installed (Debian's and "
                     f"Ubuntu's package bubblewrap; as root: {INSTALL})")
    root = os.geteuid() == 0
    ok, why = _userns_works(as_uid=_uid_range()[0] if root else None)
    if not ok:
        return Level("none", "no sandbox: this machine does not let bubblewrap make an "
                     f"unprivileged user namespace ({why}); student code would run with "
                     "the grader's own rights")
    version, parents = cgroups.detect()
    if root and version:
        return Level("root", ROOT_MESSAGE.format(version=version), version, parents)
    if root:
        return Level("root", ROOT_NO_CGROUP_MESSAGE.format(why=parents))
    if version:
        return Level("userns", USERNS_CGROUP_MESSAGE.format(version=version), version,
                     parents)
    return Level("userns", USERNS_MESSAGE.format(user="the grading user", why=parents))


# ------------------------------------------------------------------ what a kernel gets


@dataclasses.dataclass(frozen=True)
class SandboxSpec:
    """The kernel to run and exactly what it sees.

    `argv`: the command, with paths as the sandbox sees them (`PYTHON`, `RUN`, ...).
    `python_prefix`: the Python installation whose binary and standard library are bound
    at /opt/python (default: the base installation of this Python, `sys.base_prefix`).
    `site_packages`: bound read-only as the site-packages of a virtual environment at
    /opt/venv over that Python (`PYTHON` runs in it), e.g. a venv's.
    `library`: one more folder, bound read-only at /opt/lib and put on PYTHONPATH.
    `writable`: a folder of the caller's, bound read-write at /run/kernel (the kernel's
    uid gets to own it), which the caller reads afterwards.
    `env`: the kernel's whole environment (added to a few defaults: PATH, HOME=/tmp, ...).
    `workdir`: its working folder inside.
    `hide`: folders inside (under the binds) covered by an empty read-only tmpfs, e.g.
    a package in site-packages that the kernel must not read."""

    argv: tuple
    writable: Path
    site_packages: Path | None = None
    library: Path | None = None
    python_prefix: Path | None = None
    env: dict = dataclasses.field(default_factory=dict)
    workdir: str = "/tmp"
    hide: tuple = ()

    def python(self) -> tuple[Path, str]:
        """(prefix, "X.Y") of the Python installation bound at /opt/python."""
        if self.python_prefix is not None:
            prefix = Path(self.python_prefix)
            found = sorted(prefix.glob("lib/python3.*/os.py"))
            if not found:
                raise SandboxError(f"no Python standard library under {prefix}")
            return prefix, found[-1].parent.name.removeprefix("python")
        return Path(sys.base_prefix), sysconfig.get_python_version()


def python_binds(spec: SandboxSpec) -> tuple[list[tuple[Path, str]], str]:
    """[(source on the host, destination inside)] read-only binds of the Python side."""
    prefix, version = spec.python()
    binary = prefix / "bin" / f"python{version}"
    stdlib = prefix / "lib" / f"python{version}"
    if not binary.exists() or not (stdlib / "os.py").exists():
        raise SandboxError(f"no Python {version} at {prefix}")
    binds = [(binary.resolve(), f"{PYTHON_HOME}/bin/python{version}"),
             (stdlib, f"{PYTHON_HOME}/lib/python{version}")]
    # a Python built with --enable-shared (pyenv's) needs its libpython; LD_LIBRARY_PATH
    # finds it (its RUNPATH names the host path)
    for lib in sorted((prefix / "lib").glob("libpython*.so*")):
        if lib.is_file():
            binds.append((lib, f"{PYTHON_HOME}/lib/{lib.name}"))
    if spec.site_packages is not None:
        binds.append((Path(spec.site_packages), f"{VENV}/lib/python{version}/site-packages"))
    if spec.library is not None:
        binds.append((Path(spec.library), LIBRARY))
    return binds, version


def venv_config(spec: SandboxSpec) -> str:
    """The pyvenv.cfg of the virtual environment at /opt/venv."""
    _, version = spec.python()
    return (f"home = {PYTHON_HOME}/bin\ninclude-system-site-packages = false\n"
            f"version = {version}\n")


def environment(spec: SandboxSpec) -> dict[str, str]:
    env = {
        "PATH": f"{VENV}/bin:{PYTHON_HOME}/bin:/usr/bin:/bin",
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "USER": "student",
        "LOGNAME": "student",
        "LANG": "C.UTF-8",
        "LD_LIBRARY_PATH": f"{PYTHON_HOME}/lib",
        "PYTHONDONTWRITEBYTECODE": "1",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "IPYTHONDIR": "/tmp/ipython",
        "JUPYTER_RUNTIME_DIR": "/tmp/jupyter-runtime",
    }
    if spec.library is not None:
        env["PYTHONPATH"] = LIBRARY
    env.update(spec.env)
    return env


@dataclasses.dataclass
class Resources:
    """What `start` acquires for one kernel before `command` can name it: the uid it runs
    as (None: the grading user itself), the seccomp filter's fd, the cgroup.procs files
    the wrapper joins, the stage folder (None: binds by their own paths)."""

    seccomp_fd: int | None
    venv_cfg_fd: int | None = None  # a file holding `venv_config(spec)`, for --ro-bind-data
    uid: int | None = None
    cgroup_procs: tuple = ()
    stage: Path | None = None
    parent: int | None = None  # the starting process: the kernel must not outlive it (see command)
    lifeline_fd: int | None = None  # the reading end of the grader's lifeline


def _rlimits(limits: Limits, level: Level) -> list[str]:
    pairs = [("nofile", limits.open_files), ("fsize", limits.file_size),
             ("core", 0)]
    if limits.cpu_seconds:
        pairs.append(("cpu", limits.cpu_seconds))
    if level.cgroup is None:  # what the cgroups would have bounded
        pairs += [("as", limits.memory), ("nproc", limits.processes)]
    return [f"--{name}={value}:{value}" for name, value in pairs]


def _root_links() -> list[str]:
    """bwrap's arguments for /bin, /lib ... as this host has them (symlinks into /usr on
    a merged-/usr system, read-only binds otherwise)."""
    args = []
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        path = Path("/" + name)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    return args


def _limits_and_uid(limits: Limits, level: Level, resources: Resources) -> list[str]:
    """The head of every launch chain: prlimit's rlimits, then setpriv for the kernel's
    uid and the parent's death signal, then a check that the parent is still there."""
    head = ["prlimit", *_rlimits(limits, level), "--"]
    if resources.uid is not None or resources.parent is not None:
        head += ["setpriv"]
        if resources.parent is not None:
            head += ["--pdeathsig", "SIGKILL"]
        if resources.uid is not None:
            head += [f"--reuid={resources.uid}", f"--regid={resources.uid}",
                     "--clear-groups", "--inh-caps=-all", "--bounding-set=-all",
                     "--no-new-privs"]
        head += ["--"]
    if resources.parent is not None:
        # bwrap's --die-with-parent, like setpriv's --pdeathsig (set after its change of
        # uid, which clears it), only acts if the parent dies after it is set: a parent
        # killed while the chain starts would leave the kernel running. So, once the
        # signal is set, the chain goes on only if its parent is still the starter.
        head += ["/bin/sh", "-c",
                 f'[ "$PPID" = {int(resources.parent)} ] || exit 125; exec "$@"', "sh"]
    return head


def _on_host(spec: SandboxSpec, path: str) -> str:
    """`path` as the sandbox names it (its Python, writable folder, /tmp, library), as
    the host names it: what the level "limits" runs with. Other paths stay."""
    folder = str(spec.writable)
    if path == PYTHON:
        return sys.executable
    for inside, host in ((RUN, folder), ("/tmp", folder + "/tmp"),
                         (LIBRARY, str(spec.library or LIBRARY))):
        if path == inside or path.startswith(inside + "/"):
            return host + path[len(inside):]
    return path


def kernel_paths(spec: SandboxSpec, level: Level) -> tuple[str, str]:
    """(the kernel's Python, its writable folder) as the kernel sees them: inside the
    sandbox, the fixed paths; at the level "limits", this Python and the host's folder."""
    if level.sandboxed:
        return PYTHON, RUN
    return _on_host(spec, PYTHON), _on_host(spec, RUN)


def host_environment(spec: SandboxSpec) -> dict[str, str]:
    """The kernel's environment at the level "limits": `environment`'s, with the
    sandbox's fixed paths made host paths under the writable folder."""
    env = {key: _on_host(spec, value) for key, value in environment(spec).items()}
    env["PATH"] = f"{Path(sys.executable).parent}:/usr/bin:/bin"
    env.pop("LD_LIBRARY_PATH", None)
    return env


# the kernel's environment variable naming the reading end of a pipe whose only writing
# end the grader that started it holds: the pipe's end of file tells the kernel that its
# grader is gone (`autograder.kernel.gradekernel.watch_lifeline`), where the death signals
# of the launch chain cannot (a grader killed while bwrap sets the sandbox up)
LIFELINE_VARIABLE = "RESIDUAL_PACK_LIFELINE"


def _with_lifeline(env: dict[str, str], resources: Resources) -> dict[str, str]:
    if resources.lifeline_fd is None:
        return env
    return {**env, LIFELINE_VARIABLE: str(resources.lifeline_fd)}


def _limits_command(spec: SandboxSpec, limits: Limits, level: Level,
                    resources: Resources) -> list[str]:
    """The level "limits": prlimit, setpriv for the parent's death (and a uid, with
    `run_as`), a clean environment, the kernel with host paths."""
    env = [f"{key}={value}" for key, value in
           sorted(_with_lifeline(host_environment(spec), resources).items())]
    # the kernel's arguments name the sandbox's Python and folder (RUN), and files the
    # grader made on the host (its connection file, under the host's /tmp): only the
    # first two are the sandbox's paths
    argv = [_on_host(spec, a) if a == PYTHON or a == RUN or a.startswith(RUN + "/") else a
            for a in spec.argv]
    return [*_limits_and_uid(limits, level, resources), "env", "-i", "-C",
            _on_host(spec, spec.workdir), *env, *argv]


def command(spec: SandboxSpec, limits: Limits, level: Level,
            resources: Resources) -> list[str]:
    """The argument list that runs `spec` in the sandbox (see the module's docstring):
    the launch chain behind the lifeline's watcher. Pure: `start` opens what `resources`
    names and runs it."""
    return _watched(_chain(spec, limits, level, resources), resources)


def _chain(spec: SandboxSpec, limits: Limits, level: Level,
           resources: Resources) -> list[str]:
    """The launch chain of `command`, at the level "limits" or in bubblewrap."""
    if not level.usable:
        raise SandboxError(level.message)
    if not level.sandboxed:
        return _limits_command(spec, limits, level, resources)
    binds, version = python_binds(spec)
    sources = [src for src, _ in binds] + [Path(spec.writable)]
    if resources.stage is not None:  # bound in a private mount namespace, see docstring
        staged = [str(resources.stage / str(i)) for i in range(len(sources))]
    else:
        staged = [str(src) for src in sources]
    bwrap = [_bwrap() or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
             "--die-with-parent", "--new-session", "--hostname", "sandbox",
             "--ro-bind", "/usr", "/usr", *_root_links()]
    if Path("/etc/ld.so.cache").exists():
        bwrap += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    tmpfs = str(limits.disk)
    bwrap += ["--proc", "/proc", "--dev", "/dev",
              "--perms", "1777", "--size", tmpfs, "--tmpfs", "/tmp",
              "--perms", "1777", "--size", tmpfs, "--tmpfs", "/dev/shm"]
    for (_, dest), source in zip(binds, staged):
        bwrap += ["--ro-bind", source, dest]
    bwrap += ["--symlink", f"python{version}", f"{PYTHON_HOME}/bin/python3",
              "--symlink", f"{PYTHON_HOME}/bin/python{version}", PYTHON]
    for inside in spec.hide:
        bwrap += ["--perms", "0555", "--size", "4096", "--tmpfs", inside]
    if resources.venv_cfg_fd is not None:
        bwrap += ["--ro-bind-data", str(resources.venv_cfg_fd), f"{VENV}/pyvenv.cfg"]
    bwrap += ["--bind", staged[-1], RUN]
    bwrap += ["--remount-ro", "/", "--remount-ro", "/dev"]
    bwrap += ["--clearenv"]
    for key, value in sorted(_with_lifeline(environment(spec), resources).items()):
        bwrap += ["--setenv", key, value]
    bwrap += ["--chdir", spec.workdir, "--seccomp", str(resources.seccomp_fd),
              "--", *spec.argv]
    tail = _limits_and_uid(limits, level, resources) + bwrap
    if resources.stage is None and not resources.cgroup_procs:
        return tail
    if resources.stage is not None:
        lines = ["set -e"]
        for source, mount_point in zip(sources, staged):  # type: ignore[assignment]
            lines.append(shlex.join(["mount", "--bind", str(source), mount_point]))
        lines.append("exec " + shlex.join(tail))
        tail = ["unshare", "--mount", "--propagation", "private", "--",
                "/bin/sh", "-c", "\n".join(lines)]
    lines = ["set -e"]
    lines += [f"echo $$ > {shlex.quote(procs)}" for procs in resources.cgroup_procs]
    lines.append("exec " + shlex.join(tail))
    return ["/bin/sh", "-c", "\n".join(lines)]


def _watched(argv: list[str], resources: Resources) -> list[str]:
    """`argv` behind a watcher of the lifeline, outside the sandbox and its cgroups: a
    shell forked before the launch chain that blocks on the lifeline and, at its end of
    file (the grader closed it in `cleanup`, or died), SIGKILLs the launch chain's process
    group. That group holds bwrap, and, until bwrap's --new-session, the child bwrap
    cloned into the new namespaces: a grader killed between that clone and the child's
    own parent-death signal left the child waiting for ever on its setup's eventfd, with
    no kernel yet to read the lifeline (found by a CI run on 2026-12-05)."""
    if resources.lifeline_fd is None:
        return argv
    # dash redirects single-digit descriptors only: cat opens the pipe by its /proc name;
    # only its end of file kills (a cat that could not read leaves the kernel be)
    fd = int(resources.lifeline_fd)
    watcher = (f'(cat /proc/self/fd/{fd} >/dev/null && kill -9 0) </dev/null >/dev/null 2>&1 &'
               ' exec "$@"')
    return ["/bin/sh", "-c", watcher, "sh", *argv]


# ------------------------------------------------------------------ uids


def _uid_range() -> tuple[int, int]:
    text = os.environ.get(UID_RANGE_VARIABLE, "")
    if not text:
        return DEFAULT_UIDS
    lo, _, hi = text.partition("-")
    return int(lo), int(hi or lo)


def _uids_in_use() -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                found.add(entry.stat().st_uid)
    return found


def acquire_uid(attempts: int = 1000) -> tuple[int, IO[str]]:
    """(uid, lock file): a uid from the range that no process runs as and no other
    kernel holds, chosen at random so that a uid is rarely seen twice; held while the lock
    file is open."""
    lo, hi = _uid_range()
    LOCKS.mkdir(mode=0o700, exist_ok=True)
    busy = _uids_in_use()
    for _ in range(attempts):
        uid = random.randint(lo, hi)
        if uid in busy:
            continue
        path = LOCKS / f"{uid}.lock"
        lock = open(path, "a+")  # noqa: SIM115 (kept open: it is the lock)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(lock.fileno()).st_ino != os.stat(path).st_ino:
                raise OSError("removed by its last holder meanwhile")
        except OSError:
            lock.close()
            continue
        return uid, lock
    raise SandboxError(f"no free sandbox uid in {lo}-{hi}")


def release_uid(lock: IO[str]) -> None:
    """Give a uid back: its lock file removed while still held, so the folder does not
    grow with every uid ever used (a waiter that opened it meanwhile sees the inode
    change and tries another)."""
    with contextlib.suppress(OSError):
        os.unlink(lock.name)
    lock.close()


# ------------------------------------------------------------------ running it


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a sandboxed kernel ended. `kind`: "exited", "signal", "out of memory",
    "process limit" or "killed" (by `kill`); `message`: what an instructor reads."""

    kind: str
    message: str
    returncode: int | None = None
    report: dict | None = None


class SandboxProcess(subprocess.Popen):
    """A started sandbox: a Popen whose `kill()` ends everything the kernel started,
    `outcome()` says how it ended and `cleanup()` removes its cgroups and stage and gives
    its uid back. Use `start` to make one."""

    sandbox_uid: int | None = None
    _lock: Any = None
    cgroups: Any = None
    stage: Path | None = None
    limits: Any = None
    level: Any = None
    run_mount: Any = None
    _killed = False
    _lifeline: int | None = None  # this end of the kernel's lifeline, closed by cleanup()

    def kill(self) -> None:
        """SIGKILL the whole sandbox: the launch chain's process group (bwrap: its pid-1
        child dies with it, and with that pid 1 every process of the pid namespace), then
        whatever is still in the cgroups."""
        self._killed = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            super().kill()
        if self.cgroups is not None:
            self.cgroups.kill()

    terminate = kill

    def outcome(self) -> Outcome:
        code = self.poll()
        report = self.cgroups.report() if self.cgroups is not None else {}
        memory = size_words(self.limits.memory) if self.limits else "?"
        if report.get("oom_kills") or (report.get("memory_failures") and code != 0):
            return Outcome(
                "out of memory",
                f"out of memory: the kernel needed more than its {memory} (its "
                "processes, shared memory and files in /tmp and /dev/shm count together) "
                "and was stopped", code, report)
        if report.get("pids_refused"):
            return Outcome(
                "process limit",
                f"process limit: the kernel tried to run more than {self.limits.processes} "
                "processes and threads at once; the extra ones were refused", code, report)
        if self._killed:
            return Outcome("killed", "the kernel was stopped by the grader", code, report)
        if code is not None and code < 0:
            name = signal.Signals(-code).name
            return Outcome("signal", f"the kernel was ended by {name}", code, report)
        if code is not None and code > 128 and code - 128 in signal.valid_signals():
            # bwrap's pid 1 reports a signal as 128 + n
            name = signal.Signals(code - 128).name
            return Outcome("signal", f"the kernel was ended by {name}", code, report)
        return Outcome("exited", f"the kernel exited with status {code}", code, report)

    def cleanup(self) -> None:
        """After the kernel has ended (or is killed here): cgroups removed, stage folder
        removed, the writable folder's tmpfs unmounted (read it before), uid released."""
        if self.poll() is None:
            self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.wait(timeout=10)
        if self.run_mount is not None:
            subprocess.run(["umount", "--lazy", str(self.run_mount)], check=False,
                           capture_output=True)
            self.run_mount = None
        if self.cgroups is not None:
            self.cgroups.remove()
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)
        if self._lock is not None:
            release_uid(self._lock)
            self._lock = None
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None


RUN_MOUNT = "microgpt-sandbox-run-"  # + the grader's pid: the source name of its mounts
STAGE = "microgpt-sandbox-stage-"  # + the grader's pid + "-": its stage folders


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(level: Level) -> list[str]:
    """What graders that were killed before their cleanup left: empty cgroups, the tmpfs
    on writable folders and stage folders whose grader pid is gone, uid lock files no one
    holds. A list of what was removed. Call it when a grading run starts."""
    removed = []
    if level.cgroup is not None:
        removed += cgroups.remove_stale(level.cgroup, level.parents)
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            source, target = line.split()[:2]
            pid = source.removeprefix(RUN_MOUNT)
            if source.startswith(RUN_MOUNT) and pid.isdigit() and not _alive(int(pid)):
                target = target.replace("\\040", " ")
                subprocess.run(["umount", "--lazy", target], check=False,
                               capture_output=True)
                removed.append(target)
    for path in LOCKS.glob("*.lock"):  # uids whose holder is gone
        with contextlib.suppress(OSError), open(path, "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(lock.fileno()).st_ino == os.stat(path).st_ino:
                os.unlink(path)
                removed.append(str(path))
    for stage in Path(tempfile.gettempdir()).glob(STAGE + "*"):
        pid = stage.name.removeprefix(STAGE).split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(stage, ignore_errors=True)
            removed.append(str(stage))
    return removed


def _make_stage(sources: Sequence[str | os.PathLike[str]]) -> Path:
    stage = Path(tempfile.mkdtemp(prefix=f"{STAGE}{os.getpid()}-"))
    os.chmod(stage, 0o755)
    for i, source in enumerate(sources):
        point = stage / str(i)
        if Path(source).is_dir():
            point.mkdir(mode=0o755)
        else:
            point.touch(mode=0o644)
    return stage


def _mount_writable(folder: Path, uid: int, size: int) -> None:
    """A tmpfs of `size` bytes, owned by `uid`, on `folder` (the host's view: the caller
    reads it), with the regular files the caller put there before (the connection file)
    copied in: what the kernel writes there is bounded, and counted by its memory cgroup,
    instead of landing on the host's disk."""
    saved = {p.name: p.read_bytes() for p in folder.iterdir()
             if p.is_file() and not p.is_symlink()}
    subprocess.run(["mount", "-t", "tmpfs", "-o",
                    f"size={size},mode=0700,uid={uid},gid={uid},nosuid,nodev,noexec",
                    f"{RUN_MOUNT}{os.getpid()}", str(folder)], check=True,
                   capture_output=True)
    for name, data in saved.items():
        (folder / name).write_bytes(data)
        os.chown(folder / name, uid, uid)


def start(spec: SandboxSpec, limits: Limits, level: Level, *, run_as: int | None = None,
          **popen: Any) -> SandboxProcess:
    """Start `spec` in the sandbox; a `SandboxProcess`. As root at the level "root", the
    kernel gets a fresh uid, its own cgroups and a tmpfs of `limits.run_space` bytes on the
    writable folder (read it before `cleanup()`, which unmounts it). `run_as` (root
    only): run bwrap as that uid without cgroups or mounts, as an unprivileged
    instructor's grader would (the tests' non-root case). Other keywords go to Popen
    (stdout=..., ...). The writable folder is the kernel's: open what it left there
    without following symbolic links, and check that a socket is a socket (lstat) before
    connecting to it."""
    if not level.usable:
        raise SandboxError(level.message)
    root = os.geteuid() == 0
    if root and run_as is None and not level.root:
        raise SandboxError("refusing to run a kernel as root without a uid of its own")
    if level.root and not root:
        raise SandboxError("the level 'root' needs the grader to run as root")
    lock = kernel_cgroups = stage = seccomp_file = venv_file = run_mount = None
    lifeline, keep = os.pipe()  # the kernel reads, this process alone holds the other end
    try:
        uid = run_as
        if level.root and run_as is None:
            uid, lock = acquire_uid()
        if level.cgroup is not None and run_as is None:
            kernel_cgroups = cgroups.KernelCgroups(
                level.cgroup, level.parents, limits.memory, limits.processes,
                limits.cpus)
        writable = Path(spec.writable)
        if not level.sandboxed:  # its HOME and temporary folders, on the host
            (writable / "tmp").mkdir(mode=0o700, exist_ok=True)
        if level.root and run_as is None:
            _mount_writable(writable, uid, limits.run_space)  # type: ignore[arg-type]
            run_mount = writable
        if uid is not None:
            os.chown(writable, uid, uid)
            for path in writable.rglob("*"):
                os.chown(path, uid, uid, follow_symlinks=False)
        if root and uid is not None and level.sandboxed:
            binds, _ = python_binds(spec)
            stage = _make_stage([src for src, _ in binds] + [writable])
        effective = level if kernel_cgroups is not None else \
            dataclasses.replace(level, cgroup=None)
        fds: tuple[int, ...] = ()
        if level.sandboxed:
            seccomp_file = seccomp.bpf_file(deny_uncounted_memory=kernel_cgroups is None)
            venv_file = tempfile.TemporaryFile()  # noqa: SIM115 (closed below)
            venv_file.write(venv_config(spec).encode())
            venv_file.flush()
            venv_file.seek(0)
            fds = (seccomp_file.fileno(), venv_file.fileno())
        resources = Resources(
            seccomp_fd=fds[0] if fds else None, venv_cfg_fd=fds[1] if fds else None,
            uid=uid, cgroup_procs=tuple(kernel_cgroups.procs_files) if kernel_cgroups else (),
            stage=stage, parent=os.getpid(), lifeline_fd=lifeline)
        argv = command(spec, limits, effective, resources)
        # the launch chain (and bwrap's own pid 1, whose /proc/1/environ the kernel can
        # read) gets a bare environment, never the caller's: the kernel's is set by
        # --setenv after --clearenv
        popen.setdefault("env", {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})
        process = SandboxProcess(argv, pass_fds=(*fds, lifeline), start_new_session=True,
                                 **popen)
    except BaseException:
        os.close(keep)
        if run_mount is not None:
            subprocess.run(["umount", "--lazy", str(run_mount)], check=False)
        if kernel_cgroups is not None:
            kernel_cgroups.remove()
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
        if lock is not None:
            release_uid(lock)
        raise
    finally:
        os.close(lifeline)
        for f in (seccomp_file, venv_file):
            if f is not None:
                f.close()
    process._lifeline = keep
    process.sandbox_uid = uid
    process._lock = lock
    process.cgroups = kernel_cgroups
    process.stage = stage
    process.run_mount = run_mount
    process.limits = limits
    process.level = effective
    return process


def run(spec: SandboxSpec, limits: Limits, level: Level, timeout: int = 60,
        **kwargs: Any) -> tuple[Outcome, str, str]:
    """Run `spec` to its end (killed after `timeout` seconds); (outcome, stdout, stderr)
    as text. Cleans up."""
    process = start(spec, limits, level, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    text=True, **kwargs)
    try:
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        time.sleep(0)  # the cgroup counters are final once the last process is gone
        return process.outcome(), out, err
    finally:
        process.cleanup()
