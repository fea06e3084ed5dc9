"""What Validate's dialog shows (issue 41, item 5): `validate.for_the_dialog` shapes
nbgrader's result for nbgrader's lab extension, which puts each failed cell's `source` and
`error` in a `pre` that does not wrap; and the CSS that makes a test's message in the Lab
wrap at spaces. tests/browser/test_dialog_browser.py shows both in Chromium."""

import html
import json
from pathlib import Path

from autograder.student import validate

ROOT = Path(__file__).resolve().parents[2]
TEST_CELL = ('"""Task 1.1, output: residual_stack(Value(x), depth) is x * 1.1**depth for '
             'x > 0, x for x < 0."""\nimport math\n\nwith task("Task 1.1"):\n'
             '    check_value(residual_stack(Value(1.0), depth=20), 1.1**20)\n')
MESSAGE = ("CheckFailed: residual_stack(Value(1.0), depth=20): expected 6.7275 (1.1**20), "
           "got 2.7822e+06. This looks like a known mistake: the shortcut seems to be added "
           "twice in each layer, so every layer doubles x. Count how many times x <b>")


def test_a_failed_cell_is_its_first_line_and_its_message_wrapped():
    result = validate.for_the_dialog({"failed": [{
        "source": TEST_CELL, "error": "<span>nbgrader's html</span>",
        "raw_error": "\x1b[0;31m" + MESSAGE + "\x1b[0m\n  ----> 3 " + "x = layer(x) " * 8}]})
    entry = result["failed"][0]
    assert entry["source"] == ("Task 1.1, output: residual_stack(Value(x), depth) is x * "
                               "1.1**depth for\n  x > 0, x for x < 0.")
    assert "import math" not in entry["source"] and "check_value" not in entry["source"]
    lines = entry["error"].splitlines()
    assert all(len(line) <= validate.DIALOG_WIDTH for line in lines), lines
    assert " ".join(entry["error"].split()).startswith(" ".join(MESSAGE.split()[:-1]))
    assert "\x1b" not in entry["error"] and "&lt;b&gt;" in entry["error"]  # text, as HTML
    code = [i for i, line in enumerate(lines)
            if html.unescape(line).startswith("  ----> 3 x = layer(x)")]
    assert code and all(line.startswith("    ") for line in lines[code[0] + 1:]), lines
    assert entry["raw_error"].startswith("\x1b[0;31m")  # nbgrader's, for the log


def test_a_changed_cell_keeps_its_source_and_success_is_untouched():
    changed = {"changed": [{"source": TEST_CELL}]}
    assert validate.for_the_dialog(json.loads(json.dumps(changed))) == changed
    assert validate.for_the_dialog({}) == {}


def test_the_students_lab_loads_css_that_wraps_output_at_spaces():
    config = ROOT / "autograder" / "student" / "jupyter-config"
    lab = json.loads((config / "jupyter_lab_config.json").read_text(encoding="utf-8"))
    assert lab["LabApp"]["custom_css"] is True
    css = (validate.CUSTOM_CSS / "custom.css").read_text(encoding="utf-8")
    assert validate.CUSTOM_CSS == config / "custom"
    assert "body .jp-OutputArea-output pre {" in css and "word-break: normal;" in css
