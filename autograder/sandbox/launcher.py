"""The sandbox launcher: the process between a grading worker and a student's kernel.

A grading worker starts it as `python -m autograder.sandbox.launcher launch CONFIG
-- KERNEL ARGS...` (see `launch_command`). It runs as root when the sandbox is full, so it
imports only the standard library (and `syscalls`, which does too). It reads the launch
config `plan.Sandbox.plan` wrote, builds the kernel's view of the machine in new
namespaces (`_build_root`), drops to the kernel's uid, sets the limits and execs the
kernel; it writes how the kernel ended to the config's exit file. With the level `limits`
(not root), it only gives the kernel a throwaway HOME, a clean environment and the limits.

Every kernel is a new Python: the warm parents that kernels were once forked from are
gone. They made this launcher faster, but bubblewrap, the default engine, cannot use
them and grades a class as fast as this launcher's cold kernels
(`results/benchmarks/grade-class-engines-2026-12-03.txt`).

`python -m autograder.sandbox.launcher probe UID` exits 0 when this machine lets it
unshare, mount and change uid (see `limits.isolation_available`).
"""

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time

from autograder.sandbox.syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    MNT_DETACH,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    MS_REMOUNT,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_PDEATHSIG,
    check,
    libc,
    load_seccomp,
    mount,
    pivot_root,
    prctl,
    unshare,
)

MODULE = "autograder.sandbox.launcher"  # what `python -m` runs

# the levels of a launch config
FULL = "namespaces"  # own uid, private filesystem, no network
LIMITS = "limits"  # resource limits, a throwaway HOME and a clean environment only


def launch_command(config, kernel):
    """The command that starts `kernel` (a list) as the launch config `config` says."""
    return [sys.executable, "-m", MODULE, "launch", str(config), "--", *kernel]


def probe_command(uid):
    """The command whose exit status says whether this machine can isolate as `uid`."""
    return [sys.executable, "-m", MODULE, "probe", str(uid)]


def is_launcher(args):
    """Whether the command line `args` (a list of strings) is a launcher's `launch`."""
    return MODULE in args and "launch" in args


