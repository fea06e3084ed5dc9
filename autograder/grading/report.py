"""Every sentence a person reads about a grading run: the reasons for lost points, the
score table, and the class report (report.txt, report.csv, report.json).

A report holds text that students control: their folder and file names, the grade ids
and metadata of cells they made, the messages their code raised, strings flagged in their
code. Each such piece goes through `plain` before it is written, so that a newline cannot
start a made-up line about a classmate, a terminal escape or a right-to-left override
cannot disguise one, and a name that is not valid text (a lone surrogate, bytes that are
not UTF-8) cannot stop the report from being written for everyone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.sandbox.limits import Limits, size_words

if TYPE_CHECKING:
    from autograder.grading.student import StudentResult

__all__ = ["plain", "describe_end", "tampering_seen", "lost_points", "score_table",
           "class_statistics", "statistics_text", "plot_scores", "write_report",
           "WRONG_ANSWER"]


def plain(text: object, limit: int = 2000) -> str:
    """`text` as one line of printable text: control and format characters (newlines,
    escapes, bidi overrides) and lone surrogates shown as escapes, cut to `limit`."""
    text = str(text)
    out = []
    for ch in text[:limit]:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    if len(text) > limit:
        out.append("...")
    return "".join(out)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def describe_end(ended: Mapping[str, Any], limits: Limits) -> str:
    """How a kernel ended, in words, from `KernelPlan.ended`."""
    if not ended:
        return "the kernel died"
    if ended.get("message"):  # the sandbox's own words (bubblewrap: a cgroup limit hit)
        return f"the kernel was stopped: {ended['message']}"
    sig = ended.get("signal")
    if sig:
        name = _signal_name(sig)
        # a memory cgroup that counted the kernel and saw no out-of-memory kill rules the
        # memory limit out (bubblewrap as root); otherwise it is the likeliest cause
        killed = ("killed, and not by the memory limit (the sandbox counted the kernel's "
                  "memory and saw no out-of-memory kill): by its own code or the grader"
                  if ended.get("memory_counted") else
                  "killed: most likely it went over the memory limit "
                  f"({size_words(limits.memory)})")
        hint = {
            "SIGKILL": killed,
            "SIGSEGV": "it crashed (segmentation fault)",
            "SIGBUS": "it crashed (bus error)",
            "SIGABRT": "it aborted (often: out of memory inside a library)",
            "SIGXCPU": "it used up its CPU time",
            "SIGXFSZ": f"it wrote a file bigger than {size_words(limits.file_size)}",
        }.get(name, "it was killed")
        return f"the kernel ended on {name}: {hint}"
    code = ended.get("code")
    return f"the kernel exited with code {code} (exit(), sys.exit() outside a cell, or os._exit)"


# changes the kernel undid before a test that an honest notebook may make
HARMLESS_CHANGES = ("sys.path",)


def tampering_seen(result: Any) -> list[str]:
    """Reasons to withhold a score from what the graded kernels saw: a test during which
    the code it called changed what the tests rely on, or changes that earlier cells
    made to the grader's modules, the engine or the interpreter (undone before the test)."""
    reasons = []
    for run in result.runs.values():
        for c in run.get("cells", []):
            if c.get("kind") != "test":
                continue
            changed = [x for x in c.get("changed", []) if not x.startswith(HARMLESS_CHANGES)]
            restored = [x for x in c.get("restored", []) if not x.startswith(HARMLESS_CHANGES)]
            if changed:
                reasons.append(f"while {c['grade_id']} ran, the code it called changed "
                               + ", ".join(changed[:6]))
            if restored:
                reasons.append(f"before {c['grade_id']} ran, the grader undid changes earlier "
                               f"cells made to " + ", ".join(restored[:6]))
    seen = set()
    return [r for r in reasons if not (r in seen or seen.add(r))][:10]  # type: ignore[func-returns-value]


WRONG_ANSWER = {"CheckFailed", "NotAnswered", "AssertionError"}


