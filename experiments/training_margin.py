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

The tiny GPT's training checks (Tasks 5.1-5.3, `gptchecks.check_block_training`) are
measured the same way, with the same criterion, under two differences written before
their first run: a run there is its list of step losses, all of them compared at rtol
1e-6, so a distance is the largest relative distance over the steps; and a 0 is
separated only by the value and gradient checks of the same cell (5.2 and 5.3, visible and
hidden, run here against `autograder.answers.gpt`); 5.1's training cell has no other kind
of check, so a 0 there is not separated. One smaller configuration each, chosen before the
run and not searched: about half the steps (5.1: 4 visible and 3 hidden, where the cell
has 8 and 6; 5.2 and 5.3: 3 and 3, where they have 6 and 5), the sizes, rates and seeds
as they are.

    python -m experiments.training_margin > results/grading/training-margin.txt
    python -m experiments.training_margin 05_gpt_residual_adds \
        > results/grading/training-margin-05.txt
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


# the tiny GPT's checks (Tasks 5.1-5.3): (training test, block name, layout, whether the
# cell has value and gradient checks, [(label, steps, lr, seed in the cell, n_layer, n_embd,
# n_head)]), each at the configuration its cell had (the first run, 3e0caed, said "in the
# cell") and at the smaller one written down before that run. The criterion was met by the
# smaller ones of 5.1 hidden and 5.3, which the cells use since; not by 5.1 visible (a wrong
# answer 7.8e-5 away) or 5.2 (two wrong answers within 1e-6 at either size, which the
# cell's value checks fail), which keep theirs (results/grading/training-margin-05.txt)
GPT_STEPS = [
    ("task5_1_test_training", "pre_norm_block", "pre", False, [
        ("visible, before (kept)", 8, 0.01, 0, 1, 16, 4),
        ("visible, smaller", 4, 0.01, 0, 1, 16, 4),
        ("hidden, before", 6, 0.1, 3, 2, 8, 2),
        ("hidden, smaller (in the cell)", 3, 0.1, 3, 2, 8, 2),
    ]),
    ("task5_2_test", "post_norm_block", "post", True, [
        ("visible, before (kept)", 6, 0.01, 0, 1, 16, 4),
        ("visible, smaller", 3, 0.01, 0, 1, 16, 4),
        ("hidden, before (kept)", 5, 0.1, 3, 2, 8, 2),
        ("hidden, smaller", 3, 0.1, 3, 2, 8, 2),
    ]),
    ("task5_3_test", "no_residual_block", "none", True, [
        ("visible, before", 6, 0.01, 0, 1, 16, 4),
        ("visible, smaller (in the cell)", 3, 0.01, 0, 1, 16, 4),
        ("hidden, before", 5, 0.1, 3, 2, 8, 2),
        ("hidden, smaller (in the cell)", 3, 0.1, 3, 2, 8, 2),
    ]),
]
GPT_ASSIGNMENT = "05_gpt_residual_adds"


def _block_losses(block: Callable, layout: str, steps: int, lr: float, seed: int,
                  n_layer: int, n_embd: int, n_head: int) -> list[float]:
    """The step losses of `check_block_training`'s run with `block` (None: microgpt's own
    `layout` block, as the reference computes them)."""
    from autograder.answers import gpt
    from autograder.kernel.gptchecks import BlockGPT, check_docs
    from microgpt import CharTokenizer, train

    if block is None:
        return gpt.block_training(layout=layout, steps=steps, lr=lr, seed=seed,
                                  n_layer=n_layer, n_embd=n_embd, n_head=n_head)
    docs = check_docs()
    tokenizer = CharTokenizer(docs)
    model = BlockGPT(block, seed=seed, vocab_size=tokenizer.vocab_size, n_layer=n_layer,
                     n_embd=n_embd, n_head=n_head)
    return train(model, docs, tokenizer, steps=steps, lr=lr, seed=seed, progress=False)


def _steps_distance(mine: list[float], ref: list[float]) -> float:
    """The largest relative distance over the steps (the check compares every step)."""
    if len(mine) != len(ref):
        return math.inf
    return max((_rel(a, b) for a, b in zip(mine, ref)), default=0.0)


def _cell_separates(block: Callable, layout: str) -> bool:
    """Whether the value or gradient checks of 5.2's or 5.3's cell (visible and hidden, as
    the cell makes them) fail `block`."""
    from autograder.answers import gpt
    from autograder.kernel.gptchecks import check_block_gradients, check_block_values

    calls = [
        lambda: check_block_values(block, layout),
        lambda: check_block_gradients(block, layout),
        lambda: check_block_values(block, layout, n_layer=2, layer=1, n_embd=8, n_head=2,
                                   n_pos=5, seed=7, scale=0.3, reference=gpt),
        lambda: check_block_gradients(block, layout, n_layer=3, layer=2, n_embd=12, n_head=3,
                                      n_pos=4, seed=5, scale=4.0, reference=gpt),
    ]
    for call in calls:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                call()
        except Exception:  # noqa: BLE001 - a check failed or the answer raised: separated
            return True
    return False


