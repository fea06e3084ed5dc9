"""Notebook 06 before and after Assignment 5's answers are released, in a real browser, in
a student's install (issue 41, item 2).

The student release of 06 (`residual-pack student-release`'s `build`, with the wheel of
05's answers beside it) is installed as its README says: `python3 -m venv .venv`, then
`.venv/bin/pip install wheels/residual_pack_student-....whl`, so `microgpt`'s `GPT.block`
there is the withheld one. `.venv/bin/jupyter lab` serves the release folder, and headless
Chromium opens assignments/06_residual_stream as a student who has written Tasks 6.1 to 6.3
(the model answers, typed into the answer cells) but whose Assignment 5 is not yet
released:

1. **before pasting anything**: Run All. The cell for the earlier answers says that the
   cells using GPT.block wait for the student's blocks or the released ones; Task 6.1's
   test says `NotReleased` with the assignment it waits for, and never "in your answer"
   (nothing is blamed on the student's own code);
2. **the student's own 05 blocks**: the three blocks (05's model answers, as a student
   pastes their own) typed into that cell; Run All. The cell says the library uses the
   student's blocks; every autograded test cell prints its success line, and every cell
   after it runs (the training, the measurements, the plot, the lens table) without an
   error;
3. **after the release**: the wheel of 05's answers saved in the release folder and
   installed with the README's command, Kernel > Restart Kernel, the cells up to Task
   6.1's test run again: the cell says the released answer is installed and used, not
   the student's, and Task 6.1's test passes.

The server's kernels run the studies at grading's sizes (NBGRADER_EXECUTION in their
environment, `lab_helpers.at_test_sizes`: the same cells and code, shorter loops);
BROWSER_FULL_SIZE=1 runs them at a student's.

Screenshots of each stage, the server log and a summary go to
tests/browser/artifacts/earlier-answers/ (or $ARTIFACTS_DIR).
"""

import time

import lab_helpers as lh
import pytest

ASSIGNMENT = "06_residual_stream"
EARLIER = "05_gpt_residual_adds"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
STDERR = lh.STDERR
# the student's own 05 blocks: the answer cells of 05 whose functions 06's cell takes
OWN_BLOCKS = ("task5_1_pre_norm_block", "task5_2_post_norm_block",
              "task5_3_no_residual_block")
# 06's Run All trains two GPTs (about 3 min on two busy cores at a student's sizes,
# BROWSER_FULL_SIZE=1; shorter at grading's, the test's default): room for a slow machine
RUN_ALL_S = 1200

WAITING = ("The cells that use GPT.block, the transformer block (Tasks 5.1 to 5.3) wait for "
           "your answer or the released one")
USES_YOURS = ("Until 05_gpt_residual_adds's answer is released, the library uses yours for "
              "GPT.block, the transformer block (Tasks 5.1 to 5.3).")
USES_RELEASED = ("The released answer of 05_gpt_residual_adds is installed: the library uses "
                 "it for GPT.block, the transformer block (Tasks 5.1 to 5.3), not yours.")
NOT_RELEASED = "NotReleased: GPT.block (Tasks 5.1 to 5.3) is released after " \
               "05_gpt_residual_adds's due date"

pytestmark = [pytest.mark.browser, pytest.mark.slow]
out_text = lh.out_text


def test_06_before_and_after_05s_answers_are_released(tmp_path, monkeypatch):
    lh.require_browser()
    monkeypatch.setattr(lh, "RUN_ALL_S", RUN_ALL_S)  # run_all and run_cell wait this long
    shots = lh.shots_dir("earlier-answers")
    summary = []
    started = time.monotonic()

    def stage(name):
        summary.append(f"{time.monotonic() - started:7.1f} s  {name}")
        lh.log(summary[-1])

    release, env = lh.student_install(tmp_path, ASSIGNMENT, EARLIER)
    stage("release built and installed by its README's commands")
    path = release / "assignments" / ASSIGNMENT / NOTEBOOK
    student = lh.read_nb(path)
    [own] = [i for i, c in enumerate(student["cells"])
             if c["cell_type"] == "code" and "\nuse_my_answers(" in lh.cell_text(c)]
    graded = lh.graded_cells(student)
    index = {lh.nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(student["cells"])}
    solutions = lh.solution_texts(lh.read_nb(lh.REPO_ROOT / "source" / ASSIGNMENT / NOTEBOOK))
    answers = [(i, g) for i, g, kind in lh.answer_cells(student) if kind == "code"]
    assert [g for _, g in answers] == ["task6_1_stream_states", "task6_2_probes",
                                       "task6_3_logit_lens"]
    try:
        with lh.release_lab(release, lh.at_test_sizes(env), shots) as (server, page):
            stage(f".venv/bin/jupyter lab serving at {server.url}")
            nbp = lh.NotebookPage(page, server, f"assignments/{ASSIGNMENT}/{NOTEBOOK}",
                                  len(student["cells"]), shots)
            with lh.shot_on_failure(nbp):
                journey(nbp, release, env, student, own, graded, index, answers,
                        solutions, stage, summary)
    finally:
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")


