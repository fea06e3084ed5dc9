"""The hostile class of `test_hostile.py`, graded with every kernel run by bubblewrap
(`RESIDUAL_PACK_SANDBOX=bubblewrap`, `autograder.sandbox.bubblewrap`; issue #26 moves
grading onto it): the same submissions, the same scores case by case, the same kill and
resume, the grading process as safe; the walls are bubblewrap's (seccomp, cgroups, a
fresh uid per kernel) and the run says so.

The case tests are `test_hostile.py`'s own, run again here against this module's
`hostile_run`; the launcher-only tests (its message, its seccomp's EPERM for memfd) are
replaced by bubblewrap's below.
"""

import os
import shutil

import pytest

from autograder.sandbox import bubblewrap
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
    why = None
    if shutil.which("bwrap") is None:
        why = "bubblewrap is not installed (scripts/install-bubblewrap)"
    elif os.geteuid() != 0 or bubblewrap.probe().kind != "root":
        why = "grading with bubblewrap's full sandbox needs root here"
    if why:
        if os.environ.get("SANDBOX_REQUIRED"):
            pytest.fail(why)
        pytest.skip(why)
    return grade_the_hostile_class(tmp_path_factory, engine="bubblewrap")


@needs_assignment
@pytest.mark.slow
def test_the_kernel_stays_in_bubblewraps_walls(hostile_run):
    """A memfd is bounded (the file size limit stops the writes; the memory cgroup counts
    what it holds), and no user namespace or keyring entry of the kernel's own."""
    printed = _printed(hostile_run.out, "leave-the-walls")
    said = dict(line.split(": ", 1) for line in printed.splitlines() if ": " in line)
    assert said.get("memfd") in ("refused EFBIG", "refused EPERM"), printed
    assert said.get("namespace", "").startswith("refused"), printed
    assert said.get("keyring", "").startswith("refused"), printed


@needs_assignment
@pytest.mark.slow
def test_the_run_says_it_isolated_with_bubblewrap(hostile_run):
    assert "isolation: sandbox: bubblewrap as a fresh uid per kernel" in \
        hostile_run.second.stdout, hostile_run.second.stdout[-3000:]
