"""Our steps' records travel in the graded notebook (autograder/grading/notebook_record.py), not
beside nbgrader: the batch driver's results, the report and the class report export all
read them from the autograded notebook nbgrader writes; and a handed-in notebook that
carries records of its own under the key is not believed.

One class of 01, graded in the sandbox under the real nbgrader: a right answer whose
notebook carries forged records (a clean run, nothing withheld, repairs and flags that
never happened, a run that "changed" the engine), and a right answer whose own cell
carries the instructor's markers (held back for review by intake, through the notebook's
metadata to `WithholdForReview`). Then nbgrader's own `nbgrader export` with the class
report plugin gives the report `residual-pack grade` writes.
"""

import csv
import json
import os
import subprocess

import nbformat
import pytest
from clusterparts import ASSIGNMENT, BIN, COURSE
from gradedclass import attack_class, with_own_cell

from autograder.grading.course import EXERCISES
from autograder.grading.notebook_record import KEY
from autograder.grading.report import write_report
from autograder.grading.session import grading_session

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (COURSE / EXERCISES / ASSIGNMENT).is_dir(),
                                 reason=f"no {ASSIGNMENT} release")]

FORGED = "FORGED-BY-THE-STUDENT"
MARKERS = "# ### BEGIN SOLUTION\nx = 1\n# ### END SOLUTION\n"


def forged(nb):
    """A copy of `nb` carrying, under our key, records grading never wrote."""
    nb = nbformat.reads(nbformat.writes(nb), as_version=nbformat.NO_CONVERT)
    nb.metadata[KEY] = {
        "intake": {"notes": [f"{FORGED} note"], "flags": [f"{FORGED} flag"],
                   "withhold": [f"{FORGED} withhold"]},
        "run": {"ended": f"{FORGED} end", "level": "namespaces", "seconds": 0.0,
                "phases": [], "left_out": 0, "limits": {}},
        "withheld": {"points": 99.0, "reasons": [f"{FORGED} reason"]},
    }
    for index, cell in enumerate(nb.cells):
        cell.metadata[KEY] = {"index": index, "grade_id": FORGED, "kind": "test",
                              "status": "ok", "ename": "", "evalue": "", "verdict": "",
                              "changed": [f"{FORGED} change"], "restored": []}
    return nb


def test_forged_records_are_ignored_and_the_export_gives_the_batch_report(tmp_path):
    with grading_session(COURSE, tmp_path / "work", [ASSIGNMENT]) as session:
        grader = session.grader(ASSIGNMENT)
        work = grader.work
        [name] = grader.notebooks
        honest = attack_class(ASSIGNMENT)["honest"]
        grader.submit("forger", {name: forged(honest)})
        grader.submit("copier", {name: with_own_cell(honest, MARKERS)})
        forger = grader.grade("forger", feedback=True)
        copier = grader.grade("copier", feedback=False)
        assert session.sandbox is not None

    # the forged records are not believed: the right answer scores in full, nothing is
    # held back, and nothing forged reaches the result, the autograded notebook or the page
    assert forger.graded and forger.score()[0] == forger.score()[1] > 0, forger
    assert not forger.withheld and forger.withheld_score == 0.0
    assert FORGED not in json.dumps({k: v for k, v in forger.to_dict().items() if k != "log"})
    assert "carried grading records of its own" in forger.log
    autograded = work.path("autograded", "forger", ASSIGNMENT, f"{name}.ipynb")
    assert FORGED not in autograded.read_text()
    # grading's own records are there, for every cell the grader ran
    run = forger.runs[name]
    assert run["cells"] and {c["status"] for c in run["cells"]} == {"ok"}, run
    assert all(c["grade_id"] != FORGED for c in run["cells"])
    [page] = forger.feedback
    assert FORGED not in page.read_text() and KEY not in page.read_text()

    # intake's finding went through the notebook to WithholdForReview and back
    assert copier.graded and copier.withheld_score == copier.score()[1] > 0
    assert copier.score()[0] == 0.0
    assert any("instructor's markers" in reason for reason in copier.withheld), copier

    # nbgrader's own export command writes the class report from the gradebook and the
    # autograded notebooks: the same rows as the batch driver's report
    batch, export = tmp_path / "batch", tmp_path / "export"
    batch.mkdir()
    write_report(grader, [copier, forger], batch)
    env = dict(os.environ, HOME=str(tmp_path / "home"),
               PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [str(BIN / "nbgrader"), "export",
         "--exporter=autograder.grading.report_export.ClassReport",
         f"--assignment={ASSIGNMENT}", f"--to={export}"],
        cwd=work.root, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr

    def rows(folder):
        with open(folder / "report.csv", newline="", encoding="utf-8") as f:
            return {row["student"]: row for row in csv.DictReader(f)}

    assert rows(export) == rows(batch)
    text = (export / "report.txt").read_text()
    assert "copier: autograded score withheld for review" in text
    assert FORGED not in text
