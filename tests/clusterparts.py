"""Real parts for the cluster and gradebook tests: a class of 01_residual_stack notebooks, a
Dask scheduler and workers as separate processes on the loopback address, and a private
PostgreSQL server started from Debian's binaries.

A part that is missing here skips its test with the reason, unless the variable that CI
sets (DASK_REQUIRED, POSTGRES_REQUIRED) says it must be there: then the test fails.
"""

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.madeup import filled_in
from autograder.grading.course import EXERCISES, SOURCE, read_notebook

COURSE = Path(__file__).resolve().parents[1]
ASSIGNMENT = "01_residual_stack"
BIN = Path(sys.executable).parent


def require(what, why, variable):
    """Skip with `why`, or fail when `variable` is set (CI must never skip this)."""
    if os.environ.get(variable):
        pytest.fail(f"{what} is required here ({variable} is set): {why}")
    pytest.skip(f"{what} unavailable: {why}")


def require_dask():
    try:
        import distributed  # noqa: F401
    except ImportError as exc:
        require("Dask distributed", f"{exc} (install the 'dask' extra)", "DASK_REQUIRED")
    if not (BIN / "dask").exists():
        require("Dask distributed", f"no dask command in {BIN}", "DASK_REQUIRED")


def make_class(folder, students):
    """Write a class: {student: "solution" | "stub" | "empty" | notebook}. Returns the
    expected autograded score of each ("solution": 6, "stub": 0, "empty": None)."""
    release = read_notebook(COURSE / EXERCISES / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    source = read_notebook(COURSE / SOURCE / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    solution = filled_in(release, source)
    expected = {}
    for student, what in students.items():
        path = Path(folder) / student / f"{ASSIGNMENT}.ipynb"
        path.parent.mkdir(parents=True)
        if isinstance(what, str) and what == "empty":
            path.write_bytes(b"")
            expected[student] = None
            continue
        nb = {"solution": solution, "stub": release}[what] if isinstance(what, str) else what
        nbformat.write(nb, str(path))
        expected[student] = 0.0 if isinstance(what, str) and what == "stub" else 6.0
    return expected


def cli():
    return [str(BIN / "residual-pack")]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, within, step=0.1):
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return False


def kill_group(proc):
    """SIGKILL `proc`'s process group (it was started in a session of its own)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def children(pid):
    """Pids of every descendant of `pid`."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent_of[int(entry.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for child, parent in parent_of.items():
            if parent == p and child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid):
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


class DaskCluster:
    """`dask scheduler` and `dask worker` processes on 127.0.0.1, each in a process group
    of its own (so that a test can kill one worker with everything it started)."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.scheduler = None
        self.workers = {}
        self.logs = []

    def _start(self, name, args):
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 (closed in stop)
        self.logs.append(log)
        env = dict(os.environ, DASK_DISTRIBUTED__WORKER__DAEMON="False")
        return subprocess.Popen([str(BIN / "dask"), *args], stdout=log, stderr=log,
                                stdin=subprocess.DEVNULL, cwd=self.folder, env=env,
                                start_new_session=True)

    def start_scheduler(self):
        self.scheduler = self._start("scheduler", [
            "scheduler", "--host", "127.0.0.1", "--port", str(self.port),
            "--no-dashboard", "--no-show"])
        assert wait_for(self._listening, 60), self.log("scheduler")

    def _listening(self):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def start_worker(self, name):
        self.workers[name] = self._start(name, [
            "worker", self.address, "--nthreads", "1", "--nworkers", "1", "--name", name,
            "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "60"])

    def worker_pids(self, name):
        proc = self.workers[name]
        return {proc.pid} | children(proc.pid)

    def log(self, name):
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self):
        """Workers first, asked to close (they clear their sandboxes), then the rest killed."""
        for proc in self.workers.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.workers.values():
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(30)
        for proc in [*self.workers.values(), self.scheduler]:
            if proc is not None:
                kill_group(proc)
        # what killed workers left on disk, as the next worker or run would clear it
        from autograder.grading.cluster.worker import remove_stale_folders
        from autograder.grading.plan import remove_stale_roots

        remove_stale_folders()
        remove_stale_roots()
        for log in self.logs:
            log.close()


# ---------------------------------------------------------------- PostgreSQL


def _pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def require_postgres():
    missing = [n for n in ("initdb", "pg_ctl", "postgres") if not _pg_bin(n)]
    if missing:
        require("PostgreSQL", f"no {', '.join(missing)} (Debian's package postgresql)",
                "POSTGRES_REQUIRED")
    try:
        import psycopg2  # noqa: F401
    except ImportError as exc:
        require("PostgreSQL", f"{exc} (install the 'postgres' extra)", "POSTGRES_REQUIRED")


class PostgresServer:
    """A private PostgreSQL server: a new cluster in a temporary folder, listening on
    127.0.0.1 at a free port and on a socket in that folder, password authentication,
    run as the `postgres` user (or `nobody`) when this process is root."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="residual-pack-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.user = "grader"
        self.password = "pw-" + secrets.token_hex(12)
        self.database = "gradebook"
        self.run_as = None
        if os.geteuid() == 0:
            for name in ("postgres", "nobody"):
                with contextlib.suppress(KeyError):
                    self.run_as = pwd.getpwnam(name)
                    break

    def _run(self, args, **kw):
        if self.run_as is not None:
            uid, gid = self.run_as.pw_uid, self.run_as.pw_gid

            def demote():
                os.setgroups([])
                os.setgid(gid)
                os.setuid(uid)

            kw["preexec_fn"] = demote
        env = dict(os.environ, LC_ALL="C.UTF-8", LANG="C.UTF-8")
        return subprocess.run(args, capture_output=True, text=True, timeout=120, env=env,
                              cwd=self.folder, **kw)

    def start(self):
        pwfile = self.folder / "pw"
        pwfile.write_text(self.password + "\n")
        if self.run_as is not None:
            os.chown(self.folder, self.run_as.pw_uid, self.run_as.pw_gid)
            os.chown(pwfile, self.run_as.pw_uid, self.run_as.pw_gid)
        os.chmod(pwfile, 0o600)
        done = self._run([_pg_bin("initdb"), "-D", str(self.data), "-U", self.user,
                          f"--pwfile={pwfile}", "--auth=scram-sha-256", "-E", "UTF8"])
        assert done.returncode == 0, done.stdout + done.stderr
        options = (f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                   f"-c fsync=off")
        done = self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-o", options,
                          "-l", str(self.folder / "log"), "-w", "-t", "60", "start"])
        assert done.returncode == 0, done.stdout + done.stderr + self.log()
        self.create_database(self.database)
        return self

    def create_database(self, name):
        """A new database `name` on this server; returns its URL (with the password)."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.port, user=self.user,
                                password=self.password, dbname="postgres")
        conn.autocommit = True
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
        conn.close()
        return self.url(name)

    def url(self, database=None):
        return (f"postgresql+psycopg2://{self.user}:{self.password}@127.0.0.1:{self.port}/"
                f"{database or self.database}")

    def log(self):
        path = self.folder / "log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self):
        if self.data.exists():
            self._run([_pg_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w",
                       "stop"])
        shutil.rmtree(self.folder, ignore_errors=True)
