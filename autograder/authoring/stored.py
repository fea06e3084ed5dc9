"""The numbers the visible tests of assignments 2-4 compare with, computed once from the
model answers and stored kernel-side (`autograder/kernel/stored.py`).

A student's install holds no model answer (`autograder.answers` stays with the
instructor), so a visible test cell cannot compute what is right from one: it reads
`stored(name)` instead. `RECIPES` says how each stored entry is made from
`autograder.answers.reference`, with the very inputs its test cell hands the student's
code. `residual-pack stored` writes the table; `residual-pack stored --check` (and
`tests/unit/test_stored.py`) recompute it and fail when it and the answers part.
Hidden tests, which never reach a student, still call the reference.

The tiny-GPT checks of assignments 5 and 6 (`autograder.kernel.gptchecks`) take their
expected numbers the same way, from `autograder/kernel/gptchecks.json`: an entry for each
call of a check that a released notebook makes, computed by `autograder.answers.gpt`
(`gpt_calls`, `compute_gpt`). The calls are read from `source/` with its hidden tests
taken out by nbgrader's own `ClearHiddenTests`, the step that makes the release: so a
visible test whose inputs changed gets its numbers before `residual-pack generate` runs
the solution (which needs them), and no hidden input is ever stored.

Writing keeps each committed entry that the recomputed one agrees with (within the rtol
its table allows): a training run's last digits move from one machine to another, and
rewriting them would be a change to review with nothing changed.
"""

import ast
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from autograder.answers import reference
from autograder.authoring.checkout import require_checkout
from autograder.kernel.checks import central_gradients
from autograder.kernel.probes import (
    GradientProbe,
    as_values,
    layer_inputs,
    probe_forward,
    probe_gate,
    probe_gated_params,
    probe_highway_layer,
    probe_layer,
    rows,
)

__all__ = ["RECIPES", "TABLE_FILE", "compute", "render", "differences", "regenerate",
           "GPT_CHECKS", "released_cells", "gpt_calls", "kept_where_agreeing", "compute_gpt",
           "gpt_differences", "torch_recipes",
           "compute_torch", "torch_differences", "mlp_training_run", "lm_training_run"]

TABLE_FILE = Path(__file__).resolve().parent.parent / "kernel" / "stored.py"
# how far a recomputed entry may move from the stored one: a training run's last digits
# differ from one machine to another (its checks allow 1e-6), the rest is exact arithmetic
TRAINING_RTOL = 1e-8


def _short() -> Any:
    from microgpt.studies import Config

    return Config(n=16, steps=10, lr=0.02)


def _gradients(args: Sequence[Any], names: Sequence[str], fn: Callable[..., Any],
               seed: int = 0) -> list[float]:
    probe = GradientProbe(args, names, seed=seed)
    return central_gradients(probe.of(fn), probe.xs)


def _logits_net() -> Any:
    from microgpt.deepnet import make_net

    return make_net(3, width=4, d_in=3, n_classes=2, seed=31)


_LOGITS_X = [0.5, -1.2, 2.0]


def _depth_zero_net() -> Any:
    from microgpt.deepnet import make_net

    return make_net(0, width=4, d_in=3, n_classes=2, seed=36)


def _two_matrix_logits() -> list[float]:
    """Task 2.2's visible check of layers with two matrices: tanh(W h + 0.5 U h), two of
    them, drawn as the test cell draws them."""
    from microgpt.deepnet import make_net

    def two_matrices(width: int, rng: Any) -> dict[str, Any]:
        return {"U": as_values(rows(rng, width, width)), "W": as_values(rows(rng, width, width))}

    net = make_net(2, width=3, d_in=2, n_classes=2, seed=37, layer_params=two_matrices)
    return reference.f_logits(net, [0.8, -0.4], lambda h, W, U: [
        math.tanh(a + 0.5 * b)
        for a, b in zip(reference.f_linear(h, W), reference.f_linear(h, U))])


