"""A student's wrong answers, in JupyterLab in a real browser: a crash is a wrong answer.

`scripts/lab` serves a copy of the course; headless Chromium opens the release notebook of
each assignment in JOURNEYS, runs the cells above its first task, and types three wrong
answers into the task's answer cell in turn, as a student would (issue #27, "Must show"):

1. a misspelt name (a NameError in the answer),
2. lists joined with `+` where they are meant to be added item by item,
3. a detached graph: the right forward pass whose gradient does not flow (a number taken
   out with `.data`).

After each one it runs the answer cell and the task's test cells, and asserts what each
test cell shows: for a slip (1, 2; `SLIPS` in autograder/answers/mutants/) exactly the text
registered with it, the cell numbers as the browser shows them; for the detached graph (a
registered mutant) its values test passing and its gradient test naming that mistake and
no other ("This looks like a known mistake: " and the mutant's hint alone). No output
shows the grader's own traceback. A screenshot of each test cell after each answer goes
to tests/browser/artifacts/wrong-answers/ (or $ARTIFACTS_DIR/wrong-answers/).
"""

import re

import lab_helpers as lh
import pytest

from autograder.answers import mutants
from autograder.kernel.diagnosis import LEAD

pytestmark = pytest.mark.browser

STDERR = "application/vnd.jupyter.stderr"
STDOUT = "application/vnd.jupyter.stdout"
# what the grader's own traceback would show: none of it may reach the student
GRADER_TRACE = re.compile(r"Traceback|File \"|autograder/|site-packages|__exit__|checks\.py")
PROMPT = re.compile(r"^\[(\d+)\]:$")

# assignment -> the cells run first (grade ids, in order: what the task's cells need), the
# test cells run after each answer, and the three wrong answers: (what it is, the name of a
# registered Slip or Mutant of the assignment)
JOURNEYS = {
    "04_identity_shortcut": {
        "first": ["imports", "plain_layer"],
        "tests": ["task4_1_test_values", "task4_1_test_gradients"],
        "answers": [
            ("typo", "a misspelt name: plain_layr for plain_layer"),
            ("joined", "lists joined with + instead of added"),
            ("detached", "shortcut cut from the graph: h.data + f(h)"),
        ],
    },
    "05_gpt_residual_adds": {
        "first": ["imports", "harness"],
        "tests": ["task5_1_test_values", "task5_1_test_gradients"],
        "answers": [
            ("typo", "a misspelt name: rmsnrom for rmsnorm"),
            ("joined", "lists joined with + instead of added"),
            ("detached", "right numbers, shortcut cut from the graph (adds .data)"),
        ],
    },
}




def registered(assignment, name):
    """The Slip or the Mutant of `assignment` called `name`."""
    found = [s for s in mutants.load_slips(assignment) + mutants.load(assignment)
             if s.name == name]
    assert len(found) == 1, f"{assignment} registers no single wrong answer named {name!r}"
    return found[0]


def flat(text):
    return " ".join(text.split())


def shown_in(cell):
    """(what the cell's error shows, what it printed)."""
    err = "\n".join(o["text"] for o in cell["outputs"] if o["mime"] == STDERR)
    out = "".join(o["text"] for o in cell["outputs"] if o["mime"] == STDOUT)
    return err, out


def test_wrong_answers_in_jupyterlab(tmp_path):
    lh.require_browser()
    shots = lh.shots_dir("wrong-answers")
    summary = []
    env = lh.jupyter_env(tmp_path / "jupyter")
    course = tmp_path / "course"
    for assignment in JOURNEYS:
        lh.prepare_course(course, assignment, env)
    try:
        with lh.lab_page(course, env, shots) as (server, page):
            for assignment, journey in JOURNEYS.items():
                nb_path = course / "exercises" / assignment / f"{assignment}.ipynb"
                nb = lh.read_nb(nb_path)
                nbp = lh.NotebookPage(page, server, f"{assignment}/{assignment}.ipynb",
                                      len(nb["cells"]), shots)
                try:
                    nbp.open()
                    walk(nbp, assignment, journey, nb, summary)
                except BaseException:
                    nbp.shot(f"failure-{assignment}")
                    raise
                server.shutdown_kernels()
    finally:
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
        print("\n" + "\n".join(summary))


