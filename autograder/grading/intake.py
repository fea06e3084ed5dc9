"""What a student handed in, made fit to grade, before any kernel sees it.

Two steps: `read_handed_in`, where a hand-in is copied to nbgrader's `submitted/` folder,
turns bytes into a notebook nbgrader can read or says why it cannot be graded (too big,
empty, not JSON, not a notebook); `take_in`, run inside nbgrader's autograde as its first
step (`nbgrader_steps.IntakeRepairs`), does that and then repairs the notebook against the
released one, or says it is another assignment's:

- bytes that are not UTF-8 are replaced (U+FFFD) and the rest is graded;
- only what a notebook needs is kept from each cell (type, source, metadata, id, and the
  pictures attached to text cells): no outputs or odd fields; the notebook's metadata
  (its kernel) is the release's;
- every cell that carries the assignment's nbgrader metadata gets exactly the release's
  (points, grade, locked, ...): a student cannot give a test more points or make it
  ungraded; metadata naming a cell the assignment does not have is removed;
- locked cells (instructions, given code, tests) are put back as released, with their
  type; nbgrader later puts the hidden tests back into the test cells;
- cells the student deleted are put back; a copy of a locked cell is dropped; a copy of an
  answer cell runs as a cell of the student's own (the first copy is the answer);
- cells moved out of order are put back in the assignment's order (the student's own
  cells travel with the cell they followed), so tests never run before the answer.

Each repair is noted in plain words for the class report. `review_flags` scans the code the
student wrote for things a human should look at (code that reaches into the interpreter,
imports the grader, or touches files and processes); flags never change a score.
"""

import ast
import copy
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import nbformat

from autograder.cells import (
    grade_id,
    is_autograded_test,
    is_grade,
    is_locked,
    is_solution,
    nbgrader_meta,
)
from autograder.sandbox.limits import size_words

CELL_TYPES = ("code", "markdown", "raw")
NBGRADER_FIELDS = ("grade", "solution", "locked", "points", "task", "schema_version")
ID_PATTERN = re.compile(r"^[a-zA-Z0-9-_]{1,64}$")


@dataclass
class Intake:
    notebook: Any = None  # the notebook to grade (NotebookNode), None when it cannot be
    problem: str = ""  # why it cannot be graded
    notes: list = field(default_factory=list)  # what was repaired, in plain words
    flags: list = field(default_factory=list)  # what a human should look at
    withhold: list = field(default_factory=list)  # flags that hold the score back for review


def too_big(name: str, size: int, limit: int | None) -> str:
    """Why the notebook `name` of `size` bytes is not graded, or "" when it fits `limit`."""
    if not limit or size <= limit:
        return ""
    shown = f"{size / (1 << 20):.1f} MiB" if size >= 1 << 20 else f"{size} bytes"
    return f"{name} is {shown}, more than the {size_words(limit)} a notebook may be"


def read_handed_in(data: bytes, name: str, max_bytes: int | None = None) -> Intake:
    """The bytes `data` of the handed-in file `name` as a notebook nbgrader can read (an
    `Intake` whose notebook holds the student's cells, cleaned one by one, and no release
    repair yet), or the reason it cannot be graded: too big, empty, not JSON, not a
    notebook. Bytes that are not UTF-8 are replaced and noted."""
    if too_big(name, len(data), max_bytes):
        return Intake(problem=too_big(name, len(data), max_bytes))
    if not data.strip():
        return Intake(problem=f"{name} is empty ({len(data)} bytes)")
    notes = []
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        if data.startswith(b"\xef\xbb\xbf"):
            text = text[1:]
        bad = text.count("\ufffd") - data.decode("utf-8", errors="ignore").count("\ufffd")
        notes.append(f"{name} is not valid UTF-8 (first bad byte at offset {exc.start}); "
                     f"{bad} undecodable byte(s) were replaced by U+FFFD and the rest was graded")
    try:
        raw = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return Intake(problem=f"{name} is not a readable notebook "
                              f"({type(exc).__name__}: {str(exc)[:200]})")
    if isinstance(raw, dict) and raw.get("nbformat") == 3 and "cells" not in raw:
        try:  # an old format (cells in worksheets), as nbgrader itself reads it: converted
            raw = dict(nbformat.convert(nbformat.from_dict(raw), 4))
            notes.append(f"{name} is in nbformat 3; it was converted to nbformat 4")
        except Exception as exc:  # noqa: BLE001 (any failure: the file is not gradable)
            return Intake(problem=f"{name} is an nbformat 3 notebook that could not be "
                                  f"converted ({type(exc).__name__}: {str(exc)[:200]})")
    if not isinstance(raw, dict) or not isinstance(raw.get("cells"), list):
        return Intake(problem=f"{name} is not a notebook (no list of cells)")
    cells = []
    for i, item in enumerate(raw["cells"]):
        cell = _clean_cell(item, i, notes)
        if cell is not None:
            cells.append(cell)
    return Intake(notebook=nbformat.v4.new_notebook(cells=cells), notes=notes)


