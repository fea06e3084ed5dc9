"""Notebook 04 before and after Assignment 2's answers are released, in a real browser, in
a student's install (issue 41, item 2).

04 trains every net with the forward pass of Task 2.2 (`deepnet.logits`), which a student's
install holds back until Assignment 2's due date. The student release of 04 (with the
wheel of 02's answers beside it) is installed as its README says, into a fresh virtual
environment; `.venv/bin/jupyter lab` serves it and headless Chromium opens
assignments/04_identity_shortcut:

1. **untouched, nothing released**: `residual-pack progress` (the README's command) lists
   no test as failing, and Task 4.1's training test as waiting or not started; in the
   browser, Run All runs every cell; the cell for the earlier answers says that the cells
   using deepnet.logits wait, Task 4.1's tests say what is not done or what is not
   released (that message alone: none of the student's lines, nor the library's `raise`),
   never "in your answer" or a known mistake, and no cell shows a raw traceback;
2. **Tasks 4.1 to 4.3 written, still nothing released** (the model answers, typed into the
   answer cells): Run All; 4.1's values and gradients pass, and every test that needs the
   forward pass says `NotReleased` with the assignment it waits for, blaming nothing on
   the student; saved, `residual-pack progress` says the same (passed, or waiting for an
   earlier answer; nothing failing);
3. **the student's own 02 forward pass** (02's model answer of Task 2.2, as a student pastes
   their own) typed into that cell: Run All; the cell says the library uses it, every
   autograded test cell prints its success line and every cell after it runs (the depth
   study, the probe, the watched runs, the deletion probe) without an error;
4. **after the release**: the wheel of 02's answers saved in the release folder and
   installed with the README's command as printed, Kernel > Restart Kernel, the cells up
   to Task 4.1's tests run again: the cell says the released answer is used, not the
   student's, and Task 4.1's three tests pass.

The server's kernels run the studies at grading's sizes (NBGRADER_EXECUTION in their
environment, `lab_helpers.at_test_sizes`: the same cells and code, shorter loops);
BROWSER_FULL_SIZE=1 runs them at a student's. `residual-pack progress` sets it itself.

Screenshots of each stage, the server log, the progress tables and a summary go to
tests/browser/artifacts/earlier-answers-04/ (or $ARTIFACTS_DIR).
"""

import re
import subprocess
import time

import lab_helpers as lh
import pytest

ASSIGNMENT = "04_identity_shortcut"
EARLIER = "02_degradation"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
STDERR = lh.STDERR
OWN_LOGITS = ("task2_2_mlp_logits",)  # the answer cell of 02 whose function 04's cell takes
# 04's Run All trains the depth study, 18 nets of 600 steps (about 8 min on two busy
# cores) at a student's sizes (BROWSER_FULL_SIZE=1); at grading's, the test's default
# (`lab_helpers.at_test_sizes`), fewer and shorter
RUN_ALL_S = 2400
PROGRESS_S = 900

NEEDED = "deepnet.logits, the deep net's forward pass (Task 2.2)"
WAITING = f"The cells that use {NEEDED} wait for your answer or the released one"
USES_YOURS = f"Until {EARLIER}'s answer is released, the library uses yours for {NEEDED}."
USES_RELEASED = (f"The released answer of {EARLIER} is installed: the library uses it for "
                 f"{NEEDED}, not yours.")
NOT_RELEASED = f"NotReleased: deepnet.logits (Task 2.2) is released after {EARLIER}'s due date"
NOT_DONE = "Task 4.1 is not done yet"
# words that put the fault on the student's own code, and what a raw traceback shows
BLAME = ("in your answer", "Known mistake", "known mistake",
         "in the test, from what your code gave it")
RAW = ("Traceback (most recent call last)", "site-packages", "/.venv/")
# a frame under a NotReleased: the student's lines or the library's `raise`, where nothing
# of theirs is wrong (the message says what waits and what to do)
FRAMES = ("where the error was raised", "Cell In[")
# `residual-pack progress`'s words (autograder/student/progress.py)
PASSED, FAILING, NOT_STARTED, WAITS = ("passed", "failing", "not started",
                                       "waits for an earlier answer")
ROW = re.compile(r"^  (\S+)\s+[\d.]+\s+(passed|failing|not started|not run|"
                 r"waits for an earlier answer|needs PyTorch|"
                 r"to write, graded by hand|written, graded by hand)(?:  (.*))?$")

pytestmark = [pytest.mark.browser, pytest.mark.slow]
out_text = lh.out_text


