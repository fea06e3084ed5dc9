"""The reference run's records shared by work courses through one folder
($RESIDUAL_PACK_REFERENCE_CACHE, which the test suite sets to a folder of the run's tmp:
tests/conftest.py), so that a run of the suite makes each assignment's once."""

import json
from pathlib import Path
from types import SimpleNamespace

from autograder.grading.course import WorkCourse
from autograder.grading.reference_run import fingerprint
from autograder.grading.student import Grader
from autograder.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[2]
ASSIGNMENT = "01_residual_stack"


def test_a_grader_reads_the_reference_records_from_the_shared_folder(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    monkeypatch.setenv("RESIDUAL_PACK_REFERENCE_CACHE", str(shared))
    work = WorkCourse(COURSE, tmp_path / "work", [ASSIGNMENT])
    key = fingerprint(work.path("source", ASSIGNMENT), ASSIGNMENT)
    shared.mkdir()
    made_elsewhere = [{"made": "by another work course"}]
    (shared / f"reference-{ASSIGNMENT}-{key}.json").write_text(json.dumps(made_elsewhere))
    sandbox = SimpleNamespace(references={}, limits=Limits())
    Grader(work, ASSIGNMENT, generate=False, sandbox=sandbox)
    assert sandbox.references[ASSIGNMENT] == made_elsewhere
    assert not work.path(".grading").exists()  # nothing run, nothing kept of its own