def walk(nbp, assignment, journey, nb, summary):
    """One notebook's journey: the cells above the task, then each wrong answer typed into
    the answer cell and the task's test cells run."""
    index = {lh.nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(nb["cells"])
             if lh.nbgrader_meta(c).get("grade_id")}
    for grade_id in journey["first"]:
        cells = nbp.run_cell(index[grade_id])
        err, _ = shown_in(cells[index[grade_id]])
        assert not err, f"{assignment} {grade_id} failed before any answer: {err}"
    for kind, name in journey["answers"]:
        wrong = registered(assignment, name)
        answer = index[wrong.cell]
        nbp.replace_cell_text(answer, wrong.source)
        cells = nbp.run_cell(answer)
        err, _ = shown_in(cells[answer])
        assert not err, f"{assignment}, {kind}: the answer cell itself failed: {err}"
        for grade_id in journey["tests"]:
            cells = nbp.run_cell(index[grade_id])
            nbp.shot(f"{assignment}-{kind}-{grade_id}", index[grade_id])
            err, out = shown_in(cells[index[grade_id]])
            summary.append(f"{assignment}, {kind} ({name}), {grade_id}:\n"
                           f"{err.strip() or out.strip()}\n")
            assert not GRADER_TRACE.search(err), (
                f"{assignment}, {kind}: {grade_id} shows the grader's insides: {err}")
            numbers = {g: int(PROMPT.match(cells[i]["prompt"]).group(1))
                       for g, i in index.items() if PROMPT.match(cells[i]["prompt"])}
            if isinstance(wrong, mutants.Slip):
                want = dict(wrong.shows)[grade_id]
                assert flat(err) == flat(mutants.shown_text(want, numbers)), (
                    f"{assignment}, {kind}: {grade_id} should show the slip's registered "
                    f"text\n{mutants.shown_text(want, numbers)}\nit shows\n{err}")
            elif grade_id in wrong.loses:
                # named, and alone: the gradients of a detached shortcut and of a missing
                # one look alike, but the values test this notebook passed tells them apart
                assert flat(err).startswith("CheckFailed: ") and LEAD in err and \
                    flat(err.split(LEAD, 1)[1]) == flat(wrong.hint), (
                        f"{assignment}, {kind}: {grade_id} should name the mistake, and "
                        f"only it ({LEAD}{wrong.hint}); it shows\n{err}")
            else:
                assert not err and "every check in this cell passed" in out, (
                    f"{assignment}, {kind}: {grade_id} should pass (the forward pass is "
                    f"right); it shows\n{err or out}")


UNTOUCHED = "04_identity_shortcut"  # trains before its first task's test; several plots