def lost_points(result: StudentResult, limits: Limits | None,
                autograded: Mapping[tuple[str, str], bool]) -> list[str]:
    """Plain words for what cost `result` points other than a wrong answer: time and
    memory limits, a kernel that died or hung, the process limit, tampering caught, a
    test that wrote to stderr, output left out."""
    limits = limits or Limits()
    problems = []
    many = len(result.runs) > 1
    for name, run in result.runs.items():
        where = f"{name}: " if many else ""
        cells = run.get("cells", [])
        lost = {c.cell for c in result.cells if c.autograded and c.score < c.max_score}
        if run.get("ended"):
            skipped = [c["grade_id"] for c in cells
                       if c["status"] in ("not run", "died", "stuck") and c["kind"] == "test"]
            tail = f"; tests that did not run: {', '.join(skipped)}" if skipped else ""
            problems.append(f"{where}{run['ended']}{tail}")
        for c in cells:
            label = c["grade_id"] or f"cell {c['index'] + 1} (your own)"
            status, ename, evalue = c["status"], c["ename"], c["evalue"]
            text = ""
            if status == "timeout":
                text = (f"{label} ran longer than the {limits.cell_timeout} s a cell may take "
                        f"and was stopped")
            elif status == "error":
                if ename == "MemoryError":
                    text = f"{label} ran out of memory (the limit is {size_words(limits.memory)})"
                elif ename == "SystemExit":
                    text = f"{label} called sys.exit() or exit(); the cell stopped with an error"
                elif ename == "TamperingDetected":
                    text = f"{label}: {evalue}"
                elif ename in ("BlockingIOError", "OSError", "PermissionError") and (
                        "Resource temporarily unavailable" in evalue
                        or "can't start new thread" in evalue):
                    text = (f"{label} tried to start more processes than the "
                            f"{limits.processes} allowed")
                elif "No space left" in evalue or "File too large" in evalue:
                    text = (f"{label} wrote more than it may ({size_words(limits.disk)} in all, "
                            f"{size_words(limits.file_size)} per file)")
                elif ename == "KeyboardInterrupt":
                    text = f"{label} was interrupted"
                elif ename == "NoReply":
                    text = f"{label}: the kernel sent no reply"
            if text:
                problems.append(where + text)
            if c.get("stderr") and c["kind"] == "test" and c["grade_id"] in lost:
                problems.append(f"{where}{label} wrote to stderr (a warning?), which nbgrader "
                                f"counts as a failed test")
            if c.get("output_dropped"):
                more = c["output_dropped"]
                amount = f"about {size_words(more)} more" if more > 1024 else "more"
                problems.append(
                    f"{where}{label} printed {amount} than the {size_words(limits.output)} of "
                    f"output kept per notebook; the rest was left out")
            if c.get("restored") and c["kind"] == "test":
                shown = ", ".join(c["restored"][:6]) + (" ..." if len(c["restored"]) > 6 else "")
                problems.append(f"{where}before {label} ran, the grader undid changes that "
                                f"earlier cells made to what the tests rely on: {shown}")
    seen = set()
    return [p for p in problems if not (p in seen or seen.add(p))]  # type: ignore[func-returns-value]


def score_table(grader: Any, results: Sequence[StudentResult]) -> str:
    """The score table as text: one row per student, one column per autograded cell."""
    cells = [key for key in grader.order if grader.autograded[key]]
    many = len(grader.notebooks) > 1
    heads = [f"{nb}:{gid}" if many else gid for nb, gid in cells]
    late = any(getattr(r, "late_penalty", 0) for r in results)
    rows = [["student", *heads, "autograded", *(["late penalty"] if late else []),
             "seconds"]]
    for r in results:
        if not r.graded:
            rows.append([plain(r.student, 100), *(["-"] * len(cells)), "not graded",
                         *(["-"] if late else []), "-"])
            continue
        by_key = {(c.notebook, c.cell): c for c in r.cells}
        row = [plain(r.student, 100)]
        for key in cells:
            c = by_key.get(key)
            row.append(f"{_num(c.score)}/{_num(c.max_score)}" if c else "-")
        got, top = r.score()
        penalty = getattr(r, "late_penalty", 0)
        row += [f"{_num(got)}/{_num(top)}",
                *([f"-{_num(penalty)}" if penalty else ""] if late else []),
                f"{r.seconds:.1f}"]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        who = plain(r.student, 100)
        if r.reason:
            lines.append(f"{who}: not graded: {plain(r.reason)}")
        if r.withheld:
            lines.append(f"{who}: autograded score withheld for review (it would be "
                         f"{_num(r.withheld_score)}): a person must look before it counts; "
                         f"give the points back in formgrader")
        flags = [f for f in r.flags if f not in r.withheld]  # a reason is said once
        for line in [*r.problems, *r.withheld, *r.notes, *flags]:
            lines.append(f"{who}: {plain(line)}")
        for line in failed_checks(r):
            lines.append(f"{who}: {plain(line)}")
    return "\n".join(lines)


