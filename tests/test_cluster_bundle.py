"""autograder/grader/cluster.py's pieces that need no cluster: the bundle, the pack's
fingerprint, the task keys, and a worker's refusals."""

import hashlib
import io
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grader import cluster
from autograder.grader.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[1]


def _work(tmp_path):
    (tmp_path / ".grading").mkdir(exist_ok=True)
    (tmp_path / ".grading" / "reference-residual_stack-abc.json").write_text("{}")
    (tmp_path / ".grading" / "reference-highway-abc.json").write_text("{}")
    return SimpleNamespace(path=lambda *parts: tmp_path.joinpath(*parts))


def test_the_bundle_is_the_same_bytes_every_time(tmp_path):
    sandbox = SimpleNamespace(limits=Limits(), level="namespaces")
    one, digest = cluster.make_bundle(COURSE, _work(tmp_path), "residual_stack", sandbox)
    two, again = cluster.make_bundle(COURSE, _work(tmp_path), "residual_stack", sandbox)
    assert one == two and digest == again == hashlib.sha256(one).hexdigest()
    names = tarfile.open(fileobj=io.BytesIO(one)).getnames()
    assert "nbgrader_config.py" in names and "bundle.json" in names
    assert "source/residual_stack/residual_stack.ipynb" in names
    assert ".grading/reference-residual_stack-abc.json" in names
    assert ".grading/reference-highway-abc.json" not in names  # this assignment's only
    assert not any(n.startswith(("/", "..")) or "exercises" in n for n in names)
    other, other_digest = cluster.make_bundle(
        COURSE, _work(tmp_path), "residual_stack",
        SimpleNamespace(limits=Limits(cell_timeout=5), level="namespaces"))
    assert other_digest != digest  # the limits are part of what is graded


def test_task_keys_are_deterministic():
    key = cluster.task_key("residual_stack", "ann", "a" * 64, "b" * 64)
    assert key == cluster.task_key("residual_stack", "ann", "a" * 64, "b" * 64)
    assert key != cluster.task_key("residual_stack", "ann", "c" * 64, "b" * 64)
    assert key != cluster.task_key("residual_stack", "bob", "a" * 64, "b" * 64)


def test_a_worker_refuses_another_pack_or_a_bundle_that_is_not_its_hash():
    task = {"student": "ann", "assignment": "residual_stack", "files": {}, "feedback": False,
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