def _gradient_norms() -> list[float]:
    from microgpt.deepnet import make_net, teacher_data

    X6, Y6 = teacher_data(6, seed=42)
    return reference.central_gradient_norms(make_net(3, width=4, seed=41), X6, Y6,
                                            probe_layer, forward=probe_forward)


def _gate_values() -> list[float]:
    h, _, W_gate, b_gate = layer_inputs(seed=31, width=8, gated=True)
    return reference.f_highway_gate(h, W_gate, b_gate)


def _gate_gradients() -> list[float]:
    h, _, W_gate, b_gate = layer_inputs(seed=32, width=4, gated=True)
    return _gradients([h, W_gate, b_gate], ["h", "W_gate", "b_gate"], reference.f_highway_gate)


def _highway_training() -> Any:
    from microgpt.studies import Config

    return Config(n=16, steps=10, lr=0.02)


def _mean_gates() -> list[float]:
    from microgpt.deepnet import make_net, teacher_data

    net = make_net(4, width=5, seed=81, layer_params=probe_gated_params)
    for i, params in enumerate(net.layers):
        for b in params["b_gate"]:
            b.data = -2.0 + 1.2 * i
    X6, _ = teacher_data(6, d_in=8, seed=82)
    return reference.mean_gate_per_layer(net, X6, gate=probe_gate, layer=probe_highway_layer)


def _first_last_ratio() -> float:
    from microgpt.deepnet import make_net, teacher_data

    X10, Y10 = teacher_data(10, seed=62)
    return reference.first_last_ratio(make_net(8, width=6, seed=61), X10, Y10, probe_layer)


def _deletion_losses() -> list[float]:
    from microgpt.deepnet import make_net, teacher_data

    X12, Y12 = teacher_data(12, seed=72)
    return reference.f_deletion_losses(make_net(5, width=6, seed=71), X12, Y12,
                                       reference.f_probe_layer)


def _flat(matrix: Sequence[Sequence[float]]) -> list[float]:
    return [a for row in matrix for a in row]


# name -> (is it a training run's number, how to compute it from the reference)
RECIPES = {
    # 02_degradation
    "2.1 plain_layer, seed 21, width 8": (False, lambda: reference.f_plain_layer(
        *layer_inputs(seed=21, width=8))),
    "2.1 plain_layer, seed 31, 4 inputs, 6 outputs": (False, lambda: reference.f_plain_layer(
        *layer_inputs(seed=31, width=4, n_out=6))),
    "2.1 plain_layer gradients, seed 24, width 4": (False, lambda: _gradients(
        layer_inputs(seed=24, width=4), ["h", "W"], reference.f_plain_layer)),
    "2.2 mlp_logits, 3 probe layers": (False, lambda: reference.f_logits(
        _logits_net(), _LOGITS_X, reference.f_probe_layer)),
    "2.2 mlp_logits gradients in x, 3 probe layers": (False, lambda: _gradients(
        [_LOGITS_X], ["x"], lambda v: reference.f_logits(_logits_net(), v,
                                                         reference.f_probe_layer))),
    "2.2 mlp_logits, depth 0": (False, lambda: reference.f_logits(
        _depth_zero_net(), _LOGITS_X, reference.f_probe_layer)),
    "2.2 mlp_logits, 2 layers of two matrices": (False, _two_matrix_logits),
    "2.2 training loss, 3 plain layers, seed 0": (True, lambda: reference.training_loss(
        reference.plain_layer, 3, 0, _short())),
    "2.3 layer_gradient_norms, 3 probe layers": (False, _gradient_norms),
    # 03_highway
    "3.1 highway_gate, seed 31, width 8": (False, _gate_values),
    "3.1 highway_gate gradients, seed 32, width 4": (False, _gate_gradients),
    "3.2 highway_layer, seed 35, width 8": (False, lambda: reference.f_highway_layer(
        *layer_inputs(seed=35, width=8, gated=True))),
    "3.2 highway_layer gradients, seed 37, width 4": (False, lambda: _gradients(
        layer_inputs(seed=37, width=4, gated=True), ["h", "W", "W_gate", "b_gate"],
        reference.f_highway_layer)),
    "3.3 highway_params W, width 6, seed 71": (False, lambda: _flat(
        reference.highway_draws(6, 71)[0])),
    "3.3 highway_params W_gate, width 6, seed 71": (False, lambda: _flat(
        reference.highway_draws(6, 71)[1])),
    "3.3 training loss, 5 highway layers, seed 0": (True, lambda: reference.training_loss(
        reference.highway_layer, 5, 0, _highway_training(),
        layer_params=reference.highway_params)),
    "3.3 gate biases after training, 5 highway layers, seed 0": (
        True, lambda: reference.trained_highway_biases(5, 0, _highway_training())),
    "3.4 mean_gate_per_layer, 4 probe layers": (False, _mean_gates),
    # 04_identity_shortcut
    "4.1 residual_layer, seed 51, width 8": (False, lambda: reference.f_residual_layer(
        *layer_inputs(seed=51, width=8))),
    "4.1 residual_layer gradients, seed 54, width 4": (False, lambda: _gradients(
        layer_inputs(seed=54, width=4), ["h", "W"], reference.f_residual_layer)),
    "4.1 training loss, 6 residual layers, seed 0": (True, lambda: reference.training_loss(
        reference.residual_layer, 6, 0, _short())),
    "4.2 first_last_ratio, 8 probe layers": (False, _first_last_ratio),
    "4.3 deletion_losses, 5 probe layers": (False, _deletion_losses),
}


