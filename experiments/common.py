"""What every experiment command shares: arguments, timing, and writing JSON with its table."""

import json
import math
import re
import time
from pathlib import Path

from microgpt.provenance import describe, record

__all__ = ["add_common_arguments", "command_line", "coarse_curve", "dumps", "save",
           "Stopwatch", "RunClock", "fmt", "provenance_line"]


def add_common_arguments(parser, default_out):
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="seeds to run (default: 0 1 2)")
    parser.add_argument("--out", default=default_out,
                        help="the JSON result; the markdown table goes beside it (.md)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def command_line(module, argv):
    """The command as someone would type it again: `python -m experiments.<name> args...`."""
    return " ".join(["python -m", module, *map(str, argv)])


def coarse_curve(history, points=10):
    """The mean of the history over `points` equal stretches: a curve small enough to keep."""
    n = len(history)
    if n == 0:
        return []
    points = min(points, n)
    out = []
    for i in range(points):
        part = history[i * n // points:(i + 1) * n // points]
        out.append(round(math.fsum(part) / len(part), 4))
    return out


class Stopwatch:
    """Wall seconds since it was made."""

    def __init__(self):
        self.start = time.perf_counter()

    def seconds(self):
        return time.perf_counter() - self.start


class RunClock(Stopwatch):
    """A command's stopwatch that also notes the commit the run starts from.

    `save` records the provenance when the run ends; a commit made while a long run was
    going must not be credited with its numbers, so the commit (and whether the tree had
    changes) is the one at the start, and the end's is kept beside it when it differs.
    """

    def __init__(self):
        super().__init__()
        at_start = record()
        self.git = {k: at_start[k] for k in ("commit", "uncommitted_changes")}


def fmt(x, digits=3):
    """A number for a table; a missing one as a dash."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "**no**"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}f}"


def dumps(result):
    """JSON with one item per line, except lists of plain numbers, which stay on one line."""
    text = json.dumps(result, indent=1)

    def join(match):
        return "[" + ", ".join(x.strip() for x in match.group(1).split(",")) + "]"

    return re.sub(r"\[((?:\s*-?[\d.eE+-]+,?)+\s*)\]", join, text) + "\n"


def save(result, out, render, module, argv, started):
    """Add provenance to `result`, write it to `out` (JSON) and its table to `out`.md."""
    prov = record(command=command_line(module, argv), wall_seconds=started.seconds())
    at_start = getattr(started, "git", None)
    if at_start is not None and any(prov[k] != v for k, v in at_start.items()):
        prov["commit_at_end"] = prov["commit"]
        prov["uncommitted_changes_at_end"] = prov["uncommitted_changes"]
        prov.update(at_start)
    result["provenance"] = prov
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps(result), encoding="utf-8")
    table = render(result)
    out.with_suffix(".md").write_text(table, encoding="utf-8")
    return out, table


def provenance_line(result):
    return "Run: " + describe(result["provenance"]) if "provenance" in result else ""
