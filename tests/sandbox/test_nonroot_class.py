"""The same class, graded by an instructor who is not root: same scores (issue #26, "the
sandbox as a non-root user on a machine that allows user namespaces: the same hostile
class, the same results").

Nine students of the hostile class (`benchmarks/grade_paths.py`'s choice for the three
paths: honest ones, repaired notebooks, patched checks, tampering during a test, a forged
record, the hidden source printed, 12 MiB of output metadata) are graded twice with
`residual-pack grade`: as root (bubblewrap with a fresh uid and cgroup limits per kernel)
and as uid 65534 (bubblewrap in an unprivileged user namespace, rlimits instead of a
cgroup), and a third time as uid 65534 with limits only (no sandbox: what a grader gets
where bubblewrap cannot run). The scores must agree cell by cell, and each non-root run's
report must say what it lost. Where this environment's Python sits in a folder other
users cannot reach (a pyenv under /root), the non-root runs see it through a private mount
namespace, as the exchange tests do (`exchangeparts.Workflow.python_view`); the host is
not changed.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from benchmarkparts import load_benchmark
from bwrap_support import NOBODY, require_sandbox
from exchangeparts import Workflow

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STUDENTS = ["honest-full", "honest-partial", "deleted-cells", "duplicated-cells",
            "patched-checks", "tamper-during-test", "finalizer-forge", "print-hidden",
            "metadata-output", "forged-grad"]


def _as_nobody(paths, submissions, out, home, view, env=()):
    """`residual-pack grade` of `submissions` as uid 65534 into `out`: (scores, report)."""
    for folder in (out, home):
        folder.mkdir()
        os.chown(folder, NOBODY, NOBODY)
    bin_dir = Path(sys.executable).parent
    command = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
               "--", "env", "-i", f"PATH={bin_dir}:/usr/bin:/bin", f"HOME={home}",
               "LANG=C.UTF-8", *env, str(bin_dir / "residual-pack"), "grade",
               paths.ASSIGNMENT, str(submissions), "--out", str(out), "-j", "1",
               "--fresh", "--no-feedback"]
    if view.hidden_python:
        command = view.python_view(command)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return paths.gradebook_scores(out / "gradebook.db"), (out / "report.txt").read_text()


def test_a_non_root_grader_gives_the_class_the_same_scores():
    require_sandbox()
    if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare"):
        pytest.skip("needs root, setpriv and unshare to act as uid 65534")
    paths = load_benchmark("grade_paths")
    place = Path(tempfile.mkdtemp(prefix="nonroot-class-"))
    try:
        os.chmod(place, 0o755)
        submissions = place / "submissions"
        paths.make_class(submissions, place / "root", STUDENTS)
        for path in [submissions, *submissions.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        _, as_root, root_level = paths.batch(submissions, place / "root", jobs=1)
        view = Workflow(place)
        as_nobody, report = _as_nobody(paths, submissions, place / "nonroot",
                                       place / "home", view)
        # and with no sandbox at all (limits only), as where bubblewrap cannot run
        bare, bare_report = _as_nobody(paths, submissions, place / "limits",
                                       place / "home-limits", view,
                                       env=["RESIDUAL_PACK_SANDBOX=limits"])
    finally:
        shutil.rmtree(place, ignore_errors=True)

    assert "bubblewrap as a fresh uid per kernel" in root_level
    # the non-root sandbox, and what it says it lost
    assert "bubblewrap in an unprivileged user namespace" in report
    assert "without a cgroup" in report and "the limits are rlimits" in report
    assert sorted(as_nobody) == sorted(STUDENTS)
    differ = [s for s in STUDENTS if as_root.get(s) != as_nobody.get(s)]
    assert differ == [], {s: (as_root.get(s), as_nobody.get(s)) for s in differ}
    assert sum(v[0] for v in as_nobody["honest-full"].values()) == 6.0
    assert sum(v[0] for v in as_nobody["finalizer-forge"].values()) == 0.0
    assert sum(v[0] for v in as_nobody["forged-grad"].values()) == 4.0
    # limits only: the report says there is no sandbox and what the kernel could read;
    # none of these students reads files, so the scores are the same (the judge is not
    # in the kernel); the ones that do are what the sandbox is for
    assert "limits only (asked for: RESIDUAL_PACK_SANDBOX=limits): no sandbox" in bare_report
    assert "the hidden tests and the model answers included" in bare_report
    differ = [s for s in STUDENTS if as_root.get(s) != bare.get(s)]
    assert differ == [], {s: (as_root.get(s), bare.get(s)) for s in differ}
