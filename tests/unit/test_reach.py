"""What keeps other unix users out of an environment (`residual-pack check-exchange`),
judged from the mode bits of folders and files made here."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from autograder.grading.reach import closed_folders, problems, report


@pytest.fixture
def tmp_path():
    """A folder others can enter (pytest's own are mode 700)."""
    folder = Path(tempfile.mkdtemp(prefix="rp-reach-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def test_a_folder_without_the_x_bit_for_others_is_named(tmp_path):
    home = tmp_path / "home"
    package = home / "venv" / "lib" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("x = 1\n")
    os.chmod(home, 0o700)
    assert closed_folders(package / "mod.py") == [home]
    found = problems([("the package pkg", package)])
    assert len(found) == 1
    assert found[0].startswith(f"{home} (mode 700, owner ")
    assert "has no x bit for others, and holds the package pkg" in found[0]
    message = report(found)
    assert "cannot run this course's Python" in message and "chmod o+x" in message


def test_files_others_cannot_read_are_named_once_the_folders_are_open(tmp_path):
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "open.py").write_text("")
    (package / "secret.py").write_text("")
    os.chmod(package, 0o755)
    os.chmod(package / "open.py", 0o644)
    os.chmod(package / "secret.py", 0o600)
    os.chmod(package / "inner", 0o750)
    found = problems([("the package pkg", package)])
    assert [line.split(" (mode")[0] for line in found] == [
        str(package / "inner"), str(package / "secret.py")]
    assert all(line.endswith("others cannot read it") for line in found)


def test_an_open_tree_has_no_problems(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "mod.py").write_text("")
    os.chmod(package, 0o755)
    os.chmod(package / "mod.py", 0o644)
    assert problems([("the package pkg", package)]) == []
    assert "can reach" in report([])
