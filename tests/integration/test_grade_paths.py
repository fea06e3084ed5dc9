"""The course's three grading paths give the same scores on the same class.

Part of tests/hostile's class (honest students, repaired notebooks, attacks on the
verdict) is graded by `residual-pack grade` and by plain `nbgrader autograde` in a copy of
the course, and by `residual-pack grade --cluster local` (Dask), with
`benchmarks/grade_paths.py`; all must run sandboxed (namespaces) and agree cell by cell,
"needs manual grade" marks included.
"""


import pytest
from benchmarkparts import load_benchmark
from clusterparts import require_dask
from isolation import require_isolation

pytestmark = pytest.mark.slow

STUDENTS = ["honest-full", "honest-partial", "deleted-cells", "duplicated-cells",
            "patched-checks", "tamper-during-test",
            # issue #26's kinds: a forged record, the hidden source printed, output metadata,
            # a gradient written into .grad by hand
            "finalizer-forge", "print-hidden", "metadata-output", "forged-grad",
            # issue #42's output and pages kinds: display updates, widget state, script
            "display-update-flood", "widget-state-flood", "script-outputs",
            # issue #42's kinds against the witness design: records rewritten in the
            # kernel, the running request read, a Value made by hand
            "witness-rewrite", "parent-request", "hand-made-value"]


def test_the_three_grading_paths_agree(tmp_path):
    require_isolation()
    require_dask()
    found = load_benchmark("grade_paths").grade_both(tmp_path, STUDENTS, jobs=1, dask=True)
    _, batch, batch_level = found["batch"]
    _, plain, plain_level = found["plain"]
    # both paths isolate the same way: bubblewrap, each kernel a fresh uid
    assert "sandbox: bubblewrap as a fresh uid per kernel" in batch_level
    assert "student kernels run in the sandbox: sandbox: bubblewrap as a fresh uid" in \
        plain_level
    assert found["differ"] == []
    # and the scores are the ones the hostile class expects
    assert sum(v[0] for v in plain["honest-full"].values()) == 6.0
    assert sum(v[0] for v in plain["honest-partial"].values()) == 2.0
    assert sum(v[0] for v in plain["patched-checks"].values()) == 0.0
    # a right answer that patches the kernel's math while the test calls it: the tests run
    # in the grader, so it earns what its answers earn, and nothing is held back
    tampered = plain["tamper-during-test"]
    assert sum(v[0] for v in tampered.values()) == 6.0
    assert not any(manual for _, manual in tampered.values())
    # the new kinds: what the honest content earns, on every path
    _, dask, dask_level = found["dask"]
    assert "sandbox: bubblewrap as a fresh uid per kernel" in dask_level
    for scores in (batch, plain, dask):
        assert sum(v[0] for v in scores["finalizer-forge"].values()) == 0.0
        assert sum(v[0] for v in scores["print-hidden"].values()) == 0.0
        assert sum(v[0] for v in scores["metadata-output"].values()) == 6.0
        for student in ("display-update-flood", "widget-state-flood", "script-outputs"):
            assert sum(v[0] for v in scores[student].values()) == 6.0, student
        assert sum(v[0] for v in scores["forged-grad"].values()) == 4.0  # the output only
        for student, honest in (("witness-rewrite", 2.0), ("parent-request", 0.0),
                                ("hand-made-value", 2.0)):
            assert sum(v[0] for v in scores[student].values()) == honest, student
