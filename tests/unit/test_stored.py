"""The stored numbers of the visible tests (`autograder/kernel/stored.py`): made from the
model answers, used by the notebooks, and no visible test reaches for an answer."""

import json
import re
from pathlib import Path

import nbformat
import pytest

from autograder.authoring import stored as authoring
from autograder.cells import is_autograded_test
from autograder.kernel.checks import CheckFailed, check_gradients
from autograder.kernel.stored import STORED, stored

ROOT = Path(__file__).resolve().parents[2]
USED = re.compile(r"""stored\(f?["']([^"']+)["']\)""")


def _cells(folder):
    for path in sorted((ROOT / folder).glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            yield path, cell


def test_the_stored_numbers_are_the_model_answers_numbers():
    # fails when a reference answer or a visible test's inputs changed and nobody ran
    # `residual-pack stored`
    assert authoring.differences(STORED, authoring.compute()) == []


def test_a_changed_entry_is_found():
    computed = authoring.compute()
    changed = dict(STORED)
    name = "2.1 plain_layer, seed 21, width 8"  # check_values(..., atol=1e-12): rtol 1e-11
    changed[name] = [x * (1 + 1e-10) for x in STORED[name]]
    assert authoring.differences(changed, computed) == [name]
    training = "2.2 training loss, 3 plain layers, seed 0"  # a training run's last digits
    assert authoring.differences({**STORED, training: STORED[training] * (1 + 1e-10)},
                                 computed) == []
    assert authoring.differences({**STORED, training: STORED[training] * (1 + 1e-6)},
                                 computed) == [training]
    gradients = "2.1 plain_layer gradients, seed 24, width 4"  # central differences
    moved = [x * (1 + 1e-8) for x in STORED[gradients]]
    assert authoring.differences({**STORED, gradients: moved}, computed) == []
    del changed[name]
    assert authoring.differences(changed, computed) == [name]


def _copy_with(tmp_path, name, old, new):
    """source/NAME copied under tmp_path, with `old` replaced by `new` in the one cell that
    holds it."""
    import shutil

    shutil.copytree(ROOT / "source" / name, tmp_path / "source" / name)
    path = tmp_path / "source" / name / f"{name}.ipynb"
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if old in c.source]
    cell.source = cell.source.replace(old, new)
    nbformat.write(nb, path)


def test_a_changed_visible_input_of_2_to_4_is_recorded_from_the_cell(tmp_path):
    # an instructor moves Task 2.1's first visible check to another seed: `stored` must
    # take the new inputs from the cell itself (before, a recipe here named them again,
    # and the new cell failed generate's run of the solution until someone edited it)
    from autograder.answers import reference
    from autograder.kernel.probes import layer_inputs

    _copy_with(tmp_path, "02_degradation", "h, W = layer_inputs(seed=21, width=8)",
               "h, W = layer_inputs(seed=23, width=8)")
    found = authoring.compute(tmp_path)
    name = "2.1 plain_layer, seed 21, width 8"  # the name is the cell's, unchanged
    assert set(found) == {n for n in STORED if n.startswith("2.")}
    # the equation on floats, on the new inputs: the model answer's record agrees with it
    expected = reference.f_plain_layer(*layer_inputs(seed=23, width=8))
    assert found[name].value == pytest.approx(expected, rel=1e-12, abs=1e-15)
    assert authoring.differences({n: STORED[n] for n in found}, found) == [name]


@pytest.mark.parametrize("new", [
    'stored("4.2 first_last_ratio, 8 probe layers") * 1',  # used as a number
    '0.0, atol=stored("4.2 first_last_ratio, 8 probe layers")',  # another argument
])
def test_a_stored_entry_outside_a_checks_expected_is_refused(tmp_path, new):
    _copy_with(tmp_path, "04_identity_shortcut",
               'stored("4.2 first_last_ratio, 8 probe layers")', new)
    with pytest.raises(ValueError, match=r"04_identity_shortcut.ipynb, cell "
                                         r"task4_2_test_first_last_ratio: .*"
                                         r"`expected` of"):
        authoring.compute(tmp_path)


