"""Diagnosis by fingerprint (`autograder/kernel/diagnosis.py`,
`autograder/authoring/fingerprints.py`).

Fast: the fingerprint itself, the message a failing check gives in a student's kernel and
in the grading process, the note under an error a task's test raised, the log the
generator reads, the committed table's freshness, and that neither the hints nor the
table give away a hidden test or an answer.

Slow, over the whole registry: every registered wrong answer of every assignment, graded
in the assignment's one graded class of the run (`tests/gradedclass.py`, the self-check's:
its grading processes log each failing check's fingerprint, as a student's kernel does for
`residual-pack fingerprints`), read as its visible tests end in a student's kernel; each
one a visible test catches gets a message naming its mistake in every visible test cell it
fails, the others are caught only by hidden tests (listed), no message shows anything of
the hidden tests, and the table the graded class makes is the committed one. For 01 the
same is shown the way `residual-pack fingerprints` makes the table: every wrong answer run
on the visible tests in a student's kernel of its own.
"""

import ast
import importlib.util
import json
import re
from pathlib import Path

import pytest
from gradedclass import graded_outcomes

from autograder.answers import mutants as mutant_registry
from autograder.authoring import fingerprints as generator
from autograder.grading import judge
from autograder.grading.course import EXERCISES, SOURCE, assignments, notebook_paths, read_notebook
from autograder.grading.feedback import hidden_test_lines
from autograder.grading.intake import TORCH_ASSIGNMENTS
from autograder.grading.plan import kernel_side
from autograder.grading.records import WITNESS, recording
from autograder.kernel import compare, diagnosis, witness
from autograder.kernel.checks import CheckFailed, check_value, task

COURSE = Path(__file__).resolve().parents[2]
WITH_MUTANTS = [a for a in assignments(COURSE) if mutant_registry.load(a)]
RUNNABLE = [a for a in WITH_MUTANTS
            if a not in TORCH_ASSIGNMENTS or importlib.util.find_spec("torch")]
JOBS = 2


@pytest.fixture
def known(monkeypatch):
    """A table of our own: {fingerprint: [hint]} the lookups see."""
    table = {}
    monkeypatch.setattr(diagnosis, "_KNOWN", table)
    return table


# ---------------------------------------------------------------- the fingerprint


def test_a_fingerprint_keeps_four_digits_and_drops_addresses_and_reprs():
    f = diagnosis.fingerprint
    assert f("number", "w", {"number": 6.72749994932561}) == \
        f("number", "w", {"number": 6.727499949}) == f("number", "w", {"number": 6.7271})
    assert f("number", "w", {"number": 6.7271}) != f("number", "w", {"number": 6.7281})
    assert f("number", "w", {"number": 1.0, "is_value": True, "repr": "Value(data=1.0)"}) == \
        f("number", "w", {"number": 1.0, "is_value": True, "repr": "Value(data=1.0, grad=3)"})
    assert f("number", "w", {"number": 1.0, "is_value": True}) != \
        f("number", "w", {"number": 1.0, "is_value": False})
    problem = "w: expected a number, got a function: <function f at 0x7f00deadbeef>"
    assert f("number", "w", {"problem": problem}) == \
        f("number", "w", {"problem": problem.replace("0x7f00deadbeef", "0x55aa")})
    assert f("number", "w", {"number": 1.0}) != f("number", "v", {"number": 1.0})
    assert f("number", "w", {"number": 1.0}) != f("numbers", "w", {"number": 1.0})
    assert f("numbers", "w", {"numbers": [[1.00000001, "nan"], [-0.0]]}) == \
        f("numbers", "w", {"numbers": [[1.0, "nan"], [0.0]]})
    assert re.fullmatch(r"[0-9a-f]{16}", f("number", "w", {"number": 2.0}))


# ---------------------------------------------------------------- the message