def progress(release, env, shots, name):
    """{grade_id: (status, message)} of 04 by the README's `residual-pack progress` command
    (the README's example assignment replaced by 04), run in the release folder as a
    student runs it; its output is kept as shots/<name>.txt."""
    readme = (release / "README.md").read_text(encoding="utf-8")
    [line] = [c for c in lh.readme_commands(readme) if "residual-pack progress -a " in c]
    command = re.sub(r"-a \S+", f"-a {ASSIGNMENT}", line)
    done = subprocess.run(["bash", "-c", command], cwd=release, env=env, capture_output=True,
                          text=True, timeout=PROGRESS_S)
    (shots / f"{name}.txt").write_text(f"$ {command}\n{done.stdout}\n{done.stderr}",
                                       encoding="utf-8")
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-3000:])
    rows = {}
    for text in done.stdout.splitlines():
        found = ROW.match(text)
        if found:
            rows[found.group(1)] = (found.group(2), found.group(3) or "")
    assert rows, done.stdout
    return rows


def blamed(text):
    """The words of `text` that blame the student or show a raw traceback."""
    return [w for w in BLAME + RAW if w in text]


def says_it_waits(text):
    """Whether `text` says that the forward pass is not released yet, and only that."""
    return NOT_RELEASED in text and not blamed(text) and not any(w in text for w in FRAMES)


def test_04_before_and_after_02s_answers_are_released(tmp_path, monkeypatch):
    lh.require_browser()
    monkeypatch.setattr(lh, "RUN_ALL_S", RUN_ALL_S)  # run_all and run_cell wait this long
    shots = lh.shots_dir("earlier-answers-04")
    summary = []
    started = time.monotonic()

    def stage(name):
        summary.append(f"{time.monotonic() - started:7.1f} s  {name}")
        lh.log(summary[-1])

    try:
        release, env = lh.student_install(tmp_path, ASSIGNMENT, EARLIER)
        stage("release built and installed by its README's commands")

        # ---- 1. untouched, before anything is released: progress blames nothing
        rows = progress(release, env, shots, "1-progress-untouched")
        summary.append(f"1. progress, untouched: {rows}")
        assert not [g for g, (status, m) in rows.items() if status == FAILING or blamed(m)], \
            rows
        assert rows["task4_1_test_training"][0] in (WAITS, NOT_STARTED), rows
        stage("progress on the untouched notebook")

        with lh.release_lab(release, lh.at_test_sizes(env), shots) as (server, page):
            stage(f".venv/bin/jupyter lab serving at {server.url}")
            path = release / "assignments" / ASSIGNMENT / NOTEBOOK
            student = lh.read_nb(path)
            nbp = lh.NotebookPage(page, server, f"assignments/{ASSIGNMENT}/{NOTEBOOK}",
                                  len(student["cells"]), shots)
            with lh.shot_on_failure(nbp):
                journey(nbp, release, env, shots, path, student, stage, summary)
    finally:
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")


