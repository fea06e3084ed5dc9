"""A student's Validate with runaway code, under the real nbgrader and a real kernel
(`autograder/student/validate.py`, run as the server extension runs it: `python -m
autograder.student.validate` in the course folder). The browser and the server are
tests/browser/test_runaway_browser.py's."""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_residual_stack"
LOOP = ("def residual_stack(x, depth=20):\n    while depth > 0:\n        x = x + layer(x)\n"
        "    return x\n")
FLOOD = ("def residual_stack(x, depth=20):\n    for _ in range(depth):\n"
         "        print('layer ' * 2_000_000)\n        x = x + layer(x)\n    return x\n")


def course_with(tmp_path, answer):
    course = tmp_path / "course"
    folder = course / "exercises" / ASSIGNMENT
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, folder)
    shutil.copy2(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    path = folder / f"{ASSIGNMENT}.ipynb"
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell["metadata"].get("nbgrader", {}).get("grade_id") == "task1_1_residual_stack":
            cell["source"] = answer
    path.write_text(json.dumps(nb), encoding="utf-8")
    return course, path


def validate(course, path, *args):
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "autograder.student.validate", str(path), *args],
        cwd=course, capture_output=True, text=True, timeout=400)
    answer = json.loads(proc.stdout.strip().splitlines()[-1])
    return answer, time.monotonic() - started


def errors(answer):
    assert answer["success"], answer
    return [entry["raw_error"] for entry in answer["value"].get("failed", [])]


@pytest.mark.slow
def test_a_loop_is_stopped_once_and_said_with_the_students_line(tmp_path):
    course, path = course_with(tmp_path, LOOP)
    answer, took = validate(course, path, "--cell-timeout=5", "--total-timeout=120")
    first = errors(answer)[0]
    assert first.startswith("The cell that runs Task 1.1 did not finish in 5 s, so "
                            "Validate stopped it."), first
    # the stop lands on whichever line of the loop runs at that instant
    assert ("x = x + layer(x)" in first or "while depth > 0:" in first) \
        and "where your code was running" in first, first
    assert "Not run after it: the test cells of Task 1.1 (2) and Task 1.2 (1)." in first
    assert "Traceback" not in first and "CellTimeoutError" not in first
    assert took < 90, f"{took:.0f} s: the loop was waited out more than once"


@pytest.mark.slow
def test_the_total_budget_stops_validate_in_the_cell_that_spends_it(tmp_path):
    course, path = course_with(tmp_path, LOOP)
    answer, took = validate(course, path, "--cell-timeout=120", "--total-timeout=20")
    first = errors(answer)[0]
    assert first.startswith("Validate's time ran out (20 s in all) while the cell that "
                            "runs Task 1.1 ran"), first
    assert took < 80


@pytest.mark.slow
def test_a_flood_of_output_is_cut_and_validate_answers_as_usual(tmp_path):
    course, path = course_with(tmp_path, FLOOD)
    answer, took = validate(course, path, "--total-timeout=200")
    found = errors(answer)
    assert not any("Traceback" in e or "CellTimeoutError" in e for e in found), found
    assert any("Task 1.2 is not done yet" in e for e in found), found
    assert not any("Task 1.1" in e for e in found), found  # the answer is right