def test_a_failing_check_names_a_known_mistake(known):
    params = {"what": "stack(Value(1.0))"}
    wrong = {"number": 0.5, "is_value": True}
    assert diagnosis.LEAD not in compare.compare("number", wrong, {"number": 2.0}, params)
    known[diagnosis.fingerprint("number", params["what"], wrong)] = ["the layer is skipped."]
    message = compare.compare("number", wrong, {"number": 2.0}, params)
    assert message == ("stack(Value(1.0)): expected 2, got 0.5. "
                       "This looks like a known mistake: the layer is skipped.")
    assert compare.compare("number", {"number": 2.0}, {"number": 2.0}, params) is None
    # the same observation under another check's name is not that mistake
    assert diagnosis.LEAD not in compare.compare("number", wrong, {"number": 2.0},
                                                 {"what": "stack(Value(2.0))"})


def test_several_known_mistakes_are_all_named(known):
    wrong = {"number": 0.0}
    known[diagnosis.fingerprint("number", "w", wrong)] = ["one.", "two.", "three."]
    message = compare.compare("number", wrong, {"number": 1.0}, {"what": "w"})
    assert message.endswith("This looks like a known mistake: one. Or: two. Or: three.")


@pytest.fixture
def fails(monkeypatch):
    """The `fails` index the lookups see: {hint: names of the checks its mistake fails}."""
    table = {}
    monkeypatch.setattr(diagnosis, "_FAILS", table)
    return table


def test_a_mistake_that_would_fail_a_check_passed_before_is_not_named(known, fails):
    """Two known mistakes observe the same gradients; only one gets the values right. A
    notebook that passed the values check is told of that one alone (in order: the kernel's
    `passed` set follows each check's latest run)."""
    values, grads = {"what": "layer(h), values"}, {"what": "layer(h), gradients"}
    wrong = {"number": 0.0}
    known[diagnosis.fingerprint("number", grads["what"], wrong)] = ["no shortcut.", "floats."]
    fails["no shortcut."] = frozenset({diagnosis.check_name(values["what"]),
                                       diagnosis.check_name(grads["what"])})
    fails["floats."] = frozenset({diagnosis.check_name(grads["what"])})
    passed = set()
    # nothing passed yet: both named
    assert compare.compare("number", wrong, {"number": 1.0}, grads, passed).endswith(
        "known mistake: no shortcut. Or: floats.")
    assert compare.compare("number", {"number": 2.0}, {"number": 2.0}, values, passed) is None
    assert compare.compare("number", wrong, {"number": 1.0}, grads, passed).endswith(
        "known mistake: floats.")
    # the values check fails again (the student changed the layer): both named again
    assert compare.compare("number", {"number": 3.0}, {"number": 2.0}, values, passed)
    assert compare.compare("number", wrong, {"number": 1.0}, grads, passed).endswith(
        "known mistake: no shortcut. Or: floats.")
    # without a set (a hidden check in the judge), nothing is kept or filtered
    assert compare.compare("number", {"number": 2.0}, {"number": 2.0}, values) is None


def test_the_kernels_checks_keep_what_passed(known, fails, monkeypatch):
    from microgpt.engine import Value

    monkeypatch.setattr(witness, "_PASSED", set())
    known[diagnosis.fingerprint("number", "g", {"number": 0.0, "is_value": True})] = [
        "no shortcut.", "floats."]
    fails["no shortcut."] = frozenset({"v", "g"})
    fails["floats."] = frozenset({"g"})
    with task("Task 4.1"):
        check_value(Value(2.0), 2.0, what="v")
    with pytest.raises(CheckFailed) as caught:
        with task("Task 4.1"):
            check_value(Value(0.0), 1.0, what="g")
    assert str(caught.value).endswith("This looks like a known mistake: floats.")


