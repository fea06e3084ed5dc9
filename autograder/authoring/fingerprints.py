"""The fingerprints of the registered wrong answers on the visible tests.

`residual-pack fingerprints [ASSIGNMENT ...]` builds, for each assignment, the table that
`autograder.kernel.diagnosis` looks failing checks up in, and writes it into
`autograder/kernel/fingerprints.py` (committed, kernel-side):

1. the release notebook (`exercises/<assignment>/`: the visible tests only, as students
   have it) with every answer filled in from the source is run once (every visible test
   must pass), then once per registered mutant with that mutant's answer in its cell,
   each time up to its last graded test cell;
2. each run is a fresh kernel at the graded sizes (`NBGRADER_EXECUTION=validate`), with
   `diagnosis.RECORD_VARIABLE` set, so every failing check writes the fingerprint of what
   it observed, and the message it raised, to a log;
3. for each test cell that fails, the fingerprint of the check that stopped it is mapped
   to the mutant's `hint`; where mutants with different hints share a fingerprint only
   because rounding made their observations alike (their messages differ, as 0 and 1e-20
   do), each hint goes under its own finer key instead (`diagnosis.fine_key`).

Only fingerprints (hashes) and hints go into the table: no expected value, no wrong
answer's source, and nothing from the hidden tests, which never run here.

Each mutant ends up in one of three groups (`Outcome.verdict`):

- DIAGNOSED: a visible test fails through a check, and that check's fingerprint is in
  the table, so the student's message names the mistake;
- HIDDEN_ONLY: every visible test passes; only the graded run's hidden tests catch it;
- TRAINING_ONLY: the visible tests it fails fail at a check of a training run's numbers
  (`reproducible=False`), which no fingerprint names: those numbers differ in their last
  digits from one machine to another, so such a check says "expected X, got Y" only;
- UNNAMED: a visible test fails without a check's verdict (the answer raised, say), or
  the mutant has no hint. `--check` (and the tests) fail on these.

The table records a digest of what it was made from (`inputs_digest`): `check-drift`
says when the mutants, the release or the solution changed since (`stale`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import TYPE_CHECKING, Any

import nbformat

from autograder.answers import mutants as mutant_registry
from autograder.authoring.checkout import require_checkout
from autograder.authoring.madeup import filled_in, mutant_notebook_name, with_answer
from autograder.cells import as_graded, grade_id, is_autograded_test, is_solution
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    CourseError,
    assignments,
    notebook_paths,
    read_notebook,
)
from autograder.kernel import diagnosis

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["DIAGNOSED", "HIDDEN_ONLY", "UNNAMED", "TRAINING_ONLY", "Run", "Outcome",
           "inputs_digest",
           "observe", "graded_run", "needs_a_model_answer", "table_of", "write_table",
           "read_tables", "stale", "TABLE_FILE",
           "regenerate"]

DIAGNOSED, HIDDEN_ONLY, UNNAMED = "diagnosed", "hidden only", "not named"
TRAINING_ONLY = "training checks only"
TABLE_FILE = Path(__file__).resolve().parent.parent / "kernel" / "fingerprints.py"
CELL_TIMEOUT = 300


# ---------------------------------------------------------------- what the table is made of


def _release_notebooks(course: str | os.PathLike[str], assignment: str) -> dict[str, Path]:
    folder = Path(course) / EXERCISES / assignment
    found = {p.stem: p for p in notebook_paths(folder)}
    if not found:
        raise CourseError(f"{EXERCISES}/{assignment} has no notebook; run `residual-pack "
                          f"generate {assignment}` first")
    return found


def inputs_digest(course: str | os.PathLike[str], assignment: str) -> str:
    """A digest of what the fingerprints of `assignment` depend on: the released
    notebooks' code, the source's answers, the registered mutants and the fingerprint's
    own version."""
    h = hashlib.sha256()

    def add(*parts: object) -> None:
        for part in parts:
            h.update(str(part).encode("utf-8") + b"\0")

    add(diagnosis.VERSION, diagnosis.DIGITS)
    for name, path in sorted(_release_notebooks(course, assignment).items()):
        add("release", name)
        for cell in read_notebook(path).cells:
            if cell.cell_type == "code":
                add(cell.source)
        source = read_notebook(Path(course) / SOURCE / assignment / f"{name}.ipynb")
        for cell in source.cells:
            if is_solution(cell) and cell.cell_type == "code":
                add("answer", grade_id(cell), cell.source)
    for m in mutant_registry.load(assignment):
        add("mutant", m.name, m.cell, m.notebook, m.source, m.hint, *m.loses)
    return h.hexdigest()[:16]


# ---------------------------------------------------------------- running the visible tests


@dataclass
class Run:
    """One notebook run: each graded test cell's status and message, and the failing
    checks' log lines (fingerprint, kind, what, message)."""

    cells: dict = field(default_factory=dict)  # grade_id -> (status, message)
    records: list = field(default_factory=list)
    stopped: str = ""
    # grade_id -> what the student sees of the error: the traceback as text, with the notes
    # an error raised in the student's code carries (`diagnosis.diagnose_raised`)
    shown: dict = field(default_factory=dict)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _run_notebook(nb_json: str, folder: str | os.PathLike[str], timeout: int) -> dict[str, Any]:
    """Run the notebook (as JSON text) in a fresh kernel in a copy of `folder`; returns a
    Run (as a dict, to cross process boundaries)."""
    from autograder.runner import run_notebook

    nb = nbformat.reads(nb_json, as_version=4)
    work = Path(tempfile.mkdtemp(prefix="residual-pack-fingerprints-"))
    try:
        for path in Path(folder).rglob("*"):
            if path.is_file() and path.suffix != ".ipynb" and \
                    ".ipynb_checkpoints" not in path.parts:
                dest = work / path.relative_to(folder)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, dest)
        log = work / ".fingerprints.jsonl"
        env = {"NBGRADER_EXECUTION": "validate", diagnosis.RECORD_VARIABLE: str(log)}
        _, stopped = run_notebook(nb, work, env=env, timeout=timeout,
                                  prefix="residual-pack-fingerprints-")
        run = Run(stopped=stopped)
        for cell in nb.cells:
            if not is_autograded_test(cell):
                continue
            status, message = "not run", ""
            if cell.get("execution_count") is not None:
                status = "passed"
                for out in cell.get("outputs", []):
                    if out.get("output_type") == "error":
                        status = "failed"
                        message = f"{out.get('ename', '')}: {out.get('evalue', '')}"
                        run.shown[grade_id(cell)] = _ANSI.sub(
                            "", "\n".join(out.get("traceback", [])))
                        break
            run.cells[grade_id(cell)] = (status, message)
        if log.exists():
            run.records = [json.loads(line) for line in log.read_text().splitlines() if line]
        return run.__dict__
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _end_with_parent() -> None:
    """In a worker: die with the process that started it (Linux), so that a killed run
    leaves no worker behind (a kernel ends by itself when its parent is gone)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


@dataclass
class Outcome:
    """A mutant's run on the visible tests, and what the table makes of it."""

    mutant: Any
    run: Run
    keys: dict = field(default_factory=dict)  # failing grade_id -> fingerprint
    fine: dict = field(default_factory=dict)  # failing grade_id -> its `diagnosis.fine_key`
    unnamed: dict = field(default_factory=dict)  # failing grade_id -> message (no check's)
    # failing grade_id -> message, failed at a training run's check (never fingerprinted)
    training: dict = field(default_factory=dict)

    @property
    def failing(self) -> dict[str, str]:
        return {g: m for g, (s, m) in self.run.cells.items() if s != "passed"}

    @property
    def verdict(self) -> str:
        if not self.failing:
            return HIDDEN_ONLY
        if self.unnamed or not self.mutant.hint.strip():
            return UNNAMED
        if not self.keys:
            return TRAINING_ONLY if self.training else UNNAMED
        return DIAGNOSED


