"""The stored numbers of the visible tests (`autograder/kernel/stored.py`): made from the
model answers, used by the notebooks, and no visible test reaches for an answer."""

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
    # fails when a reference answer or a recipe's inputs changed and nobody ran
    # `residual-pack stored`
    assert authoring.differences(STORED, authoring.compute()) == []


def test_a_changed_entry_is_found():
    changed = dict(STORED)
    name = "2.1 plain_layer, seed 21, width 8"
    changed[name] = [x + 1e-12 for x in STORED[name]]
    assert authoring.differences(changed, STORED) == [name]
    training = "2.2 training loss, 3 plain layers, seed 0"  # a training run's last digits
    assert authoring.differences({**STORED, training: STORED[training] * (1 + 1e-10)},
                                 STORED) == []
    assert authoring.differences({**STORED, training: STORED[training] * (1 + 1e-6)},
                                 STORED) == [training]
    del changed[name]
    assert authoring.differences(changed, STORED) == [name]


def test_the_rendered_table_is_the_committed_one():
    assert authoring.render(STORED) == authoring.TABLE_FILE.read_text(encoding="utf-8")


def test_every_name_the_notebooks_read_is_stored_and_every_entry_is_read():
    used = set()
    for _, cell in _cells("source"):
        for name in USED.findall(cell.source):
            # Task 3.3's cell reads one entry per key, W and W_gate
            used |= {name.replace("{key}", key) for key in ("W", "W_gate")}
    assert used == set(STORED) == set(authoring.RECIPES)


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