def test_the_table_keeps_what_each_shared_hint_fails():
    """The committed table: 04's shortcut left out and shortcut added as floats share the
    gradient check's fingerprint; only the first fails the values check, so the table
    says so and a notebook that passed it is told of the floats alone."""
    table = generator.read_tables()["04_identity_shortcut"]
    hints = table["hints"]
    plain = next(i for i, h in enumerate(hints) if "the output is the plain layer's" in h)
    floats = next(i for i, h in enumerate(hints) if "adds floats (.data)" in h)
    assert any(plain in ids and floats in ids for ids in table["known"].values())
    assert set(table["fails"][floats]) < set(table["fails"][plain])


def test_in_a_students_kernel_the_check_raises_with_the_mistake(known):
    what = "residual_stack(Value(1.0), depth=20)"
    known[diagnosis.fingerprint("number", what, {"number": 1e-20, "is_value": True})] = [
        "the plain stack."]
    with pytest.raises(CheckFailed, match="This looks like a known mistake: the plain stack."):
        with task("Task 1.1"):
            from microgpt.engine import Value

            check_value(Value(1e-20), 6.7275, what=what)


def test_a_problem_observation_is_diagnosed_too(known):
    what = "f(1)"
    observed = {"problem": "f(1): expected a number or a Value, got None. Does the "
                           "function end with `return`?"}
    known[diagnosis.fingerprint("number", what, observed)] = ["it prints instead."]
    with pytest.raises(CheckFailed, match="known mistake: it prints instead"):
        check_value(None, 1.0, what=what)
    assert compare.compare("number", observed, {"number": 1.0}, {"what": what}).endswith(
        "it prints instead.")


def test_an_error_raised_in_a_tasks_test_gets_a_note(known):
    error = KeyError("W_gate")
    known[diagnosis.fingerprint(diagnosis.RAISED, "Task 3.3",
                                {diagnosis.RAISED: "KeyError: 'W_gate'"})] = ["the keys."]
    with pytest.raises(KeyError) as caught:
        with task("Task 3.3"):
            raise error
    assert caught.value is error  # the student's own error, with its own traceback
    if hasattr(error, "add_note"):
        assert error.__notes__ == ["This looks like a known mistake: the keys."]
    # an unknown one is left as it was
    with pytest.raises(KeyError) as caught:
        with task("Task 3.3"):
            raise KeyError("W")
    assert not getattr(caught.value, "__notes__", None)


def test_a_checkfailed_raised_outside_a_check_gets_it_in_its_message(known):
    text = "your block called model.block"
    known[diagnosis.fingerprint(diagnosis.RAISED, "Task 5.1",
                                {diagnosis.RAISED: f"CheckFailed: {text}"})] = ["library."]
    with pytest.raises(CheckFailed) as caught:
        with task("Task 5.1"):
            raise CheckFailed(text)
    assert str(caught.value) == f"{text}. This looks like a known mistake: library."
    # a check's own failure is diagnosed once, by the check
    with pytest.raises(CheckFailed) as caught:
        with task("Task 5.1"):
            check_value(1.0, 2.0, what="x")
    assert str(caught.value) == "x: expected 2, got 1"


def test_the_grading_process_reuses_the_words_but_never_for_a_hidden_check(known):
    wrong = {"number": 0.5}
    known[diagnosis.fingerprint("number", "w", wrong)] = ["the layer is skipped."]
    expected = [{"line": 3, "kind": "number", "expected": {"number": 2.0},
                 "params": {"what": "w"}}]
    report = [{"line": 3, "kind": "number", "observed": wrong}]
    shown = judge.verdict(report, "ok", None, expected, frozenset())
    assert not shown.passed and "known mistake: the layer is skipped." in shown.message
    hidden = judge.verdict(report, "ok", None, expected, frozenset({3}))
    assert hidden.hidden and hidden.message == judge.HIDDEN_FAILURE.format(n=1, total=1)