def _plain(x: Any) -> Any:
    """A computed entry as plain floats (and lists of them)."""
    if isinstance(x, (list, tuple)):
        return [_plain(a) for a in x]
    return float(getattr(x, "data", x))


def compute(names: Sequence[str] | None = None) -> dict[str, Any]:
    """{name: the entry computed from the reference now} for `names` (all when None)."""
    return {name: _plain(RECIPES[name][1]()) for name in (names or RECIPES)}


def render(table: Mapping[str, Any]) -> str:
    lines = ['"""Generated by `residual-pack stored`; do not edit (see `authoring/stored.py`).',
             "",
             "The numbers the visible tests of assignments 2-4 compare with, computed once",
             "from the model answers, which a student's install does not hold.",
             '"""',
             "",
             "# ruff: noqa: E501",
             "",
             "import copy",
             "from typing import Any",
             "",
             '__all__ = ["STORED", "stored"]',
             "",
             "STORED = {"]
    for name, value in table.items():
        lines.append(f"    {name!r}: {value!r},")
    lines += ["}",
              "",
              "",
              "def stored(name: str) -> Any:",
              '    """The stored entry `name` (a number, or lists of numbers), a fresh copy."""',
              "    return copy.deepcopy(STORED[name])",
              ""]
    return "\n".join(lines)


def _close(a: Any, b: Any, rtol: float) -> bool:
    """`a` and `b` (numbers, or lists and dicts of them, strings and ints compared as
    they are) agree within `rtol`; 0 asks for the same numbers (NaN agreeing with NaN)."""
    if isinstance(a, dict) or isinstance(b, dict):
        return (isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys()
                and all(_close(a[k], b[k], rtol) for k in a))
    if isinstance(a, list) or isinstance(b, list):
        return (isinstance(a, list) and isinstance(b, list) and len(a) == len(b)
                and all(_close(x, y, rtol) for x, y in zip(a, b)))
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if rtol == 0 or isinstance(a, int) and isinstance(b, int):
        return a == b or (math.isnan(a) and math.isnan(b))
    return math.isclose(a, b, rel_tol=rtol, abs_tol=1e-15)


def differences(stored: Mapping[str, Any], computed: Mapping[str, Any]) -> list[str]:
    """The names whose stored entry is missing, extra or apart from the computed one."""
    names = set(stored) | set(computed)
    return sorted(n for n in names
                  if n not in stored or n not in computed
                  or not _close(stored[n], computed[n],
                                TRAINING_RTOL if RECIPES[n][0] else 0.0))