def _check_of(message: str, records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The record of the failing check whose message the cell's error shows."""
    for record in records:
        if message == record.get("error"):
            return record
    return None


def _outcome(mutant: Any, run: Run) -> Outcome:
    outcome = Outcome(mutant, run)
    for gid, message in outcome.failing.items():
        record = _check_of(message, run.records)
        if record is None:
            outcome.unnamed[gid] = message
        elif record.get("exact", True) is False:
            outcome.training[gid] = message
        else:
            outcome.keys[gid] = record["key"]
            outcome.fine[gid] = record.get("fine")
    return outcome


def observe(course: str | os.PathLike[str], assignment: str, jobs: int = 1,
            say: Callable[[str], object] | None = None,
            only: Sequence[str] | None = None) -> tuple[Run, list[Outcome]]:
    """Run the solution and every registered mutant of `assignment` (those whose name
    holds a word of `only`, when given) on the visible tests. Returns (solution Run,
    [Outcome])."""
    say = say or (lambda *_: None)
    course = Path(course)
    releases = _release_notebooks(course, assignment)
    names = sorted(releases)
    source_dir = course / SOURCE / assignment
    solution = {
        # the cells a submission runs while grading: those left out cannot change what a
        # test observes
        name: as_graded(filled_in(read_notebook(releases[name]),
                                  read_notebook(source_dir / f"{name}.ipynb")))
        for name in names
    }
    registered = mutant_registry.load(assignment)
    if only:
        registered = [m for m in registered if any(w in m.name for w in only)]
    jobs_list: list[tuple[Any, str, Any]] = [(None, name, solution[name]) for name in names]
    for m in registered:
        name = mutant_notebook_name(m, names)
        jobs_list.append((m, name, with_answer(solution[name], m.cell, m.source)))
    say(f"{assignment}: running the visible tests of the solution and "
        f"{len(registered)} mutant(s), {jobs} at a time")
    context = get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=context,
                             initializer=_end_with_parent) as pool:
        futures = [
            pool.submit(_run_notebook, nbformat.writes(nb), str(releases[name].parent),
                        CELL_TIMEOUT)
            for _, name, nb in jobs_list
        ]
        runs = []
        for (m, _, _), future in zip(jobs_list, futures):
            run = Run(**future.result())
            runs.append(run)
            if m is not None:
                failing = [g for g, (s, _) in run.cells.items() if s != "passed"]
                say(f"  {m.name}: " + (", ".join(failing) if failing else "passes every "
                                                                            "visible test"))
    solution_runs = runs[: len(names)]
    merged = Run()
    for run in solution_runs:
        merged.cells.update(run.cells)
        merged.records += run.records
        merged.stopped = merged.stopped or run.stopped
    outcomes = [_outcome(m, run) for (m, _, _), run in zip(jobs_list[len(names):],
                                                            runs[len(names):])]
    return merged, outcomes