def test_the_rendered_table_is_the_committed_one():
    assert authoring.render(STORED) == authoring.TABLE_FILE.read_text(encoding="utf-8")


def test_every_name_the_notebooks_read_is_stored_and_every_entry_is_read():
    used = set()
    for _, cell in _cells("source"):
        for name in USED.findall(cell.source):
            # Task 3.3's cell reads one entry per key, W and W_gate
            used |= {name.replace("{key}", key) for key in ("W", "W_gate")}
    assert used == set(STORED) == set(authoring.compute())


def test_no_released_cell_names_the_model_answers():
    # what a student gets: the visible tests compare with stored numbers, not an answer
    seen = 0
    for path, cell in _cells("exercises"):
        assert "autograder.answers" not in cell.source, (path.name, cell.get("id"))
        seen += is_autograded_test(cell)
    assert seen > 20


def test_stored_returns_a_fresh_copy():
    name = "2.1 plain_layer, seed 21, width 8"
    stored(name).append(0.0)
    assert len(stored(name)) == len(STORED[name])


def test_check_gradients_compares_with_stored_gradients():
    def f(vs):
        return vs[0] * vs[1]

    assert check_gradients(f, [2.0, 3.0], what="x * y", expected=[3.0, 2.0]) == [3.0, 2.0]
    with pytest.raises(CheckFailed, match="2.5"):
        check_gradients(f, [2.0, 3.0], what="x * y", expected=[3.0, 2.5])


# ---------------------------------------------------------------- the tiny-GPT checks


def _gpt_table():
    import json

    from autograder.kernel.gptchecks import STORED_FILE

    return json.loads(STORED_FILE.read_text(encoding="utf-8"))


def test_the_gpt_checks_stored_numbers_are_the_references_numbers():
    # every call of a tiny-GPT check in a released notebook has its entry, and no other
    assert authoring.gpt_differences(_gpt_table(), authoring.compute_gpt()) == []
    assert set(_gpt_table()) == set(authoring.gpt_calls())
    # 05: the second block of two is a visible check too; 06: a context that cuts the
    # name, for Task 6.1 and Task 6.3 (issue #41)
    assert len(_gpt_table()) == 19


def test_the_rendered_gpt_table_is_the_committed_one():
    from autograder.kernel.gptchecks import STORED_FILE

    assert authoring.render_gpt(_gpt_table()) == STORED_FILE.read_text(encoding="utf-8")


def test_a_changed_gpt_entry_is_found():
    table = _gpt_table()
    key = next(k for k in table if k.startswith("block_values("))
    changed = {**table, key: [[x * (1 + 1e-9) for x in row] for row in table[key]]}
    assert authoring.gpt_differences(changed, table) == [key]
    training = next(k for k in table if k.startswith("block_training("))
    moved = {**table, training: [x * (1 + 1e-10) for x in table[training]]}
    assert authoring.gpt_differences(moved, table) == []


def test_a_visible_test_whose_inputs_changed_gets_its_numbers_before_generate(tmp_path):
    # an instructor edits a visible test in source/: `residual-pack stored` must see the new
    # call before `generate` runs the solution, which needs its numbers (exercises/ is only
    # written by a generate that succeeded); the hidden tests' calls are never stored
    import shutil

    name = "05_gpt_residual_adds"
    shutil.copytree(ROOT / "source" / name, tmp_path / "source" / name)
    path = tmp_path / "source" / name / f"{name}.ipynb"
    old = 'check_block_training(post_norm_block, "post", steps=6, seed=0)'
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if old in c.source]
    cell.source = cell.source.replace(old, old.replace("steps=6", "steps=7"))
    nbformat.write(nb, path)
    before = "block_training(layout='post', lr=0.01, n_embd=16, n_head=4, n_layer=1, " \
             "seed=0, steps=6)"
    # the committed table holds the calls of the released notebooks, no hidden one
    committed_05 = {k for k in _gpt_table() if k.startswith("block_")}  # 05's checks
    assert before in committed_05
    assert set(authoring.gpt_calls(tmp_path)) == committed_05 - {before} | {
        before.replace("steps=6", "steps=7")}