def gpt_section() -> list[tuple[str, str, bool]]:
    """Measure and print 05's training checks; the verdicts (assignment, label, met)."""
    verdicts = []
    solved = namespace(GPT_ASSIGNMENT)
    for test, name, layout, other_checks, configs in GPT_STEPS:
        wrong = [(m.name, namespace(GPT_ASSIGNMENT, {m.cell: m.source})[name])
                 for m in load(GPT_ASSIGNMENT) if test in m.loses]
        rows = []
        for label, steps, lr, cell_seed, n_layer, n_embd, n_head in configs:
            same_worst, gaps = 0.0, {n: [] for n, _ in wrong}
            for seed in SEEDS:
                args = (steps, lr, seed, n_layer, n_embd, n_head)
                ref = _block_losses(None, layout, *args)
                mine = _block_losses(solved[name], layout, *args)
                again = _block_losses(_rounded(solved[name]), layout, *args)
                same_worst = max(same_worst, _steps_distance(mine, ref),
                                 _steps_distance(again, ref))
                for wname, block in wrong:
                    try:
                        with contextlib.redirect_stdout(io.StringIO()):
                            losses = _block_losses(block, layout, *args)
                    except Exception:  # noqa: BLE001 - a wrong answer may raise: it loses
                        gaps[wname].append(math.inf)
                        continue
                    gaps[wname].append(_steps_distance(losses, ref))
            rows.append((label, steps, lr, cell_seed, n_layer, n_embd, n_head, same_worst,
                         gaps))
        itself = sorted(n for n, _ in wrong if all(g == 0 for row in rows for g in row[8][n]))
        blocks = dict(wrong)
        separated = {n: other_checks and _cell_separates(blocks[n], layout)
                     for n, _ in wrong if n not in itself
                     and any(0 in row[8][n] for row in rows)}
        print(f"\n{GPT_ASSIGNMENT} {test} ({name}): {len(wrong)} registered wrong answers "
              f"must lose the cell; {len(itself)} of them run the model answer itself: "
              f"{itself}")
        for label, steps, lr, cell_seed, n_layer, n_embd, n_head, same_worst, gaps in rows:
            others = {n: g for n, g in gaps.items() if n not in itself}
            near = min((x for g in others.values() for x in g if x > 0), default=math.inf)
            zeros = sorted(n for n, g in others.items() if 0 in g)
            apart = [n for n in zeros if not separated.get(n)]
            ok = same_worst <= SAME_MATHS_LIMIT and near >= WRONG_LIMIT and not apart
            verdicts.append((GPT_ASSIGNMENT, f"{test} {label}", ok))
            print(f"  {label}: steps={steps}, lr={lr}, seed {cell_seed} in the cell, "
                  f"n_layer={n_layer}, n_embd={n_embd}, n_head={n_head}")
            print(f"    same maths (the solution, and rounded otherwise): at most "
                  f"{same_worst:.1e} away over the steps")
            print(f"    nearest of the other {len(others)} wrong answers: {near:.1e} away"
                  + (f"; 0 away on some seed, separated by the cell's value or gradient "
                     f"checks: {[n for n in zeros if separated.get(n)]}" if zeros else "")
                  + (f"; 0 away and not separated: {apart}" if apart else ""))
            print(f"    criterion met: {'yes' if ok else 'NO'}")
    return verdicts


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args:
        if args != [GPT_ASSIGNMENT]:
            print(f"usage: python -m experiments.training_margin [{GPT_ASSIGNMENT}]",
                  file=sys.stderr)
            return 2
        return _main_gpt()
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
    _close(verdicts, "python -m experiments.training_margin", start, at_start)
    return 0


def _close(verdicts: list[tuple[str, str, bool]], command: str, start: float,
           at_start: dict[str, Any]) -> None:
    """Print the verdicts and the line saying which run made them."""
    print("\n" + "\n".join(f"# {a} {label}: {'met' if ok else 'not met'}"
                           for a, label, ok in verdicts))
    prov = record(command=command, wall_seconds=time.perf_counter() - start)
    # the code measured is the commit at the start (a commit made while it ran is not it)
    prov.update({k: at_start[k] for k in ("commit", "uncommitted_changes")})
    print("# " + describe(prov))


def _main_gpt() -> int:
    start, at_start = time.perf_counter(), record()
    print(f"# the tiny GPT's training checks ({GPT_ASSIGNMENT}): largest relative distance "
          f"over the steps of each run's losses from the reference run's (microgpt's own "
          f"block), seeds {SEEDS.start}-{SEEDS.stop - 1}")
    print(f"# criterion (written before the first run): same maths <= {SAME_MATHS_LIMIT:.0e} "
          f"on every seed; every wrong answer 0 and separated by its cell's value or "
          f"gradient checks, or >= {WRONG_LIMIT:.0e}, on every seed")
    print("# a wrong answer 0 away on every seed of every configuration runs microgpt's own "
          "block in this process; it is listed, and left out of the criterion (in grading it "
          "finds no model answer: the self-check shows it loses)")
    _close(gpt_section(), f"python -m experiments.training_margin {GPT_ASSIGNMENT}", start,
           at_start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
