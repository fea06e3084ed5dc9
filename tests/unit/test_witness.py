"""The witness design's pieces, each on its own: a test cell split for the two kernels
(testsource), the checks' three modes (witness), the comparisons (compare), the verdict
(judge), the guards on model answers (policy) and the report's escaping (report)."""

import math
import textwrap

import pytest

from autograder.grading import judge
from autograder.grading.report import plain
from autograder.grading.submissions import student_id
from autograder.grading.testsource import GradedCellError, prepare
from autograder.kernel import compare, policy, witness
from autograder.kernel.checks import (
    CheckFailed,
    check_gradient,
    check_numbers,
    check_range,
    check_same,
    check_value,
    check_values,
    expected,
)
from microgpt import Value

CELL = textwrap.dedent('''\
    """Task 1.1: a docstring."""
    from autograder.answers import reference
    from autograder.kernel.checks import check_value, task
    from microgpt import Value

    with task("Task 1.1"):
        # a visible check
        check_value(f(Value(1.0)), 2.0, what="f(1)", expected_text="two")
        ### BEGIN HIDDEN TESTS
        check_value(f(Value(3.0)), reference.double(3.0), rtol=1e-3, what="f(3)")
        ### END HIDDEN TESTS
    print("Task 1.1: every check in this cell passed.")
    ''')


# ---------------------------------------------------------------- testsource


def test_the_witness_version_keeps_no_expected_value_tolerance_or_reference():
    split = prepare(CELL)
    assert "2.0" not in split.witness and "reference" not in split.witness
    assert "rtol" not in split.witness and "two" not in split.witness
    assert "check_value(f(Value(3.0)), None, what='f(3)')" in split.witness
    assert "# a visible check" not in split.witness  # comments go
    assert "print(" not in split.witness and "print(" not in split.reference
    assert "reference.double(3.0)" in split.reference  # the reference keeps it all


def test_both_versions_have_their_statements_on_the_same_lines():
    split = prepare(CELL)
    witness_lines = split.witness.splitlines()
    reference_lines = split.reference.splitlines()
    assert len(witness_lines) == len(reference_lines)
    hidden = [reference_lines[n - 1] for n in sorted(split.hidden)]
    assert hidden == ["    check_value(f(Value(3.0)), reference.double(3.0), rtol=0.001, "
                      "what='f(3)')"]


def test_a_cell_that_would_hand_the_reference_to_the_student_is_refused():
    cell = ("from autograder.answers import reference\n"
            "check_value(g(reference.plain_layer), 1.0, what='x')\n")
    with pytest.raises(GradedCellError, match=r"would need autograder\.answers"):
        prepare(cell)
    with pytest.raises(GradedCellError, match=r"\*args"):
        prepare("check_value(*args)\n")


# ---------------------------------------------------------------- witness modes


def _in_mode(mode, run):
    records = witness.begin(mode, __file__)
    try:
        run()
    finally:
        witness.end()
    return records


def test_a_witness_records_what_it_saw_and_never_computes_the_expected_value():
    def never():
        raise AssertionError("the expected value was computed in a witness kernel")

    records = _in_mode(witness.WITNESS, lambda: check_value(Value(3.0), expected(never),
                                                            what="x"))
    assert records == [{"line": records[0]["line"], "kind": "number",
                        "observed": {"number": 3.0, "is_value": True, "repr": records[0][
                            "observed"]["repr"]}}]
    assert records[0]["line"] > 0  # the line of this file the check was called from


def test_a_witness_stops_on_an_answer_that_cannot_be_right():
    with pytest.raises(CheckFailed, match="got None"):
        _in_mode(witness.WITNESS, lambda: check_value(None, 1.0, what="x"))


def test_the_reference_records_the_expected_value_and_fails_a_wrong_solution():
    records = _in_mode(witness.REFERENCE, lambda: check_value(2.0, expected(lambda: 2.0),
                                                              what="x", rtol=1e-3))
    assert records[0]["expected"] == {"number": 2.0}
    assert records[0]["params"]["rtol"] == 1e-3
    with pytest.raises(CheckFailed, match="the reference solution fails this check"):
        _in_mode(witness.REFERENCE, lambda: check_value(2.5, 2.0, what="x"))


