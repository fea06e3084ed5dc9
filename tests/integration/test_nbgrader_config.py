"""The course's nbgrader_config.py puts our steps into nbgrader's own lists, and nothing
else changes in them: the lists are nbgrader's defaults with ours put in."""

import os
from pathlib import Path

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.converters import Autograde, GenerateAssignment, GenerateFeedback
from nbgrader.preprocessors import Execute, GetGrades, LimitOutput, SaveAutoGrades
from traitlets.config.loader import PyFileConfigLoader
from traitlets.utils.importstring import import_item

from autograder.grading import nbgrader_steps, pipeline
from autograder.grading.course import WorkCourse
from autograder.grading.execute import SandboxedExecute
from autograder.grading.feedback import FEEDBACK_PREPROCESSORS

ROOT = Path(__file__).resolve().parents[2]


def _config():
    return PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()


def test_the_config_names_our_steps_in_nbgraders_lists():
    cfg = _config()
    assert cfg.Autograde.sanitize_preprocessors == nbgrader_steps.SANITIZE_STEPS
    assert cfg.Autograde.autograde_preprocessors == nbgrader_steps.AUTOGRADE_STEPS
    assert cfg.GenerateFeedback.preprocessors == nbgrader_steps.FEEDBACK_STEPS
    assert cfg.GenerateAssignment.preprocessors == nbgrader_steps.GENERATE_STEPS
    for name in [*nbgrader_steps.SANITIZE_STEPS, *nbgrader_steps.AUTOGRADE_STEPS,
                 *nbgrader_steps.FEEDBACK_STEPS, *nbgrader_steps.GENERATE_STEPS]:
        assert import_item(name)  # every name imports


def test_the_lists_are_nbgraders_own_with_ours_put_in():
    traits = Autograde.class_traits()
    ours = {"IntakeRepairs", "WithholdForReview"}
    sanitize = [import_item(n) for n in nbgrader_steps.SANITIZE_STEPS]
    assert [c for c in sanitize if c.__name__ not in ours] == \
        traits["sanitize_preprocessors"].default()
    autograde = [import_item(n) for n in nbgrader_steps.AUTOGRADE_STEPS]
    stock = [Execute if issubclass(c, SandboxedExecute) else c for c in autograde
             if c.__name__ not in ours]
    # but LimitOutput, whose rule our Execute step applies (execute_state.OutputBudget)
    assert stock == [c for c in traits["autograde_preprocessors"].default()
                     if c is not LimitOutput]
    # nbgrader's own Execute (trusted notebooks) has it back, in its place
    trusted = [import_item(n) for n in pipeline.TRUSTED_AUTOGRADE_STEPS]
    assert [c for c in trusted if c.__name__ not in ours] == \
        traits["autograde_preprocessors"].default()
    assert [c for c in trusted if c is not LimitOutput][1:] == autograde[1:]
    # withholding comes after nbgrader has saved the scores it holds back
    names = [c.__name__ for c in autograde]
    assert names.index("WithholdForReview") == names.index(SaveAutoGrades.__name__) + 1
    generate = [import_item(n) for n in nbgrader_steps.GENERATE_STEPS]
    assert generate[:-1] == GenerateAssignment.class_traits()["preprocessors"].default()
    assert generate[-1].__name__ == "StripQuoteLists"
    feedback = [import_item(n) for n in nbgrader_steps.FEEDBACK_STEPS]
    assert feedback == FEEDBACK_PREPROCESSORS
    assert GenerateFeedback.class_traits()["preprocessors"].default() == \
        [GetGrades, CSSHTMLHeaderPreprocessor]


