"""Where a command's CPU goes, by kind of process: runs the command and, while it runs,
reads every process's own CPU (user + system, from /proc) twice a second; at the end,
the CPU of each process seen, summed by what kind of process it was (a grading kernel,
a grading worker, Chromium, pip, ...).

    .venv/bin/python benchmarks/process_cpu.py [--every S] [--top N] -- bash .ci/run

Unlike the test suite's CPU log (`suite_cpu.py`, which counts what each test's process
reaped), this sees processes whose parent never waits for them: the sandboxed grading
kernels (a kernel's CPU does not reach its grader's `os.times`), the browsers, the
servers. A process that starts and ends between two readings is missed, and so is the
last half second of each process: "not seen" is the machine's busy time (from
/proc/stat, every process on the machine) less what the readings saw.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict

CLOCK = os.sysconf("SC_CLK_TCK")

# (kind, a pattern of its command line); the first that matches wins
KINDS = [
    ("grading kernel (sandboxed)", r"autograder\.kernel\.gradekernel"),
    ("IPython kernel (a student's, Validate's, the reference run's)", r"ipykernel_launcher"),
    ("grading worker process (multiprocessing)", r"multiprocessing\.spawn|spawn_main"),
    ("Chromium", r"chrom(e|ium)"),
    ("Playwright's driver", r"playwright/driver"),
    ("pytest-xdist worker", r"exec\(eval\(sys\.stdin\.readline"),
    ("pip", r"-m pip\b|bin/pip3? "),
    ("nbgrader command", r"bin/nbgrader\b|-m nbgrader\b"),
    ("residual-pack command", r"bin/residual-pack\b|autograder\.cli\b"),
    ("pytest", r"-m pytest\b|bin/pytest\b"),  # (not a path in pytest's tmp folders)
    ("Jupyter server", r"scripts/lab|jupyter[-_ ]?(lab|server)|jupyterlab"),
    ("PostgreSQL", r"postgres"),
    ("Dask", r"dask|distributed"),
    ("ruff and mypy", r"\b(ruff|mypy)\b"),
    ("bubblewrap", r"\bbwrap\b"),
]


def kind_of(command: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, command):
            return kind
    return "other"


def busy_seconds() -> float:
    """The machine's busy CPU seconds since boot (every core; not idle, not iowait)."""
    with open("/proc/stat", encoding="ascii") as stat:
        fields = [int(x) for x in stat.readline().split()[1:9]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / CLOCK


class Sampler:
    """The own CPU of every process on the machine, read every `every` seconds."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.seen: dict[tuple[str, str], list] = {}  # (pid, start) -> [cmd, first, last, old]
        self.first = True
        self.stop = threading.Event()

    def read(self) -> None:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
                    stat = f.read()
                rest = stat[stat.rindex(")") + 2:].split()
                cpu = (int(rest[11]) + int(rest[12])) / CLOCK
                key = (pid, rest[19])  # a pid is reused: its start time tells them apart
                if key in self.seen:
                    self.seen[key][2] = cpu
                    continue
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    command = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
                command = command or stat[stat.index("(") + 1:stat.rindex(")")]
                # a process already running at the first reading counts from then on
                self.seen[key] = [command, cpu, cpu, self.first]
            except (OSError, ValueError, IndexError):
                continue  # it ended while being read
        self.first = False

    def run(self) -> None:
        while not self.stop.is_set():
            self.read()
            self.stop.wait(self.every)
        self.read()

    def totals(self) -> tuple[dict[str, float], dict[str, int], dict[str, float]]:
        """({kind: CPU seconds}, {kind: processes}, {command, numbers masked: CPU s})."""
        cpu: dict[str, float] = defaultdict(float)
        count: dict[str, int] = defaultdict(int)
        commands: dict[str, float] = defaultdict(float)
        for command, first, last, old in self.seen.values():
            spent = last - first if old else last
            kind = kind_of(command)
            cpu[kind] += spent
            count[kind] += 1
            commands[re.sub(r"\d+", "N", command)[:120]] += spent
        return cpu, count, commands


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=float, default=0.5, help="seconds between readings")
    parser.add_argument("--top", type=int, default=25, help="commands listed")
    parser.add_argument("--raw", help="also write every process seen to this file (JSON "
                                      "lines: command, CPU seconds), to classify again")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    sampler = Sampler(args.every)
    sampler.read()
    reader = threading.Thread(target=sampler.run, daemon=True)
    busy, started = busy_seconds(), time.monotonic()
    reader.start()
    code = subprocess.call(command)
    sampler.stop.set()
    reader.join()
    busy, wall = busy_seconds() - busy, time.monotonic() - started
    cpu, count, commands = sampler.totals()
    if args.raw:
        with open(args.raw, "w", encoding="utf-8") as raw:
            for command_line, first, last, old in sampler.seen.values():
                raw.write(json.dumps({"command": command_line,
                                      "cpu": round(last - first if old else last, 2)}) + "\n")
    seen = sum(cpu.values())
    print(f"\n# process_cpu: {' '.join(command)} (exit {code})", file=sys.stderr)
    out = [f"wall {wall:.0f} s; the machine busy {busy:.0f} CPU s on {os.cpu_count()} cores "
           f"({100 * busy / wall / (os.cpu_count() or 1):.0f}%); seen in processes "
           f"{seen:.0f} s, not seen {busy - seen:.0f} s",
           "", "## by kind of process: CPU s, share of the busy time, processes"]
    for kind in sorted(cpu, key=cpu.get, reverse=True):
        out.append(f"  {cpu[kind]:8.1f}  {100 * cpu[kind] / busy:5.1f}%  {count[kind]:6d}  {kind}")
    out += ["", f"## the {args.top} commands of the most CPU (numbers masked): CPU s"]
    for name in sorted(commands, key=commands.get, reverse=True)[:args.top]:
        out.append(f"  {commands[name]:8.1f}  {name}")
    print("\n".join(out), file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