def test_the_check_mode_compares_at_once():
    check_values([1.0, Value(2.0)], [1.0, 2.0], what="v")
    with pytest.raises(CheckFailed, match=r"^v\[1\]: expected 2, got 3$"):
        check_values([1.0, 3.0], [1.0, 2.0], what="v")
    check_range(0.1, None, 0.25, what="gate")
    with pytest.raises(CheckFailed, match="expected below 0.25"):
        check_range(0.3, None, 0.25, what="gate")
    check_same(["W", "b"], ["W", "b"], what="keys")
    with pytest.raises(CheckFailed, match="keys"):
        check_same(["W"], ["W", "b"], what="keys")
    check_numbers([[1.0, 2.0], [3.0]], [[1.0, 2.0], [3.0]], what="n", labels=("row", "col"))
    with pytest.raises(CheckFailed, match=r"^n, row 1, col 0: expected 3, got 4$"):
        check_numbers([[1.0, 2.0], [4.0]], [[1.0, 2.0], [3.0]], what="n",
                      labels=("row", "col"))


# ---------------------------------------------------------------- compare and judge


def test_numbers_that_json_cannot_hold_travel_as_words():
    for x in (math.inf, -math.inf):
        assert compare.decode(compare.encode(x)) == x
    assert math.isnan(compare.decode(compare.encode(math.nan)))
    assert compare.compare("number", {"number": "nan"}, {"number": 1.0}, {"what": "x"})
    assert compare.compare("number", {"number": "inf"}, {"number": "inf"}, {"what": "x"}) is None


def test_malformed_observations_fail_the_check_and_never_crash():
    for bad in (None, [], {"number": [1]}, {"numbers": {"x": 1}}, "text"):
        message = compare.compare("number", bad, {"number": 1.0}, {"what": "x"})
        assert message, bad
    assert compare.compare("nonsense", {}, {}, {"what": "x"})


def _check_f(value, expected_value):
    check_value(value, expected_value, what="f(1)")  # one line, as in a test cell


def _one_cell(student_value):
    """(student's report, reference records) for one cell that checks f(1) == 2."""
    expected_records = _in_mode(witness.REFERENCE, lambda: _check_f(2.0, 2.0))
    observed = _in_mode(witness.WITNESS, lambda: _check_f(student_value, None))
    return {"nonce": "n", "records": observed}, expected_records


def test_the_judge_passes_only_what_it_compared():
    report, want = _one_cell(2.0)
    assert judge.verdict(report, "ok", None, want, set(), "n").passed
    report, want = _one_cell(3.0)
    found = judge.verdict(report, "ok", None, want, set(), "n")
    assert not found.passed and found.message == "f(1): expected 2, got 3"


def test_the_kernel_cannot_make_a_cell_pass_by_saying_so():
    report, want = _one_cell(2.0)
    assert not judge.verdict(None, "ok", None, want, set(), "n").passed
    assert not judge.verdict(report, "ok", None, want, set(), "other nonce").passed
    assert not judge.verdict({"nonce": "n", "records": []}, "ok", None, want, set(),
                             "n").passed
    twice = {"nonce": "n", "records": report["records"] * 2}
    assert not judge.verdict(twice, "ok", None, want, set(), "n").passed
    moved = {"nonce": "n", "records": [dict(report["records"][0], line=999)]}
    assert "out of order" in judge.verdict(moved, "ok", None, want, set(), "n").message
    # the kernel's error fails the cell even when every observation agrees
    assert not judge.verdict(report, "error", ("ValueError", "x"), want, set(), "n").passed


def test_a_hidden_failure_shows_neither_inputs_nor_expected_value():
    report, want = _one_cell(3.0)
    found = judge.verdict(report, "ok", None, want, {want[0]["line"]}, "n")
    assert found.hidden and "f(1)" not in found.message and "2" not in found.message.split(
        "check")[0]


def test_a_student_gradient_is_compared_with_the_reference_not_with_itself():
    def cell(f):
        check_gradient(f, 3.0, what="d")

    want = _in_mode(witness.REFERENCE, lambda: cell(lambda x: x * x))
    # a "gradient" that agrees with central differences of the student's own wrong function
    seen = _in_mode(witness.WITNESS, lambda: cell(lambda x: x * 4))
    found = judge.verdict({"nonce": "n", "records": seen}, "ok", None, want, set(), "n")
    assert not found.passed and "expected 6" in found.message


# ---------------------------------------------------------------- guards and words


def test_a_switched_off_answer_still_serves_the_library(monkeypatch):
    from microgpt import GPT

    original = GPT.__dict__["block"]
    try:
        assert "microgpt.model.GPT.block" in policy.switch_off("05_gpt_residual_adds")
        model = GPT(seed=0)
        model.loss([0, 1, 2, 0])  # the library's own call of block: allowed
        namespace = {"model": model}
        with pytest.raises(policy.AnswerSwitchedOff, match="Tasks 5.1 to 5.3"):
            exec(compile("model.block(model.embed(1, 0), 0, model.new_cache()[0])",
                         "/tmp/ipykernel_1/123.py", "exec"), namespace)
    finally:
        GPT.block = original