def journey(nbp, release, env, shots, path, student, stage, summary):
    cells_of = student["cells"]
    [own] = [i for i, c in enumerate(cells_of)
             if c["cell_type"] == "code" and "\nuse_my_answers(" in lh.cell_text(c)]
    graded = lh.graded_cells(student)
    index = {lh.nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(cells_of)}
    success = {g: s for _, g, _, s in graded}
    task41 = [g for _, g, task_id, _ in graded if task_id == "Task 4.1"]
    assert task41 == ["task4_1_test_values", "task4_1_test_gradients",
                      "task4_1_test_training"], task41
    solutions = lh.solution_texts(lh.read_nb(lh.REPO_ROOT / "source" / ASSIGNMENT / NOTEBOOK))
    answers = [(i, g) for i, g, kind in lh.answer_cells(student) if kind == "code"]
    assert [g for _, g in answers] == ["task4_1_residual_layer", "task4_2_first_last_ratio",
                                       "task4_3_deletion_losses"]
    code = [i for i, c in enumerate(cells_of) if c["cell_type"] == "code"]

    def all_ran_calmly(cells, label):
        """Every code cell ran (Run All went to the end) and none shows a raw traceback."""
        not_run = [i for i in code if not lh.NUMBERED.match(cells[i]["prompt"])]
        raw = {i: out_text(cells[i])[-600:] for i in code
               if any(w in out_text(cells[i]) for w in RAW)}
        summary.append(f"{label} code cells: {len(code)}, not run: {not_run}, "
                       f"with a raw traceback: {sorted(raw)}")
        assert not not_run, f"cells {not_run} did not run"
        assert not raw, raw

    nbp.open()
    stage("notebook open")

    # ---- 1. untouched: the cell says what waits; Task 4.1's tests blame nothing
    cells = nbp.run_all()
    stage("Run All, untouched")
    nbp.shot("1-waiting-cell", own)
    shown = out_text(cells[own])
    summary.append(f"1. the earlier answers' cell: {shown.strip()}")
    assert WAITING in shown and not out_text(cells[own], STDERR), shown
    for grade_id in task41:
        i = index[grade_id]
        nbp.shot(f"1-{grade_id}", i)
        text = out_text(cells[i])
        summary.append(f"1. {grade_id}: {text.strip()[-600:]}")
        assert not blamed(text), (grade_id, blamed(text), text)
        if grade_id == "task4_1_test_training":
            assert says_it_waits(text), (grade_id, text)
        else:
            assert NOT_DONE in text, (grade_id, text)
    all_ran_calmly(cells, "1.")

    # ---- 2. Tasks 4.1 to 4.3 written, nothing released: waiting, not failing
    for i, grade_id in answers:
        nbp.replace_cell_text(i, solutions[grade_id])
    cells = nbp.run_all()
    stage("Run All, Tasks 4.1 to 4.3 typed in, no forward pass yet")
    assert WAITING in out_text(cells[own]), out_text(cells[own])
    for i, grade_id, _, line in graded:
        text = out_text(cells[i])
        summary.append(f"2. {grade_id}: {text.strip()[-600:]}")
        nbp.shot(f"2-{grade_id}", i)
        assert not blamed(text), (grade_id, blamed(text), text)
        if grade_id in ("task4_1_test_values", "task4_1_test_gradients"):
            assert line in text and not out_text(cells[i], STDERR), (grade_id, text)
        else:  # each of these runs the forward pass
            assert says_it_waits(text), (grade_id, text)
    nbp.shot("2-experiment", index["experiment"])
    experiment = out_text(cells[index["experiment"]])
    summary.append(f"2. the depth study: {experiment.strip()[-600:]}")
    assert says_it_waits(experiment), experiment
    all_ran_calmly(cells, "2.")
    nbp.save()
    _, saved = lh.wait_for_file(path, lambda nb: all(
        solutions[g].splitlines()[-1].strip() in lh.cell_text(nb["cells"][i])
        for i, g in answers))
    assert saved, "the notebook with Tasks 4.1 to 4.3 was not saved"
    rows = progress(release, env, shots, "2-progress-answered")
    summary.append(f"2. progress, Tasks 4.1 to 4.3 written: {rows}")
    stage("progress on the saved notebook")
    assert not [g for g, (status, m) in rows.items() if status == FAILING or blamed(m)], rows
    for grade_id in success:
        want = PASSED if grade_id in ("task4_1_test_values", "task4_1_test_gradients") \
            else WAITS
        assert rows[grade_id][0] == want, (grade_id, rows[grade_id])

    # ---- 3. the student's own forward pass: the tests pass, every cell after it runs
    nbp.replace_cell_text(own, lh.own_answers_cell(lh.cell_text(cells_of[own]), EARLIER,
                                                   OWN_LOGITS))
    cells = nbp.run_all()
    stage("Run All, on the student's own 02 forward pass")
    nbp.shot("3-own-logits-cell", own)
    shown = out_text(cells[own])
    summary.append(f"3. the earlier answers' cell: {shown.strip()}")
    assert USES_YOURS in shown, shown
    for i, grade_id, _, line in graded:
        nbp.shot(f"3-{grade_id}", i)
        text = out_text(cells[i])
        summary.append(f"3. {grade_id}: {text.strip()[-300:]}")
        assert line in text and not out_text(cells[i], STDERR), (grade_id, text)
    after = [i for i in code if i > own]
    errors = {i: out_text(cells[i], STDERR)[-500:] for i in after
              if "Error" in out_text(cells[i], STDERR) or "Traceback" in out_text(cells[i])}
    summary.append(f"3. code cells after the earlier answers' cell: {len(after)}, "
                   f"with an error: {sorted(errors)}")
    assert not errors, errors
    all_ran_calmly(cells, "3.")
    for name in ("experiment", "experiment_plot", "deletion_probe"):
        nbp.shot(f"3-{name}", index[name])

    # ---- 4. the released answers installed (the README's command), the kernel restarted
    command = lh.install_released(release, env, EARLIER)
    summary.append(f"4. the README's command for the released answers: {command}")
    stage("02's released answers installed")
    lh.restart_kernel(nbp)
    for i in sorted({index["imports"], index["plain_layer"], own,
                     index["task4_1_residual_layer"], *(index[g] for g in task41)}):
        cells = nbp.run_cell(i)
    stage("after a restart, the cells up to Task 4.1's tests run again")
    nbp.shot("4-released-cell", own)
    shown = out_text(cells[own])
    summary.append(f"4. the earlier answers' cell: {shown.strip()}")
    assert USES_RELEASED in shown, shown
    for grade_id in task41:
        i = index[grade_id]
        nbp.shot(f"4-{grade_id}", i)
        text = out_text(cells[i])
        summary.append(f"4. {grade_id}: {text.strip()[-300:]}")
        assert success[grade_id] in text and not out_text(cells[i], STDERR), (grade_id, text)