# ---------------------------------------------------------------- the tiny-GPT checks

# check -> (how many functions of the student's it takes first, the references it reads)
GPT_CHECKS = {
    "check_block_values": (1, ("block_values",)),
    "check_block_gradients": (1, ("block_gradients",)),
    "check_block_training": (1, ("block_training",)),
    "check_stream_states": (1, ("stream_states",)),
    "check_logit_lens": (1, ("logit_lens",)),
    "check_lens_on_the_model_states": (1, ("model_states", "lens_on_the_model_states",
                                           "lens_on_the_model_states_loss")),
}
# a training run's numbers: their last digits may move from one machine to another
GPT_TRAINING = ("block_training",)


def _call_arguments(call: ast.Call) -> tuple[str, dict[str, Any]]:
    """(check name, its arguments after the student's functions, defaults included) of an
    ast.Call of a check with literal arguments."""
    from autograder.kernel import gptchecks

    name = call.func.id  # type: ignore[attr-defined]
    fn = getattr(gptchecks, name)
    args = [None] * GPT_CHECKS[name][0] + [ast.literal_eval(a) for a in
                                            call.args[GPT_CHECKS[name][0]:]]
    kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    bound = inspect.signature(fn).bind(*args, **kwargs)  # type: ignore[arg-type]
    bound.apply_defaults()
    out = {}
    for i, (key, value) in enumerate(bound.arguments.items()):
        if i < GPT_CHECKS[name][0] or key == "reference":
            continue
        if inspect.signature(fn).parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            out.update(value)
        else:
            out[key] = value
    return name, out


def released_cells(root: str | Path | None = None) -> list[Any]:
    """The code cells of the course's source notebooks (`source/*/*.ipynb`) as the release
    has them: their hidden tests taken out by nbgrader's `ClearHiddenTests`."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests

    from autograder.grading.course import SOURCE

    root = Path(root or TABLE_FILE.parents[2])
    cells = []
    for path in sorted((root / SOURCE).glob("*/*.ipynb")):
        nb, _ = ClearHiddenTests().preprocess(nbformat.read(path, as_version=4), {})
        cells += [cell for cell in nb.cells if cell.cell_type == "code"]
    return cells


def gpt_calls(root: str | Path | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """{stored key: (reference name, its arguments)} for every call of a tiny-GPT check in
    the code cells of the released notebooks (`released_cells`: from `source/`, so before
    `exercises/` is generated again)."""
    from autograder.kernel.gptchecks import stored_key

    found = {}
    for cell in released_cells(root):
        if "check_" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                    and node.func.id in GPT_CHECKS:
                name, args = _call_arguments(node)
                for ref in GPT_CHECKS[name][1]:
                    found[stored_key(ref, **args)] = (ref, args)
    return found


# the tiny-GPT entries keep 13 significant digits (the checks compare to 1e-9 at most):
# a third less file than full precision
GPT_DIGITS = 13
GPT_RTOL = 1e-12


def _rounded(x: Any) -> Any:
    if isinstance(x, list):
        return [_rounded(a) for a in x]
    return float(f"{x:.{GPT_DIGITS}g}")


def compute_gpt(root: str | Path | None = None) -> dict[str, Any]:
    """{stored key: the expected observation computed by autograder.answers.gpt}."""
    from autograder.answers import gpt

    return {key: _rounded(_plain(getattr(gpt, ref)(**args)))
            for key, (ref, args) in sorted(gpt_calls(root).items())}


def _gpt_rtol(key: str) -> float:
    return TRAINING_RTOL if key.startswith(GPT_TRAINING) else GPT_RTOL


def gpt_differences(stored: Mapping[str, Any], computed: Mapping[str, Any]) -> list[str]:
    """The keys whose stored entry is missing, extra or apart from the computed one."""
    keys = set(stored) | set(computed)
    return sorted(k for k in keys
                  if k not in stored or k not in computed
                  or not _close(stored[k], computed[k], _gpt_rtol(k)))


def render_gpt(table: Mapping[str, Any]) -> str:
    """The JSON file: one entry per line, keys in order."""
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in sorted(table.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


# ---------------------------------------------------------------- the torch track


def _rows(seed: int, *shape: int, scale: float = 1.0, shift: float = 0.0) -> Any:
    """The inputs of the visible tests of 08 (their `rows`) and 09 (their `inputs`)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(*shape, generator=g, dtype=torch.float64) + shift


