"""The tests run in the grader, on every assignment: attacks on the verdict earn nothing.

The full hostile class (`tests/hostile`, `test_hostile.py`) is made from the first
assignment. Here every other assignment with autograded cells gets two attacks, graded
for real in the sandbox in the assignment's one graded class of the run
(`tests/gradedclass.py`: the self-check's, so the solution there is the honest student):

- `forger`: the stubs left as they are, and a cell of the student's own that blanks
  every check it can reach (the checks of `autograder.kernel.checks`,
  `autograder.kernel.gptchecks`, `autograder.kernel.torchchecks` and the witness's
  `settle`, through their `__code__`, so every alias
  changes too), makes `task` swallow every failure, and prints success lines;
- `machinery`: the stubs, and a kernel whose `do_execute` answers every graded test cell
  itself with status "ok", the grader's nonce and a made-up observation for every check
  line of the cell it was sent;
- `honest` (the self-check's `solution`): the instructor's answers, which must get every
  autograded point (so the class is graded by a grader that can give points, and the
  zeros above mean something).

Both attacks must score 0, and so must what they are held back for review with (the
score they would have had). A control (`test_the_attacks_are_real_...`) grades the forger
with nbgrader's own kernel on one assignment, where it earns points.
"""

import importlib.util
import json
import os
import subprocess
from pathlib import Path

import nbformat
import pytest
from gradedclass import HOSTILE, attack_class, graded_class, has_autograded_cells
from isolation import cli, require_isolation

from autograder.authoring.madeup import filled_in
from autograder.grading.course import (
    EXERCISES,
    SOURCE,
    WorkCourse,
    assignments,
    notebook_paths,
    private_jupyter_dirs,
    read_notebook,
)
from autograder.grading.intake import TORCH_ASSIGNMENTS

COURSE = Path(__file__).resolve().parents[2]
FIRST = "01_residual_stack"  # the full hostile class covers it (gradedclass.FIRST)


OTHERS = [a for a in assignments(COURSE) if a != FIRST and has_autograded_cells(a)]
# those whose self-check runs here (the torch track's needs torch)
GRADED = [a for a in OTHERS
          if a not in TORCH_ASSIGNMENTS or importlib.util.find_spec("torch")]



def _class(name, folder):
    """{student: notebook} for one assignment, written as <student>/<name>/<notebook>."""
    [release_path] = notebook_paths(COURSE / EXERCISES / name)
    students = attack_class(name)
    for student, nb in students.items():
        path = folder / student / name / release_path.name
        path.parent.mkdir(parents=True)
        nbformat.write(nb, str(path))
    return students


@pytest.mark.slow
@pytest.mark.parametrize("name", OTHERS)
def test_attacks_on_the_verdict_earn_nothing(name, tmp_path_factory):
    """Read from the assignment's graded class (tests/gradedclass.py): the self-check's,
    where the two attacks are graded beside the solution (the honest student)."""
    require_isolation()
    if name not in GRADED:
        pytest.skip(f"{name}'s self-check does not run here (it needs torch)")
    check, _ = graded_class(name, tmp_path_factory)
    entries = {r.student: r for r in check.results}
    honest = entries["solution"]
    got, top = honest.score()
    assert honest.graded and got == top > 0, honest
    for student in HOSTILE.values():
        entry = entries[student]
        said = f"{student}: {entry.score()} withheld {entry.withheld_score} " \
               f"{entry.withheld} {entry.problems} {entry.reason}"[:4000]
        assert entry.graded, said
        assert entry.score()[0] == 0, said
        assert entry.withheld_score == 0, said
    # the tests run in the grader: the machinery attack changes nothing there, and is held
    # back for a person only on the torch track, whose observations the kernel makes
    machinery = entries[HOSTILE["machinery"]]
    assert bool(machinery.withheld) == (name in TORCH_ASSIGNMENTS), machinery


CONTROL = "05_gpt_residual_adds"


@pytest.mark.slow
@pytest.mark.skipif(CONTROL not in OTHERS, reason=f"no {CONTROL}")
def test_the_attacks_are_real_in_nbgraders_own_kernel(tmp_path):
    """Control: graded by nbgrader's own Execute (a plain IPython kernel that runs the whole
    test cell and is its own judge), the forger earns points."""
    from autograder.grading.student import Grader

    students = _class(CONTROL, tmp_path / "submissions")
    with private_jupyter_dirs(tmp_path / "home"):
        work = WorkCourse(COURSE, tmp_path / "course", [CONTROL])
        grader = Grader(work, CONTROL)  # no sandbox: nbgrader's kernel
        [path] = notebook_paths(COURSE / EXERCISES / CONTROL)
        grader.submit("forger", {path.stem: students["forger"]})
        result = grader.grade("forger", feedback=False)
    assert max(result.score()[0], result.withheld_score) > 0, result