def failed_checks(result: StudentResult) -> list[str]:
    """Each failed test cell of `result` with the check that failed it, in words: the
    grader's verdict, and for a hidden check the check itself (the instructor may see
    it; the student's page says only which check failed)."""
    found = []
    many = len(result.runs) > 1
    for name, run in result.runs.items():
        for c in run.get("cells", []):
            if c.get("kind") != "test" or not (c.get("verdict") or c.get("detail")):
                continue
            why = c.get("detail") or c.get("verdict")
            found.append(f"{name + ': ' if many else ''}{c['grade_id']} failed: {why}")
    return found


def _num(x: float) -> str:
    return f"{x:g}"


# a number standing on its own (not the digits of a name such as task1_2)
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w])")


_TASKS = re.compile(r"\bTasks? \d+\.\d+(?: (?:to|and) \d+\.\d+)?")


def _reason_kind(cell: Mapping[str, Any]) -> str:
    """Why a test cell failed, with its numbers taken out, so that the same mistake with
    other values counts as one: the grader's verdict (which check, what it diagnosed),
    else how the cell ended."""
    text = cell.get("verdict") or ""
    if not text:
        status = cell.get("status", "")
        if status in ("timeout", "died", "stuck", "not run"):
            text = {"timeout": "ran past the time limit", "died": "the kernel died",
                    "stuck": "the kernel stopped answering",
                    "not run": "did not run (the kernel had stopped)"}[status]
        else:
            text = ": ".join(x for x in (cell.get("ename", ""), cell.get("evalue", "")) if x)
    # the numbers of a task's name (Task 5.1, Tasks 5.1 to 5.3) are words, not values:
    # kept aside under letters-only placeholders while the values are taken out
    names = []

    def aside(match: re.Match[str]) -> str:
        names.append(match.group(0))
        return "TASKNAME" + "".join(chr(65 + int(d)) for d in str(len(names) - 1)) + "X"

    text = _NUMBER.sub("#", _TASKS.sub(aside, text[:600]))
    for i, name in enumerate(names):
        text = text.replace("TASKNAME" + "".join(chr(65 + int(d)) for d in str(i)) + "X",
                            name)
    text = plain(text, 600)
    return text if text else "failed"


def class_statistics(grader: Any, results: Sequence[StudentResult],
                     top: int = 3) -> list[dict[str, Any]]:
    """Per autograded cell, over the students graded: how many passed (full points), and
    the `top` most common reasons of the failures, and how many failed for other reasons, as
    [{"notebook", "grade_id", "graded", "passed", "share", "reasons": [[reason, count]],
    "other": count}]."""
    graded = [r for r in results if r.graded]
    stats = []
    for nb, gid in grader.order:
        if not grader.autograded[(nb, gid)]:
            continue
        reasons: Counter[str]
        passed, reasons = 0, Counter()
        for r in graded:
            c = next((c for c in r.cells if (c.notebook, c.cell) == (nb, gid)), None)
            if c is not None and c.max_score and c.score >= c.max_score:
                passed += 1
                continue
            run = r.runs.get(nb, {})
            cell = next((x for x in run.get("cells", []) if x.get("grade_id") == gid), None)
            if cell is None:
                reasons["not run (notebook not graded to this cell)"] += 1
            elif r.withheld and cell.get("status") == "ok" and not cell.get("verdict"):
                reasons["withheld for review"] += 1
            else:
                reasons[_reason_kind(cell)] += 1
        common: list[list[Any]] = [[k, n] for k, n in reasons.most_common(top)]
        stats.append({"notebook": nb, "grade_id": gid, "graded": len(graded),
                      "passed": passed, "share": passed / len(graded) if graded else 0.0,
                      "reasons": common,
                      # the failures of the other reasons, so that the counts add up
                      "other": sum(reasons.values()) - sum(n for _, n in common)})
    return stats