def _module(make: Callable[[], Any], inputs: Any, seed: int) -> dict[str, Any]:
    from autograder.kernel.torchchecks import module_observation, seeded

    with seeded(seed):
        built = make()
    return module_observation(built, inputs, "the reference")


def mlp_training_run(layer: Any) -> float:
    """The final loss of the run that Tasks 8.1's and 8.2's visible training checks make:
    10 `layer`s, seed 0, in torch's default dtype when called (the stored entry: float64)."""
    from torchtrack.mlp import MLPConfig, run_variant, teacher_task

    short = MLPConfig(n=256, width=16, steps=30, batch=32)
    Xs, Ys = teacher_task(256, seed=0)
    return run_variant(layer, 10, 0, short, Xs, Ys)["final"]


def lm_training_run(layout: str, block_cls: Any = None) -> float:
    """The validation loss of the run that Task 9.1's visible training check makes in
    `layout` (with `block_cls`, the library's `Block` by default), in torch's default
    dtype when called (the stored entry: float64)."""
    from torchtrack import studies
    from torchtrack.data import offline_text, split_ids

    tiny = studies.LMConfig(dim=16, n_layers=2, n_heads=2, steps=12, batch_size=4,
                            block_size=16, eval_every=12, eval_iters=2)
    v, tr, va = split_ids(offline_text())
    return studies.train_variant(tr, va, v.size, layout, 0, tiny,
                                 block_cls=block_cls)[1]["val"][-1]


def _in_float64(run: Callable[..., Any], *args: Any) -> Any:
    from autograder.kernel.torchchecks import in_float64

    with in_float64():
        return run(*args)


def _probe_lens() -> Any:
    import torch

    from torchtrack import transformer
    from torchtrack.data import get_batch, offline_text, split_ids

    v, _, va = split_ids(offline_text())
    xb, yb = get_batch(va, 4, 12, torch.Generator().manual_seed(0))
    model = transformer.make_lm(v.size, "pre", dim=16, n_layers=3, n_heads=2, seed=21,
                                block_cls=transformer.ProbeBlock).double()
    return transformer.logit_lens(model, xb, yb)


def _block(layout: str) -> dict[str, Any]:
    from autograder.kernel.torchchecks import with_moved_norms
    from torchtrack.transformer import Block

    return _module(lambda: with_moved_norms(Block(16, 4, layout).double(), 91),
                   _rows(91, 2, 5, 16), 91)


def _torch_recipes() -> dict[str, tuple[bool, Callable[[], Any]]]:
    from torchtrack import mlp

    return {
        # 08_torch_mlp
        "8.1 ResidualLayer(8) on 5 rows": (False, lambda: _module(
            lambda: mlp.ResidualLayer(8).double(), _rows(81, 5, 8), 81)),
        "8.1 final training loss, 10 residual layers, seed 0": (
            True, lambda: _in_float64(mlp_training_run, mlp.ResidualLayer)),
        "8.2 HighwayLayer(8) on 5 rows": (False, lambda: _module(
            lambda: mlp.HighwayLayer(8).double(), _rows(91, 5, 8), 91)),
        "8.2 final training loss, 10 highway layers, seed 0": (
            True, lambda: _in_float64(mlp_training_run, mlp.HighwayLayer)),
        # 09_torch_transformer
        **{f'9.1 Block(16, 4, "{layout}") on 2 x 5 x 16': (False, lambda layout=layout:  # type: ignore[misc]
                                                             _block(layout))
           for layout in ("pre", "post", "none")},
        **{f"9.1 validation loss after 12 steps, {layout}-norm, seed 0": (
            True, lambda layout=layout: _in_float64(lm_training_run, layout))  # type: ignore[misc]
           for layout in ("pre", "post")},
        "9.2 logit_lens, 3 probe blocks": (False, _probe_lens),
    }


