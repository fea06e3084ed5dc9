"""The numbers the visible tests compare with, computed once from the model answers and
stored kernel-side: `autograder/kernel/stored.py` (assignments 2-4),
`autograder/kernel/gptchecks.json` (the tiny-GPT checks of 5 and 6) and
`autograder/kernel/torchchecks.json` (8 and 9).

A student's install holds no model answer (`autograder.answers` stays with the
instructor, `torchtrack`'s answers are held back), so a visible test cell cannot compute
what is right from one: it reads a stored entry instead. `residual-pack stored` writes
the tables; `residual-pack stored --check` (and `tests/unit/test_stored.py`) recompute
them and fail when they and the answers part. Hidden tests, which never reach a student,
still call the reference.

Every entry is made from the visible tests as the release has them: `source/` with its
hidden tests taken out by nbgrader's own `ClearHiddenTests` (`released_notebooks`). So a
visible test whose inputs changed gets its numbers before `residual-pack generate` runs
the solution (which needs them), with nothing to edit here, and no hidden input is ever
stored.

- 2-4, 8 and 9 read an entry by name (`stored(name)`, `stored_observation(name)`) as the
  `expected` of a check. `recorded` runs each cell that reads one here, with the model
  answers under the student's names (`ANSWERS`), and each such check records what the
  answers give on the cell's own inputs (the values, or the central differences of a
  gradient check, or the observation of a torch module); other checks do nothing.
- 5 and 6 call a tiny-GPT check with literal arguments (`autograder.kernel.gptchecks`);
  the entry of each call is `autograder.answers.gpt`'s, keyed by its arguments
  (`gpt_calls`, `compute_gpt`).

Writing keeps each committed entry that the recomputed one agrees with (within `SHARE` of
its check's rtol; the tiny-GPT table within its own): a training run's last digits move
from one machine to another, and rewriting them would be a change to review with nothing
changed.
"""

import ast
import contextlib
import inspect
import json
import math
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from autograder.authoring.checkout import require_checkout
from autograder.kernel.checks import central_gradients

__all__ = ["ANSWERS", "Entry", "SHARE", "TABLE_FILE", "recorded", "values", "compute",
           "render", "differences", "regenerate", "GPT_CHECKS", "released_notebooks",
           "released_cells", "gpt_calls", "kept_where_agreeing", "compute_gpt",
           "gpt_differences", "compute_torch", "mlp_training_run",
           "lm_training_run"]

TABLE_FILE = Path(__file__).resolve().parent.parent / "kernel" / "stored.py"


# where each assignment's model answers are, by the names its solution cells define; and
# the names of its given cells that the visible tests use, with what stands in for them
ANSWERS = {
    "02_degradation": "autograder.answers.reference",
    "03_highway": "autograder.answers.reference",
    "04_identity_shortcut": "autograder.answers.reference",
    "08_torch_mlp": "torchtrack.mlp",
    "09_torch_transformer": "torchtrack.transformer",
}
GIVEN = {"09_torch_transformer": {"MyBlock": "Block"}}  # MyBlock: Block with your forward
TORCH_ASSIGNMENTS = ("08_torch_mlp", "09_torch_transformer")
# the checks a visible test may read a stored entry in, by module
RECORDED_CHECKS = {
    "autograder.kernel.checks": ("check_value", "check_values", "check_numbers",
                                 "check_gradients", "check_gradient", "check_same",
                                 "check_range"),
    "autograder.kernel.torchchecks": ("check_module",),
}


class Entry(NamedTuple):
    """A recorded entry: its value, and how far a recomputation may move it (relative)
    before it counts as changed: `SHARE` of what the check that reads it allows."""

    value: Any
    rtol: float


# An entry counts as changed when it moved by more than a hundredth of its check's rtol
# (an exact check's, 0: by anything). So a training run's last digits, which differ from
# one machine to another, stay (its checks allow 1e-6: 1e-8 here); so do the central
# differences of a gradient check (they divide a rounding error by their step of 1e-6:
# the model answer on Values and the equation on floats, which made the committed entries,
# gave them up to 7.6e-9 apart here; the check allows 1e-5) and 2.3's norms (the
# committed ones central differences, the model answer's from backward(): 3.2e-10 apart,
# the check allows 1e-5); values on fixed inputs differed by 3.8e-14 at most.
SHARE = 0.01


class _Refused(ValueError):
    """A cell that reads a stored entry other than as a check's `expected`."""


class _Pending:
    """What `stored(name)` and `stored_observation(name)` give while the tables are
    made: the entry that the check it is handed to records."""

    def __init__(self, name: str, table: str) -> None:
        self.name = name
        self.table = table


def _plain(x: Any) -> Any:
    """A computed entry as plain floats (and lists of them)."""
    if isinstance(x, (list, tuple)):
        return [_plain(a) for a in x]
    return float(getattr(x, "data", x))