def journey(nbp, release, env, student, own, graded, index, answers, solutions, stage,
            summary):
    nbp.open()
    for i, grade_id in answers:
        nbp.replace_cell_text(i, solutions[grade_id])
    stage("notebook open, Tasks 6.1 to 6.3 typed in")

    # ---- 1. Assignment 5 not released, nothing pasted: the cells wait, and say for what
    cells = nbp.run_all()
    stage("Run All, before pasting the blocks")
    nbp.shot("1-waiting-cell", own)
    shown = out_text(cells[own])
    summary.append(f"1. the earlier answers' cell: {shown.strip()}")
    assert WAITING in shown, shown
    first_test = index["task6_1_test_values"]
    nbp.shot("1-waiting-test", first_test)
    test_text = out_text(cells[first_test])
    summary.append(f"1. Task 6.1's test: {test_text.strip()[-600:]}")
    assert NOT_RELEASED in test_text, test_text
    assert "in your answer" not in test_text, test_text
    assert "Known mistake" not in test_text and "known mistake" not in test_text, test_text

    # ---- 2. the student's own blocks pasted: the tests pass, the cells after them run
    nbp.replace_cell_text(own, lh.own_answers_cell(lh.cell_text(student["cells"][own]),
                                                   EARLIER, OWN_BLOCKS))
    cells = nbp.run_all()
    stage("Run All, on the student's own 05 blocks")
    nbp.shot("2-own-blocks-cell", own)
    shown = out_text(cells[own])
    summary.append(f"2. the earlier answers' cell: {shown.strip()}")
    assert USES_YOURS in shown, shown
    for i, grade_id, _, success in graded:
        nbp.shot(f"2-{grade_id}", i)
        text = out_text(cells[i])
        summary.append(f"2. {grade_id}: {text.strip()[-300:]}")
        assert success in text and not out_text(cells[i], STDERR), (grade_id, text)
    after = [i for i, c in enumerate(cells) if c["kind"] == "code" and i > own]
    not_run = [i for i in after if not lh.NUMBERED.match(cells[i]["prompt"])]
    errors = {i: out_text(cells[i], STDERR)[-500:] for i in after
              if "Error" in out_text(cells[i], STDERR) or "Traceback" in out_text(cells[i])}
    summary.append(f"2. code cells after the earlier answers' cell: {len(after)}, not run: "
                   f"{not_run}, with an error: {sorted(errors)}")
    assert not not_run, f"cells {not_run} did not run"
    assert not errors, errors
    last = after[-1]
    nbp.shot("2-last-cell", last)

    # ---- 3. the released answers installed (the README's command), the kernel restarted
    command = lh.install_released(release, env, EARLIER)
    summary.append(f"3. the README's command for the released answers: {command}")
    stage("05's released answers installed")
    lh.restart_kernel(nbp)
    first_test = index["task6_1_test_values"]
    for i in sorted({index["imports"], index["harness"], own, index["task6_1_stream_states"],
                     first_test}):
        cells = nbp.run_cell(i)
    stage("after a restart, the cells up to Task 6.1's test run again")
    nbp.shot("3-released-cell", own)
    shown = out_text(cells[own])
    summary.append(f"3. the earlier answers' cell: {shown.strip()}")
    assert USES_RELEASED in shown, shown
    nbp.shot("3-released-test", first_test)
    text = out_text(cells[first_test])
    summary.append(f"3. Task 6.1's test: {text.strip()[-300:]}")
    success = next(s for i, _, _, s in graded if i == first_test)
    assert success in text and not out_text(cells[first_test], STDERR), text