def test_a_switched_off_answer_handed_to_the_gpt_checks_stays_switched_off():
    from autograder.kernel import gptchecks
    from microgpt import GPT

    original = GPT.__dict__["block"]
    try:
        policy.switch_off("05_gpt_residual_adds")
        # handed to BlockGPT or run_block, microgpt's block is still called from code the
        # guard takes for a notebook's: it launders nothing
        laundered = gptchecks.BlockGPT(GPT.block, seed=0)
        with pytest.raises(policy.AnswerSwitchedOff):
            laundered.block(laundered.embed(1, 0), 0, laundered.new_cache()[0])
        with pytest.raises(policy.AnswerSwitchedOff):
            gptchecks.run_block(GPT.block, GPT(seed=0), [GPT(seed=0).embed(1, 0)], 0)
        # the checks' own reference still runs (a scratch cell's check in a graded kernel)
        gptchecks.check_block_values(
            lambda model, x, layer, cache: _pre_norm_block(model, x, layer, cache), "pre")
        # and the model handed to a block has no block of its own
        with pytest.raises(CheckFailed, match="model.block"):
            gptchecks.check_block_values(
                lambda model, x, layer, cache: model.block(x, layer, cache), "pre")
    finally:
        GPT.block = original


def _pre_norm_block(model, x, layer, cache):
    from microgpt import rmsnorm

    a = model.attention(rmsnorm(x), layer, cache)
    x = [xi + ai for xi, ai in zip(x, a)]
    m = model.mlp(rmsnorm(x), layer)
    return [xi + mi for xi, mi in zip(x, m)]


def test_report_text_is_one_line_of_printable_text():
    assert plain("a\nb\rc\x1b[31m") == "a\\x0ab\\x0dc\\x1b[31m"
    assert plain("x\ud800y") == "x\\ud800y"
    assert plain("right\u202eleft") == "right\\u202eleft"
    assert plain("é ok") == "é ok"


def test_every_handed_in_name_gets_an_id():
    assert student_id("ann.lee") == ("ann.lee", "")
    made, note = student_id("caf\udce9")
    assert made.startswith("student-") and "not plain text" in note
    assert student_id("a\nb")[0].startswith("student-")
    assert student_id("../x")[0].startswith("student-")


# ---------------------------------------------------------------- the pack's own test cells


def _graded_code_cells():
    import nbformat

    from autograder.cells import nbgrader_meta
    from autograder.grading.course import SOURCE, assignments, notebook_paths

    course = __import__("pathlib").Path(__file__).resolve().parents[2]
    for name in assignments(course):
        for path in notebook_paths(course / SOURCE / name):
            for cell in nbformat.read(str(path), as_version=4).cells:
                meta = nbgrader_meta(cell)
                if meta.get("grade") and cell.cell_type == "code":
                    yield name, meta["grade_id"], cell.source


def _check_lines(source):
    import ast

    from autograder.grading.testsource import JUDGE_ARGUMENTS

    lines = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", "")
            if name in JUDGE_ARGUMENTS or name.startswith("check_"):
                lines.add(node.lineno)
    return lines


def test_every_graded_cell_splits_and_checks_something_the_student_has_not_seen():
    """Each graded test cell of every assignment splits into its two versions, keeps the
    reference answers out of the witness version, and has checks in its hidden tests: a
    kernel that forges the observations of the visible checks (their expected values are
    in the released notebook) still fails the cell."""
    cells = list(_graded_code_cells())
    assert len(cells) >= 30
    for name, grade_id, source in cells:
        split = prepare(source)
        assert "autograder.answers.reference" not in split.witness, (name, grade_id)
        assert _check_lines(split.reference) & set(split.hidden), (name, grade_id)


def test_a_gradient_check_says_when_the_output_was_cut_from_its_input():
    """A result rebuilt from .data fails with words about the cut graph, in the student's
    kernel and in the grader's verdict alike; a connected graph with a zero slope gets none."""
    with pytest.raises(CheckFailed, match="no longer depends on it.*rebuilt from numbers"):
        check_gradient(lambda x: Value(x.data * 2), 1.0, what="d f/dx")
    with pytest.raises(CheckFailed) as raised:
        check_gradient(lambda x: x * 0 + Value(x.data), 1.0, what="d g/dx")
    assert "rebuilt" not in str(raised.value)
    records = witness.begin(witness.WITNESS, "<test>")
    try:
        check_gradient(lambda x: Value(x.data * 2), 1.0, what="d f/dx")
    finally:
        witness.end()
    message = compare.compare("gradient", records[0]["observed"], {"number": 2.0},
                              {"what": "d f/dx", "rtol": 1e-5, "atol": 1e-8})
    assert "no longer depends on it" in message