def _entry(check: str, arguments: Mapping[str, Any]) -> Entry:
    """What `check`, called with `arguments` and the model answers, records."""
    rtol = SHARE * arguments.get("rtol", 0.0)
    if check == "check_gradients":
        xs = [float(x) for x in arguments["xs"]]
        return Entry(central_gradients(arguments["f"], xs, arguments["h"], on_floats=False),
                     rtol)
    if check == "check_module":
        from autograder.kernel.torchchecks import module_observation, seeded

        with seeded(arguments["seed"]):
            built = arguments["make"]()
        return Entry(module_observation(built, arguments["inputs"], "the reference"), rtol)
    if check == "check_same":  # plain data, compared exactly
        return Entry(json.loads(json.dumps(arguments["actual"])), 0.0)
    return Entry(_plain(arguments["actual"]), rtol)


def _recorder(real: Callable[..., Any], found: dict[str, dict[str, Entry]],
              where: list[str]) -> Callable[..., Any]:
    """`real`, a check, as it runs while the tables are made (`where[0]`: the cell)."""
    signature = inspect.signature(real)

    def record(*args: Any, **kwargs: Any) -> None:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        pending = bound.arguments.get("expected")
        if isinstance(pending, _Pending):
            if pending.name in found[pending.table]:
                raise _Refused(f"{where[0]}: the stored entry {pending.name!r} is read "
                               f"twice")
            found[pending.table][pending.name] = _entry(real.__name__, bound.arguments)
        elif any(isinstance(a, _Pending) for a in bound.arguments.values()):
            raise _Refused(f"{where[0]}: a stored entry must be the `expected` of "
                           f"{real.__name__}")

    return record


@contextlib.contextmanager
def _recording(found: dict[str, dict[str, Entry]], where: list[str]) -> Iterator[None]:
    """While it lasts, `stored` and `stored_observation` give a `_Pending`, the check
    that gets one records its entry in `found`, and every other check does nothing."""
    import importlib

    saved = []
    modules = {name: importlib.import_module(name) for name in RECORDED_CHECKS
               if "torch" not in name or _torch_installed()}
    for name, module in modules.items():
        for check in RECORDED_CHECKS[name]:
            saved.append((module, check, getattr(module, check)))
            setattr(module, check, _recorder(getattr(module, check), found, where))
    import autograder.kernel.stored as kernel_stored

    saved.append((kernel_stored, "stored", kernel_stored.stored))
    kernel_stored.stored = lambda name: _Pending(name, "stored")  # type: ignore[assignment]
    if "autograder.kernel.torchchecks" in modules:
        torchchecks = modules["autograder.kernel.torchchecks"]
        saved.append((torchchecks, "stored_observation", torchchecks.stored_observation))
        torchchecks.stored_observation = lambda name: _Pending(name, "torch")  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)


