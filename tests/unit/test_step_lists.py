"""nbgrader's lists of steps with ours put in are written once, in
`autograder/grading/pipeline.py`: the course's `nbgrader_config.py`, the feedback module
and the work course read them from there (issue 43, item 3)."""

import ast
from pathlib import Path

from autograder.grading import pipeline

ROOT = Path(__file__).resolve().parents[2]
LISTS = {"SANITIZE_STEPS": pipeline.SANITIZE_STEPS, "AUTOGRADE_STEPS": pipeline.AUTOGRADE_STEPS,
         "GENERATE_STEPS": pipeline.GENERATE_STEPS, "FEEDBACK_STEPS": pipeline.FEEDBACK_STEPS}


def _step_lists_written(path: Path) -> list[list[str]]:
    """The step lists written out in `path`: list literals of which at least three items
    name a step of pipeline's lists (a dotted name as a string, an f-string ending in a
    step's class name, or the class itself)."""
    known = {n for steps in LISTS.values() for n in steps}
    short = {n.rsplit(".", 1)[1] for n in known}
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.List):
            continue
        named = []
        for item in node.elts:
            if isinstance(item, ast.Constant) and isinstance(item.value, str):
                if item.value in known:
                    named.append(item.value)
            elif isinstance(item, ast.JoinedStr):
                tail = item.values[-1]
                if isinstance(tail, ast.Constant) and "." in str(tail.value) and \
                        str(tail.value).rsplit(".", 1)[1] in short:
                    named.append(ast.unparse(item))
            elif isinstance(item, ast.Name) and item.id in short:
                named.append(item.id)
        if len(named) >= 3:
            found.append(named)
    return found


def test_the_step_lists_are_written_in_pipeline_only():
    files = [ROOT / "nbgrader_config.py", *sorted((ROOT / "autograder").rglob("*.py"))]
    elsewhere = {str(p.relative_to(ROOT)): names for p in files
                 if p != ROOT / "autograder" / "grading" / "pipeline.py"
                 and (names := _step_lists_written(p))}
    assert elsewhere == {}


def test_the_config_and_the_feedback_module_read_pipelines_lists():
    from traitlets.config.loader import PyFileConfigLoader
    from traitlets.utils.importstring import import_item

    from autograder.grading.feedback import FEEDBACK_PREPROCESSORS

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    assert cfg.Autograde.sanitize_preprocessors == pipeline.SANITIZE_STEPS
    assert cfg.Autograde.autograde_preprocessors == pipeline.AUTOGRADE_STEPS
    assert cfg.GenerateAssignment.preprocessors == pipeline.GENERATE_STEPS
    assert cfg.GenerateFeedback.preprocessors == pipeline.FEEDBACK_STEPS
    assert FEEDBACK_PREPROCESSORS == [import_item(n) for n in pipeline.FEEDBACK_STEPS]