def test_writing_keeps_the_committed_entries_the_new_ones_agree_with():
    training = "block_training(layout='pre', lr=0.01, n_embd=16, n_head=4, n_layer=1, " \
               "seed=0, steps=8)"
    values = "block_values(layer=0, layout='pre', n_embd=16, n_head=4, n_layer=1, " \
             "n_pos=3, scale=2.0, seed=0)"
    committed = {training: [3.0, 2.5], values: [[1.0]], "gone": [0.0]}
    computed = {training: [3.0 * (1 + 1e-10), 2.5], values: [[1.0 + 1e-6]], "new": [1.0]}
    kept = authoring.kept_where_agreeing(
        committed, computed, authoring.gpt_differences(committed, computed))
    # a training run's last digits: the committed ones; a value that moved, and a new
    # entry: the computed ones; an entry no longer called: gone
    assert kept == {training: [3.0, 2.5], values: [[1.0 + 1e-6]], "new": [1.0]}


def test_every_hidden_gpt_check_hands_in_the_reference_and_no_visible_one_does():
    import ast

    hidden_calls = visible_calls = 0
    for path, cell in _cells("source"):
        if cell.cell_type != "code" or not is_autograded_test(cell):
            continue
        lines = cell.source.splitlines()
        begin = next((i for i, x in enumerate(lines) if "BEGIN HIDDEN TESTS" in x), None)
        end = next((i for i, x in enumerate(lines) if "END HIDDEN TESTS" in x), None)
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) \
                    in authoring.GPT_CHECKS:
                hidden = begin is not None and begin < node.lineno - 1 < end
                has_reference = any(k.arg == "reference" for k in node.keywords)
                assert has_reference == hidden, (path.name, node.lineno)
                hidden_calls += hidden
                visible_calls += not hidden
    assert hidden_calls >= 20 and visible_calls >= 10


def test_a_gpt_check_without_stored_numbers_or_a_reference_says_so():
    from autograder.answers import gpt
    from autograder.kernel.gptchecks import check_block_values

    def pre_norm_block(model, x, layer, cache):  # the answer, as a student writes it
        from microgpt import rmsnorm

        a = model.attention(rmsnorm(x), layer, cache)
        x = [xi + ai for xi, ai in zip(x, a)]
        m = model.mlp(rmsnorm(x), layer)
        return [xi + mi for xi, mi in zip(x, m)]

    check_block_values(pre_norm_block, "pre")  # stored
    check_block_values(pre_norm_block, "pre", n_layer=2, layer=1, n_embd=8, n_head=2,
                       reference=gpt)  # computed
    with pytest.raises(CheckFailed, match="no stored numbers for block_values"):
        check_block_values(pre_norm_block, "pre", n_layer=2, layer=1, n_embd=8, n_head=2)
    with pytest.raises(CheckFailed, match="expected"):
        check_block_values(lambda model, x, layer, cache: x, "pre")  # no block at all


# ---------------------------------------------------------------- the torch track

OBSERVATION = re.compile(r"""stored_observation\(f?(["'])(.+?)\1\)""")


def _torch_table():
    from autograder.kernel.torchchecks import STORED_FILE

    return json.loads(STORED_FILE.read_text(encoding="utf-8"))


def test_every_torch_entry_the_notebooks_read_is_stored_and_every_entry_is_read():
    pytest.importorskip("torch")
    used = set()
    for _, cell in _cells("source"):
        for _, name in OBSERVATION.findall(cell.source):
            used |= {name.replace("{layout}", layout) for layout in ("pre", "post", "none")}
    table = _torch_table()
    # 9.1's training reads pre and post only: the none-layout name is not read
    used -= {n for n in used if n not in table and "none-norm" in n}
    assert used == set(table)