def test_the_batch_command_grades_with_the_courses_steps(tmp_path):
    """One grading path: `residual-pack grade`'s work course gives nbgrader's autograde
    the lists nbgrader_config.py names for nbgrader's own commands, and its sandbox to
    the Execute step as a plain config value (the sandbox's root folder); without a
    sandbox (trusted notebooks only), nbgrader's own Execute runs them."""
    from types import SimpleNamespace

    from autograder.grading import plan

    work = WorkCourse(ROOT, tmp_path, ["01_residual_stack"])
    trusted = work.config().Autograde.autograde_preprocessors
    assert trusted == pipeline.TRUSTED_AUTOGRADE_STEPS
    assert trusted[0] == "nbgrader.preprocessors.Execute"
    assert "sandbox_root" not in work.config().SandboxedExecute
    box = SimpleNamespace(root=tmp_path / "box", references={})
    work.use_sandbox(box)
    cfg = work.config()
    assert cfg.Autograde.sanitize_preprocessors == nbgrader_steps.SANITIZE_STEPS
    assert cfg.Autograde.autograde_preprocessors == nbgrader_steps.AUTOGRADE_STEPS
    course = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert cfg.Autograde.autograde_preprocessors == course.Autograde.autograde_preprocessors
    assert cfg.Autograde.sanitize_preprocessors == course.Autograde.sanitize_preprocessors
    steps = [import_item(n)(config=cfg) for n in nbgrader_steps.AUTOGRADE_STEPS
             if n.startswith("autograder.")]
    steps.append(nbgrader_steps.IntakeRepairs(config=cfg))
    assert [type(s).__name__ for s in steps] == \
        ["SandboxedExecute", "WithholdForReview", "IntakeRepairs"]
    # the one setting of our steps: a string, which nbgrader's config system can set
    assert steps[0].sandbox_root == str(box.root)
    assert plan.sandbox_at(str(box.root)) is box
    plan._OPEN.pop(str(box.root))
    assert {n for step in steps for n in step.trait_names()
            if step.trait_metadata(n, "config") and n not in type(step).__mro__[1]
            .class_trait_names()} <= {"sandbox_root"}


def test_schemas_checked_once_validate_cells_as_jsonschema_does():
    import jsonschema
    import pytest
    from nbgrader.nbgraderformat import v3

    from autograder.compat import check_schemas_once

    check_schemas_once()
    check_schemas_once()  # a second call wraps nothing again
    from nbgrader.nbgraderformat import common

    assert common.jsonschema.schema_checked_once
    assert not isinstance(common.jsonschema._module, type(common.jsonschema))
    validator = v3.MetadataValidatorV3()
    good = {"grade": True, "solution": False, "locked": True, "points": 2,
            "grade_id": "t", "schema_version": 3, "task": False}
    common.jsonschema.validate(good, validator.schema)
    for bad in ({**good, "points": "x"}, {**good, "grade": "yes", "locked": 1}):
        with pytest.raises(jsonschema.ValidationError) as ours:
            common.jsonschema.validate(bad, validator.schema)
        with pytest.raises(jsonschema.ValidationError) as theirs:
            jsonschema.validate(bad, validator.schema)
        assert ours.value.message == theirs.value.message


def test_plain_nbgrader_autograde_does_not_follow_a_symbolic_link(tmp_path):
    """A handed-in notebook that is a symbolic link to the instructor's source (which the
    grading user can read) is refused by our first step under nbgrader's own autograde:
    no score, no feedback page with the model answers; the log says why."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook, MissingEntry

    name = "01_residual_stack"
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "source" / name, course / "source" / name)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "HOME": str(tmp_path / "home"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = subprocess.run([str(bin_dir / "nbgrader"), "generate_assignment", name],
                         cwd=course, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-2000:]
    handed = course / "submitted" / "mallory" / name
    handed.mkdir(parents=True)
    (handed / f"{name}.ipynb").symlink_to(course / "source" / name / f"{name}.ipynb")
    run = subprocess.run([str(bin_dir / "nbgrader"), "autograde", name], cwd=course,
                         capture_output=True, text=True, env=env)
    assert "mallory: 01_residual_stack.ipynb: the notebook is a symbolic link; it was not " \
           "followed" in run.stderr
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        try:
            scores = [g.score for nb in gb.find_submission(name, "mallory").notebooks
                      for g in nb.grades]
        except MissingEntry:
            scores = []
    assert not any(scores)
    assert not (course / "autograded" / "mallory" / name / f"{name}.ipynb").exists()