# ---------------------------------------------------------------- a graded submission, read back


def graded_run(result: Any, workdir: str | os.PathLike[str]) -> Run:
    """A graded submission (`StudentResult`, graded in the work folder `workdir`) as its
    visible tests would end in a student's kernel: a test cell the grader passed, or failed
    at a hidden check (a student's notebook holds none), passed; any other failed, with the
    first error its autograded notebook shows ("ename: evalue", and the traceback's text:
    the grader's verdict goes first, what the feedback page shows)."""
    run = Run()
    for notebook, notebook_run in sorted(result.runs.items()):
        shown: dict[str, tuple[str, str]] | None = None
        for cell in notebook_run.get("cells", []):
            if cell.get("kind") != "test":
                continue
            gid = cell["grade_id"]
            if cell.get("status") == "ok" or cell.get("hidden"):
                run.cells[gid] = ("passed", "")
                continue
            if shown is None:
                shown = _first_errors(Path(workdir), result.student, notebook)
            message, text = shown.get(gid, ("", ""))
            run.cells[gid] = ("failed", message)
            run.shown[gid] = text
    return run


def _first_errors(workdir: Path, student: str, notebook: str) -> dict[str, tuple[str, str]]:
    """{grade_id: ("ename: evalue", traceback text) of the cell's first error} of the
    student's autograded `notebook` in `workdir`."""
    found = sorted(workdir.glob(f"**/autograded/{student}/*/{notebook}.ipynb"))
    errors: dict[str, tuple[str, str]] = {}
    for cell in read_notebook(found[0]).cells if found else []:
        gid = grade_id(cell)
        first = next((o for o in cell.get("outputs", []) if o.get("output_type") == "error"),
                     None)
        if gid and first is not None:
            errors[gid] = (f"{first.get('ename', '')}: {first.get('evalue', '')}",
                           _ANSI.sub("", "\n".join(first.get("traceback", []))))
    return errors


