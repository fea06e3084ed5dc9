"""How far the pure-Python training checks' runs (Tasks 2.2, 3.1-3.3 and 4.1) move when only
rounding changes, against how far the registered wrong answers move them; at the
configurations the test cells used before and at the smaller ones they use since 473b29b.

A training check compares a student's short seeded run with the reference run at
rtol 1e-6. Graded, every call of the student's layer crosses to their kernel and back, so
the check's cost is its number of layer calls: steps x batch x depth for training, then
points x depth for the final loss. A smaller configuration is only as good as its margin
on both sides, which this command measures, for each check and each configuration, on
seeds 0-9 (the seed of the test cell among them):

- **the same maths, other rounding**: the model answers with each layer's output scaled
  by 3 and back (`v * 3 * (1 / 3)`, which can round differently from `v`), so every
  step of training runs on numbers a last-bit away: its largest relative distance from the
  reference's loss over the seeds;
- **every registered wrong answer that must lose the check** (`loses` names its training
  test): its smallest relative distance over the seeds. A wrong answer 0 away on a seed
  runs the reference's maths there; it must lose the cell by another of its checks (the
  gate biases of 3.3), and the self-check is what shows that. A wrong answer 0 away on every
  seed of every configuration, the one in use included, calls the model answer itself
  (the library's or the reference's): in this process it runs the same maths, in grading
  it finds no model answer and raises. It is listed apart (a change made after the first
  run, which counted such answers against every configuration alike, the one in use too).

The criterion for taking a smaller configuration, written before its first run: on every
one of the ten seeds, the same maths at most 1e-8 away (100 times inside the rtol) and
every wrong answer 0 or at least 1e-4 away (100 times outside it); a 0 counted only where
the cell's other check separates it. The self-check (every mutant loses its cells) is
then the judge on the graded path.

    python -m experiments.training_margin > results/grading/training-margin.txt
"""

import contextlib
import io
import json
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from autograder.answers.mutants import load
from microgpt.provenance import describe, record
from microgpt.studies import Config, Variant, run

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
SEEDS = range(10)
SAME_MATHS_LIMIT = 1e-8
WRONG_LIMIT = 1e-4


def _cells(assignment: str) -> list[tuple[str, str]]:
    """(grade_id, source) of the code cells a training check's namespace needs: the imports,
    the notebook's own plain layer, and the solution cells."""
    nb = json.loads((ROOT / "source" / assignment / f"{assignment}.ipynb").read_text())
    out = []
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        grade_id = meta.get("grade_id", "")
        if cell["cell_type"] == "code" and (meta.get("solution") or grade_id in ("imports",
                                                                                 "plain_layer")):
            out.append((grade_id, "".join(cell["source"])))
    return out


def namespace(assignment: str, replace: dict[str, str] | None = None) -> dict[str, Any]:
    """The names a solved notebook defines, with the cells in `replace` swapped in."""
    space: dict[str, Any] = {}
    with contextlib.redirect_stdout(io.StringIO()):  # what the cells print is not a result
        for grade_id, source in _cells(assignment):
            exec((replace or {}).get(grade_id, source), space)  # noqa: S102 - our own cells
    return space


def _rounded(layer: Callable) -> Callable:
    """`layer` with each output v as v * 3 * (1/3): the same maths, rounded otherwise."""
    def other(*args: Any, **kw: Any) -> list:
        return [v * 3 * (1 / 3) for v in layer(*args, **kw)]
    return other


def _residual(space: dict, depth: int, rounded: bool) -> Variant:
    layer = space["residual_layer"]
    return Variant(_rounded(layer) if rounded else layer, depth)


def _highway(space: dict, depth: int, rounded: bool) -> Variant:
    layer = space["highway_layer"]
    return Variant(_rounded(layer) if rounded else layer, depth,
                   layer_params=space["highway_params"])


def _plain(space: dict, depth: int, rounded: bool) -> Variant:
    layer, logits = space["plain_layer"], space["mlp_logits"]

    def yours(net: Any, x: Any, layer: Any) -> Any:
        return logits(net, x, layer)
    return Variant(_rounded(layer) if rounded else layer, depth, forward=yours)


# (assignment, training test, variant maker, [(label, depth, seed in the cell, config)]);
# each check at the configuration its cell used before (64 or 48 points) and at the
# smaller one it uses since 473b29b
CHECKS = [
    ("02_degradation", "task2_2_test_training", _plain, [
        ("visible, before", 3, 0, Config(n=64, steps=40, lr=0.02)),
        ("visible, in the cell", 3, 0, Config(n=16, steps=10, lr=0.02)),
        ("hidden, before", 5, 7, Config(width=6, n=48, steps=30, lr=0.01, batch=6)),
        ("hidden, in the cell", 5, 7, Config(width=6, n=12, steps=8, lr=0.01, batch=6)),
    ]),
    ("03_highway", "task3_test_training", _highway, [
        ("visible, before", 5, 0, Config(n=64, steps=30, lr=0.02)),
        ("visible, in the cell", 5, 0, Config(n=16, steps=10, lr=0.02)),
        ("hidden, before", 7, 5, Config(width=6, n=48, steps=20, lr=0.01, batch=6)),
        ("hidden, in the cell", 7, 5, Config(width=6, n=12, steps=8, lr=0.01, batch=6)),
    ]),
    ("04_identity_shortcut", "task4_1_test_training", _residual, [
        ("visible, before", 6, 0, Config(n=64, steps=40, lr=0.02)),
        ("visible, in the cell", 6, 0, Config(n=16, steps=10, lr=0.02)),
        ("hidden, before", 8, 3, Config(width=6, n=48, steps=25, lr=0.01, batch=6)),
        ("hidden, in the cell", 8, 3, Config(width=6, n=12, steps=8, lr=0.01, batch=6)),
    ]),
]


