"""End to end, in a real browser: a student's first exercise in JupyterLab.

`scripts/lab` (the README command) serves a copy of the course on 127.0.0.1; headless
Chromium (Debian's, driven by Playwright) opens exercises/01_residual_stack/01_residual_stack.ipynb
and does what a student does:

1. opens it: headings and equations render, the kernel starts without asking which one;
2. runs all cells on the stub: every graded test cell fails with its readable message
   ("Task 1.1 is not done yet ..."); a graded cell that Run All did not reach, because an
   earlier cell failed first, is run on its own, as a student would;
3. makes a known mistake: types a registered wrong answer (autograder/answers/mutants/) into the
   first TODO cell and runs Task 1.1's test cells. The failing one shows the check's
   message, "This looks like a known mistake: " and that mistake's hint, and no traceback
   of the grader's code; the others pass;
4. saves, and runs the progress command (`residual-pack progress`) from a console on the
   notebook: its table lists every graded cell with the status this notebook earns
   (passed, failing with the check's message, not started) and the points;
5. types the solution (taken from source/'s BEGIN/END SOLUTION regions) into each TODO
   cell through the editor;
6. runs all cells again: every graded cell prints its success line, the plot renders, each
   cell that calls draw() shows its graph as an SVG whose boxes carry their labels (data
   and grad; in the two stacks' drawing, the input's grad is the one the cell printed and
   its 3 shortcuts, and only they, are coloured), no cell writes a warning or an error, no
   cell runs long without showing progress;
7. saves, checks the file holds exactly what was typed, and presses nbgrader's Validate
   button: the dialog says "Success! Your notebook passes all the tests."

The browser never leaves 127.0.0.1 and the server neither lists extensions from PyPI nor
fetches news. Screenshots of each stage, the server log and a summary go to
tests/browser/artifacts/ (or $ARTIFACTS_DIR).
"""

import re
import time
from datetime import datetime

import lab_helpers as lh
import pytest

from autograder.answers import mutants
from autograder.kernel.diagnosis import LEAD
from autograder.student.progress import FAILING, NOT_STARTED, PASSED
from microgpt.draw import SHORTCUT_COLOUR

ASSIGNMENT = "01_residual_stack"
NOTEBOOK = "01_residual_stack.ipynb"
STDERR = "application/vnd.jupyter.stderr"
PNG = "image/png"
# a cell that runs longer than this must show progress (a tqdm bar or a widget)
LONG_CELL_S = 10.0
PROGRESS = re.compile(r"\d+%\|| \d+/\d+ \[|it/s\]|s/it\]")
# the known mistake typed in step 3: its numbers are right, its graph is cut from the input
# (the issue's example), so one of Task 1.1's test cells passes and the other names it
MISTAKE = "right numbers on floats, graph cut from the input"
# what the grader's own traceback would show: none of it may reach the student
GRADER_TRACE = re.compile(r"Traceback|File \"|autograder/|site-packages|__exit__")
# a drawn box's label (its tooltip): "name: data 1 | grad 0.001" or "data 0.1 | grad 0"
NODE_LABEL = re.compile(r"^(?:(?P<name>[^:]+): )?data (?P<data>\S+) \| grad (?P<grad>\S+)$")

pytestmark = pytest.mark.browser



def error_line(outputs):
    """The last line of the error a cell printed (its exception and message), or None."""
    errors = [o["text"] for o in outputs if o["mime"] == STDERR]
    if not errors:
        return None
    lines = [line for line in errors[-1].splitlines() if line.strip()]
    return lines[-1] if lines else ""


def state(cell):
    """What a code cell shows: its error's last line, "not run", or "no error"."""
    if not lh.NUMBERED.match(cell["prompt"]):
        return "not run"
    return error_line(cell["outputs"]) or "no error"


def stdout_text(outputs):
    return "".join(o["text"] for o in outputs if o["mime"] == "application/vnd.jupyter.stdout")