def _bind(src, target, readonly=True):
    if os.path.isdir(src):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            open(target, "a").close()  # noqa: SIM115
    mount(src, target, None, MS_BIND | MS_REC)
    if readonly:
        mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _build_root(cfg):
    """The kernel's view of the machine, built in the new mount namespace."""
    root = cfg["newroot"]
    uid = cfg["uid"]
    os.makedirs(root, mode=0o700, exist_ok=True)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=16m,mode=755")
    # the only writable space: one tmpfs for HOME, the working folder, /tmp and /dev/shm
    sandbox = root + "/sandbox"
    os.makedirs(sandbox)
    limits = cfg["limits"]
    mount("tmpfs", sandbox, "tmpfs", MS_NOSUID | MS_NODEV,
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
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID, "size=64k,mode=755")
    for node in ("null", "zero", "full", "random", "urandom"):
        _bind("/dev/" + node, f"{root}/dev/{node}", readonly=False)
    os.makedirs(root + "/dev/shm")
    _bind(f"{sandbox}/shm", root + "/dev/shm", readonly=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                         ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/proc")
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
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
    if pivot_root(root, old):
        os.chdir("/")
        check(libc().umount2(b"/.old", MNT_DETACH), "umount the old root")
        os.rmdir("/.old")
    else:
        os.chroot(root)
        os.chdir("/")
    mount(None, "/", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


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
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def _read_filter(cfg):
    """The seccomp filter's BPF program (bytes) the plan wrote (`seccomp`), read while
    this process may still read the plan's files; None when the plan names none."""
    path = cfg.get("seccomp")
    if not path:
        return None
    with open(path, "rb") as f:
        return f.read()


def _confine(program):
    """The last step before the kernel: the seccomp filter (no new namespaces, mounts,
    keyrings, ptrace; no memory outside the address-space limit: memfd_create, shmget;
    see `autograder.sandbox.seccomp`), after the uid and the limits are set."""
    if program is not None:
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        load_seccomp(program)


def _exec_kernel(cfg, argv, phases=None):
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    os.umask(0o077)
    os.chdir(cfg["work"])
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the kernel writes past ZeroMQ goes nowhere
        os.dup2(null, fd)
    _stamp(phases, "kernel exec")
    os.execve(argv[0], argv, cfg["env"])


def _phases_file(cfg):
    """The launcher's timing record (`phases_file` in the config): an fd that its own
    processes append lines "name wall-time" to; not inherited by the kernel (opened
    close-on-exec). None without one."""
    path = cfg.get("phases_file")
    if not path:
        return None
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError:
        return None


def _stamp(fd, name):
    if fd is not None:
        with contextlib.suppress(OSError):
            os.write(fd, f"{name} {time.time():.6f}\n".encode())


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
    """Start the kernel `argv` as `cfg` (read from the file `config`) says; return its
    exit status (128 + signal)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # interrupts are for the kernel
    if os.getppid() != cfg["parent"]:  # the grading process died before we started
        return 1
    phases = _phases_file(cfg)
    _stamp(phases, "launcher started")
    if cfg["level"] != FULL:
        return _launch_limits_only(cfg, argv, phases)
    init = _fork_init(cfg, argv, phases)

    def stop(*_):
        with contextlib.suppress(OSError):
            os.kill(init, signal.SIGKILL)

    signal.signal(signal.SIGTERM, lambda *a: (stop(), os._exit(143)))
    signal.signal(signal.SIGHUP, lambda *a: (stop(), os._exit(129)))
    status = _wait(init, stop, cfg["parent"])
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return 128 + os.WTERMSIG(status)


def _fork_init(cfg, argv, phases=None):
    """Start the kernel's pid namespace: this process stays where it is, and its child, the
    namespace's first process, runs `_run_init` and dies with this process. Returns the
    child's pid."""
    unshare(CLONE_NEWPID)
    init = os.fork()
    if init == 0:
        try:
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # this process gone: all of it goes
            _run_init(cfg, argv, phases)
        except BaseException as exc:  # noqa: BLE001
            print(f"sandbox: {exc}", file=sys.stderr, flush=True)
            os._exit(70)
        os._exit(0)
    return init


def _run_init(cfg, argv, phases=None):
    """The first process of the new pid namespace: build the root, start the kernel
    (`_exec_kernel`), reap; when the kernel ends, so does everything else in the
    namespace."""
    record = open(cfg["exit_file"], "w")  # noqa: SIM115 (not inherited by the kernel)
    unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
    for path in [cfg["conn"], *(os.path.join(cfg["conn"], n) for n in os.listdir(cfg["conn"]))]:
        os.chown(path, cfg["uid"], cfg["uid"])  # the connection file: the kernel reads it
    _stamp(phases, "namespaces")
    program = _read_filter(cfg)
    _build_root(cfg)
    _stamp(phases, "root built")
    uid = cfg["uid"]
    kernel = os.fork()
    if kernel == 0:
        try:
            _drop_privileges(uid)
            _set_limits(cfg["limits"])
            _confine(program)
            _exec_kernel(cfg, argv, phases)
        except BaseException as exc:  # noqa: BLE001
            print(f"sandbox: could not start the kernel: {exc}", file=sys.stderr, flush=True)
        os._exit(70)
    # the kernel is in the launcher's process group: it gets interrupts itself
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


def _launch_limits_only(cfg, argv, phases=None):
    """No namespaces: the kernel gets a throwaway HOME and working folder, a clean
    environment and the limits, and runs as this process's user."""
    folder = cfg["folder"]
    for sub in ("home", "work", "tmp"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    _fill_home(cfg, cfg["home"], cfg["work"], None)
    _stamp(phases, "root built")
    record = open(cfg["exit_file"], "w")  # noqa: SIM115
    program = _read_filter(cfg)
    kernel = os.fork()
    if kernel == 0:
        try:
            _set_limits(cfg["limits"])
            _confine(program)
            _exec_kernel(cfg, argv, phases)
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
        unshare(CLONE_NEWPID)
        child = os.fork()
    except OSError as exc:
        os.rmdir(where)
        print(f"{exc}", file=sys.stderr, flush=True)
        return 1
    if child == 0:
        try:
            unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", where, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
            mount(sys.prefix, where, None, MS_BIND | MS_REC)
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
    print(f"usage: python -m {MODULE} launch CONFIG -- KERNEL ARGS...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
