"""One kernel's cgroups: made before it starts (with its limits), joined by the launch
wrapper (a shell that writes its own pid to each `cgroup.procs`, then execs the sandbox),
read after it ends (did it run out of memory, did it hit the process limit) and removed.

Two layouts:

- cgroup v1 (our machines): the `memory` and `pids` hierarchies (and `cpu` for a quota
  when asked), each kernel in a new child of the cgroup this process is in, so a kernel
  never escapes its grader's own limits. Memory is `memory.limit_in_bytes` and, when the
  kernel has swap accounting, `memory.memsw.limit_in_bytes` (no swap either). The v1
  memory controller charges anonymous memory, shared memory (memfd, System V, /dev/shm)
  and tmpfs pages alike to the cgroup of the process that touched them first.
- cgroup v2: used when this process's cgroup, or its parent, has `memory` and `pids` in
  its `cgroup.subtree_control` and is writable (a delegated subtree): `memory.max`,
  `memory.swap.max`, `pids.max`, `cpu.max`. (Not exercised on our machines, whose
  cgroup2 hierarchy has no controllers; only its file writes and reads are tested.)

Root may always use v1 where it is mounted; without root, only a delegated v2 subtree
would do (see `bubblewrap.probe`).
"""

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path("/sys/fs/cgroup")


def _own_paths(text: str | None = None) -> dict[str, str]:
    """{controller or "" (v2): path of this process's cgroup in that hierarchy}."""
    if text is None:
        text = Path("/proc/self/cgroup").read_text()
    found = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _v2_mount() -> Path | None:
    """Where cgroup2 is mounted (/sys/fs/cgroup on a pure v2 machine, /sys/fs/cgroup/unified
    on a hybrid one), or None."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) > 2 and fields[2] == "cgroup2":
                return Path(fields[1])
    return None


def _writable_dir(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


def detect() -> tuple[str | None, Any]:
    """("v1", {controller: parent folder}) or ("v2", parent folder) where this process may
    make a kernel's cgroups with memory and pids limits, else (None, why not)."""
    own = _own_paths()
    v2 = _v2_mount()
    if v2 is not None and "" in own:
        here = v2 / own[""].lstrip("/")
        # our own cgroup can hand controllers down only if it is the root (v2 keeps
        # processes out of inner cgroups): the usual delegation is a writable parent
        # (systemd's Delegate=yes) with the grader in one child and its kernels in others
        for parent in dict.fromkeys((here, here.parent if here != v2 else here)):
            with contextlib.suppress(OSError):
                enabled = (parent / "cgroup.subtree_control").read_text().split()
                if ({"memory", "pids"} <= set(enabled) and _writable_dir(parent)
                        and os.access(parent / "cgroup.procs", os.W_OK)):
                    return "v2", parent
    parents = {}
    for name in ("memory", "pids", "cpu"):
        base = ROOT / name
        if name in own and (base / "cgroup.procs").exists():
            parent = base / own[name].lstrip("/")
            if _writable_dir(parent):
                parents[name] = parent
    if "memory" in parents and "pids" in parents:
        return "v1", parents
    why = ("no writable cgroup v1 memory and pids hierarchies and no delegated cgroup v2 "
           "subtree with the memory and pids controllers")
    return None, why


PREFIX = "microgpt-sandbox-"


def _owner_alive(name: str) -> bool:
    """Whether the grader named in a kernel cgroup's name (PREFIX + pid + "-" + id) lives;
    False for a name without a pid (older names: removed once empty, as before)."""
    pid = name.removeprefix(PREFIX).split("-")[0]
    if not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale(version: str, parents: Any) -> list[str]:
    """Remove the kernels' cgroups that no process is in any more and whose grader is gone
    (left by a grader that was killed before its cleanup); the names of those removed. A
    live grader's cgroup is empty for a moment before its kernel joins it: left alone."""
    folders = [Path(parents)] if version == "v2" else [Path(p) for p in parents.values()]
    removed = []
    for parent in folders:
        for folder in parent.glob(PREFIX + "*"):
            if _owner_alive(folder.name):
                continue
            with contextlib.suppress(OSError):
                if not (folder / "cgroup.procs").read_text().split():
                    folder.rmdir()
                    removed.append(folder.name)
    return removed


