"""autograder/grading/plan.py: the run's sandbox and one kernel's launch config."""

import json
import os

import pytest

from autograder.grading import plan as plan_module
from autograder.grading.plan import Sandbox, end_run, leftover_launchers
from autograder.kernel import policy
from autograder.sandbox.limits import FULL, LIMITS, Limits, SandboxError

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.mark.skipif(not ROOT_USER, reason="the refusal is for a grading process run as root")
def test_root_without_namespaces_refuses_to_run_student_code():
    with pytest.raises(SandboxError, match="refusing to run student code as root"):
        Sandbox(level=LIMITS)


def test_an_unknown_engine_is_refused_by_name(monkeypatch):
    monkeypatch.setenv(plan_module.ENGINE_VARIABLE, "chroot")
    with pytest.raises(SandboxError, match="RESIDUAL_PACK_SANDBOX='chroot'"):
        Sandbox()


@pytest.mark.skipif(not ROOT_USER, reason="bubblewrap's full sandbox needs root here")
def test_the_bubblewrap_library_holds_the_kernel_side_and_our_engine_only():
    made = Sandbox(Limits(), engine="bubblewrap")
    try:
        lib = made.root / "lib"
        assert {p.name for p in lib.iterdir()} >= {"autograder", "microgpt"}
        assert not (lib / "autograder" / "answers").exists()
        assert not list(lib.rglob("*reference*.py"))
        spec, limits, _ = made.plan(None, "s/n", "01_residual_stack").bwrap
        assert spec.library == lib and limits.run_mib == 1
        # an assignment whose tasks the library answers gets a library without them
        spec, _, _ = made.plan(None, "s/n", "05_gpt_residual_adds").bwrap
        assert spec.library == made.root / "lib-05_gpt_residual_adds"
        model = (spec.library / "microgpt" / "model.py").read_text()
        assert "zip(x, a)" not in model and "grading runs without it" in model
        assert "zip(x, a)" in (lib / "microgpt" / "model.py").read_text()
        assert {p.name for p in spec.library.iterdir()} == {p.name for p in lib.iterdir()}
    finally:
        made.close()


@pytest.fixture(scope="module")
def box():
    level = FULL if ROOT_USER else LIMITS
    made = Sandbox(Limits(cell_timeout=7), level=level)
    yield made
    made.close()


def test_only_kernel_side_modules_are_copied(box):
    lib = box.root / "lib"
    copied = {".".join(p.relative_to(lib).with_suffix("").parts).removesuffix(".__init__")
              for p in lib.rglob("*.py")}
    assert copied and all(policy.kernel_side(name) for name in copied), copied
    assert "autograder.kernel.checks" in copied
    assert [box.lib, box.autograder_dir] in box.binds


def test_a_kernel_plan(box, tmp_path):
    release = tmp_path / "release"
    (release / "data").mkdir(parents=True)
    (release / "nb.ipynb").write_text("{}")
    (release / "data" / "table.csv").write_text("1,2")
    box.add_release("hw", release)
    box.add_release("hw", tmp_path)  # once per assignment: the first release stays
    plan = box.plan(64999 if box.level == FULL else None, "ann/nb", "hw")
    try:
        config = json.loads(plan.config.read_text())
        assert config["label"] == "ann/nb" and config["level"] == box.level
        assert config["support"] == [[str(release / "data" / "table.csv"), "data/table.csv"]]
        assert config["limits"]["cell_timeout"] == 7
        env = config["env"]
        assert env[policy.ASSIGNMENT_VARIABLE] == "hw" and env["PYTHONSAFEPATH"] == "1"
        assert env["HOME"] == config["home"]
        assert oct(plan.config.stat().st_mode & 0o777) == "0o600"
        assert plan.ended() == {}
        plan.exit_file.write_text('{"code": 0}')
        assert plan.ended() == {"code": 0}
        assert box.plan(None, "x", "other").config.read_text().count('"support": []') == 1
        # the launcher binds our engine from the copy without the assignment's answers
        binds = json.loads(box.plan(None, "y", "05_gpt_residual_adds").config.read_text())
        engine = [src for src, _ in binds["binds"] if src.endswith("/microgpt")]
        assert set(engine) == {os.path.join(box.answerless["05_gpt_residual_adds"], "microgpt")}
        assert "grading runs without it" in open(os.path.join(engine[0], "model.py")).read()
        assert box.packages["microgpt"] in [src for src, _ in config["binds"]]  # not for "hw"
    finally:
        plan.remove()
    assert not plan.folder.exists()
    assert str(plan.conn) not in open("/proc/self/mounts").read()


def test_a_run_ends_with_nothing_left(tmp_path):
    level = FULL if ROOT_USER else LIMITS
    (tmp_path / "rp-test").mkdir()
    made = Sandbox(level=level, root=tmp_path / "rp-test")
    made.plan(None, "x")
    # planning starts no process: a launcher starts only with its kernel
    assert leftover_launchers(made.root) == []
    end_run(made.root)
    assert not made.root.exists()
    laptop = type("S", (), {"level": LIMITS, "why": "a laptop", "limits": Limits()})()
    assert "limits only" in Sandbox._launcher_words(laptop)
