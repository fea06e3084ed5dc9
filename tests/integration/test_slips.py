"""A crash is a wrong answer: every registered slip (`SLIPS` in `autograder/answers/mutants/`)
shows a student, in each visible test cell it fails, exactly the text registered with it.

Each slip's answer is put in its cell of the release notebook (every other answer filled in
from the source, as `residual-pack fingerprints` does with the mutants), the notebook runs
in a fresh local kernel up to the last cell the slip names (`autograder.runner`, the graded
sizes: `NBGRADER_EXECUTION=validate`), and what each test cell's error shows (its
traceback as the notebook holds it) is compared with the registered text.
"""

import re
import shutil
from pathlib import Path

import pytest

from autograder.answers import mutants as registry
from autograder.authoring.madeup import filled_in, mutant_notebook_name, with_answer
from autograder.cells import grade_id, is_autograded_test, is_solution
from autograder.grading.course import EXERCISES, SOURCE, assignments, notebook_paths, read_notebook
from autograder.runner import run_notebook

COURSE = Path(__file__).resolve().parents[2]
SLIPS = [(a, s) for a in assignments(COURSE) for s in registry.load_slips(a)]
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _release(assignment, slip):
    releases = {p.stem: p for p in notebook_paths(COURSE / EXERCISES / assignment)}
    name = mutant_notebook_name(slip, sorted(releases))
    return name, releases[name]


def run_slip(assignment, slip, workdir):
    """Run the release with `slip`'s answer (a Slip or a Mutant) up to the last test cell
    it names. Returns ({grade_id: what its error shows, or "passed"}, {grade_id: execution
    count})."""
    name, path = _release(assignment, slip)
    nb = with_answer(filled_in(read_notebook(path),
                               read_notebook(COURSE / SOURCE / assignment / f"{name}.ipynb")),
                     slip.cell, slip.source)
    named = dict(slip.shows) if isinstance(slip, registry.Slip) else slip.loses
    last = max(i for i, c in enumerate(nb.cells) if grade_id(c) in named)
    nb.cells = nb.cells[: last + 1]
    for item in path.parent.iterdir():  # the release's other files (data, figures)
        if item.is_file() and item.suffix != ".ipynb":
            shutil.copy2(item, workdir / item.name)
    _, stopped = run_notebook(nb, workdir, env={"NBGRADER_EXECUTION": "validate"})
    assert not stopped, stopped
    shown, numbers = {}, {}
    for cell in nb.cells:
        gid = grade_id(cell)
        if gid:
            numbers[gid] = cell.get("execution_count")
        if not is_autograded_test(cell):
            continue
        errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
        shown[gid] = _ANSI.sub("", "\n".join(errors[0]["traceback"])) if errors else "passed"
    return shown, numbers


@pytest.mark.parametrize("assignment, slip", SLIPS, ids=[f"{a}: {s.name}" for a, s in SLIPS])
def test_a_slip_is_registered_against_cells_of_its_release(assignment, slip):
    _, path = _release(assignment, slip)
    cells = {grade_id(c): c for c in read_notebook(path).cells if grade_id(c)}
    assert slip.cell in cells and is_solution(cells[slip.cell])
    assert slip.shows and all(is_autograded_test(cells[g]) for g, _ in slip.shows)
    for _, text in slip.shows:
        for gid in registry.CELL_NUMBER.findall(text):
            assert gid in cells, f"{slip.name}: no cell {gid}"


@pytest.mark.parametrize("assignment, slip", SLIPS, ids=[f"{a}: {s.name}" for a, s in SLIPS])
def test_a_slip_shows_the_student_exactly_its_registered_text(assignment, slip, tmp_path):
    shown, numbers = run_slip(assignment, slip, tmp_path)
    for gid, text in slip.shows:
        assert shown[gid] == registry.shown_text(text, numbers), gid


