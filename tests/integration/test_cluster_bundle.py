"""autograder/grading/cluster/bundle.py: the bundle, the pack's fingerprint, the names of
the files that travel (no cluster needed)."""

import hashlib
import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from autograder.grading.cluster import bundle
from autograder.sandbox.limits import Limits

COURSE = Path(__file__).resolve().parents[2]


REFERENCES = {"01_residual_stack": {"t1": {"records": [1, 2], "hidden": []}}}


def _sandbox(**limits):
    return SimpleNamespace(limits=Limits(**limits), level="namespaces",
                           references={"01_residual_stack": REFERENCES, "03_highway": {"x": 1}})


def test_the_bundle_is_the_same_bytes_every_time():
    one, digest = bundle.make_bundle(COURSE, "01_residual_stack", _sandbox())
    two, again = bundle.make_bundle(COURSE, "01_residual_stack", _sandbox())
    assert one == two and digest == again == hashlib.sha256(one).hexdigest()
    tar = tarfile.open(fileobj=io.BytesIO(one))
    names = tar.getnames()
    assert "nbgrader_config.py" in names and "bundle.json" in names
    assert "source/01_residual_stack/01_residual_stack.ipynb" in names
    # the coordinator's expected observations for this assignment, and no other's
    assert json.loads(tar.extractfile("references.json").read()) == REFERENCES
    assert not any(n.startswith(("/", "..")) or "exercises" in n for n in names)
    _, other_digest = bundle.make_bundle(COURSE, "01_residual_stack", _sandbox(cell_timeout=5))
    assert other_digest != digest  # the limits are part of what is graded


def test_a_bundle_without_a_sandbox_says_so_and_carries_no_references():
    data, _ = bundle.make_bundle(COURSE, "01_residual_stack", None)
    tar = tarfile.open(fileobj=io.BytesIO(data))
    about = json.loads(tar.extractfile("bundle.json").read())
    assert about == {"assignment": "01_residual_stack", "pack": bundle.pack_fingerprint(),
                     "limits": None, "level": None}
    assert "references.json" not in tar.getnames()


def test_an_unpacked_bundle_describes_itself(tmp_path):
    data, _ = bundle.make_bundle(COURSE, "01_residual_stack", _sandbox(cell_timeout=5))
    bundle.unpack_bundle(data, tmp_path)
    about = bundle.read_about(tmp_path)
    assert about["assignment"] == "01_residual_stack" and about["level"] == "namespaces"
    assert Limits(**about["limits"]) == Limits(cell_timeout=5)
    assert (tmp_path / "source" / "01_residual_stack" / "01_residual_stack.ipynb").is_file()


def test_a_bundle_of_another_pack_is_refused_when_read(tmp_path, monkeypatch):
    monkeypatch.setattr(bundle, "pack_fingerprint", lambda: "0.0.1+elsewhere")
    data, _ = bundle.make_bundle(COURSE, "01_residual_stack", None)
    monkeypatch.undo()
    bundle.unpack_bundle(data, tmp_path)
    with pytest.raises(bundle.PackMismatch, match="the bundle is for pack 0.0.1"):
        bundle.read_about(tmp_path)


def test_a_bundle_entry_outside_its_folder_is_refused(tmp_path):
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        bundle._add(tar, "../evil.py", b"x")
    with pytest.raises(bundle.PackMismatch, match="bad bundle entry"):
        bundle.unpack_bundle(raw.getvalue(), tmp_path / "x")
    assert not (tmp_path / "evil.py").exists()


def test_the_fingerprint_names_the_version_and_the_code():
    fp = bundle.pack_fingerprint()
    version, digest = fp.split("+")
    assert version and len(digest) == 16


@pytest.mark.parametrize("name,ok", [
    ("01_residual_stack.ipynb", True), ("01_residual_stack.html", True),
    ("../x.ipynb", False), ("a/b.ipynb", False), ("a\\b.html", False), ("x.py", False),
    ("x.ipynb\0", False), (".ipynb", False)])
def test_only_notebooks_and_pages_named_without_a_folder_travel(name, ok):
    assert bool(bundle.SAFE_NAME.match(name)) is ok