def test_the_judge_keeps_what_passed_over_a_notebooks_cells(known, fails):
    """In the grading process the same filter: the grader's set of passed checks, kept
    over one notebook's test cells, never fed by a hidden check."""
    wrong = {"number": 0.0}
    known[diagnosis.fingerprint("number", "g", wrong)] = ["no shortcut.", "floats."]
    fails["no shortcut."] = frozenset({"v", "g"})
    fails["floats."] = frozenset({"g"})

    def cell(what, observed, hidden=frozenset(), passed=None):
        expected = [{"line": 3, "kind": "number", "expected": {"number": 2.0},
                     "params": {"what": what}}]
        report = [{"line": 3, "kind": "number", "observed": observed}]
        return judge.verdict(report, "ok", None, expected, hidden, passed)

    passed = set()
    assert cell("v", {"number": 2.0}, passed=passed).passed
    assert cell("g", wrong, passed=passed).message.endswith("known mistake: floats.")
    # a hidden check's pass says nothing to the messages
    passed = set()
    assert cell("v", {"number": 2.0}, hidden=frozenset({3}), passed=passed).passed
    assert not passed
    assert cell("g", wrong, passed=passed).message.endswith(
        "known mistake: no shortcut. Or: floats.")


def test_the_generator_reads_each_failing_check_from_a_log(tmp_path, monkeypatch):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(diagnosis.RECORD_VARIABLE, str(log))
    with pytest.raises(CheckFailed) as caught:
        check_value(1.0, 2.0, what="x")
    with pytest.raises(ValueError):
        with task("Task 1.1"):
            raise ValueError("no")
    first, second = [json.loads(line) for line in log.read_text().splitlines()]
    key = diagnosis.fingerprint("number", "x", {"number": 1.0, "is_value": False})
    assert first == {"key": key, "kind": "number", "what": "x",
                     "error": f"CheckFailed: {caught.value}",
                     "fine": diagnosis.fine_key(key, str(caught.value))}
    assert second["error"] == "ValueError: no" and second["kind"] == diagnosis.RAISED
    monkeypatch.delenv(diagnosis.RECORD_VARIABLE)
    with pytest.raises(CheckFailed):
        check_value(1.0, 2.0, what="x")
    assert len(log.read_text().splitlines()) == 2  # nothing is written unless asked


def test_in_a_witness_kernel_nothing_is_diagnosed_or_logged(tmp_path, monkeypatch, known):
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv(diagnosis.RECORD_VARIABLE, str(log))
    with recording(WITNESS, "<cell>") as records:
        check_value(1.0, 2.0, what="x")  # observed only: the grader compares
    assert len(records) == 1 and not log.exists()


# ---------------------------------------------------------------- the registry and table


def test_the_table_is_kernel_side_and_plain_data():
    assert all(kernel_side(m) for m in ("autograder.kernel.diagnosis",
                                        "autograder.kernel.fingerprints"))
    tree = ast.parse(generator.TABLE_FILE.read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom,
                                                            ast.Call, ast.FunctionDef))]
    tables = generator.read_tables()
    for table in tables.values():
        assert set(table) in ({"digest", "hints", "known"}, {"digest", "hints", "known", "fails"})
        for key, ids in table["known"].items():
            assert re.fullmatch(r"[0-9a-f]{16}", key)
            assert ids and all(0 <= i < len(table["hints"]) for i in ids)
        for i, names in table.get("fails", {}).items():
            assert 0 <= i < len(table["hints"]) and names
            assert all(isinstance(name, str) for name in names)


@pytest.mark.parametrize("assignment", WITH_MUTANTS)
def test_every_registered_mutant_has_a_hint(assignment):
    for m in mutant_registry.load(assignment):
        assert m.hint.strip(), f"{assignment}: mutant {m.name!r} has no hint"
        assert len(m.hint) <= 300, f"{assignment}: the hint of {m.name!r} is long"


def test_the_committed_fingerprints_are_up_to_date():
    """The table was made from the mutants, releases and answers committed now (else:
    `residual-pack fingerprints`); `residual-pack check-drift` says the same."""
    assert generator.stale(COURSE) == []


