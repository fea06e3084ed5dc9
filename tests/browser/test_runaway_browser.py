"""Runaway code in a student's JupyterLab, in a real browser (issue 41, item 1).

`scripts/lab` serves a copy of the course with Validate's budgets lowered through the
server's config (`--StudentValidate.cell_timeout=15`, `total_timeout=150`), so that the
test does not wait out the course's 120 s. Headless Chromium opens
exercises/01_residual_stack and:

1. **a huge print**: a Task 1.1 that prints ~12 MB per layer (right otherwise). Its test
   cell shows the first 1 MB, then the line that says the rest was cut, and its success
   line; no "IOPub data rate exceeded"; Validate answers with its usual dialog (the stub's
   failures), not nbclient's traceback;
2. **an infinite loop in a test**: the loop typed into Task 1.1, then Run > Run Selected
   Cell and All Below from Task 1.1's first test cell. One Stop: the kernel is idle within
   seconds, the test cell shows "Interrupted", Task 1.1's test and the student's own line,
   no frame of the checks, the engine or IPython, and the test cells below it did not run
   (the same loop is not started again);
3. **the loop in Validate**: Validate says which cell did not finish in 15 s, with the
   student's line and the test cells not run after it, within a bounded time; while it
   runs, the server answers `/api/status` within 2 s every time it is asked.

Each is a test of its own (its own server), so that each shows its failure on the code
before the fix. Screenshots, the server log and a summary go to
tests/browser/artifacts/runaway-*/.
"""

import re
import time
import urllib.request

import lab_helpers as lh
import pytest

ASSIGNMENT = "01_residual_stack"
NOTEBOOK = "01_residual_stack.ipynb"
STDOUT = "application/vnd.jupyter.stdout"
STDERR = "application/vnd.jupyter.stderr"
CELL_BUDGET_S = 15
TOTAL_BUDGET_S = 150
STATUS_S = 2.0  # the server must answer /api/status within this while Validate runs

# right, but printing ~12 MB per layer
FLOOD = '''def residual_stack(x, depth=20):
    for _ in range(depth):
        print("layer " * 2_000_000)
        x = x + layer(x)
    return x'''
# never ends: depth is never counted down
LOOP = '''def residual_stack(x, depth=20):
    while depth > 0:
        x = x + layer(x)
    return x'''
# an interrupt lands on whichever line of the loop runs at that instant: its test or its body
LOOP_LINES = ("while depth > 0:", "x = x + layer(x)")


def names_the_loop(text: str) -> bool:
    return any(line in text for line in LOOP_LINES)
CUT = "the rest of its output was cut"
# what none of a stopped cell's output may show: the checks', the engine's, IPython's frames
OUR_FRAMES = re.compile(r"Traceback|File \"|autograder/|site-packages|microgpt/|"
                        r"<handed-in code>|interactiveshell|KeyboardInterrupt\s*$", re.M)

pytestmark = pytest.mark.browser


def out_text(cell, mime=None):
    return "".join(o["text"] for o in cell["outputs"] if mime is None or o["mime"] == mime)


def grade_index(student, grade_id):
    return next(i for i, c in enumerate(student["cells"])
                if lh.nbgrader_meta(c).get("grade_id") == grade_id)


def status_times(server, seconds, dialog_shown):
    """GET /api/status once a second for `seconds` (or until `dialog_shown()`): the
    seconds each answer took (None for one that did not come within 10 s)."""
    times = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and not dialog_shown():
        started = time.monotonic()
        try:
            server.api("api/status", timeout=10)
            times.append(time.monotonic() - started)
        except OSError:
            times.append(None)
        time.sleep(1.0)
    return times


def in_the_lab(tmp_path, name, scenario):
    """`scenario(nbp, server, cells, summary)` on Assignment 1 open in JupyterLab, after
    Run All on the stub (which defines the given cells' functions)."""
    lh.require_browser()
    shots = lh.shots_dir(f"runaway-{name}")
    env = lh.jupyter_env(tmp_path / "jupyter")
    course, _ = lh.prepare_course(tmp_path / "course", ASSIGNMENT, env)
    student = lh.read_nb(course / "exercises" / ASSIGNMENT / NOTEBOOK)
    cells = {g: grade_index(student, g) for g in
             ("task1_1_residual_stack", "task1_1_test_output", "task1_1_test_gradient")}
    summary = []
    budgets = [f"--StudentValidate.cell_timeout={CELL_BUDGET_S}",
               f"--StudentValidate.total_timeout={TOTAL_BUDGET_S}"]
    try:
        with lh.lab_page(course, env, shots, extra_args=budgets) as (server, page):
            nbp = lh.NotebookPage(page, server, f"{ASSIGNMENT}/{NOTEBOOK}",
                                  len(student["cells"]), shots)
            try:
                nbp.open()
                nbp.run_all()
                scenario(nbp, server, cells, summary)
            except BaseException:
                try:
                    nbp.shot("failure")
                except Exception:  # the page itself may be gone
                    pass
                raise
    finally:
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")


def test_a_huge_print_is_cut_in_the_lab_and_in_validate(tmp_path):
    in_the_lab(tmp_path, "print", huge_print)


def test_one_stop_ends_a_loop_in_a_test_and_the_cells_below(tmp_path):
    in_the_lab(tmp_path, "stop", loop_in_a_test)