def take_in(data: bytes, name: str, release: Any, assignment: str,
            foreign: Mapping[str, set[Any]] | None = None, max_bytes: int | None = None,
            ) -> Intake:
    """An `Intake` for the bytes `data` of the file `name`, graded as the release notebook
    `release` of `assignment`. `foreign`: {other assignment: set of its grade ids}."""
    read = read_handed_in(data, name, max_bytes)
    if read.problem:
        return read
    notes = list(read.notes)
    result = _repair(list(read.notebook.cells), name, release, assignment, foreign or {},
                     notes)
    if result.notebook is not None:
        result.flags = review_flags(result.notebook, assignment)
        result.withhold = [f for f in result.flags if any(k in f for k in WITHHOLD)]
    return result


def _clean_cell(item: object, index: int, notes: list[str]) -> Any:
    if not isinstance(item, dict):
        notes.append(f"item {index} of the cell list is not a cell; it was left out")
        return None
    kind = item.get("cell_type")
    source = item.get("source", "")
    if isinstance(source, list):
        source = "".join(s if isinstance(s, str) else str(s) for s in source)
    elif not isinstance(source, str):
        source = str(source)
    metadata = item.get("metadata", {})
    if not isinstance(metadata, dict):
        notes.append(f"cell {index} had damaged metadata; it was reset")
        metadata = {}
    metadata = copy.deepcopy(metadata)
    if "nbgrader" in metadata and not isinstance(metadata["nbgrader"], dict):
        kind_of = type(metadata["nbgrader"]).__name__
        notes.append(f"cell {index} had damaged nbgrader metadata (a {kind_of}); it was removed")
        del metadata["nbgrader"]
    if kind not in CELL_TYPES:
        notes.append(f"cell {index} had an unknown type {str(kind)[:20]!r}; it was kept as text")
        kind = "raw"
    maker = {"code": nbformat.v4.new_code_cell, "markdown": nbformat.v4.new_markdown_cell,
             "raw": nbformat.v4.new_raw_cell}[kind]
    cell = maker(source=source, metadata=metadata)
    attachments = item.get("attachments")
    if kind != "code" and isinstance(attachments, dict):  # pictures in a written answer
        cell["attachments"] = copy.deepcopy(attachments)
    cid = item.get("id")
    cell["id"] = cid if isinstance(cid, str) and ID_PATTERN.match(cid) else _new_id()
    return cell


def _new_id() -> str:
    return uuid.uuid4().hex[:12]


def _label(cell: Any) -> str:
    return grade_id(cell) or "a cell of your own"


