"""`residual-pack progress`'s reading of one test cell's output (issue #41 item 2: a test
that stops on an earlier assignment's unreleased answer is waiting, not failing)."""

from autograder.student.progress import FAILING, NOT_STARTED, PASSED, WAITING, _status


def _cell(ename, evalue):
    return {"execution_count": 3, "outputs": [
        {"output_type": "error", "ename": ename, "evalue": evalue, "traceback": []}]}


def test_an_unreleased_earlier_answer_is_waiting_not_failing():
    status, message = _status(_cell(
        "NotReleased", "deepnet.logits (Task 2.2) is released after 02_degradation's due "
        "date: ... hand the library your own answer in this notebook's first cells"))
    assert status == WAITING and "Task 2.2" in message


def test_other_outcomes_are_as_before():
    assert _status(_cell("NotAnswered", "Task 4.1 is not done yet"))[0] == NOT_STARTED
    assert _status(_cell("CheckFailed", "expected 1.1, got 1.0"))[0] == FAILING
    assert _status({"execution_count": 2, "outputs": []})[0] == PASSED


def test_a_waiting_test_keeps_the_whole_message_with_what_to_do():
    """The message of NotReleased (autograder/authoring/withheld.py's `released`, as a
    student's install raises it for 02's answer) ends with the student's choices; a
    300-character cut lost the last of them."""
    text = ("deepnet.logits (Task 2.2) is released after 02_degradation's due date: your "
            "instructor then hands out the wheel residual_pack_solved_02_degradation, to "
            "install as your README says (its section 'The earlier answers'). Until then, "
            "hand the library your own answer in this notebook's first cells "
            "(use_my_answers), or wait: the cells that use it cannot run without one.")
    assert len(text) > 300
    status, message = _status(_cell("NotReleased", text))
    assert status == WAITING and message.endswith("cannot run without one.")


def test_an_assignment_asked_for_that_the_folder_does_not_hold_is_named(tmp_path, capsys):
    """`progress -a NAME` with a typo (or in another folder): one line naming what was asked
    for and what the folder holds, not "no assignment notebooks" for a folder that has them."""
    import nbformat

    from autograder.student import __main__ as student_main
    from autograder.student.progress import not_found

    for name in ("01_residual_stack", "02_degradation"):
        (tmp_path / name).mkdir()
        nbformat.write(nbformat.v4.new_notebook(), str(tmp_path / name / f"{name}.ipynb"))
    assert not_found(tmp_path, ["01_residual_stack"]) is None
    assert not_found(tmp_path, None) is None
    said = not_found(tmp_path, ["01_residual_stak", "02_degradation"])
    assert said == (f"no assignment 01_residual_stak under {tmp_path} (it has "
                    "01_residual_stack, 02_degradation)")
    assert student_main.main(["progress", str(tmp_path), "-a", "01_residual_stak"]) == 2
    one = not_found(tmp_path, ["01_residual_stak"])
    assert capsys.readouterr().err == f"residual-pack: {one}\n"


def test_progress_from_the_wrong_folder_or_with_a_name_for_the_folder_says_what_to_do(
        tmp_path, capsys, monkeypatch):
    """A student tried both: `progress` in their home folder (no assignments/ there), and
    `progress 01_residual_stack` without `-a`. Each said only "... is not a folder"."""
    from autograder.student import __main__ as student_main

    monkeypatch.chdir(tmp_path)
    assert student_main.main(["progress"]) == 2
    said = capsys.readouterr().err
    assert said.startswith(f"residual-pack: no folder assignments in {tmp_path}: run "
                           "residual-pack progress in your release folder (the one that holds "
                           "README.md and assignments/)"), said
    assert student_main.main(["progress", "01_residual_stack"]) == 2
    assert capsys.readouterr().err == (
        "residual-pack: 01_residual_stack is not a folder here; for one assignment: "
        "residual-pack progress -a 01_residual_stack\n")
    assert student_main.main(["progress", "no/such/folder"]) == 2
    assert capsys.readouterr().err == "residual-pack: no/such/folder is not a folder\n"