# A task handed to the library's own answer, loaded anew so that no guard around the
# attribute is in the way (issue #26: `runpy` gave back a fresh, unguarded copy): for each
# assignment whose tasks the library answers, {answer cell: its source}. The graded kernel
# loads a library with those answers taken out of the source (`grading/answerless.py`), so
# the copy holds no answer either.
QUIET = "import warnings\n\nwarnings.simplefilter('ignore')\n"
LIBRARIAN = {
    "02_degradation": {"task2_2_mlp_logits": (
        "import runpy\n\n\ndef mlp_logits(net, x, layer):\n"
        "    return runpy.run_module('microgpt.deepnet')['logits'](net, x, layer)\n")},
    "05_gpt_residual_adds": {"task5_1_pre_norm_block": (
        "import runpy\n\n\ndef pre_norm_block(model, x, layer, cache):\n"
        "    GPT = runpy.run_module('microgpt.model')['GPT']\n"
        "    return GPT.block(model, x, layer, cache)\n")},
    "06_residual_stream": {"task6_1_stream_states": (
        "import runpy\n\n\ndef stream_states(model, tokens):\n"
        "    GPT = runpy.run_module('microgpt.model')['GPT']\n"
        "    return GPT.stream_states(model, tokens)\n")},
    "08_torch_mlp": {"task8_1_residual_layer": (
        "import runpy\n\n\nclass ResidualLayer(PlainLayer):\n"
        "    def forward(self, h):\n"
        "        theirs = runpy.run_module('torchtrack.mlp')['ResidualLayer']\n"
        "        return theirs.forward(self, h)\n")},
    "09_torch_transformer": {"task9_1_block_forward": (
        "import runpy\n\n\ndef block_forward(block, x):\n"
        "    Block = runpy.run_module('torchtrack.transformer')['Block']\n"
        "    return Block.forward(block, x)\n")},
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in LIBRARIAN if n in OTHERS))
def test_a_task_handed_to_the_library_run_anew_earns_nothing(name, tmp_path):
    """The honest notebook, but one task answered by the library's model answer, run anew
    from its module: that task's tests fail in the graded kernel (the answer is not in its
    library), and the score, withheld for review or not, is below the honest one."""
    from autograder.authoring.madeup import with_answer

    require_isolation()
    [release_path] = notebook_paths(COURSE / EXERCISES / name)
    [source_path] = notebook_paths(COURSE / SOURCE / name)
    honest = filled_in(read_notebook(release_path), read_notebook(source_path))
    [(cell, answer)] = LIBRARIAN[name].items()
    answer = QUIET + answer  # runpy's warning on stderr would fail the tests by itself
    submissions, out = tmp_path / "submissions", tmp_path / "graded"
    path = submissions / "librarian" / name / release_path.name
    path.parent.mkdir(parents=True)
    nbformat.write(with_answer(honest, cell, answer), str(path))
    uid_base = 63000 + 50 * (os.getpid() % 19)
    env = dict(os.environ, SANDBOX_UIDS=f"{uid_base}-{uid_base + 49}")
    done = subprocess.run([*cli(), "grade", name, str(submissions), "--out", str(out)],
                          cwd=COURSE, capture_output=True, text=True, env=env, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [entry] = json.loads((out / "report.json").read_text())["students"]
    said = json.dumps(entry, indent=1)[:4000]
    assert entry["graded"], said
    # the task's tests raised AnswerSwitchedOff, and their points are not in the score,
    # withheld for review (runpy is named) or not
    prefix = "_".join(cell.split("_")[:2]) + "_test"  # task5_1_test...: the task's tests
    tests = [c for c in entry["cells"] if c["cell"].startswith(prefix)]
    ran = [c for run in entry["runs"].values() for c in run["cells"]
           if c["grade_id"].startswith(prefix)]
    assert tests and ran and all(c["ename"] == "AnswerSwitchedOff" for c in ran), said
    earned = entry["autograded_score"] + entry.get("withheld_score", 0)
    assert earned <= entry["autograded_max"] - sum(c["max_score"] for c in tests), said