def cell_seconds(cell):
    """How long a cell ran, from the timing JupyterLab records in its metadata."""
    ex = cell.get("metadata", {}).get("execution", {})
    start, end = ex.get("iopub.execute_input"), ex.get("shell.execute_reply")
    if not start or not end:
        return None

    def parse(s):
        return datetime.fromisoformat(s.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def test_first_exercise_in_jupyterlab(tmp_path):
    lh.require_browser()
    started = time.monotonic()
    stages = {}
    summary = []

    def stage(name):
        stages[name] = time.monotonic() - started
        lh.log(f"{stages[name]:6.1f} s  {name}")

    shots = lh.artifacts_dir()
    env = lh.jupyter_env(tmp_path / "jupyter")
    # JupyterLab writes each cell's run times into the saved notebook: the progress check
    lh.write_user_settings(env, "@jupyterlab/notebook-extension:tracker", {"recordTiming": True})
    course, how = lh.prepare_course(tmp_path / "course", ASSIGNMENT, env)
    nb_path = course / "exercises" / ASSIGNMENT / NOTEBOOK
    student = lh.read_nb(nb_path)
    solutions = lh.solution_texts(lh.read_nb(lh.REPO_ROOT / "source" / ASSIGNMENT / NOTEBOOK))
    answers = lh.answer_cells(student)
    graded = lh.graded_cells(student)
    assert answers, f"{nb_path} has no answer cells"
    assert graded, f"{nb_path} has no graded test cells"
    unsolved = [g for _, g, _ in answers if g not in solutions]
    assert not unsolved, f"source/ has no solution for the answer cells {unsolved}"
    summary.append(f"exercise: exercises/{ASSIGNMENT}/{NOTEBOOK} ({how})")
    stage("course copy ready")

    try:
        with lh.lab_page(course, env, shots) as (server, page):
            stage(f"JupyterLab serving at {server.url}")
            outside = []
            page.on("request", lambda r: None if r.url.startswith(
                (server.url, "data:", "blob:")) else outside.append(r.url))
            nbp = lh.NotebookPage(page, server, f"{ASSIGNMENT}/{NOTEBOOK}",
                                  len(student["cells"]), shots)
            try:
                run_student_session(nbp, nb_path, student, answers, graded, solutions,
                                    summary, stage)
            except BaseException:
                try:
                    nbp.shot("failure")
                except Exception:  # the page itself may be gone
                    pass
                raise
            # offline: the page asked nothing of any host but the server
            assert not outside, f"the browser left 127.0.0.1: {outside[:10]}"
            student_lab_has_no_instructor_tools(page, server, summary)
            # offline: no PyPI extension listing, no news feed, no update check
            log = server.log_text()
            assert "Extension Manager is 'readonly'" in log, "the extension manager can reach PyPI"
            assert server.api("lab/api/news") == {"news": []}
            assert server.api("lab/api/update") == {"notification": None}
    finally:
        stage("server stopped")
        summary.append("stages (seconds since the start): " + ", ".join(
            f"{name}: {t:.1f}" for name, t in stages.items()))
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")


def student_lab_has_no_instructor_tools(page, server, summary):
    """scripts/lab is the student's Lab: nbgrader's menu offers the assignment list, not
    Formgrader or the course list; no Create Assignment sidebar; no formgrader pages."""
    import urllib.error

    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    menu = page.locator("#jp-mainmenu-nbgrader")
    menu.wait_for()
    items = [t.strip() for t in menu.locator(".lm-Menu-itemLabel").all_inner_texts()]
    page.keyboard.press("Escape")
    summary.append("Nbgrader menu: " + ", ".join(i for i in items if i))
    assert "Assignment List" in items, items
    assert not [i for i in items if "Formgrader" in i or "Course List" in i], items
    assert page.locator("#nbgrader-create_assignemnt").count() == 0  # nbgrader's spelling
    try:
        server.api("formgrader")
        served = True
    except urllib.error.HTTPError as exc:
        served = exc.code != 404
    assert not served, "the formgrader's pages are served in the student's Lab"


def run_student_session(nbp, nb_path, student, answers, graded, solutions, summary, stage):
    # ---- 1. open: the kernel starts, headings and equations render
    nbp.open()
    stage("notebook open, kernel idle")
    nbp.shot("01-opened")
    cells = nbp.cells()
    markdown = [c["markdown"] for c in cells if c["kind"] == "markdown"]
    assert all(m["rendered"] and m["text"].strip() for m in markdown), (
        "a markdown cell is not rendered")
    assert any(h.startswith("H1 ") for m in markdown for h in m["headings"]), "no title heading"
    assert sum(m["math"] for m in markdown) > 0, "no equation was typeset (MathJax)"
    assert not any(m["mathErrors"] for m in markdown), "MathJax reported an error"
    raw_tex = [m["rawTex"] for m in markdown if m["rawTex"]]
    assert not raw_tex, f"TeX shown as text instead of typeset: {raw_tex}"
    summary.append("headings: " + "; ".join(h for m in markdown for h in m["headings"]))

    # ---- 2. run all on the stub: every graded cell fails with its readable message
    cells = nbp.run_all()
    stage("run all (stub) done")
    graded_index = {g[0] for g in graded}
    summary.append("stub, after Run All alone: " + "; ".join(
        f"{g}: {state(cells[i])}" for i, g, _, _ in graded))
    failed_first = [f"cell {i}: {error_line(c['outputs'])}" for i, c in enumerate(cells)
                    if c["kind"] == "code" and error_line(c["outputs"]) and i not in graded_index]
    if failed_first:
        summary.append("stub, other cells that failed under Run All: " + "; ".join(failed_first))
    # where Run All stopped: the first cell that failed
    first_error = next((i for i, c in enumerate(cells) if c["kind"] == "code"
                        and error_line(c["outputs"]) is not None), None)
    nbp.shot("02-before-run-all", first_error)
    # Run All stops at the first error: the kernel drops the requests queued behind it. Run
    # what it skipped, top to bottom, then each graded cell again, now that every cell
    # above it has run, as a student who reads the first error would.
    skipped = [i for i, c in enumerate(cells)
               if c["kind"] == "code" and not lh.NUMBERED.match(c["prompt"])]
    for index in skipped:
        cells = nbp.run_cell(index)
    for index, *_ in graded:
        cells = nbp.run_cell(index)
    stage("stub: every graded cell run")
    for index, grade_id, task, success in graded:
        outputs = cells[index]["outputs"]
        line = error_line(outputs)
        nbp.shot(f"02-before-{grade_id}", index)
        assert line is not None, (
            f"graded cell {grade_id} did not fail on the stub: it printed "
            f"{stdout_text(outputs)!r}")
        assert f"{task} is not done yet" in line, (
            f"graded cell {grade_id} failed on the stub without the readable message "
            f"'{task} is not done yet ...'; its last line: {line!r}")
        assert success not in stdout_text(outputs), (
            f"graded cell {grade_id} printed its success line on the stub")
        summary.append(f"stub, {grade_id}: {line}")

    # ---- Validate on the stub: it must say which graded cells fail, not "Success"
    kind, message = nbp.validate()
    stage("validate (stub) done")
    nbp.shot("03-before-validate")
    summary.append(f"Validate on the stub: {kind}: {' '.join(message.split())[:400]}")
    assert kind == "error" and "The following cell failed" in message, (
        f"Validate did not report the stub's failures ({kind}): {message[:2000]}")
    # each failed cell is named by its first line (a docstring without its quotes), wrapped
    flat_message = " ".join(message.split())
    unreported = [g for i, g, _, _ in graded
                  if " ".join(lh.cell_text(student["cells"][i]).split("\n")[0].strip('"')
                              .split()) not in flat_message]
    assert not unreported, f"Validate on the stub did not list the graded cells {unreported}"
    # an unwritten answer is shown as its cell, whose first line names the task
    written = [c for c in student["cells"] if c["cell_type"] == "markdown"
               and c["metadata"].get("nbgrader", {}).get("solution")
               and c["metadata"].get("nbgrader", {}).get("grade")]
    assert written, "the notebook has no written answer"
    for cell in written:
        lead = lh.cell_text(cell).split("\n")[0]
        assert lead.startswith("**Your answer to Task ") \
            and " ".join(lead.split()) in flat_message, (
            f"Validate did not name the unwritten answer {lead!r}: {message[-2000:]}")
    assert "You did not provide a response" in message
    nbp.close_dialog()

    # ---- 3. a known mistake, diagnosed in its test cell
    made_mistake(nbp, nb_path, student, answers, graded, summary, stage)

    # ---- 5. type the solution into every TODO cell
    for index, grade_id, _ in answers:
        nbp.replace_cell_text(index, solutions[grade_id])
        nbp.shot(f"04-typed-{grade_id}", index)
    stage("solutions typed")

    # ---- 6. run all again: every graded cell passes; nothing stray in any output
    cells = nbp.run_all()
    stage("run all (solution) done")
    for index, grade_id, _, success in graded:
        outputs = cells[index]["outputs"]
        nbp.shot(f"05-after-{grade_id}", index)
        line = error_line(outputs)
        assert line is None, f"graded cell {grade_id} fails with the solution: {line}"
        assert success in stdout_text(outputs), (
            f"graded cell {grade_id} did not print {success!r}; it printed "
            f"{stdout_text(outputs)!r}")
        summary.append(f"solution, {grade_id}: {stdout_text(outputs).strip()}")
    not_run = [i for i, c in enumerate(cells) if c["kind"] == "code"
               and not lh.NUMBERED.match(c["prompt"])]
    assert not not_run, f"Run All left cells {not_run} unrun with the solution in place"
    stray = {i: [o["text"][:300] for o in c["outputs"] if o["mime"] == STDERR]
             for i, c in enumerate(cells) if c["kind"] == "code"}
    stray = {i: texts for i, texts in stray.items()
             if texts and not all(PROGRESS.search(t) for t in texts)}
    assert not stray, f"cells wrote warnings or errors with the solution in place: {stray}"
    images = [(i, img) for i, c in enumerate(cells) for o in c["outputs"]
              if o["mime"] == PNG for img in o["images"]]
    assert images and all(img["loaded"] for _, img in images), f"plots did not render: {images}"
    for n, (i, _) in enumerate(images):
        nbp.shot(f"06-after-plot-{n + 1}", i)
    summary.append(f"plots: {len(images)}, alt text: {[img['alt'] for _, img in images]}")
    check_drawn_graphs(nbp, student, cells, summary)

    # ---- 7. save, check the file, press Validate
    nbp.save()
    want = {g: solutions[g] for _, g, _ in answers}

    def saved(nb):
        got = {lh.nbgrader_meta(nb["cells"][i]).get("grade_id"): lh.cell_text(nb["cells"][i])
               for i, _, _ in answers}
        ran = all(nb["cells"][i].get("execution_count") for i, *_ in graded)
        return got == want and ran

    on_disk, ok = lh.wait_for_file(nb_path, saved)
    if not ok:
        got = {g: lh.cell_text(on_disk["cells"][i]) for i, g, _ in answers} if on_disk else None
        raise AssertionError(f"the saved notebook does not hold the typed solution:\n"
                             f"wanted {want!r}\ngot {got!r}")
    stage("saved")
    timings = {i: cell_seconds(c) for i, c in enumerate(on_disk["cells"])
               if c["cell_type"] == "code"}
    known = {i: s for i, s in timings.items() if s is not None}
    if known:
        slowest = max(known, key=known.get)
        summary.append(f"solution run: slowest cell {slowest} "
                       f"({lh.nbgrader_meta(on_disk['cells'][slowest]).get('grade_id')}) "
                       f"{known[slowest]:.2f} s; all code cells {sum(known.values()):.2f} s")
    silent_long = [i for i, s in known.items() if s > LONG_CELL_S and not any(
        PROGRESS.search(o["text"]) or "widget" in o["mime"] for o in cells[i]["outputs"])]
    assert not silent_long, (
        f"cells ran longer than {LONG_CELL_S} s without showing progress: "
        f"{ {i: round(known[i], 1) for i in silent_long} }")

    kind, message = nbp.validate()
    stage("validate done")
    nbp.shot("07-after-validate")
    summary.append(f"Validate: {kind}: {message.strip()[:300]}")
    assert kind == "success" and "Success! Your notebook passes all the tests." in message, (
        f"Validate did not report success ({kind}): {message[:2000]}")
    nbp.close_dialog()
    # offline: JupyterLab never asked to fetch its news (that toast means a settings leak)
    assert nbp.page.get_by_text("official Jupyter news").count() == 0, (
        "JupyterLab asks whether to fetch its news: scripts/lab's settings override is missing")


def made_mistake(nbp, nb_path, student, answers, graded, summary, stage):
    """Steps 3 and 4: a registered wrong answer in the first TODO cell, diagnosed by the
    test cell it fails; then the progress command's table for the notebook as saved."""
    registered = {m.name: m for m in mutants.load(ASSIGNMENT)}
    assert MISTAKE in registered, (
        f"autograder/answers/mutants/{ASSIGNMENT}.py registers no wrong answer named {MISTAKE!r}")
    mistake = registered[MISTAKE]
    index = next(i for i, g, _ in answers if g == mistake.cell)
    task = next(t for _, g, t, _ in graded if g in mistake.loses)
    ours = [(i, g, success) for i, g, t, success in graded if t == task]
    assert {g for _, g, _ in ours} > set(mistake.loses), (
        f"{MISTAKE!r} should fail some of {task}'s test cells and pass others")

    # the student types it and runs the cell, then the task's test cells
    nbp.replace_cell_text(index, mistake.source)
    nbp.run_cell(index)
    for i, grade_id, success in ours:
        cells = nbp.run_cell(i)
        outputs = cells[i]["outputs"]
        shown = "\n".join(o["text"] for o in outputs if o["mime"] == STDERR)
        if grade_id not in mistake.loses:
            assert not shown and success in stdout_text(outputs), (
                f"{grade_id} should pass with {MISTAKE!r}; it shows "
                f"{shown or stdout_text(outputs)!r}")
            continue
        nbp.shot("03b-diagnosed-failure", i)
        assert shown, f"{grade_id} did not fail with {MISTAKE!r}"
        assert LEAD + mistake.hint in " ".join(shown.split()), (
            f"{grade_id} failed with {MISTAKE!r} without naming it ({LEAD!r} and its hint "
            f"{mistake.hint!r}); it shows {shown!r}")
        assert not GRADER_TRACE.search(shown), (
            f"{grade_id} shows the grader's own traceback: {shown!r}")
        assert shown.lstrip().startswith("CheckFailed: "), (
            f"{grade_id} does not open with the check's message: {shown!r}")
        summary.append(f"known mistake ({MISTAKE}), {grade_id}: {shown.strip()}")
    stage("known mistake diagnosed")

    # saved as it stands (the mistake, the other TODOs still stubs): the progress command
    nbp.save()
    _, ok = lh.wait_for_file(nb_path, lambda nb: lh.cell_text(nb["cells"][index]).strip()
                             == mistake.source.strip())
    assert ok, "the notebook with the typed mistake was not saved"
    # from the notebook's folder: the course copy holds no source/, so the command is told
    # where the course is (in a clone of the pack it finds it by itself)
    texts = nbp.run_in_console(f"!residual-pack --course ../.. progress -a {ASSIGNMENT}",
                               "visible tests only")
    stage("progress table shown")
    nbp.shot("03c-progress-table")
    table = "\n".join(texts)
    summary.append("progress: " + " | ".join(line.strip() for line in table.splitlines()
                                              if line.strip()))
    want = {}
    for i, grade_id, task_id, _ in graded:
        points = lh.nbgrader_meta(student["cells"][i])["points"]
        if grade_id in mistake.loses:
            status = FAILING
        elif task_id == task:
            status = PASSED
        else:
            status = NOT_STARTED  # the other TODOs are still the stubs
        want[grade_id] = (points, status)
        row = re.search(rf"^\s*{re.escape(grade_id)}\s+{points:g}\s+{status}(?P<tail>.*)$",
                        table, re.M)
        assert row, (f"the progress table has no row '{grade_id} {points:g} {status}':\n"
                     f"{table}")
        if status == FAILING:
            assert row["tail"].strip().startswith("CheckFailed:"), (
                f"the failing row of {grade_id} does not give the check's message: {row[0]!r}")
    got = sum(p for p, st in want.values() if st == PASSED)
    top = sum(p for p, _ in want.values())
    assert f"{ASSIGNMENT}: {got:g} of {top:g} points on the visible tests" in table, table
    counts = {st: sum(s == st for _, s in want.values()) for st in (PASSED, FAILING,
                                                                  NOT_STARTED)}
    assert f"{counts[PASSED]} passed, {counts[FAILING]} failing, " \
           f"{counts[NOT_STARTED]} not started, 0 not run" in table, table
    nbp.close_console()


def check_drawn_graphs(nbp, student, cells, summary):
    """Every cell that calls draw() shows its graph as an SVG: drawn (the image loaded),
    one labelled box per Value (data and grad), the named ones by name. In the cell that
    draws both stacks, the input's grad in each drawing is the one the cell printed, and
    the residual stack's 3 shortcuts are coloured and the plain stack has none."""
    drawing = [i for i, c in enumerate(student["cells"])
               if c["cell_type"] == "code" and "draw(" in lh.cell_text(c)]
    assert drawing, f"no cell of {NOTEBOOK} calls draw()"
    for i in drawing:
        grade_id = lh.nbgrader_meta(student["cells"][i]).get("grade_id", f"cell {i}")
        svgs = nbp.svg_outputs(i)
        assert svgs, f"{grade_id} calls draw() but shows no SVG: {cells[i]['outputs']}"
        for svg in svgs:
            assert svg["shown"], f"{grade_id}: an SVG did not render: {svg}"
            labels = [m for m in map(NODE_LABEL.match, svg["titles"]) if m]
            assert len(labels) >= 2 and any(m["name"] for m in labels), (
                f"{grade_id}: the drawing has no labelled boxes: {svg['titles']}")
            assert all(f"data {m['data']}" in svg["texts"] and f"grad {m['grad']}"
                       in svg["texts"] for m in labels), (
                f"{grade_id}: a box does not show its data and grad: {svg['texts']}")
        nbp.shot(f"06-drawn-graph-{grade_id}", i)
        summary.append(f"drawn, {grade_id}: " + "; ".join(
            ", ".join(t for t in svg["titles"] if NODE_LABEL.match(t) and ":" in t)
            for svg in svgs))
    # the two stacks, three layers each: the cell prints d out/dx before each drawing
    index = next(i for i, c in enumerate(student["cells"])
                 if lh.nbgrader_meta(c).get("grade_id") == "task1_1_graph")
    printed = re.findall(r"(\w+) stack, 3 layers: d out/dx = (\S+)",
                         stdout_text(cells[index]["outputs"]))
    svgs = nbp.svg_outputs(index)
    assert [name for name, _ in printed] == ["plain", "residual"] and len(svgs) == 2, (
        f"task1_1_graph should print and draw both stacks: {printed}, {len(svgs)} drawings")
    for (name, grad), svg in zip(printed, svgs):
        assert f"x: data 1 | grad {grad}" in svg["titles"], (
            f"the {name} stack's drawing does not show the printed input gradient {grad}: "
            f"{svg['titles']}")
    # both stacks have the same layers; the residual one adds each layer's input around
    # it: 3 shortcuts in colour, and none in the plain stack
    plain, residual = (svg["paths"].count(SHORTCUT_COLOUR) for svg in svgs)
    assert (plain, residual) == (0, 3), (
        f"the plain stack's drawing has {plain} shortcut arrows and the residual stack's "
        f"{residual}: expected 0 and 3")