def test_the_slips_cover_the_known_kinds():
    """A misspelt name, an answer cell that does not compile, lists joined with `+`, list
    arithmetic and a float where a Value belongs are registered, each in some assignment;
    in torch, tensors whose shapes do not fit, math.exp on a tensor and a misspelt torch
    function; and every assignment with code to write has slips."""
    texts = [text for _, s in SLIPS for _, text in s.shows]
    for start in ("NameError in your answer: ", "IndentationError in your answer ",
                  "ValueError in your answer: linear: ", "AttributeError in your answer: "
                  "'float' object", "TypeError in your answer: can't multiply sequence",
                  "RuntimeError in your answer: The size of tensor",
                  "ValueError in your answer: only one element tensors",
                  "AttributeError in your answer: module 'torch'"):
        assert any(t.startswith(start) for t in texts), start
    # 07 asks for written answers only: no code of the student's runs in its tests
    without = [a for a in assignments(COURSE) if not registry.load_slips(a)]
    assert without == ["07_check_understanding"], f"no slips registered for {without}"


# ---------------------------------------------------------------- a wrong answer, named once


def _mutant(assignment, name):
    (found,) = [m for m in registry.load(assignment) if m.name == name]
    return found


def test_forgetting_the_add_is_named_once_in_its_gradient_test(tmp_path):
    """Issue #27, item 3: the plain stack passes back 1e-20, a constant output 0; rounded
    alike, the plain stack's gradient message also said "Or: the output is a constant
    number..." twice."""
    plain = _mutant("01_residual_stack", "plain stack returned as the residual one")
    shown, _ = run_slip("01_residual_stack", plain, tmp_path)
    assert shown["task1_1_test_gradient"] == (
        "CheckFailed: d residual_stack(x, depth=20)/dx at x = 1.0: expected 6.7275 (1.1**20), "
        f"got 1e-20. This looks like a known mistake: {plain.hint}")


def test_a_constant_output_is_named_once_in_each_test(tmp_path):
    """1.1**20 hard-coded passed the visible output test until depth=0, which Task 1.1
    names, became a visible check (issue #41 item 3): now each test names it once."""
    constant = _mutant("01_residual_stack", "hard-coded 1.1**20, no graph")
    shown, _ = run_slip("01_residual_stack", constant, tmp_path)
    assert shown["task1_1_test_output"] == (
        "CheckFailed: residual_stack(Value(1.5), depth=0): expected 1.5 (no layers: the "
        f"input itself), got 6.7275. This looks like a known mistake: {constant.hint}")
    assert shown["task1_1_test_gradient"] == (
        "CheckFailed: d residual_stack(x, depth=20)/dx at x = 1.0: expected 6.7275 (1.1**20), "
        f"got 0. This looks like a known mistake: {constant.hint}")


def test_post_norm_written_where_pre_norm_is_asked_is_named_on_the_visible_tests(tmp_path):
    """Issue #41, item 3: Task 5.1 answered with the post-norm block showed only "expected
    0.58008, got 0.47361", though the post-norm reference is at hand: the values and the
    gradients test each name the mistake."""
    wrong = _mutant("05_gpt_residual_adds", "pre-norm written as post-norm: norm(x + f(x))")
    shown, _ = run_slip("05_gpt_residual_adds", wrong, tmp_path)
    for gid in ("task5_1_test_values", "task5_1_test_gradients"):
        assert shown[gid].startswith("CheckFailed: pre_norm_block: "), shown[gid]
        assert shown[gid].endswith(f"This looks like a known mistake: {wrong.hint}"), shown[gid]
        assert shown[gid].count("This looks like a known mistake") == 1


def test_a_layer_index_fixed_at_0_is_named_on_the_visible_tests(tmp_path):
    """Issue #41, item 3: the hint of Task 5.1 asks for the block's own layer, but every
    visible check ran block 0 of a one-block model, so weights of block 0 hard-coded passed
    them all; the second block of two is now a visible check that names the mistake."""
    wrong = _mutant("05_gpt_residual_adds", "weights of block 0 used in every block")
    shown, _ = run_slip("05_gpt_residual_adds", wrong, tmp_path)
    assert shown["task5_1_test_values"].startswith(
        "CheckFailed: pre_norm_block: output (block 1 of 2, "), shown["task5_1_test_values"]
    assert shown["task5_1_test_values"].endswith(
        f"This looks like a known mistake: {wrong.hint}")