def test_validate_stops_a_loop_and_the_server_answers_meanwhile(tmp_path):
    in_the_lab(tmp_path, "validate", loop_in_validate)


def huge_print(nbp, server, cells, summary):
    answer, test_output = cells["task1_1_residual_stack"], cells["task1_1_test_output"]
    nbp.replace_cell_text(answer, FLOOD)
    nbp.run_cell(answer)
    started = time.monotonic()
    cells = nbp.run_cell(test_output)
    took = time.monotonic() - started
    nbp.shot("1-huge-print-test-cell", test_output)
    shown = out_text(cells[test_output])
    summary.append(f"huge print: test cell ran {took:.1f} s, showed {len(shown)} characters, "
                   f"ending {shown[-300:]!r}")
    assert "IOPub data rate exceeded" not in shown, shown[-2000:]
    assert f"your code printed more than 1 MB in this cell: {CUT}" in shown, (
        f"the test cell's output was not cut with a line saying so: {shown[-1000:]!r}")
    assert len(shown) < 1_100_000, f"{len(shown)} characters reached the page"
    assert "Task 1.1 (output): every check in this cell passed." in shown, shown[-1000:]

    started = time.monotonic()
    kind, message = nbp.validate()
    took = time.monotonic() - started
    nbp.shot("2-huge-print-validate")
    summary.append(f"huge print, Validate ({took:.1f} s): {kind}: "
                   f"{' '.join(message.split())[:600]}")
    assert "Traceback" not in message and "CellTimeoutError" not in message, message[:3000]
    assert "The following cell failed" in message, message[:3000]
    assert "Task 1.2 is not done yet" in message, message[:3000]  # the stub's, as always
    assert "Task 1.1, output" not in message, (
        f"Validate failed Task 1.1's test, which passes with this answer: {message[:3000]}")
    nbp.close_dialog()


def loop_in_a_test(nbp, server, cells, summary):
    answer, test_output = cells["task1_1_residual_stack"], cells["task1_1_test_output"]
    test_gradient = cells["task1_1_test_gradient"]
    nbp.replace_cell_text(answer, LOOP)
    nbp.run_cell(answer)
    before = nbp.cells()[test_gradient]["prompt"]
    nbp.run_all_below(test_output)
    nbp.wait_running(test_output)
    time.sleep(4)  # the loop is running
    nbp.interrupt()
    quiet = nbp.wait_quiet(30)
    cells = nbp.cells()
    nbp.shot("3-loop-interrupted-test-cell", test_output)
    shown = out_text(cells[test_output], STDERR)
    summary.append(f"loop in a test, one Stop: idle after {quiet} s; the test cell shows "
                   f"{shown!r}; the next test cell's prompt {cells[test_gradient]['prompt']!r}"
                   f" (before: {before!r})")
    assert quiet is not None, "one Stop did not bring the kernel back to idle within 30 s"
    assert shown.lstrip().startswith("Interrupted: Task 1.1's test was stopped"), shown
    assert names_the_loop(shown) and "where your code was running" in shown, shown
    assert not OUR_FRAMES.search(shown), f"the interrupt shows our frames: {shown}"
    # not run: JupyterLab clears a queued cell, and an aborted one keeps no number
    assert cells[test_gradient]["prompt"] in (before, "[ ]:") \
        and not cells[test_gradient]["outputs"], (
        f"the test cell after the stopped one ran (the same loop again): "
        f"{cells[test_gradient]['prompt']} {out_text(cells[test_gradient])[:500]!r}")


def loop_in_validate(nbp, server, cells, summary):
    nbp.replace_cell_text(cells["task1_1_residual_stack"], LOOP)  # Validate saves it
    started = time.monotonic()
    nbp.start_validate()
    dialog = nbp.page.locator(".nbgrader-SuccessDialog, .nbgrader-ErrorDialog")
    times = status_times(server, CELL_BUDGET_S + 10, lambda: dialog.count() > 0)
    nbp.shot("4-loop-validate-running")
    summary.append(f"loop in Validate: /api/status took "
                   f"{[None if t is None else round(t, 2) for t in times]} s")
    assert times, "Validate answered before /api/status could be asked"
    slow = [t for t in times if t is None or t > STATUS_S]
    assert not slow, (f"the server did not answer /api/status within {STATUS_S} s while "
                      f"Validate ran: {times}")
    kind, message = nbp.validate_result()
    took = time.monotonic() - started
    nbp.shot("5-loop-validate-dialog")
    text = " ".join(message.split())
    summary.append(f"loop in Validate: {took:.1f} s; {kind}: {text[:1200]}")
    assert f"did not finish in {CELL_BUDGET_S} s, so Validate stopped it" in text, text[:3000]
    assert names_the_loop(text), text[:3000]
    assert "Not run after it: the test cells of Task 1.1 (2)" in text, text[:3000]
    assert "Traceback" not in text and "CellTimeoutError" not in text, text[:3000]
    # the loop is stopped once: one cell budget, not one per cell that calls it
    assert took < 3 * CELL_BUDGET_S + 60, f"Validate took {took:.0f} s"
    nbp.close_dialog()
    # the server still answers, the kernel of the Lab is usable
    with urllib.request.urlopen(f"{server.url}/api/status?token={server.token}",
                                timeout=STATUS_S) as r:
        assert r.status == 200
