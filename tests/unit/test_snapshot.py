"""`kernel/snapshot.py`: the state a graded kernel's tests depend on, recorded before any
student code, reported and put back when a student's cell changed it."""

import builtins
import sys

import pytest

import microgpt
from autograder.kernel import checks
from autograder.kernel.snapshot import Snapshot, private_import
from microgpt import Value


@pytest.fixture
def snap():
    made = Snapshot()
    made.record()
    yield made
    made.differences(fix=True)  # whatever a test left changed is put back


def test_an_untouched_kernel_has_no_differences(snap):
    assert snap.differences(fix=False) == []


def test_changes_to_our_modules_classes_and_builtins_are_named_and_put_back(snap):
    original_check, original_add, original_len = checks.check_value, Value.__add__, len
    checks.check_value = lambda *a, **k: None
    Value.__add__ = lambda self, other: self
    Value.forged = True
    builtins.len = lambda x: 0
    microgpt.smuggled = 1
    found = snap.differences(fix=True)
    assert "autograder.kernel.checks.check_value" in found
    assert any(name.startswith("microgpt.engine.Value.__add__") for name in found)
    assert any("Value.forged (added)" in name for name in found)
    assert "builtins.len" in found and "microgpt.smuggled (added)" in found
    assert checks.check_value is original_check and Value.__add__ is original_add
    assert builtins.len is original_len and not hasattr(Value, "forged")
    assert snap.differences(fix=False) == []


def test_a_function_changed_in_place_is_put_back(snap):
    original = checks.check_value.__code__
    checks.check_value.__code__ = (lambda *a, **k: None).__code__
    found = snap.differences(fix=True)
    assert any("check_value (changed in place)" in name for name in found)
    assert checks.check_value.__code__ is original


def test_sys_path_and_the_streams_are_put_back(snap):
    saved_out = sys.stdout
    sys.path.insert(0, "/nowhere")
    found = snap.differences(fix=True)
    assert "sys.path" in found and "/nowhere" not in sys.path
    assert sys.stdout is saved_out


def test_a_test_cell_gets_private_copies_of_the_checks(snap):
    copies, originals = snap.hardened_modules()
    copy = copies["autograder.kernel.checks"]
    assert copy is not checks and copy.check_value is not checks.check_value
    assert originals[id(copy.check_value)] is checks.check_value
    # replacing the module's function afterwards does not reach the copy
    checks.check_value = None
    assert copy.check_value is not None
    importer = private_import(copies, builtins.__import__)
    module = importer("autograder.kernel.checks", fromlist=("check_value",))
    assert module is copy
    assert importer("math") is sys.modules["math"]