def test_a_changed_mutant_makes_the_table_stale(monkeypatch):
    assignment = WITH_MUTANTS[0]
    registered = mutant_registry.load(assignment)
    changed = [registered[0].__class__(**{**registered[0].__dict__, "hint": "other words"})]
    monkeypatch.setattr(mutant_registry, "load",
                        lambda a: changed + registered[1:] if a == assignment else [])
    assert generator.stale(COURSE, [assignment]) == [
        f"autograder/kernel/fingerprints.py is stale for {assignment} (its mutants, release or "
        f"answers changed)"]


def _hidden_texts(assignment):
    """What a hidden test of `assignment` holds that its release does not show: its
    string literals (the checks' names of their inputs, the texts of expected values) and
    its decimal numbers."""
    release = "\n".join(c.source for p in notebook_paths(COURSE / EXERCISES / assignment)
                        for c in read_notebook(p).cells)
    found = set()
    for path in notebook_paths(COURSE / SOURCE / assignment):
        for cell in read_notebook(path).cells:
            for line in hidden_test_lines(cell.source):
                found |= {s for s in re.findall(r'"([^"\n]{8,})"', line)
                          if "{" not in s}
                found |= {s for s in re.findall(r"(?<![\w.])-?\d+\.\d+", line)}
    return {s for s in found if s not in release}


@pytest.mark.parametrize("assignment", WITH_MUTANTS)
def test_no_hint_and_no_fingerprint_shows_a_hidden_test_or_a_wrong_answer(assignment):
    hidden = _hidden_texts(assignment)
    table = generator.TABLE_FILE.read_text(encoding="utf-8")
    for m in mutant_registry.load(assignment):
        leaks = [s for s in hidden if s in m.hint]
        assert not leaks, f"the hint of {m.name!r} holds hidden-test text {leaks}"
        long_lines = [line.strip() for line in m.source.splitlines()
                      if len(line.strip()) >= 24 and line.strip() not in m.hint]
        assert not [line for line in long_lines if line in table], m.name
    words = [s for s in hidden if not re.fullmatch(r"-?\d+\.\d+", s)]
    assert not [s for s in words if s in table]


# ---------------------------------------------------------------- slow: the whole registry


def registry_problems(assignment, solution, outcomes):
    """What is wrong with one assignment's run of its registry on the visible tests, and
    the mutants caught only by hidden tests."""
    problems = [f"the solution fails {gid}: {message[:300]}"
                for gid, (status, message) in solution.cells.items() if status != "passed"]
    hidden = [s for s in _hidden_texts(assignment) if not re.fullmatch(r"-?\d+\.\d+", s)]
    hidden_only = []
    for o in outcomes:
        if o.verdict in (generator.HIDDEN_ONLY, generator.TRAINING_ONLY):
            hidden_only.append(o.mutant.name)
            continue
        if o.verdict != generator.DIAGNOSED:
            problems.append(f"{o.mutant.name}: not named ({o.unnamed or 'no hint'})")
            continue
        for gid, message in o.failing.items():
            # a check's message, or the notes under an error the answer raised
            shown = o.run.shown.get(gid, "") or message
            named = diagnosis.LEAD in shown and o.mutant.hint.strip() in shown
            # a training run's check is never named, by design: it names nothing at all
            if gid in o.training and diagnosis.LEAD in shown:
                problems.append(f"{o.mutant.name}: {gid} names a mistake from a training "
                                f"run's numbers: {shown[-400:]!r}")
            elif gid not in o.training and not named:
                problems.append(f"{o.mutant.name}: {gid} says {shown[-400:]!r}")
            leaks = [s for s in hidden if s in message or s in shown]
            if leaks:
                problems.append(f"{o.mutant.name}: {gid}'s message shows hidden {leaks}")
    if generator.table_of(COURSE, assignment, outcomes) != generator.read_tables().get(
            assignment):
        problems.append("the committed table is not the one this run makes")
    return problems, hidden_only


# where the table's own way of running the wrong answers is still run whole: in a student's
# kernel of its own each (`fingerprints.observe`), the cheapest assignment; every assignment
# is run the graded way below, in its graded class of the run
IN_OWN_KERNELS = ["01_residual_stack"]