def _solution_names(cells: list[Any]) -> list[str]:
    """The functions and classes the notebook's solution cells (among its code `cells`)
    define."""
    names = []
    for cell in cells:
        if cell.metadata.get("nbgrader", {}).get("solution"):
            names += [node.name for node in ast.parse(cell.source).body
                      if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    return names


def _answers(assignment: str, cells: list[Any]) -> dict[str, Any]:
    """{name the visible tests call: the model answer} for one assignment, whose code
    cells are `cells`."""
    import importlib

    module = importlib.import_module(ANSWERS[assignment])
    answers = {name: getattr(module, name) for name in _solution_names(cells)
               if hasattr(module, name)}
    answers.update({name: getattr(module, attr)
                    for name, attr in GIVEN.get(assignment, {}).items()})
    return answers


READS_STORED = re.compile(r"\bstored(_observation)?\(")


def recorded(root: str | Path | None = None, torch: bool | None = None,
             ) -> dict[str, dict[str, Entry]]:
    """{"stored": 2-4's entries, "torch": 8 and 9's}: each visible test cell of `source/`
    that reads a stored entry (`released_notebooks`: its hidden tests taken out) run here with
    the model answers under the student's names, each check that reads an entry recording
    what the answers give on the cell's own inputs. The torch track's only with torch
    (`torch`: when None, whether it is installed)."""
    import io

    torch = _torch_installed() if torch is None else torch
    found: dict[str, dict[str, Entry]] = {"stored": {}, "torch": {}}
    where = [""]
    with _recording(found, where):
        for path, cells in released_notebooks(root):
            assignment = path.parent.name
            reading = [c for c in cells if READS_STORED.search(c.source)]
            if not reading or (assignment in TORCH_ASSIGNMENTS and not torch):
                continue
            if assignment not in ANSWERS:
                raise ValueError(f"{path.name} reads stored entries, and "
                                 f"autograder/authoring/stored.py's ANSWERS does not "
                                 f"say where its model answers are")
            answers = _answers(assignment, cells)
            for cell in reading:
                where[0] = f"{path.name}, cell {cell.metadata['nbgrader']['grade_id']}"
                code = compile(cell.source, f"<{where[0]}>", "exec")
                try:
                    with contextlib.redirect_stdout(io.StringIO()):
                        exec(code, {"__name__": "__main__", **answers})
                except _Refused:
                    raise
                except Exception as e:
                    hint = " (a stored entry is only ever the `expected` of a check)" \
                        if "_Pending" in str(e) else ""
                    raise ValueError(f"{where[0]}: run with the model answers to record "
                                     f"its stored entries, it raised "
                                     f"{type(e).__name__}: {e}{hint}") from e
    return found


def values(entries: Mapping[str, Entry]) -> dict[str, Any]:
    """{name: value} of recorded entries."""
    return {name: entry.value for name, entry in entries.items()}


def compute(root: str | Path | None = None) -> dict[str, Entry]:
    """2-4's entries (`stored`), recorded from the visible tests now."""
    return recorded(root, torch=False)["stored"]


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


def differences(stored: Mapping[str, Any], computed: Mapping[str, Entry]) -> list[str]:
    """The names whose stored entry is missing, extra or apart from the recorded one (by
    more than the entry's rtol)."""
    names = set(stored) | set(computed)
    return sorted(n for n in names
                  if n not in stored or n not in computed
                  or not _close(stored[n], computed[n].value, computed[n].rtol))


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


def released_notebooks(root: str | Path | None = None) -> list[tuple[Path, list[Any]]]:
    """(path, code cells) of each of the course's source notebooks (`source/*/*.ipynb`) as
    the release has them: their hidden tests taken out by nbgrader's `ClearHiddenTests`,
    the step that makes the release."""
    from nbgrader.preprocessors import ClearHiddenTests

    from autograder.grading.course import SOURCE, read_notebook

    root = Path(root or TABLE_FILE.parents[2])
    found = []
    for path in sorted((root / SOURCE).glob("*/*.ipynb")):
        nb, _ = ClearHiddenTests().preprocess(read_notebook(path), {})
        found.append((path, [cell for cell in nb.cells if cell.cell_type == "code"]))
    return found


def released_cells(root: str | Path | None = None) -> list[Any]:
    """The code cells of every notebook of `released_notebooks`, in order."""
    return [cell for _, cells in released_notebooks(root) for cell in cells]


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
GPT_TRAINING_RTOL = 1e-8  # a training run's last digits move from one machine to another


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
    return GPT_TRAINING_RTOL if key.startswith(GPT_TRAINING) else GPT_RTOL


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


def compute_torch(root: str | Path | None = None) -> dict[str, Entry]:
    """8 and 9's entries (`stored_observation`), recorded from the visible tests now (torch
    must be installed)."""
    return recorded(root, torch=True)["torch"]


def _torch_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


def kept_where_agreeing(committed: Mapping[str, Any], computed: Mapping[str, Any],
                        apart: Collection[str]) -> dict[str, Any]:
    """`computed`, with the committed entry wherever the table's own comparison found the
    two in agreement (every name not in `apart`)."""
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
    torch = _torch_installed()
    entries = recorded(torch=torch)
    computed, computed_gpt = entries["stored"], compute_gpt()
    committed_gpt = (json.loads(STORED_FILE.read_text(encoding="utf-8"))
                     if STORED_FILE.exists() else {})
    apart_stored = differences(STORED, computed)
    apart_gpt = gpt_differences(committed_gpt, computed_gpt)
    apart_torch: list[str] = []
    if torch:
        committed_torch = (json.loads(TORCH_FILE.read_text(encoding="utf-8"))
                           if TORCH_FILE.exists() else {})
        apart_torch = differences(committed_torch, entries["torch"])
    else:
        say(f"torch is not installed: {TORCH_FILE} left as it is")
    if write:
        table = kept_where_agreeing(STORED, values(computed), apart_stored)
        TABLE_FILE.write_text(render(table), encoding="utf-8")
        STORED_FILE.write_text(render_gpt(kept_where_agreeing(committed_gpt, computed_gpt,
                                                              apart_gpt)),
                               encoding="utf-8")
        say(f"wrote {len(table)} entries to {TABLE_FILE} and {len(computed_gpt)} to "
            f"{STORED_FILE}")
        if torch:
            torch_table = kept_where_agreeing(committed_torch, values(entries["torch"]),
                                              apart_torch)
            TORCH_FILE.write_text(render_gpt(torch_table), encoding="utf-8")
            say(f"wrote {len(torch_table)} entries to {TORCH_FILE}")
        return []
    apart = apart_stored + apart_gpt + apart_torch
    for name in apart:
        say(f"stored and computed differ: {name}")
    return apart
