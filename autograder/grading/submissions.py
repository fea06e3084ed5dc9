"""The folder of submissions a class hands in, and who is who in it.

A folder of submissions may hold, for an assignment `A` with notebook `N.ipynb`:

    SUBMISSIONS/<student>/A/N.ipynb   nbgrader's own layout (what `nbgrader collect` makes)
    SUBMISSIONS/<student>/N.ipynb     one folder per student
    SUBMISSIONS/<student>.ipynb       one file per student (assignments with one notebook)

A student folder whose only notebook has another name (`N (1).ipynb`) counts as `N.ipynb`
when the assignment has a single notebook. Only notebooks are graded: every other file a
student hands in (an `autograder.py`, a `microgpt/` folder) is left out and reported, and
symbolic links are not followed. A name that is not plain text gets an id of its own.

A student folder may also hold nbgrader's `timestamp.txt` beside the notebooks (nbgrader's
exchange writes one at `nbgrader submit`, and `nbgrader collect` keeps it): when it was
handed in, which nbgrader's autograde compares with the assignment's due date
(`handed_in_at` reads it; the grader hands it to nbgrader with the notebooks).
"""

import hashlib
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from autograder.grading.course import CourseError, notebook_paths

__all__ = ["student_id", "find_submissions", "submission_hash", "handed_in_at", "TIMESTAMP_FILE",
           "EXCHANGE_FILES"]

TIMESTAMP_FILE = "timestamp.txt"  # nbgrader's: when a submission was handed in
# what nbgrader's exchange itself puts beside every submission (`nbgrader submit` writes
# both, `nbgrader collect` keeps them): expected, so never reported as left out
EXCHANGE_FILES = (TIMESTAMP_FILE, "submission_secret.txt")
TIMESTAMP_BYTES = 200  # nbgrader writes one line of about 30 characters


def student_id(name: str) -> tuple[str, str]:
    """(the student id for a file or folder `name`, a note or ""): the name itself when it
    is plain text (letters, digits, ``._@+-`` and spaces, at most 100 characters), else
    `student-` and a digest of its bytes, so that any name is graded and reported."""
    ok = (0 < len(name) <= 100 and name == name.strip() and not name.startswith(".")
          and all(ch.isalnum() or ch in "._@+- " for ch in name)
          and not any(0xD800 <= ord(ch) <= 0xDFFF for ch in name))
    if ok:
        return name, ""
    raw = os.fsencode(name)
    made = "student-" + hashlib.sha256(raw).hexdigest()[:10]
    return made, f"the name {raw!r} is not plain text; graded as {made}"


