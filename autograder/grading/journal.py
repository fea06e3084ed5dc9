"""A grading run's journal, so that a run that is killed resumes where it stopped.

`Journal` keeps one line per student done (`.grading/journal.jsonl` in the work course),
headed by what the scores depend on besides the submissions (`run_fingerprint`): a new
run with the same header skips the students it lists with the same submission.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autograder.grading.course import SOURCE, CourseError
from autograder.grading.student import StudentResult

if TYPE_CHECKING:
    from autograder.grading.plan import Sandbox

__all__ = ["Journal", "run_fingerprint", "students_kept"]


class Journal:
    """`.grading/journal.jsonl` in the work course: one line per student done, written
    (and flushed to disk) by the coordinating process once the student's grades are in
    the gradebook. A run that is killed resumes from it: a student whose line is there,
    with the same submission fingerprint, is not graded again."""

    def __init__(self, root: str | os.PathLike[str], header: dict[str, Any]) -> None:
        self.folder = Path(root) / ".grading"
        self.path = self.folder / "journal.jsonl"
        self.header = header
        self.done: dict[str, tuple[str, StudentResult]] = {}  # student -> (hash, result)

    def load(self) -> bool:
        """Read an earlier run's journal; False (and nothing read) if it is not for the
        same assignment, sources and settings."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return False
        if text and not text.endswith("\n"):  # the kill cut the last line short: drop it
            text = text[: text.rfind("\n") + 1]
            with open(self.path, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        lines = text.splitlines()
        try:
            earlier = json.loads(lines[0])
        except (IndexError, ValueError):
            return False
        if not isinstance(earlier, dict):
            return False
        theirs, ours = earlier.get("gradebook"), self.header.get("gradebook")
        if len(lines) > 1 and theirs is not None and theirs != ours:
            # its grades are in another gradebook: starting over here would leave this
            # one empty and overwrite grades.csv with it
            raise CourseError(
                f"the run in {self.folder.parent} wrote its grades to the gradebook {theirs}, "
                f"not {ours}: give the same gradebook again (--db-url or "
                f"RESIDUAL_PACK_DB_URL) to resume it, or --fresh to grade everyone again "
                f"into {ours}")
        if earlier != self.header:
            return False
        for line in lines[1:]:
            try:  # a line cut short by the kill is simply not there
                entry = json.loads(line)
                self.done[entry["student"]] = (entry["hash"],
                                               StudentResult.from_dict(entry["result"]))
            except (ValueError, KeyError, TypeError):
                continue
        return True

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.path, "w", encoding="utf-8") as f:
            f.write(json.dumps(self.header) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def append(self, result: StudentResult, digest: str) -> None:
        entry = {"student": result.student, "hash": digest, "result": result.to_dict(),
                 "at": round(time.time(), 3)}  # when it was written: the class's pace
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(entry) + "\n")
            f.flush()
            os.fsync(f.fileno())
        self.done[result.student] = (digest, result)


def students_kept(root: str | os.PathLike[str]) -> set[str]:
    """The students a run in the work course `root` has written to its journal as done
    (complete lines only): those that the same command, run again, does not grade again
    (unless their submission changed)."""
    try:
        lines = (Path(root) / ".grading" / "journal.jsonl").read_text(
            encoding="utf-8").splitlines()[1:]
    except (OSError, UnicodeDecodeError):
        return set()
    kept = set()
    for line in lines:
        try:
            kept.add(json.loads(line)["student"])
        except (ValueError, KeyError, TypeError):
            continue
    return kept


def run_fingerprint(course: str | os.PathLike[str], assignment: str,
                    sandbox: Sandbox | None) -> str:
    """What the scores depend on besides the submissions: the assignment's source, the
    limits and the isolation level."""
    digest = hashlib.sha256()
    folder = Path(course) / SOURCE / assignment
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if "__pycache__" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    if sandbox is not None:
        digest.update(json.dumps(asdict(sandbox.limits), sort_keys=True).encode())
        digest.update(sandbox.level.encode())
    return digest.hexdigest()[:16]
