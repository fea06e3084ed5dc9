"""Where a measured number came from: the run that printed it.

Every result file the pack commits (the seed tables, the depth searches, the benchmarks)
carries one `record()`: the command, the commit and whether the tree had uncommitted
changes, the Python and library versions, the threads, the CPU, the load, the date and
the wall time. A figure quoted in a notebook or the README can then be traced to the run
that printed it, and rerun with the same command.

    started = time.perf_counter()
    ...  # the experiment
    result["provenance"] = record(wall_seconds=time.perf_counter() - started)
"""

import datetime
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["record", "describe"]

_REPO = Path(__file__).resolve().parent.parent


def _git(*args: str) -> str | None:
    # only this package's own checkout: installed in site-packages (inside, say, a
    # project's .venv) git would answer for whatever repository encloses it
    if not (_REPO / ".git").exists():
        return None
    try:
        run = subprocess.run(["git", *args], cwd=_REPO, capture_output=True, text=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return run.stdout.strip() if run.returncode == 0 else None


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("numpy", "torch"):
        module = sys.modules.get(name)  # only what the run itself imported
        if module is not None:
            found[name] = getattr(module, "__version__", "unknown")
    return found


def _threads() -> int:
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.get_num_threads()
    return 1  # pure Python: one thread


def record(command: str | None = None, wall_seconds: float | None = None,
           **extra: Any) -> dict[str, Any]:
    """A dict saying which run produced a result; `extra` items are added as they are."""
    dirty = _git("status", "--porcelain", "--untracked-files=no")
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    out: dict[str, Any] = {
        "command": command or " ".join([Path(sys.argv[0]).name if sys.argv else "python",
                                        *sys.argv[1:]]),
        "commit": _git("rev-parse", "HEAD") or "unknown (not a git checkout)",
        "uncommitted_changes": bool(dirty) if dirty is not None else None,
        "versions": _versions(),
        "threads": _threads(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "machine": f"{platform.system()} {platform.machine()}",
        "load_average": load,
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }
    if wall_seconds is not None:
        out["wall_seconds"] = round(wall_seconds, 1)
    out.update(extra)
    return out


def describe(prov: dict[str, Any]) -> str:
    """One line for a table's caption: commit, versions, threads, CPU, date, wall time."""
    versions = ", ".join(f"{k} {v}" for k, v in prov.get("versions", {}).items())
    commit = str(prov.get("commit", "?"))
    if re.fullmatch(r"[0-9a-f]{40}", commit):  # a hash, shortened; anything else as it is
        commit = commit[:10]
    if prov.get("uncommitted_changes"):
        commit += " (with uncommitted changes)"
    wall = prov.get("wall_seconds")
    wall_text = f", {wall:.0f} s" if isinstance(wall, (int, float)) else ""
    return (f"`{prov.get('command', '?')}` at {commit}; {versions}; "
            f"{prov.get('threads', '?')} thread(s) on {prov.get('cores', '?')} x "
            f"{prov.get('cpu', '?')}; load {prov.get('load_average')}; "
            f"{prov.get('date', '?')}{wall_text}")