def calls(depth: int, config: Config) -> int:
    """The layer calls of one training check's run: training, then the loss on all points."""
    return config.steps * config.batch * depth + config.n * depth


def _rel(a: float, b: float) -> float:
    return abs(a - b) / abs(b) if b else abs(a)


def _biases(r: Any) -> list[float]:
    return [b.data for params in r.net.layers for b in params.get("b_gate", [])]


def _gaps(variant: Callable, solved: dict, wrong: list, depth: int,
          config: Config) -> tuple[float, dict[str, list[float]]]:
    """The same maths' largest distance over the seeds, and each wrong answer's distances."""
    same_worst, gaps = 0.0, {name: [] for name, _ in wrong}
    for seed in SEEDS:
        ref = run(variant(solved, depth, False), seed, config)
        again = run(variant(solved, depth, True), seed, config)
        same_worst = max(same_worst, _rel(again.loss, ref.loss))
        for name, space in wrong:
            try:
                mine = run(variant(space, depth, False), seed, config)
            except Exception:  # noqa: BLE001 - a wrong answer may raise: it loses the cell
                gaps[name].append(math.inf)
                continue
            gap = _rel(mine.loss, ref.loss)
            if gap == 0 and _biases(mine) != _biases(ref):
                gap = math.inf  # the cell's check of the gate biases separates it
            gaps[name].append(gap)
    return same_worst, gaps


def main(argv: list[str] | None = None) -> int:
    start, at_start = time.perf_counter(), record()
    print("# the pure-Python training checks: relative distance of each run's final loss from "
          f"the reference run's, seeds {SEEDS.start}-{SEEDS.stop - 1}")
    print(f"# criterion (written before the first run): same maths <= {SAME_MATHS_LIMIT:.0e} "
          f"on every seed; every wrong answer 0 and separated, or >= {WRONG_LIMIT:.0e}, on "
          "every seed")
    print("# a wrong answer 0 away on every seed of every configuration, the one used before "
          "included, runs the model answer's own maths in this process (it calls the library's "
          "or the reference's answer); it is listed, and left out of the criterion: no "
          "configuration can separate it, and in grading it loses the cell because a grading "
          "kernel has no model answer to call")
    verdicts = []
    for assignment, test, variant, configs in CHECKS:
        solved = namespace(assignment)
        wrong = [(m.name, namespace(assignment, {m.cell: m.source}))
                 for m in load(assignment) if test in m.loses]
        rows = [(label, depth, seed, config, *_gaps(variant, solved, wrong, depth, config))
                for label, depth, seed, config in configs]
        itself = sorted(name for name, _ in wrong
                        if all(g == 0 for row in rows for g in row[5][name]))
        print(f"\n{assignment} {test}: {len(wrong)} registered wrong answers must lose it; "
              f"{len(itself)} of them run the model answer itself: {itself}")
        for label, depth, cell_seed, config, same_worst, gaps in rows:
            others = {n: g for n, g in gaps.items() if n not in itself}
            near = min((x for g in others.values() for x in g if x > 0), default=math.inf)
            zeros = sorted(n for n, g in others.items() if 0 in g)
            ok = same_worst <= SAME_MATHS_LIMIT and near >= WRONG_LIMIT and not zeros
            verdicts.append((assignment, label, ok))
            print(f"  {label}: depth {depth}, seed {cell_seed} in the cell, n={config.n}, "
                  f"steps={config.steps}, batch={config.batch}, width={config.width}, "
                  f"lr={config.lr}; {calls(depth, config)} layer calls a run")
            print(f"    same maths, other rounding: at most {same_worst:.1e} away")
            print(f"    nearest of the other {len(others)} wrong answers: {near:.1e} away"
                  + (f"; 0 away on some seed and not separated: {zeros}" if zeros else ""))
            print(f"    criterion met: {'yes' if ok else 'NO'}")
    print("\n" + "\n".join(f"# {a} {label}: {'met' if ok else 'not met'}"
                           for a, label, ok in verdicts))
    prov = record(command="python -m experiments.training_margin",
                  wall_seconds=time.perf_counter() - start)
    # the code measured is the commit at the start (a commit made while it ran is not it)
    prov.update({k: at_start[k] for k in ("commit", "uncommitted_changes")})
    print("# " + describe(prov))
    return 0


if __name__ == "__main__":
    sys.exit(main())
