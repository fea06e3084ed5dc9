"""How far the stored torch training checks' runs move when only rounding changes, in
float32 and in float64, against how far the registered wrong answers move them.

The visible training checks of 08 and 09 compare a student's short run with a number
stored from the reference run (`autograder/kernel/torchchecks.json`), so a run on
another machine (other CPU kernels, another thread count) must land within the check's
rtol. This command reruns each stored run: the reference; the same maths with other
rounding (the matmul written out in 8.1; every add scaled up and back down in 8.2 and
9.1); at 1 thread and at 2; in float32 and in float64 (`in_float64`). Then every
registered wrong answer that must lose the training check. It prints each run's
relative distance from the reference's run in the same dtype at 2 threads (in float64,
the stored number), and a provenance line. A wrong answer 0 away runs the reference's
maths in that run; it loses the check by another of the cell's checks (where its class
is defined, or the other layout's run).

    python -m experiments.torch_rounding > results/torchtrack/rounding.txt
"""

import contextlib
import sys

import torch
import torch.nn.functional as F
from torch import nn

from autograder.answers.mutants import load
from autograder.authoring.stored import lm_training_run, mlp_training_run
from autograder.kernel.torchchecks import in_float64, stored_observation
from microgpt.provenance import describe, record
from torchtrack import mlp
from torchtrack.transformer import Block

__all__ = ["main"]


class ByHand(mlp.PlainLayer):
    """8.1's answer with the matmul written out."""

    def forward(self, h):
        return h + (self.norm(h) @ self.linear.weight.T + self.linear.bias).clamp(min=0)


class ScaledHighway(mlp.HighwayLayer):
    """8.2's answer with its add scaled by 3 and back (by 4 would round the same)."""

    def forward(self, h):
        t = torch.sigmoid(self.gate(h))
        return (3 * (t * self.branch(h)) + 3 * ((1 - t) * h)) / 3


class ScaledBlock(Block):
    """9.1's answer with every add scaled by 3 and back."""

    def forward(self, x):
        if self.layout == "pre":
            x = (3 * x + 3 * self.attn(self.norm1(x))) / 3
            return (3 * x + 3 * self.ffn(self.norm2(x))) / 3
        if self.layout == "post":
            x = self.norm1((3 * x + 3 * self.attn(x)) / 3)
            return self.norm2((3 * x + 3 * self.ffn(x)) / 3)
        return Block.forward(self, x)


def _mutant_classes(assignment, test, name):
    """(mutant name, class) for each registered wrong answer that must lose `test`."""
    out = []
    for m in load(assignment):
        if test not in m.loses:
            continue
        space = {"torch": torch, "nn": nn, "F": F, "PlainLayer": mlp.PlainLayer,
                 "Block": Block, "mlp": mlp}
        exec(m.source, space)  # noqa: S102 - the pack's own registered wrong answers
        if name in space:
            out.append((m.name, space[name]))
        else:
            forward = space["block_forward"]
            out.append((m.name, type("Mutant", (Block,), {"forward": forward})))
    return out


def _checks():
    """(stored entry, the reference run, a run of the same maths, wrong runs)."""
    out = []
    for kind, name, layer, other, test in (
            ("residual", "ResidualLayer", mlp.ResidualLayer, ByHand, "task8_1_test_training"),
            ("highway", "HighwayLayer", mlp.HighwayLayer, ScaledHighway,
             "task8_2_test_training")):
        number = "8.1" if kind == "residual" else "8.2"
        wrong = _mutant_classes("08_torch_mlp", test, name)
        out.append((f"{number} final training loss, 10 {kind} layers, seed 0",
                    lambda layer=layer: mlp_training_run(layer),
                    lambda other=other: mlp_training_run(other),
                    [(n, lambda c=c: mlp_training_run(c)) for n, c in wrong]))
    wrong = _mutant_classes("09_torch_transformer", "task9_1_test_training", "MyBlock")
    for layout in ("pre", "post"):
        out.append((f"9.1 validation loss after 12 steps, {layout}-norm, seed 0",
                    lambda layout=layout: lm_training_run(layout),
                    lambda layout=layout: lm_training_run(layout, ScaledBlock),
                    [(n, lambda c=c, layout=layout: lm_training_run(layout, c))
                     for n, c in wrong]))
    return out


def _rel(a, b):
    return abs(a - b) / abs(b)


def main(argv=None):
    threads_before = torch.get_num_threads()
    print("# how far each stored torch training run moves: relative distance from the "
          "reference run of the same dtype")
    worst = {"float32": 0.0, "float64": 0.0}
    nearest_wrong = None
    for entry, reference, same_maths, wrong in _checks():
        stored = stored_observation(entry)
        print(f"\n{entry}: stored (float64) {stored!r}")
        for dtype, ctx in (("float32", contextlib.nullcontext), ("float64", in_float64)):
            base = None
            for threads in (2, 1):
                torch.set_num_threads(threads)
                with ctx():
                    ref, again = reference(), same_maths()
                base = ref if base is None else base
                if dtype == "float64":
                    assert ref == stored or _rel(ref, stored) < 1e-8, (ref, stored)
                moved = max(_rel(ref, base), _rel(again, base))
                worst[dtype] = max(worst[dtype], moved)
                print(f"  {dtype} {threads} thread(s): reference {ref!r}, same maths other "
                      f"rounding {again!r}; moved {moved:.1e}")
        torch.set_num_threads(threads_before)
        with in_float64():
            for name, run in wrong:
                gap = _rel(run(), stored)
                print(f"  float64 wrong answer {gap:.1e} away: {name}")
                if gap > 0 and (nearest_wrong is None or gap < nearest_wrong[0]):
                    nearest_wrong = (gap, entry, name)
    print(f"\nlargest move from rounding: float32 {worst['float32']:.1e}, float64 "
          f"{worst['float64']:.1e}")
    print(f"nearest wrong answer (float64): {nearest_wrong[0]:.1e} away ({nearest_wrong[2]}, "
          f"{nearest_wrong[1]})")
    print("# " + describe(record(command="python -m experiments.torch_rounding")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