class KernelCgroups:
    """The cgroups of one kernel. `procs_files` are what the launch wrapper writes its pid
    to; `report()` says how the limits were met; `kill()` and `remove()` clean up."""

    def __init__(self, version: str, parents: Any, memory_bytes: int, processes: int,
                 cpus: float | None = None, name: str | None = None) -> None:
        self.version = version
        # the grader's pid in the name: `remove_stale` leaves a live grader's cgroups alone
        self.name = name or f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:12]}"
        self.folders: dict[str, Path] = {}
        if version == "v2":
            folder = Path(parents) / self.name
            folder.mkdir()
            self.folders[""] = folder
            self._write(folder / "memory.max", memory_bytes)
            with contextlib.suppress(OSError):
                self._write(folder / "memory.swap.max", 0)
            self._write(folder / "pids.max", processes)
            if cpus:
                with contextlib.suppress(OSError):
                    self._write(folder / "cpu.max", f"{int(cpus * 100000)} 100000")
            return
        try:
            for controller in ("memory", "pids"):
                folder = Path(parents[controller]) / self.name
                folder.mkdir()
                self.folders[controller] = folder
            memory = self.folders["memory"]
            self._write(memory / "memory.limit_in_bytes", memory_bytes)
            if (memory / "memory.memsw.limit_in_bytes").exists():
                self._write(memory / "memory.memsw.limit_in_bytes", memory_bytes)
            self._write(self.folders["pids"] / "pids.max", processes)
            if cpus and "cpu" in parents:
                folder = Path(parents["cpu"]) / self.name
                folder.mkdir()
                self.folders["cpu"] = folder
                period = 100000
                self._write(folder / "cpu.cfs_period_us", period)
                self._write(folder / "cpu.cfs_quota_us", int(cpus * period))
        except BaseException:
            self.remove()
            raise

    @staticmethod
    def _write(path: Path, value: object) -> None:
        path.write_text(f"{value}\n")

    @property
    def procs_files(self) -> list[str]:
        return [str(folder / "cgroup.procs") for folder in self.folders.values()]

    def _memory_folder(self) -> Path | None:
        return self.folders.get("memory") or self.folders.get("")

    def _pids_folder(self) -> Path | None:
        return self.folders.get("pids") or self.folders.get("")

    @staticmethod
    def _fields(path: Path) -> dict[str, int]:
        found: dict[str, int] = {}
        with contextlib.suppress(OSError):
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                with contextlib.suppress(ValueError):
                    found[key] = int(value)
        return found

    @staticmethod
    def _number(path: Path) -> int:
        try:
            return int(path.read_text().strip())
        except (OSError, ValueError):
            return 0

    def report(self) -> dict[str, int]:
        """{"oom_kills", "memory_failures", "pids_refused", "peak_memory"}: how often the
        kernel met its limits (0 where this layout cannot tell)."""
        memory: Any = self._memory_folder()  # both set for a kernel that has cgroups
        pids: Any = self._pids_folder()
        if self.version == "v2":
            events = self._fields(memory / "memory.events")
            return {"oom_kills": events.get("oom_kill", 0),
                    "memory_failures": events.get("max", 0) + events.get("oom", 0),
                    "pids_refused": self._fields(pids / "pids.events").get("max", 0),
                    "peak_memory": self._number(memory / "memory.peak")}
        failures = max(self._number(memory / "memory.failcnt"),
                       self._number(memory / "memory.memsw.failcnt"))
        peak = max(self._number(memory / "memory.max_usage_in_bytes"),
                   self._number(memory / "memory.memsw.max_usage_in_bytes"))
        return {"oom_kills": self._fields(memory / "memory.oom_control").get("oom_kill", 0),
                "memory_failures": failures,
                "pids_refused": self._fields(pids / "pids.events").get("max", 0),
                "peak_memory": peak}

    def pids(self) -> set[int]:
        found: set[int] = set()
        for folder in self.folders.values():
            with contextlib.suppress(OSError):
                found.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
        return found

    def kill(self, timeout: float = 10.0) -> bool:
        """SIGKILL every process in the cgroups until none is left (or `timeout`)."""
        deadline = time.monotonic() + timeout
        while True:
            left = self.pids()
            if not left or time.monotonic() > deadline:
                return not left
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def remove(self) -> bool:
        """Kill what is left and remove the folders (a v1 memory cgroup may stay busy for a
        moment after its last process)."""
        self.kill()
        for folder in list(self.folders.values()):
            for _ in range(100):
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.folders = {k: v for k, v in self.folders.items() if v.exists()}
        return not self.folders