@pytest.mark.torch
@pytest.mark.slow
def test_the_torch_stored_numbers_are_torchtracks():
    pytest.importorskip("torch")
    table, computed = _torch_table(), authoring.compute_torch()
    assert authoring.differences(table, computed) == []
    # and a change is found: an observation's number, and a training run's beyond its
    # last digits
    name = "9.2 logit_lens, 3 probe blocks"  # check_numbers(..., rtol=1e-6): 1e-8
    changed = {**table, name: [x * (1 + 1e-7) for x in table[name]]}
    assert authoring.differences(changed, computed) == [name]
    observation = "8.1 ResidualLayer(8) on 5 rows"
    moved = json.loads(json.dumps(table[observation]))
    moved["tensors"][0][1]["data"][0] += 1e-6
    assert authoring.differences({**table, observation: moved}, computed) == [
        observation]
    training = "8.1 final training loss, 10 residual layers, seed 0"
    assert authoring.differences({**table, training: table[training] * (1 + 1e-10)},
                                       computed) == []


@pytest.mark.torch
@pytest.mark.slow
def test_a_changed_visible_input_of_8_is_recorded_from_the_cell(tmp_path):
    pytest.importorskip("torch")
    import torch

    from autograder.kernel.torchchecks import module_observation, seeded
    from torchtrack import mlp

    _copy_with(tmp_path, "08_torch_mlp", "rows(81, 5, 8), seed=81", "rows(84, 3, 8), seed=84")
    found = authoring.compute_torch(tmp_path)
    with seeded(84):
        layer = mlp.ResidualLayer(8).double()
    inputs = torch.randn(3, 8, generator=torch.Generator().manual_seed(84),
                         dtype=torch.float64)
    expected = module_observation(layer, inputs, "the reference")
    name = "8.1 ResidualLayer(8) on 5 rows"
    assert found[name].value == expected
    assert authoring.differences({n: _torch_table()[n] for n in found}, found) == [name]


def test_every_stored_training_run_is_rerun_in_float64():
    # in float32 a run's last digits move from one machine to another by more than the
    # checks' rtol of 1e-6; each cell that reads a training entry reruns it in float64
    pytest.importorskip("torch")
    readers = [cell.source for _, cell in _cells("source")
               if "stored_observation(" in cell.source and "reproducible=False" in cell.source]
    assert len(readers) == 3  # 8.1, 8.2 and 9.1's training cells
    for source in readers:
        # the student's run in float64 where their class lives (in_kernel at grading time)
        assert "float64=True" in source and "rtol=1e-6" in source


def test_in_float64_restores_the_dtype_before_even_on_an_error():
    torch = pytest.importorskip("torch")
    from autograder.kernel.torchchecks import in_float64

    assert torch.get_default_dtype() == torch.float32
    with in_float64():
        assert torch.zeros(1).dtype == torch.float64
    with pytest.raises(RuntimeError, match="a check failed"), in_float64():
        raise RuntimeError("a check failed")
    assert torch.get_default_dtype() == torch.float32


@pytest.mark.torch
def test_a_float64_run_of_the_same_maths_with_other_rounding_stays_within_the_checks_rtol():
    # what another machine's kernels do to a run: the same layer with its matmul written
    # out rounds differently (2e-16 apart here, where float32 moved by 1e-7)
    torch = pytest.importorskip("torch")
    from autograder.kernel.torchchecks import in_float64
    from torchtrack import mlp

    class ByHand(mlp.PlainLayer):
        def forward(self, h):
            return h + (self.norm(h) @ self.linear.weight.T + self.linear.bias).clamp(min=0)

    stored = _torch_table()["8.1 final training loss, 10 residual layers, seed 0"]
    with in_float64():
        again = authoring.mlp_training_run(ByHand)
    assert again == pytest.approx(stored, rel=1e-8, abs=0)
    assert torch.get_default_dtype() == torch.float32
