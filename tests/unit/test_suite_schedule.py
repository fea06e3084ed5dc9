"""The suite's scheduling on several workers (tests/conftest.py): every test it spreads by
parameter exists and is parametrized, so that a renamed test cannot quietly fall back to
one worker per file."""

import ast
from pathlib import Path

import conftest

REPO = Path(__file__).resolve().parents[2]


def parametrized_tests(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.FunctionDef)
            and any("parametrize" in ast.unparse(d) for d in node.decorator_list)}


def test_every_spread_test_exists_and_is_parametrized():
    for name in conftest.SPREAD:
        path, test = name.split("::")
        assert test in parametrized_tests(REPO / path), name


def test_a_spread_test_is_a_unit_per_parameter_and_others_a_unit_per_file():
    spread = conftest.SPREAD[-1]
    assert spread not in conftest.GRADED_CLASS
    path = spread.split("::")[0]
    assert conftest._unit(f"{spread}[04_identity_shortcut]") == f"{path}[04_identity_shortcut]"
    assert conftest._unit(f"{path}::test_other[04_identity_shortcut]") == path
    assert conftest._unit("tests/unit/test_cells.py::test_x") == "tests/unit/test_cells.py"


def test_the_readers_of_one_graded_class_are_one_unit_across_files():
    units = {conftest._unit(f"{test}[04_identity_shortcut]") for test in conftest.GRADED_CLASS}
    assert units == {"graded-class[04_identity_shortcut]"}
    assert {test.split("::")[0] for test in conftest.GRADED_CLASS} == {
        "tests/integration/test_pipeline.py", "tests/hostile/test_hostile_every_assignment.py",
        "tests/integration/test_diagnosis.py"}