def _repair(cells: list[Any], name: str, release: Any, assignment: str,
            foreign: Mapping[str, set[Any]], notes: list[str]) -> Intake:
    rel_cells: dict[Any, Any] = {}
    rel_order = []
    for cell in release.cells:
        gid = grade_id(cell)
        if gid:
            rel_cells[gid] = cell
            rel_order.append(gid)
    # whose notebook is it? its answer and test cells say (an "intro" may be anyone's)
    graded = {g for g, c in rel_cells.items() if _is_work(c)}
    theirs = {grade_id(c) for c in cells if grade_id(c) and _is_work(c)}
    if theirs and not theirs & graded:
        guess = ""
        if foreign:
            scores = {a: len(theirs & gids) for a, gids in foreign.items()}
            best = max(scores, key=scores.get)  # type: ignore[arg-type]
            if scores[best]:
                guess = f"; it looks like the notebook of {best}"
        return Intake(problem=f"{name} is not the notebook of {assignment}: none of its "
                              f"{len(theirs)} answer or test cell(s) belong to it{guess}")
    seen = set()
    kept = []
    for cell in cells:
        gid = grade_id(cell)
        meta = cell.metadata.get("nbgrader")
        if meta is not None and gid not in rel_cells:
            del cell.metadata["nbgrader"]
            if gid:
                notes.append(f"a cell carried nbgrader metadata of a cell {assignment} does not "
                             f"have ({gid}); it was graded as a cell of your own")
            else:
                notes.append("a cell carried damaged nbgrader metadata (no grade id); "
                             "it was graded as a cell of your own")
            gid = None
        if gid in seen:
            if is_locked(rel_cells[gid]):
                notes.append(f"a copy of the locked cell {gid} was removed")
                continue
            # a copied answer cell: the first copy is the answer, the others run where
            # they are, as the student's own cells (nbgrader refuses a notebook with both)
            del cell.metadata["nbgrader"]
            notes.append(f"the answer cell {gid} appears more than once (a copied cell?); "
                         "the first copy was graded as the answer, the others ran as cells "
                         "of your own")
            gid = None
        if gid:
            seen.add(gid)
            cell = _restore_cell(cell, rel_cells[gid], notes)
        kept.append(cell)
    missing = [g for g in rel_order if g not in seen]
    # [anchor grade id, cells], the first group holds leading cells
    groups: list[Any] = [[None, []]]
    for cell in kept:
        gid = grade_id(cell)
        if gid:
            groups.append([gid, [cell]])
        else:
            groups[-1][1].append(cell)
    if missing:
        put_back = []
        for gid in missing:
            groups.append([gid, [_missing_cell(rel_cells[gid])]])
            put_back.append(gid)
        notes.append("cell(s) missing from the notebook were put back: " + ", ".join(put_back))
    position = {g: i for i, g in enumerate(rel_order)}
    anchors = [g for g, _ in groups[1:]]
    wanted = sorted(anchors, key=position.__getitem__)
    present = [g for g in anchors if g not in missing]
    if present != sorted(present, key=position.__getitem__):
        first = next(a for a, b in zip(present, sorted(present, key=position.__getitem__))
                     if a != b)
        notes.append(f"cells were out of order ({first} was moved); they were graded in the "
                     f"assignment's order, each of your own cells after the cell it followed")
    by_anchor = {g: c for g, c in groups[1:]}
    nb = nbformat.v4.new_notebook()
    nb.metadata = copy.deepcopy(release.metadata)
    nb.nbformat, nb.nbformat_minor = release.nbformat, max(release.nbformat_minor, 5)
    nb.cells = list(groups[0][1]) + [c for g in wanted for c in by_anchor[g]]
    ids = set()
    for cell in nb.cells:
        if cell.get("id") in ids:
            cell["id"] = _new_id()
        ids.add(cell["id"])
    return Intake(notebook=nb, notes=notes)


def _is_work(cell: Any) -> bool:
    """An answer or test cell: what says whose notebook it is."""
    return is_solution(cell) or is_grade(cell)