def statistics_text(grader: Any, results: Sequence[StudentResult],
                    stats: list[dict[str, Any]] | None = None) -> str:
    """The class statistics as text for report.txt."""
    stats = class_statistics(grader, results) if stats is None else stats
    scores = [r.score()[0] for r in results if r.graded]
    top = max((r.score()[1] for r in results if r.graded), default=0)
    lines = ["class statistics", "----------------"]
    ungraded = sum(1 for r in results if not r.graded)
    if scores:
        ordered = sorted(scores)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        lines.append(f"{len(scores)} graded, {ungraded} not graded; autograded score out of "
                     f"{_num(top)}: mean {sum(scores) / len(scores):.2f}, median "
                     f"{_num(median)}, full marks {sum(1 for x in scores if x >= top)}, "
                     f"zero {sum(1 for x in scores if x == 0)}")
    else:
        lines.append(f"nobody graded ({ungraded} not graded)")
    many = len(grader.notebooks) > 1
    for st in stats:
        name = f"{st['notebook']}:{st['grade_id']}" if many else st["grade_id"]
        lines.append(f"{plain(name, 200)}: passed by {st['passed']}/{st['graded']} "
                     f"({100 * st['share']:.0f}%)")
        for reason, count in st["reasons"]:
            lines.append(f"    {count} x {reason}")
        if st.get("other"):
            lines.append(f"    {st['other']} x other reasons")
    return "\n".join(lines)


def plot_scores(results: Sequence[StudentResult], path: str | os.PathLike[str],
                title: str = "") -> Path | None:
    """A histogram of the class's autograded scores (graded students), saved as PNG at
    `path`; None when nobody was graded or matplotlib is missing."""
    scores = [r.score()[0] for r in results if r.graded]
    if not scores:
        return None
    try:
        # a Figure of its own, drawn by Agg: the same PNG as pyplot's, without importing
        # pyplot and its backend machinery (a quarter of a second per run)
        from matplotlib.figure import Figure
    except ImportError:
        return None
    top = max(r.score()[1] for r in results if r.graded)
    fig = Figure(figsize=(6, 3.5), dpi=100)
    ax = fig.subplots()
    step = 1.0 if top <= 40 else top / 40
    edges = [i * step - step / 2 for i in range(int(top / step) + 2)]
    ax.hist(scores, bins=edges, color="#4477aa", edgecolor="white")
    ax.set_xlabel(f"autograded score (out of {_num(top)})")
    ax.set_ylabel("students")
    ungraded = sum(1 for r in results if not r.graded)
    ax.set_title(f"{title}: {len(scores)} graded" + (f", {ungraded} not graded" if ungraded
                                                     else ""))
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    return Path(path)


def write_report(grader: Any, results: Sequence[StudentResult], out: str | os.PathLike[str],
                 header: str = "") -> Path:
    """The class report in `out`: report.txt (the table, then per student what cost
    points besides wrong answers, what was repaired, what to review), report.csv (one row
    per student, a column per graded cell) and report.json (everything)."""
    import csv

    out = Path(out)
    stats = class_statistics(grader, results)
    text = (header + "\n\n" if header else "") + score_table(grader, results) + "\n\n" + \
        statistics_text(grader, results, stats) + "\n"
    plot_scores(results, out / "score_distribution.png", grader.assignment)
    (out / "report.txt").write_text(text, encoding="utf-8", errors="backslashreplace")
    keys = list(grader.order)
    many = len(grader.notebooks) > 1
    heads = [f"{nb}:{gid}" if many else gid for nb, gid in keys]
    with open(out / "report.csv", "w", newline="", encoding="utf-8",
              errors="backslashreplace") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "graded", *heads, "autograded", "autograded_max",
                         "lost_points_because", "not_graded_because", "repairs", "review",
                         "withheld_for_review"])
        for r in results:
            by_key = {(c.notebook, c.cell): c for c in r.cells}
            got, top = r.score()
            writer.writerow([
                plain(r.student, 100), "yes" if r.graded else "no",
                *[_num(by_key[k].score) if k in by_key else "" for k in keys],
                _num(got), _num(top) if r.graded else "",
                plain(" | ".join(r.problems), 20000), plain(r.reason),
                plain(" | ".join(r.notes), 20000), plain(" | ".join(r.flags), 20000),
                plain(" | ".join(r.withheld), 20000),
            ])
    data = {
        "assignment": grader.assignment,
        "header": header,
        "cells": [{"notebook": nb, "grade_id": gid, "autograded": grader.autograded[(nb, gid)]}
                  for nb, gid in keys],
        "statistics": stats,
        "students": [r.to_dict() | {"autograded_score": r.score()[0],
                                    "autograded_max": r.score()[1]} for r in results],
    }
    for entry in data["students"]:
        entry.pop("log", None)
    (out / "report.json").write_text(json.dumps(data, indent=1), encoding="utf-8")
    return out / "report.txt"


