"""The hostile class of `test_hostile.py`, graded with every kernel started by the
home-made launcher (`RESIDUAL_PACK_SANDBOX=launcher`, `autograder.sandbox.launcher`), the
fallback where bubblewrap cannot run until it is retired (issue #26): the same
submissions, the same scores case by case, the same kill and resume, the grading process
as safe; the walls are the launcher's (its seccomp filter) and the run says so.

The case tests are `test_hostile.py`'s own, run again here against this module's
`hostile_run`; the tests of the walls and of the run's message are the launcher's below.
"""

import pytest
from isolation import require_isolation

from hostile.test_hostile import (  # noqa: F401 (collected again, on this module's fixture)
    _printed,
    grade_the_hostile_class,
    needs_assignment,
    test_no_student_reached_what_it_must_not,
    test_submission,
    test_the_class_finishes_after_a_kill_and_a_resume,
    test_the_grading_process_is_safe_from_the_kernel,
)


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    require_isolation()
    return grade_the_hostile_class(tmp_path_factory, engine="launcher")


@needs_assignment
@pytest.mark.slow
def test_the_kernel_stays_in_the_launchers_walls(hostile_run):
    """The seccomp filter the launcher puts the kernel under (`_confine`): no memory held
    outside the address-space limit, no namespace of the kernel's own, no keyring entry
    that a later kernel of the same uid could read."""
    printed = _printed(hostile_run.out, "leave-the-walls")
    said = dict(line.split(": ", 1) for line in printed.splitlines() if ": " in line)
    assert said.get("memfd") == "refused EPERM", printed
    assert said.get("namespace") == "refused EPERM", printed
    assert said.get("keyring") == "refused EPERM", printed


@needs_assignment
@pytest.mark.slow
def test_the_run_says_it_isolated_with_the_launcher(hostile_run):
    assert "isolation: own uid, private filesystem, no network" in hostile_run.second.stdout