def _restore_cell(cell: Any, released: Any, notes: list[str]) -> Any:
    """`cell` with the release's nbgrader metadata, type and (when locked) source."""
    gid = grade_id(released)
    theirs, ours = nbgrader_meta(cell), nbgrader_meta(released)
    # "points: 99, the release's 2": what was handed in, then what was put back
    changed = [f"{k}: {theirs.get(k)!r}, the release's {ours.get(k)!r}" for k in NBGRADER_FIELDS
               if theirs.get(k) != ours.get(k)]
    if changed:
        notes.append(f"the nbgrader metadata of {gid} had been changed ({'; '.join(changed)});"
                     " it was put back")
    locked = is_locked(released)
    test = is_autograded_test(released)
    if cell.cell_type != released.cell_type:
        what = "test cell" if test else ("locked cell" if locked else "answer cell")
        notes.append(f"the {what} {gid} had been turned into a {cell.cell_type} cell; it was "
                     f"graded as a {released.cell_type} cell")
    if locked and cell.source != released.source:
        what = "test cell" if test else "locked cell"
        notes.append(f"the {what} {gid} had been edited; it was graded as released")
    source = released.source if locked else cell.source
    fixed = copy.deepcopy(released)
    fixed.source = source
    if not locked and fixed.cell_type != "code" and "attachments" in cell:
        fixed["attachments"] = cell["attachments"]
    if fixed.cell_type == "code":
        fixed.outputs = []
        fixed.execution_count = None
    fixed["id"] = cell.get("id") or _new_id()
    return fixed


def _missing_cell(released: Any) -> Any:
    """A released cell put back: locked cells as released, answers empty (so a definition
    the student wrote elsewhere is not replaced by the stub), written answers as the stub."""
    cell = copy.deepcopy(released)
    if is_solution(released) and released.cell_type == "code":
        cell.source = ""
    if cell.cell_type == "code":
        cell.outputs = []
        cell.execution_count = None
    cell["id"] = _new_id()
    return cell


# ---------------------------------------------------------------- code to look at

INTERPRETER = {
    "get_ipython", "_getframe", "f_back", "f_globals", "f_locals", "f_code", "f_trace",
    "settrace", "setprofile", "addaudithook", "__code__", "__globals__", "__closure__",
    "__defaults__", "__kwdefaults__", "__dict__", "__wrapped__", "__self__", "__func__",
    "__builtins__", "__subclasses__", "__import__", "builtins", "meta_path", "path_hooks",
    "importlib", "gc", "ctypes", "inspect", "signal", "atexit", "excepthook", "displayhook",
    "set_custom_exc", "showtraceback", "input_transformers_cleanup", "input_transformers_post",
    "ast_transformers", "sys.modules", "sys.path",
    # running a module anew: the graded kernel's library holds no answer to give back
    # (`answerless`), but it is reach into the import machinery all the same
    "runpy", "run_module", "run_path", "reload", "exec_module", "spec_from_file_location",
    "SourceFileLoader",
    # code that runs when the interpreter frees an object: after a check, into its records
    "__del__", "weakref", "finalize",
    # the source of the running cell (the hidden checks) and frames reached without sys
    "linecache", "getlines", "tb_frame", "gi_frame", "cr_frame", "ag_frame",
    # torch's hooks change a gradient inside backward(), where the checks read it; no task
    # asks for one
    "register_hook", "register_backward_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_prehook", "register_post_accumulate_grad_hook",
}
# words of a test's verdict, in a string of the student's code (a printed fake success)
SUCCESS_WORDS = re.compile(r"\b(passed|all (tests|checks)|tests? ok|success)\b", re.IGNORECASE)
CALLS_INTERPRETER = {"exec", "eval", "compile", "globals", "setattr", "delattr"}
# what students may import from the grader: the checks (the notebooks say so)
STUDENT_API = {"autograder.kernel.checks"}
# kinds of flag that hold a submission's autograded score back until a person looks. The
# tests run in the grader (`remote`), so nothing a notebook does in its kernel can change
# a verdict of the microgpt track: there, only a copy of the instructor's source (which
# holds the answers and the hidden tests: a leak to look into) is held back. The torch
# track's observations are made in the student's kernel (`torchchecks.in_kernel`: the
# grader cannot run a student's torch module itself), so there code that reaches into the
# interpreter or the grader's modules is held back as well, and code that touches files
# or processes is flagged
TORCH_ASSIGNMENTS = ("08_torch_mlp", "09_torch_transformer")
COPIED_SOURCE = "carries the instructor's markers, as the source notebook does"
# nbgrader's markers in a source notebook (solutions, hidden tests, mark schemes); the
# student version has none of them
INSTRUCTOR_MARKERS = re.compile(
    r"(?:###|===)\s*(?:BEGIN|END)\s+(?:SOLUTION|HIDDEN TESTS|MARK SCHEME)")