@pytest.mark.slow
@pytest.mark.parametrize("assignment", IN_OWN_KERNELS)
def test_every_mutant_a_visible_test_catches_is_named(assignment):
    solution, outcomes = generator.observe(COURSE, assignment, jobs=JOBS)
    problems, hidden_only = registry_problems(assignment, solution, outcomes)
    assert not problems, "\n".join(problems)
    named = len(outcomes) - len(hidden_only)
    print(f"\n{assignment}: {named} named on the visible tests, {len(hidden_only)} caught "
          f"only by hidden tests: {hidden_only}")


@pytest.mark.slow
@pytest.mark.parametrize("assignment", RUNNABLE)
def test_every_mutant_a_visible_test_catches_is_named_when_graded(assignment,
                                                                   tmp_path_factory):
    """The registry's check on the assignment's graded class: the grader judges each check
    with the kernel's own `compare` and `diagnose`, so the same wrong answers are named in
    the same cells of the graded notebook (what the feedback page shows), and their
    fingerprints make the committed table. A wrong answer that runs into a model answer
    grading runs without (`needs_a_model_answer`) runs, instead, the way the table is made:
    in a student's kernel of its own (`fingerprints.observe`), where it meets the model
    answer or a check that names calling it."""
    solution, outcomes, apart = graded_outcomes(assignment, tmp_path_factory)
    if apart:
        _, in_kernels = generator.observe(COURSE, assignment, jobs=JOBS, only=apart)
        outcomes += [o for o in in_kernels if o.mutant.name in apart]
    registered = {m.name: m for m in mutant_registry.load(assignment)}
    assert sorted(o.mutant.name for o in outcomes) == sorted(registered)
    problems, hidden_only = registry_problems(assignment, solution, outcomes)
    assert not problems, "\n".join(problems)
    named = len(outcomes) - len(hidden_only)
    print(f"\n{assignment} (graded): {named} named on the visible tests, {len(hidden_only)} "
          f"caught only by hidden tests: {hidden_only}; {len(apart)} of them run in kernels "
          f"of their own (they run into a model answer grading runs without): {apart}")


def _fake_runs(monkeypatch, solution_fails=(), unnamed=(), tables=None):
    """`regenerate` over made-up observations: {assignment: table} written or compared."""
    written = []

    def observe(course, name, jobs=1, say=None):
        cells = {"t": ("failed" if name in solution_fails else "passed", "")}
        verdict = generator.UNNAMED if name in unnamed else generator.DIAGNOSED
        return generator.Run(cells=cells), [type("O", (), {"verdict": verdict})()]

    monkeypatch.setattr(generator, "observe", observe)
    monkeypatch.setattr(generator, "summary", lambda name, s, o: [f"{name}: summary"])
    monkeypatch.setattr(generator, "table_of", lambda course, name, o: {"of": name})
    monkeypatch.setattr(generator, "write_table", lambda course, t: written.append(t))
    monkeypatch.setattr(generator, "read_tables", lambda: tables or {})
    return written


def test_regenerate_writes_the_tables_and_names_what_fails(monkeypatch):
    written = _fake_runs(monkeypatch, solution_fails={"b"}, unnamed={"c"})
    said = []
    assert generator.regenerate(COURSE, ["a", "b", "c"], say=said.append) == ["b", "c"]
    assert written == [{"a": {"of": "a"}, "b": {"of": "b"}, "c": {"of": "c"}}]
    assert said[:3] == ["a: summary", "b: summary", "c: summary"]


def test_regenerate_without_writing_compares_with_the_committed_tables(monkeypatch):
    written = _fake_runs(monkeypatch, tables={"a": {"of": "a"}, "b": {"of": "older"}})
    said = []
    assert generator.regenerate(COURSE, ["a", "b"], write=False, say=said.append) == ["b"]
    assert written == []
    assert any("b: autograder/kernel/fingerprints.py differs" in line for line in said)