def find_submissions(folder: str | os.PathLike[str], assignment: str, notebooks: Sequence[str],
                     exclude: Iterable[str | os.PathLike[str]] = (),
                     ) -> dict[str, tuple[dict[str, Path], list[str]]]:
    """{student: ({notebook name: path}, [notes])} for every student in `folder`, leaving
    out the entries that hold a path of `exclude` (the run's own output folder, when the
    command runs inside the submissions folder)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CourseError(f"{folder} is not a folder of submissions")
    kept_out = [Path(p).resolve() for p in exclude]
    found: dict[str, tuple[dict[str, Path], list[str]]] = {}
    for entry in sorted(folder.iterdir(), key=lambda p: os.fsencode(p.name)):
        if entry.name.startswith((".", "_")):
            continue
        if not entry.is_symlink() and any(
                p == entry.resolve() or entry.resolve() in p.parents for p in kept_out):
            continue
        found_before = set(found)
        if entry.is_symlink():  # it could point at anything, another student's work included
            found[entry.name.removesuffix(".ipynb")] = (
                {}, [f"{entry.name} is a symbolic link; links are not followed"])
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            if len(notebooks) != 1:
                found[entry.stem] = (
                    {},
                    [f"{entry.name}: one file per student works only for one-notebook "
                     f"assignments; {assignment} has {notebooks}"],
                )
            else:
                found[entry.stem] = ({notebooks[0]: entry}, [])
        elif entry.is_dir():
            inner = entry / assignment if (entry / assignment).is_dir() else entry
            found[entry.name] = _match_notebooks(inner, notebooks)
        for raw in set(found) - found_before:  # the id the gradebook and the report use
            made, note = student_id(raw)
            if note:
                files, notes = found.pop(raw)
                found[made] = (files, [note, *notes])
    return found


def _match_notebooks(folder: Path, notebooks: Sequence[str],
                     ) -> tuple[dict[str, Path], list[str]]:
    notes = []
    files = {}
    for p in notebook_paths(folder):
        if p.is_symlink():
            notes.append(f"{p.name} is a symbolic link; links are not followed")
        else:
            files[p.stem] = p
    matched = {name: files.pop(name) for name in notebooks if name in files}
    if len(notebooks) == 1 and not matched and len(files) == 1:
        (stem, path), = files.items()
        matched[notebooks[0]] = path
        files.clear()
        notes.append(f"graded {path.name} as {notebooks[0]}.ipynb")
    if files:
        notes.append("ignored notebook(s) not in the assignment: "
                     + ", ".join(sorted(p.name for p in files.values())))
    others, deeper = [], []  # files that are not notebooks; notebooks a folder too deep
    exchange = {folder / name for name in EXCHANGE_FILES}
    for p in _walk_files(folder):
        if ".ipynb_checkpoints" in p.parts:
            continue
        if p.suffix != ".ipynb":
            if p not in exchange:
                others.append(str(p.relative_to(folder)))
        elif p.parent != folder:  # a zip unpacked into a folder of its own: said, not graded
            deeper.append(str(p.relative_to(folder)))
    if others:
        notes.append(f"left out {len(others)} file(s) that are not notebooks: "
                     f"{_first_few(others)}")
    if deeper:
        notes.append(f"not graded, in a folder below {folder.name}/: {_first_few(deeper)} "
                     f"(a notebook is read from <student>/<assignment>/ or <student>/ itself)")
    return matched, notes


def _first_few(paths: list[str], few: int = 5) -> str:
    """The first `few` of `paths` in order, then "..." when there are more."""
    paths = sorted(paths)
    return ", ".join(paths[:few]) + (" ..." if len(paths) > few else "")


def _walk_files(folder: str | os.PathLike[str], limit: int = 10000) -> Iterator[Path]:
    """Files under `folder` (links not followed), at most `limit` of them."""
    count = 0
    for root, _dirs, files in os.walk(folder, followlinks=False):
        for name in files:
            yield Path(root) / name
            count += 1
            if count >= limit:
                return


def handed_in_at(notebooks: Mapping[str, Path], folder: str | os.PathLike[str]) -> str | None:
    """The text of the `timestamp.txt` beside a student's `notebooks` ({name: path}) when
    they are in a folder of the student's own inside the submissions `folder` (never for
    one file per student: the submissions folder itself is no one's), else None. A link,
    an empty or an oversized file is not read."""
    parents = {Path(p).parent for p in notebooks.values()}
    if len(parents) != 1:
        return None
    (parent,) = parents
    if parent.resolve() == Path(folder).resolve():
        return None
    path = parent / TIMESTAMP_FILE
    if path.is_symlink() or not path.is_file() or path.stat().st_size > TIMESTAMP_BYTES:
        return None
    text = path.read_bytes().decode("utf-8", errors="replace").strip()
    return text or None


def submission_hash(notebooks: Mapping[str, str | os.PathLike[str]],
                    timestamp: str | None = None) -> str:
    """A fingerprint of what a student handed in ({name: path}), and when (`timestamp`,
    nbgrader's text, when there is one)."""
    digest = hashlib.sha256()
    if timestamp is not None:
        digest.update(b"timestamp\0" + timestamp.encode("utf-8", "surrogatepass") + b"\0")
    for name in sorted(notebooks):
        digest.update(name.encode() + b"\0")
        with open(notebooks[name], "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()