WITHHOLD = ("reaches into the interpreter or the kernel", "imports the grader's own modules",
            COPIED_SOURCE)
FILES_PROCESSES = {
    "open", "system", "popen", "subprocess", "fork", "forkpty", "kill", "killpg", "_exit",
    "socket", "shutil", "remove", "unlink", "rmtree", "walk", "listdir", "scandir", "glob",
    "pathlib", "urllib", "requests", "multiprocessing", "threading", "sqlite3", "execv",
    "execve", "sys.exit", "exit", "quit",
}


def review_flags(nb: Any, assignment: str = "") -> list[str]:
    """Plain-word flags for code the student wrote (answer cells and their own cells):
    a copy of the instructor's source, and text that looks like a test result; in the
    torch track also code that reaches into the interpreter, the grader's modules, files
    or processes (see `TORCH_ASSIGNMENTS`)."""
    observed_in_kernel = assignment in TORCH_ASSIGNMENTS or not assignment
    found: dict[tuple[str, str], set[str]] = {}
    for cell in nb.cells:
        if is_locked(cell):
            continue
        markers = set(INSTRUCTOR_MARKERS.findall(cell.source))
        if markers:  # the release has none: they come from the instructor's source
            label = grade_id(cell) or "a cell of your own"
            found.setdefault((label, COPIED_SOURCE), set()).update(
                " ".join(m.split()) for m in markers)
        if cell.cell_type != "code":
            continue
        seen = _names(cell.source)
        if seen is None:
            continue
        names, calls, imports, strings = seen
        label = grade_id(cell) or "a cell of your own"
        hits = {
            "reaches into the interpreter or the kernel":  # getattr(f, "__globals__") too
                ((names | strings) & INTERPRETER) | (calls & CALLS_INTERPRETER),
            "imports the grader's own modules": {
                m for m in imports
                if m.startswith("autograder.") and m not in STUDENT_API
            },
            "touches files, processes or the network":
                (names | imports) & (FILES_PROCESSES - {"open", "exit", "quit"})
                | calls & FILES_PROCESSES,
        } if observed_in_kernel else {}
        fake = {text.strip()[:40] for text in strings if SUCCESS_WORDS.search(text)}
        if fake:  # the score is the test's verdict, whatever is printed: worth a look
            hits["writes text that looks like a test result"] = fake
        for what, items in hits.items():
            if items:
                found.setdefault((label, what), set()).update(items)
    return [f"flagged for review: {label} {what} ({', '.join(sorted(items)[:8])})"
            for (label, what), items in found.items()]


def _names(source: str) -> tuple[set[str], set[str], set[str], set[str]] | None:
    """(names, calls, imports, string constants) used by `source`, or None when it does
    not parse. Names include attribute names and `module.attribute` pairs."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 (then parse it as it is)
        pass
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    names, calls, imports, strings = set(), set(), set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            strings.add(node.value)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("__"):  # a special method (a finalizer, say)
                names.add(node.name)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
            if isinstance(node.value, ast.Name):
                names.add(f"{node.value.id}.{node.attr}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports.add(alias.name.split(".")[0])
                imports.add("autograder.*" if alias.name == "autograder" else alias.name)
                names.update(alias.name.split("."))
        elif isinstance(node, ast.ImportFrom) and node.module:
            imports.add(node.module.split(".")[0])
            names.update(node.module.split("."))
            names.update(a.name for a in node.names)
            if node.module in ("autograder", "autograder.kernel"):  # packages: their modules
                imports.update(f"{node.module}.{a.name}" for a in node.names)
            else:
                imports.add(node.module)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                calls.add(func.id)
            elif isinstance(func, ast.Attribute):
                calls.add(func.attr)
                if isinstance(func.value, ast.Name):
                    calls.add(f"{func.value.id}.{func.attr}")
    return names, calls, imports, strings