def needs_a_model_answer(result: Any) -> bool:
    """Whether a graded submission (`StudentResult`) ran into a model answer that grading
    runs without (issue 42, item 4): a library function switched off (`AnswerSwitchedOff`),
    or an answer cell that imports the grader's reference (`autograder.answers` is not in a
    grading kernel). In a student's kernel, where the table is made, such an answer runs
    the model answer's maths instead."""
    for notebook_run in result.runs.values():
        for cell in notebook_run.get("cells", []):
            if cell.get("ename") == "AnswerSwitchedOff" or (
                    cell.get("kind") == "answer" and cell.get("ename") == "ModuleNotFoundError"
                    and "autograder.answers" in cell.get("evalue", "")):
                return True
    return False


# ---------------------------------------------------------------- the table


def table_of(course: str | os.PathLike[str], assignment: str,
             outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The table of one assignment: {"digest", "hints": [...], "known": {key: [i]}}."""
    hints = sorted({o.mutant.hint.strip() for o in outcomes if o.keys and o.mutant.hint.strip()})
    index = {h: i for i, h in enumerate(hints)}
    # fingerprint -> {fine key: hint ids}: who observed what, before and after rounding
    seen: dict[str, dict[str | None, set[int]]] = {}
    for o in outcomes:
        hint = o.mutant.hint.strip()
        if not hint:
            continue
        for gid, key in o.keys.items():
            seen.setdefault(key, {}).setdefault(o.fine.get(gid), set()).add(index[hint])
    known: dict[Any, list[int]] = {}
    for key, by_fine in seen.items():
        ids = set().union(*by_fine.values())
        if len(ids) > 1 and len(by_fine) > 1 and None not in by_fine:
            # mistakes that look alike only once rounded: each is named under its fine key
            # (`diagnosis.fine_key`), none under the shared one, so none is named for another
            for fine, fine_ids in by_fine.items():
                known[fine] = sorted(set(known.get(fine, ())) | fine_ids)
        else:
            known[key] = sorted(ids)
    table = {"digest": inputs_digest(course, assignment), "hints": hints,
             "known": dict(sorted(known.items()))}
    # hints that share a fingerprint: the visible checks every mistake with the hint fails,
    # so that a notebook that passed one of them is not told of that mistake (`diagnosis`)
    shared = sorted({i for ids in known.values() if len(ids) > 1 for i in ids})
    fails: dict[int, Any] = {}
    for o in outcomes:
        hint = o.mutant.hint.strip()
        if hint and index.get(hint) in shared:
            names = set()
            for message in o.failing.values():
                record = _check_of(message, o.run.records)
                if record is not None:
                    names.add(diagnosis.check_name(record.get("what", "")))
            i = index[hint]
            fails[i] = fails[i] & names if i in fails else names
    if any(fails.values()):
        table["fails"] = {i: sorted(names) for i, names in sorted(fails.items()) if names}
    return table


HEADER = '''"""Generated by `residual-pack fingerprints`; do not edit (see `kernel.diagnosis`).

TABLES holds, per assignment, the fingerprints of what a failing visible check observed
when a registered wrong answer was run (`known`: fingerprint -> indices in `hints`); for
hints that share a fingerprint, the visible checks every mistake with the hint fails
(`fails`: index in `hints` -> check names); and the digest of what the table was made
from (`digest`: its release, its solution's answers, its mutants), which `residual-pack
check-drift` compares.
"""

# ruff: noqa: E501

'''


def read_tables() -> dict[str, Any]:
    """The committed tables ({assignment: table}), read from the module's file."""
    import ast

    text = TABLE_FILE.read_text(encoding="utf-8") if TABLE_FILE.exists() else ""
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "TABLES" for t in node.targets):
            return ast.literal_eval(node.value)
    return {}


def render(tables: dict[str, Any]) -> str:
    """The module's text: one line per hint and per fingerprint."""

    def q(x: object) -> str:
        return json.dumps(x, ensure_ascii=False)

    lines = [f"{HEADER}TABLES = {{"]
    for a in sorted(tables):
        t = tables[a]
        lines.append(f"    {q(a)}: {{")
        lines.append(f"        \"digest\": {q(t['digest'])},")
        lines.append("        \"hints\": [")
        lines += [f"            {q(h)}," for h in t["hints"]]
        lines.append("        ],")
        lines.append("        \"known\": {")
        lines += [f"            {q(k)}: {q(v)}," for k, v in sorted(t["known"].items())]
        lines.append("        },")
        if t.get("fails"):
            lines.append("        \"fails\": {")
            lines += [f"            {i}: {q(v)}," for i, v in sorted(t["fails"].items())]
            lines.append("        },")
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_table(course: str | os.PathLike[str], tables: dict[str, Any],
                path: Path = TABLE_FILE) -> None:
    """Write `tables` ({assignment: table}) over the committed ones of those assignments;
    tables of assignments no longer in `source/` are dropped."""
    merged = {a: t for a, t in read_tables().items() if a in set(assignments(course))}
    merged.update(tables)
    Path(path).write_text(render(merged), encoding="utf-8")


def stale(course: str | os.PathLike[str], names: Sequence[str] | None = None) -> list[str]:
    """Problems with the committed table: assignments with mutants whose table is missing
    or was made from other inputs ([]: up to date)."""
    tables = read_tables()
    problems = []
    for name in names or assignments(course):
        registered = mutant_registry.load(name)
        if not registered:
            continue
        table = tables.get(name)
        if table is None:
            problems.append(f"autograder/kernel/fingerprints.py has no table for {name}")
        elif table.get("digest") != inputs_digest(course, name):
            problems.append(f"autograder/kernel/fingerprints.py is stale for {name} (its mutants, "
                            f"release or answers changed)")
    return problems


def summary(assignment: str, solution: Run, outcomes: Sequence[Outcome]) -> list[str]:
    """The report of one assignment's run, as lines."""
    lines = []
    broken = {g: m for g, (s, m) in solution.cells.items() if s != "passed"}
    if broken:
        lines.append(f"{assignment}: the solution fails visible tests: {broken}")
    counts = {v: sum(o.verdict == v for o in outcomes)
              for v in (DIAGNOSED, HIDDEN_ONLY, TRAINING_ONLY, UNNAMED)}
    lines.append(f"{assignment}: {counts[DIAGNOSED]} diagnosed on the visible tests, "
                 f"{counts[TRAINING_ONLY]} caught there only by a training run's check "
                 f"(not fingerprinted), {counts[HIDDEN_ONLY]} caught only by hidden tests, "
                 f"{counts[UNNAMED]} not named")
    for o in outcomes:
        if o.verdict == HIDDEN_ONLY:
            lines.append(f"  hidden only: {o.mutant.name}")
        elif o.verdict == UNNAMED:
            why = "no hint" if not o.mutant.hint.strip() else \
                "; ".join(f"{g}: {m[:160]}" for g, m in o.unnamed.items()) or "no check failed"
            lines.append(f"  NOT NAMED: {o.mutant.name} ({why})")
    return lines


def regenerate(course: str | os.PathLike[str], names: Sequence[str], jobs: int = 1,
               write: bool = True, say: Callable[[str], object] | None = None) -> list[str]:
    """`residual-pack fingerprints`: observe each of `names`, say its summary, then write
    the table (`write`) or compare it with the committed one. Returns the assignments that
    fail: the solution fails a visible test, a mutant is not named, or (not `write`) the
    committed table differs from this run."""
    say = say or (lambda *_: None)
    if write:  # before the long runs (--check compares with the installed table)
        require_checkout("fingerprints", "it rewrites autograder/kernel/fingerprints.py; "
                                         "`--check` runs anywhere")
    tables, failed = {}, []
    for name in names:
        solution, outcomes = observe(course, name, jobs=jobs, say=say)
        for line in summary(name, solution, outcomes):
            say(line)
        if any(s != "passed" for s, _ in solution.cells.values()) or any(
                o.verdict == UNNAMED for o in outcomes):
            failed.append(name)
        tables[name] = table_of(course, name, outcomes)
    if write:
        write_table(course, tables)
        say(f"wrote autograder/kernel/fingerprints.py for {', '.join(names)}")
    else:
        committed = read_tables()
        for name in names:
            if committed.get(name) != tables[name]:
                say(f"{name}: autograder/kernel/fingerprints.py differs from a fresh run "
                    f"(run `residual-pack fingerprints {name}`)")
                failed.append(name)
    return sorted(set(failed))