def test_an_untouched_notebook_runs_through_saying_one_line_per_cell(tmp_path):
    """Run All on the release as fetched, in JupyterLab: it reaches the last cell (the
    cells that fail on the stub are tagged `raises-exception`), and each cell that fails
    shows one line that says why (`NotAnswered`: a task not done, an experiment whose
    answer is still the stub, a plot with nothing to show yet), no traceback, no NameError
    and no empty figure left by a cell that stopped."""
    lh.require_browser()
    shots = lh.shots_dir("untouched")
    env = lh.jupyter_env(tmp_path / "jupyter")
    course = tmp_path / "course"
    lh.prepare_course(course, UNTOUCHED, env)
    nb = lh.read_nb(course / "exercises" / UNTOUCHED / f"{UNTOUCHED}.ipynb")
    with lh.lab_page(course, env, shots) as (server, page):
        nbp = lh.NotebookPage(page, server, f"{UNTOUCHED}/{UNTOUCHED}.ipynb",
                              len(nb["cells"]), shots)
        nbp.open()
        cells = nbp.run_all()
        for i, cell in enumerate(nb["cells"]):  # to look at: the study and its plot
            if lh.nbgrader_meta(cell).get("grade_id") in ("experiment", "experiment_plot"):
                nbp.shot(f"{UNTOUCHED}-{lh.nbgrader_meta(cell)['grade_id']}", i)
    code = [i for i, c in enumerate(cells) if c["kind"] == "code"]
    assert PROMPT.match(cells[code[-1]]["prompt"]), "Run All stopped before the last cell"
    failed = {}
    for i in code:
        err, _ = shown_in(cells[i])
        if err.strip():
            failed[i] = err.strip()
            name = lh.nbgrader_meta(nb["cells"][i]).get("grade_id") or f"cell {i}"
            assert len(err.strip().splitlines()) == 1 and err.startswith("NotAnswered: "), (
                f"{name} shows more than one line of why it failed:\n{err}")
            assert not any(o["images"] for o in cells[i]["outputs"]), \
                f"{name} drew a figure before it failed"
    given = [i for i in failed if "test" not in
             (lh.nbgrader_meta(nb["cells"][i]).get("grade_id") or "")]
    assert given, "no given cell waited for an answer: the test would prove nothing"
    (shots / "summary.txt").write_text(
        "\n".join(f"[{i}] {lh.nbgrader_meta(nb['cells'][i]).get('grade_id')}: {text}"
                  for i, text in failed.items()) + "\n", encoding="utf-8")


CRASHED = "05_gpt_residual_adds"  # its experiment trains with the student's three blocks


def test_a_crash_in_an_experiment_reads_like_one_in_a_test(tmp_path):
    """The rest of "a crash goes through the insides": Tasks 5.1 to 5.3 answered, 5.1 with
    lists joined by `+` (a registered slip), then Run All. The experiment cell, which
    trains a model with the student's blocks through the library, shows the error as a
    test does (the student's line, the library line that raised, the slip's hint), not
    the library's frames in between."""
    import json

    lh.require_browser()
    from autograder.authoring.madeup import filled_in, with_answer
    from autograder.grading.course import read_notebook

    shots = lh.shots_dir("experiment-crash")
    env = lh.jupyter_env(tmp_path / "jupyter")
    course = tmp_path / "course"
    lh.prepare_course(course, CRASHED, env)
    path = course / "exercises" / CRASHED / f"{CRASHED}.ipynb"
    slip = registered(CRASHED, "lists joined with + instead of added")
    solved = filled_in(read_notebook(path),
                       read_notebook(lh.REPO_ROOT / "source" / CRASHED / f"{CRASHED}.ipynb"))
    path.write_text(json.dumps(with_answer(solved, slip.cell, slip.source)), encoding="utf-8")
    nb = lh.read_nb(path)
    index = {lh.nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(nb["cells"])}
    with lh.lab_page(course, env, shots) as (server, page):
        nbp = lh.NotebookPage(page, server, f"{CRASHED}/{CRASHED}.ipynb", len(nb["cells"]),
                              shots)
        nbp.open()
        cells = nbp.run_all()
        # twice: the drawings above it finish their layout after the first scroll
        nbp.shot(f"{CRASHED}-experiment", index["experiment"])
        page.wait_for_timeout(1500)
        nbp.shot(f"{CRASHED}-experiment", index["experiment"])
    err, _ = shown_in(cells[index["experiment"]])
    (shots / "summary.txt").write_text(err + "\n", encoding="utf-8")
    assert err.startswith("ValueError in your answer: linear: a row of 16 weights for 32 "
                          "inputs"), err
    assert "this cell:" in err and "in pre_norm_block:" in err and "Hint: " in err, err
    assert not GRADER_TRACE.search(err) and "microgpt/model.py" not in err, err
    assert len(err.splitlines()) < 25, err
