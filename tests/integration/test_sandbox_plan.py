"""autograder/grading/plan.py: the run's sandbox and one kernel's plan."""

import os

import pytest

from autograder.grading import plan as plan_module
from autograder.grading.plan import FULL, LIMITS, Sandbox, end_run, kernel_side
from autograder.sandbox import bubblewrap
from autograder.sandbox.limits import Limits, SandboxError

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0
SANDBOX_HERE = bubblewrap.probe().usable


@pytest.mark.skipif(not ROOT_USER, reason="the refusal is for a grading process run as root")
def test_root_without_the_sandbox_refuses_to_run_student_code(monkeypatch):
    monkeypatch.setenv(plan_module.ENGINE_VARIABLE, "limits")
    with pytest.raises(SandboxError, match="refusing to run student code as root"):
        Sandbox()
    # and where bubblewrap is missing, as root: no falling back to limits only
    monkeypatch.delenv(plan_module.ENGINE_VARIABLE)
    monkeypatch.setattr(bubblewrap, "probe", lambda: bubblewrap.Level("none", "no sandbox: x"))
    with pytest.raises(SandboxError, match="as root, grading refuses"):
        Sandbox()


def test_an_unknown_engine_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(plan_module.ENGINE_VARIABLE, "chroot")
    with pytest.raises(SandboxError, match="RESIDUAL_PACK_SANDBOX='chroot'"):
        Sandbox()


def test_without_bubblewrap_a_non_root_grader_gets_limits_only_and_is_told(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(bubblewrap, "probe", lambda: bubblewrap.Level(
        "none", "no sandbox: bubblewrap is not installed"))
    made = Sandbox()
    try:
        assert made.level == LIMITS
        words = made.describe()
        assert words.startswith("limits only (bubblewrap is not installed): no sandbox")
        assert "the hidden tests and the model answers included" in words
        spec, _, level = made.plan("s/n", "01_residual_stack").bwrap
        assert not level.sandboxed
    finally:
        made.close()
    # asking for bubblewrap by name fails instead of falling back
    monkeypatch.setenv(plan_module.ENGINE_VARIABLE, "bubblewrap")
    with pytest.raises(SandboxError, match="bubblewrap is not installed"):
        Sandbox()


@pytest.mark.skipif(not (ROOT_USER and SANDBOX_HERE), reason="bubblewrap as root needed here")
def test_the_library_holds_the_kernel_side_and_our_engine_only():
    made = Sandbox(Limits(), engine="bubblewrap")
    try:
        assert made.level == FULL
        lib = made.root / "lib"
        assert {p.name for p in lib.iterdir()} >= {"autograder", "microgpt"}
        assert not (lib / "autograder" / "answers").exists()
        assert not list(lib.rglob("*reference*.py"))
        copied = {".".join(p.relative_to(lib).with_suffix("").parts).removesuffix(".__init__")
                  for p in (lib / "autograder").rglob("*.py")}
        assert copied and all(kernel_side(name) for name in copied), copied
        assert "autograder.kernel.checks" in copied
        plan = made.plan("s/n", "01_residual_stack")
        spec, limits, level = plan.bwrap
        assert spec.library == lib and limits.run_space == 1 << 20
        # a CPU quota of one core per kernel, where the machine has a cpu cgroup (ours does)
        assert limits.cpus == 1.0
        assert ("1 CPU per kernel" in made.describe()) == bubblewrap.cpu_quota(level)
        assert spec.writable == plan.conn
        assert spec.env["PYTHONSAFEPATH"] == "1" and "PATH" not in spec.env
        assert plan.ended() == {}  # not started
        # an assignment whose tasks the library answers gets a library without them
        spec, _, _ = made.plan("s/n", "05_gpt_residual_adds").bwrap
        assert spec.library == made.root / "lib-05_gpt_residual_adds"
        model = (spec.library / "microgpt" / "model.py").read_text()
        assert "zip(x, a)" not in model and "grading runs without it" in model
        assert "zip(x, a)" in (lib / "microgpt" / "model.py").read_text()
        assert {p.name for p in spec.library.iterdir()} == {p.name for p in lib.iterdir()}
        plan.remove()
        assert not plan.folder.exists()
    finally:
        made.close()
    assert not made.root.exists()


def test_a_run_ends_with_nothing_left(tmp_path, monkeypatch):
    if not (ROOT_USER and SANDBOX_HERE):
        monkeypatch.setenv(plan_module.ENGINE_VARIABLE, "limits")
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    (tmp_path / "rp-test").mkdir()
    made = Sandbox(root=tmp_path / "rp-test")
    made.plan("x")
    end_run(made.root)
    assert not made.root.exists()
