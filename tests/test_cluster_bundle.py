"""autograder/grader/cluster.py's pieces that need no cluster: the bundle, the pack's
fingerprint, the task keys, and a worker's refusals."""

import hashlib
import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grader import cluster
from autograder.grader.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[1]


REFERENCES = {"01_residual_stack": {"t1": {"records": [1, 2], "hidden": []}}}


def _sandbox(**limits):
    return SimpleNamespace(limits=Limits(**limits), level="namespaces",
                           references={"01_residual_stack": REFERENCES, "03_highway": {"x": 1}})


def test_the_bundle_is_the_same_bytes_every_time():
    one, digest = cluster.make_bundle(COURSE, "01_residual_stack", _sandbox())
    two, again = cluster.make_bundle(COURSE, "01_residual_stack", _sandbox())
    assert one == two and digest == again == hashlib.sha256(one).hexdigest()
    tar = tarfile.open(fileobj=io.BytesIO(one))
    names = tar.getnames()
    assert "nbgrader_config.py" in names and "bundle.json" in names
    assert "source/01_residual_stack/01_residual_stack.ipynb" in names
    # the coordinator's expected observations for this assignment, and no other's
    assert json.loads(tar.extractfile("references.json").read()) == REFERENCES
    assert not any(n.startswith(("/", "..")) or "exercises" in n for n in names)
    _, other_digest = cluster.make_bundle(COURSE, "01_residual_stack", _sandbox(cell_timeout=5))
    assert other_digest != digest  # the limits are part of what is graded


def test_task_keys_are_deterministic():
    key = cluster.task_key("01_residual_stack", "ann", "a" * 64, "b" * 64)
    assert key == cluster.task_key("01_residual_stack", "ann", "a" * 64, "b" * 64)
    assert key != cluster.task_key("01_residual_stack", "ann", "c" * 64, "b" * 64)
    assert key != cluster.task_key("01_residual_stack", "bob", "a" * 64, "b" * 64)


def test_a_worker_refuses_another_pack_or_a_bundle_that_is_not_its_hash():
    task = {"student": "ann", "assignment": "01_residual_stack", "files": {}, "feedback": False,
            "pack": "0.0.1+elsewhere", "bundle": "0" * 64, "bundle_bytes": b"x"}
    with pytest.raises(cluster.PackMismatch, match="another|this worker"):
        cluster.grade_task(task)
    task["pack"] = cluster.pack_fingerprint()
    with pytest.raises(cluster.PackMismatch, match="do not match"):
        cluster.grade_task(task)


def test_a_bundle_entry_outside_its_folder_is_refused(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        cluster._add(tar, "../evil.py", b"x")
    with pytest.raises(cluster.PackMismatch, match="bad bundle entry"):
        cluster._unpack(raw.getvalue(), tmp_path / "x")
    assert not (tmp_path / "evil.py").exists()


def test_the_fingerprint_names_the_version_and_the_code():
    fp = cluster.pack_fingerprint()
    version, digest = fp.split("+")
    assert version and len(digest) == 16


def test_a_worker_that_refuses_a_bundle_leaves_nothing_behind(monkeypatch):
    import os
    import tempfile

    monkeypatch.setattr(cluster, "pack_fingerprint", lambda: "0.0.1+elsewhere")
    data, digest = cluster.make_bundle(COURSE, "01_residual_stack", _sandbox())
    monkeypatch.undo()
    before = set(Path(tempfile.gettempdir()).glob("residual-pack-worker-*"))
    home = os.environ.get("HOME")
    with pytest.raises(cluster.PackMismatch, match="the bundle is for pack 0.0.1"):
        cluster._WorkerCourse(data, digest)
    assert set(Path(tempfile.gettempdir()).glob("residual-pack-worker-*")) <= before
    assert os.environ.get("HOME") == home
