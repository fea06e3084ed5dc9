"""Warm kernels: a parent that has imported the kernel's libraries once, and forks each
sandboxed kernel from that state instead of starting a new Python for it.

A cold kernel spends most of its first second and a half importing the same third-party
libraries (IPython, ipykernel, ZeroMQ, tornado, numpy, matplotlib and pyplot) for every
student. `serve` imports them once per grading worker, then for each kernel forks a copy
of itself that does exactly what the launcher does for a cold kernel: new pid, mount,
network and IPC namespaces, a fresh root, the student's uid, the limits. The only
difference is the last step: instead of exec'ing a new interpreter, the copy runs the
kernel module (`autograder.kernel.gradekernel`) in itself.

What stays the rule: a fresh process and fresh namespaces for every student. The parent
never runs student code, never reads a course file (no tests, no solutions, no connection
keys: the launch config is read by the forked copy), and its environment is the kernels'
own; what a kernel inherits from it is a copy of freshly imported library modules. The
parent runs as root and imports third-party code as root, which the launcher (standard
library only) does not: these are the same installed packages that the grading process
imports as root anyway. What a forked kernel shares with its siblings and a cold one
does not: the address-space layout (ASLR is per exec) and Python's string-hash seed. Its
random generators are fresh in the copy: `random` is reseeded by Python itself after a
fork, numpy's global one is made at its first use (reseeded here if a preload made it).

Protocol: the launcher (`launcher._launch_warm`, with `warm` in its config) connects to the
parent's Unix socket (root only; not in any kernel's root) and sends one JSON line, the
config's path and the kernel command. The parent forks; the copy reads the request,
checks it and supervises the kernel: a byte "i" from the launcher is an interrupt for the
kernel, the launcher's end (its socket closing, as when nbclient kills it) kills the
kernel's namespace at once, and the kernel's end goes back to the launcher as "exit N".

Only at the namespace level (the kernels' uid needs root); the `limits` level and a
parent that is not ready yet or has died use the cold launcher.
"""

import contextlib
import json
import os
import runpy
import select
import signal
import socket
import sys

from autograder.sandbox import launcher
from autograder.sandbox.syscalls import PR_SET_DUMPABLE, prctl

MODULE = "autograder.sandbox.warm"
KERNEL_MODULE = "autograder.kernel.gradekernel"  # the only module a warm kernel may run
# third-party libraries only: our own packages are imported by each kernel itself, after
# its environment says which assignment it grades (`policy.switch_off`, the snapshot)
PRELOAD = (
    "zmq", "tornado.ioloop", "jupyter_client.session", "IPython", "ipykernel.kernelapp",
    "ipykernel.ipkernel", "numpy", "matplotlib", "matplotlib.pyplot",
)
REQUEST_BYTES = 1 << 16


def serve_command(path):
    """The command that starts a warm parent listening on the socket `path`."""
    return [sys.executable, "-m", MODULE, "serve", str(path)]


def is_warm_parent(args, folder):
    """Whether the command line `args` is a warm parent (or a copy) of the run `folder`."""
    return MODULE in args and "serve" in args and \
        any(os.path.realpath(a).startswith(folder) for a in args[args.index("serve") + 1:])


def _threads():
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def preload():
    """Import the kernel's libraries (what fails to import is left to the kernel)."""
    import importlib

    for name in PRELOAD:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def serve(path):
    """Import, listen on `path`, fork a supervised kernel per connection; end with the
    process that started this one."""
    started_by = os.getppid()
    preload()
    if _threads() != 1:  # fork is only safe from a single thread
        print(f"not warm: {_threads()} threads after the imports", flush=True)
        return 3
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    listener.listen(64)
    listener.settimeout(0.5)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the copies are reaped by the system
    print("ready", flush=True)
    while os.getppid() == started_by:
        try:
            conn, _ = listener.accept()
        except (TimeoutError, InterruptedError):
            continue
        if _peer_uid(conn) != os.geteuid():  # only the grading process's own user
            conn.close()
            continue
        pid = os.fork()
        if pid == 0:
            code = 70
            try:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                code = _supervise(conn, os.path.dirname(os.path.realpath(path)))
            except BaseException as exc:  # noqa: BLE001
                with contextlib.suppress(OSError):
                    conn.sendall(f"failed {exc}\n".encode()[:4096])
            finally:
                os._exit(code)
        conn.close()
    return 0


def _peer_uid(conn):
    import struct

    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    except OSError:
        return -1


def _request(conn):
    request = json.loads(launcher.read_line(conn, REQUEST_BYTES, timeout=10))
    return str(request["config"]), [str(a) for a in request["argv"]]


def _supervise(conn, root):
    """In the forked copy: start the kernel in new namespaces as the launcher would, then
    pass interrupts to it, and kill it when the launcher goes; return its exit status."""
    config, argv = _request(conn)
    if not os.path.realpath(config).startswith(root + "/"):
        raise ValueError("the launch config is not in this run's sandbox")
    if argv[1:3] != ["-m", KERNEL_MODULE]:
        raise ValueError(f"a warm parent only starts {KERNEL_MODULE}")
    with open(config) as f:
        cfg = json.load(f)
    init = launcher._fork_init(cfg, argv, launcher._phases_file(cfg), start=_start_here,
                               close=(conn,))
    while True:
        pid, status = os.waitpid(init, os.WNOHANG)
        if pid == init:
            code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else \
                128 + os.WTERMSIG(status)
            with contextlib.suppress(OSError):
                conn.sendall(f"exit {code}\n".encode())
            return 0
        ready, _, _ = select.select([conn], [], [], 0.05)
        if ready:
            data = b""
            with contextlib.suppress(OSError):
                data = conn.recv(64)
            if not data:  # the launcher is gone: so is the kernel
                with contextlib.suppress(OSError):
                    os.kill(init, signal.SIGKILL)
                return 0
            if b"i" in data:
                with contextlib.suppress(OSError):
                    os.kill(init, signal.SIGINT)  # the namespace's init passes it on


def _start_here(cfg, argv, phases=None):
    """In the kernel's process (its uid and limits already set): what exec gives a cold
    kernel, then the kernel module run as `python -m` would run it. Never returns."""
    code = 70
    try:
        prctl(PR_SET_DUMPABLE, 1)  # as after an exec (changing uid cleared it)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD, signal.SIGQUIT,
                    signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python sets them at start
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        os.umask(0o077)
        os.chdir(cfg["work"])
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        launcher._stamp(phases, "kernel forked")
        os.closerange(3, _fd_bound())  # nothing of the parent's or the launcher's is kept
        os.environ.clear()
        os.environ.update(cfg["env"])
        drawn = sys.modules.get("numpy.random")  # (a preload may have made numpy's
        if drawn is not None:  # global generator, seeded in the parent: not today's list)
            drawn.seed()
        sys.argv = [KERNEL_MODULE, *argv[3:]]
        code = 0
        runpy.run_module(KERNEL_MODULE, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001
        code = 1
    finally:
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
        os._exit(code)


def _fd_bound():
    """Above every open descriptor: the open-file limit, or above the highest one open (an
    fd opened before the limit was lowered may lie above it)."""
    try:
        bound = os.sysconf("SC_OPEN_MAX")
    except (OSError, ValueError):
        bound = 4096
    with contextlib.suppress(OSError, ValueError):
        bound = max([bound, *(int(fd) + 1 for fd in os.listdir("/proc/self/fd"))])
    return bound


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve"] and len(argv) == 2:
        return serve(argv[1])
    print(f"usage: python -m {MODULE} serve SOCKET", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