# the stored training runs are float64 (`in_float64`): a rewrite of the same maths moved
# them by 2e-16 here, so 1e-8 leaves room for other machines' kernels; other float64
# tensors by their last bits
TORCH_TRAINING_RTOL = 1e-8
TORCH_RTOL = 1e-12


def torch_recipes() -> dict[str, tuple[bool, Callable[[], Any]]]:
    """name -> (is it a training run's number, how to compute it from torchtrack's
    answers); a function, so that torch is imported only when asked."""
    return _torch_recipes()


def compute_torch() -> dict[str, Any]:
    """{name: the torch track's entry computed from torchtrack's answers now}."""
    return {name: recipe() for name, (_, recipe) in torch_recipes().items()}


def torch_differences(stored: Mapping[str, Any], computed: Mapping[str, Any]) -> list[str]:
    recipes = torch_recipes()
    names = set(stored) | set(computed)
    return sorted(n for n in names
                  if n not in stored or n not in computed
                  or not _close(stored[n], computed[n],
                                TORCH_TRAINING_RTOL if recipes[n][0] else TORCH_RTOL))


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def kept_where_agreeing(committed: Mapping[str, Any], computed: Mapping[str, Any],
                        differ: Callable[[Mapping[str, Any], Mapping[str, Any]], list[str]],
                        ) -> dict[str, Any]:
    """`computed`, with the committed entry wherever `differ` (the table's own comparison)
    finds the two in agreement."""
    apart = set(differ(committed, computed))
    return {name: committed[name] if name in committed and name not in apart else value
            for name, value in computed.items()}


def regenerate(write: bool = True, say: Callable[[str], object] = print) -> list[str]:
    """Compute every entry of the three tables; write them (or, with `write` false,
    compare). Returns the names that differ from the committed tables. The torch track's
    needs torch: without it, it is left as it is (and said so)."""
    require_checkout("stored", "it computes from the checkout's source/ and rewrites "
                               "autograder/kernel/stored.py, gptchecks.json and torchchecks.json")
    from autograder.kernel.gptchecks import STORED_FILE
    from autograder.kernel.stored import STORED

    # torchchecks.STORED_FILE, named without importing torchchecks (which imports torch)
    TORCH_FILE = STORED_FILE.with_name("torchchecks.json")
    computed, computed_gpt = compute(), compute_gpt()
    committed_gpt = (json.loads(STORED_FILE.read_text(encoding="utf-8"))
                     if STORED_FILE.exists() else {})
    apart = differences(STORED, computed) + gpt_differences(committed_gpt, computed_gpt)
    computed_torch = None
    if _torch_installed():
        computed_torch = compute_torch()
        committed_torch = (json.loads(TORCH_FILE.read_text(encoding="utf-8"))
                           if TORCH_FILE.exists() else {})
        apart += torch_differences(committed_torch, computed_torch)
    else:
        say(f"torch is not installed: {TORCH_FILE} left as it is")
    if write:
        computed = kept_where_agreeing(STORED, computed, differences)
        computed_gpt = kept_where_agreeing(committed_gpt, computed_gpt, gpt_differences)
        if computed_torch is not None:
            computed_torch = kept_where_agreeing(committed_torch, computed_torch,
                                                 torch_differences)
        TABLE_FILE.write_text(render(computed), encoding="utf-8")
        STORED_FILE.write_text(render_gpt(computed_gpt), encoding="utf-8")
        say(f"wrote {len(computed)} entries to {TABLE_FILE} and {len(computed_gpt)} to "
            f"{STORED_FILE}")
        if computed_torch is not None:
            TORCH_FILE.write_text(render_gpt(computed_torch), encoding="utf-8")
            say(f"wrote {len(computed_torch)} entries to {TORCH_FILE}")
        return []
    for name in apart:
        say(f"stored and computed differ: {name}")
    return apart