def test_task_2_1_asks_for_a_matrix_that_need_not_be_square(tmp_path):
    """Issue #41, item 3: Task 2.1 says W need not be square, but the visible test had
    only a square W; a layer with one output per input now fails it, named."""
    wrong = _mutant("02_degradation",
                    "one output per input: the rows counted by len(h), a square W assumed")
    shown, _ = run_slip("02_degradation", wrong, tmp_path)
    assert "plain_layer(h, W) with 4 inputs and 6 outputs" in shown["task2_1_test_values"]
    assert shown["task2_1_test_values"].endswith(
        f"This looks like a known mistake: {wrong.hint}"), shown["task2_1_test_values"]


def _folder(tmp_path, name):
    folder = tmp_path / name
    folder.mkdir()
    return folder


def test_a_name_longer_than_the_context_is_a_visible_check_of_task_6_1(tmp_path):
    """The block_size cut that Task 6.1 asks for was checked only in hidden tests: an
    answer that ran every token, or one position short of the context, passed every
    visible one. Now a model with block_size=4 and a name of 6 tokens is a visible check,
    and each of these mistakes is named there (the first stops in model.embed, which says
    which position is outside the context)."""
    uncut = _mutant("06_residual_stream", "positions not cut at block_size")
    shown, _ = run_slip("06_residual_stream", uncut, _folder(tmp_path, "uncut"))
    text = shown["task6_1_test_values"]
    assert text.startswith("IndexError in your answer: model.embed(token, 4): position 4 is "
                           "outside the model's context, which holds positions 0 to 3 "
                           "(block_size=4)\n"), text
    assert "----> 5         x = model.embed(tok, pos)" in text, text
    assert text.count(uncut.hint) == 1, text
    short = _mutant("06_residual_stream", "positions cut one short of block_size (block_size - 1)")
    shown, _ = run_slip("06_residual_stream", short, _folder(tmp_path, "short"))
    text = shown["task6_1_test_values"]
    assert text.startswith("CheckFailed: stream_states for 'emma' (2 layers, pre-norm) (part 0: "
                           "the states), part 0: expected a list of 4 "), text
    assert text.endswith(f"This looks like a known mistake: {short.hint}"), text


def test_a_lens_one_position_short_of_the_context_is_named_on_a_visible_check(tmp_path):
    """Task 6.3 scores every position of the states that has a next token; when the context
    cuts the tokens, that is every position of the states. An average over len(states) - 1
    positions passed the visible tests (none had a cut); now one has."""
    short = _mutant("06_residual_stream",
                    "logit lens over len(states) - 1 positions (one short when the context cuts)")
    shown, _ = run_slip("06_residual_stream", short, tmp_path)
    text = shown["task6_3_test_values"]
    assert text.startswith("CheckFailed: logit_lens for 'emma' on random states (2 layers, "
                           "pre-norm, final_norm=True) (part 0: the losses), part 0, item 0: "
                           "expected 3.4105, got 3.3968"), text
    assert text.endswith(f"This looks like a known mistake: {short.hint}"), text


def test_deletion_losses_that_change_the_net_fail_a_visible_check(tmp_path):
    """Task 4.3 says to leave the net handed in as it was; only a hidden test checked it,
    so losses that were right from a function that took a layer out of net.layers passed
    every visible test. Now the visible test compares the net's own loss before and after
    the call, and names the mistake."""
    for name in ("deletion: right losses, but the net handed in loses its last layer",
                 "deletion: net.layers reassigned for each deletion, left without the last "
                 "layer"):
        wrong = _mutant("04_identity_shortcut", name)
        shown, _ = run_slip("04_identity_shortcut", wrong, _folder(tmp_path, str(len(name))))
        assert shown["task4_3_test_deletion_losses"] == (
            "CheckFailed: the 5-layer net's own loss after deletion_losses: expected 1.3203 "
            "(its loss before the call: the net unchanged), got 1.9435. This looks like a "
            f"known mistake: {wrong.hint}"), name
