"""Does a graded submission's feedback name the same known mistake as the student's own
kernel does? For every registered wrong answer of each assignment, the message of each
visible test cell it fails, both ways (issue 42, item 7: "the same check code serves both
places"; issue 43, item 5: could the registry's slow test read the graded class instead of
running every wrong answer again?):

- **in a student's kernel**: the way `residual-pack fingerprints` makes the table
  (`fingerprints.observe`: the release's visible tests, a kernel of its own per wrong
  answer), the message the notebook shows;
- **graded**: the self-check's class of the assignment (`selfcheck.selfcheck`, sandboxed,
  nbgrader's autograde), read as the visible tests end in a student's kernel: a cell the
  grader passed, or failed at a hidden check, counts as passed; else its first error in the
  autograded notebook (what the feedback page shows).

For each failing visible cell, one of: the same mistake named both ways; named in the
kernel only; named graded only; a different mistake named; named neither way (a training
run's check, which names nothing by design, or an error without a hint). A wrong answer
that, graded, runs into a model answer that grading runs without (a library function
switched off, or an import of the grader's reference) is counted apart: in a student's
kernel it runs the model answer's maths.

    python -m experiments.diagnosis_paths [ASSIGNMENT ...] > results/grading/diagnosis-paths.txt
"""

import sys
import tempfile
import time
from pathlib import Path

from autograder.answers import mutants as mutant_registry
from autograder.authoring import fingerprints
from autograder.authoring.selfcheck import selfcheck
from autograder.grading.course import assignments
from autograder.kernel.diagnosis import LEAD
from microgpt.provenance import describe, record

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def _hints_named(text: str, hints: list[str]) -> set[str]:
    """The registered hints a message names (after "This looks like a known mistake")."""
    if LEAD not in text:
        return set()
    flat = " ".join(text.split())
    return {h for h in hints if " ".join(h.split()) in flat}


def graded(assignment: str, workdir: Path) -> tuple[dict, set]:
    """({mutant name: {failing visible grade_id: shown text}}, names that need a model
    answer) from the assignment's self-check graded in `workdir`."""
    [check] = selfcheck(ROOT, [assignment], workdir=workdir, jobs=2)
    failing, needing = {}, set()
    for result in check.results:
        label = check.labels[result.student]
        if not label.startswith("mutant: "):
            continue
        name = label[len("mutant: "):]
        if fingerprints.needs_a_model_answer(result):
            needing.add(name)
        run = fingerprints.graded_run(result, workdir)
        failing[name] = {g: run.shown[g] for g, (status, _) in run.cells.items()
                         if status != "passed"}
    return failing, needing


def in_kernels(assignment: str) -> dict:
    """{mutant name: {failing visible grade_id: shown text}} the way the table is made."""
    _, outcomes = fingerprints.observe(ROOT, assignment, jobs=2)
    return {o.mutant.name: {g: o.run.shown.get(g, "") or m for g, m in o.failing.items()}
            for o in outcomes}


def compare_paths(assignment: str) -> list[str]:
    hints = [m.hint.strip() for m in mutant_registry.load(assignment) if m.hint.strip()]
    own = {m.name: m.hint.strip() for m in mutant_registry.load(assignment)}
    with tempfile.TemporaryDirectory(prefix="rp-diagnosis-paths-") as folder:
        started = time.perf_counter()
        by_grading, needing = graded(assignment, Path(folder) / "class")
        graded_s = time.perf_counter() - started
    started = time.perf_counter()
    by_kernel = in_kernels(assignment)
    kernel_s = time.perf_counter() - started
    counts = {k: 0 for k in ("same", "kernel only", "graded only", "different", "neither",
                             "fails one way only")}
    lines = []
    for name in sorted(own):
        if name in needing:
            continue
        k_cells, g_cells = by_kernel.get(name, {}), by_grading.get(name, {})
        for grade_id in sorted(set(k_cells) | set(g_cells)):
            if (grade_id in k_cells) != (grade_id in g_cells):
                counts["fails one way only"] += 1
                way = "in the kernel" if grade_id in k_cells else "graded"
                shown = (k_cells.get(grade_id) or g_cells.get(grade_id, ""))[-300:]
                lines.append(f"  {name} / {grade_id}: fails {way} only: {' '.join(shown.split())}")
                continue
            k = _hints_named(k_cells[grade_id], hints)
            g = _hints_named(g_cells[grade_id], hints)
            if k == g:
                key = "same" if k else "neither"
            elif k and g:
                key = "different"
            else:
                key = "kernel only" if k else "graded only"
            counts[key] += 1
            if key not in ("same", "neither"):
                lines.append(f"  {name} / {grade_id}: {key}")
                lines.append(f"    kernel: {' '.join(k_cells[grade_id].split())[-400:]}")
                lines.append(f"    graded: {' '.join(g_cells[grade_id].split())[-400:]}")
    head = (f"{assignment}: {len(own)} registered wrong answers, {len(needing)} of them run "
            f"into a model answer grading runs without (counted apart: {sorted(needing)}); "
            f"failing visible cells: " + ", ".join(f"{v} {k}" for k, v in counts.items())
            + f" (graded class {graded_s:.0f} s, kernels of their own {kernel_s:.0f} s)")
    return [head, *lines]


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or [
        a for a in assignments(ROOT) if mutant_registry.load(a)]
    start, at_start = time.perf_counter(), record()
    print("# the message of each visible test cell a registered wrong answer fails, in a "
          "student's kernel (as `residual-pack fingerprints` runs it) and graded (the "
          "self-check's class, the first error of the autograded notebook's cell); which "
          "known mistake each names")
    for name in names:
        print()
        print("\n".join(compare_paths(name)), flush=True)
    prov = record(command="python -m experiments.diagnosis_paths " + " ".join(names),
                  wall_seconds=time.perf_counter() - start)
    prov.update({k: at_start[k] for k in ("commit", "uncommitted_changes")})
    print("\n# " + describe(prov))
    return 0


if __name__ == "__main__":
    sys.exit(main())
