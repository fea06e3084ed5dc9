"""The oldest Python the pack says it runs on is one its dependencies install on.

Until 2026-12-07 the pack, the student's wheel and both READMEs said "Python 3.10 or
later", while nbgrader 0.9.6 (the pack's floor) requires 3.11: on 3.10 the student's
first install stopped with pip's "No matching distribution found for
nbgrader<0.10,>=0.9.6", which names nbgrader, not the Python. Here:

- the instructor's `pyproject.toml` and the student's wheel (`release.REQUIRES_PYTHON`)
  name the same floor, and every dependency whose floor is the version installed here
  (so its own Requires-Python is the one pip meets) admits that Python;
- `scripts/find-python`, which `scripts/demo` and `scripts/test` make `.venv` with, takes
  a python3 of that floor or newer and says which Python is too old otherwise.
"""

import importlib.metadata
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from autograder.authoring import release

ROOT = Path(__file__).resolve().parents[2]
FIND_PYTHON = ROOT / "scripts" / "find-python"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _floor(specifier: str) -> Version:
    [bound] = [s for s in SpecifierSet(specifier) if s.operator == ">="]
    return Version(bound.version)


def test_the_instructors_and_the_students_installs_name_one_floor():
    assert _project()["requires-python"] == release.REQUIRES_PYTHON
    readme = release.README_TEMPLATE
    floor = _floor(release.REQUIRES_PYTHON)
    assert f"You need Python {floor.major}.{floor.minor} or later" in readme
    assert f"Python {floor.major}.{floor.minor} or newer" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("where", ["pyproject.toml", "the student's wheel"])
def test_each_dependency_at_its_floor_installs_on_the_oldest_python_named(where):
    requirements = (_project()["dependencies"] if where == "pyproject.toml"
                    else release.DEPENDENCIES)
    python = _floor(release.REQUIRES_PYTHON)
    checked, refusing = [], []
    for line in requirements:
        requirement = Requirement(line)
        try:
            installed = Version(importlib.metadata.version(requirement.name))
        except importlib.metadata.PackageNotFoundError:
            continue
        floors = [s for s in requirement.specifier if s.operator == ">="]
        if not floors or Version(floors[0].version) != installed:
            continue  # an older release pip may take: its Requires-Python is not known here
        checked.append(requirement.name)
        needs = importlib.metadata.metadata(requirement.name).get("Requires-Python")
        if needs and python not in SpecifierSet(needs):
            refusing.append(f"{requirement.name} {installed} requires Python {needs}")
    assert "nbgrader" in checked, checked  # the one whose floor is pinned to what CI installs
    assert refusing == [], refusing


def _fake_python(folder: Path, name: str, version: str) -> None:
    """An executable `name` that says it is Python `version` and fails the version test."""
    path = folder / name
    path.write_text(f"#!/bin/sh\n[ \"$1\" = --version ] && echo 'Python {version}'\nexit 1\n")
    path.chmod(0o755)


def _find(path: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/bash", str(FIND_PYTHON)], capture_output=True, text=True,
                          env={"PATH": str(path), **env}, timeout=60)


def test_find_python_refuses_an_old_python3_and_names_it(tmp_path):
    _fake_python(tmp_path, "python3", "3.10.12")
    done = _find(tmp_path)
    assert done.returncode == 2 and done.stdout == "", done
    assert "3.11 or newer" in done.stderr and "Python 3.10.12" in done.stderr, done.stderr
    done = _find(tmp_path, PYTHON=str(tmp_path / "python3"))
    assert done.returncode == 2 and "PYTHON=" in done.stderr, done


def test_find_python_takes_a_newer_one_beside_an_old_python3(tmp_path):
    _fake_python(tmp_path, "python3", "3.10.12")
    newer = tmp_path / "python3.12"
    newer.symlink_to(sys.executable)  # this test's Python: 3.11 or newer
    done = _find(tmp_path)
    assert done.returncode == 0, done
    assert done.stdout.strip() == str(newer), done
    done = _find(tmp_path, PYTHON=sys.executable)
    assert done.stdout.strip() == sys.executable, done


def test_demo_and_test_make_their_venv_with_find_python_at_the_floor():
    for script in ("demo", "test"):
        text = (ROOT / "scripts" / script).read_text()
        assert "PY=$(scripts/find-python)" in text, script
    assert os.access(FIND_PYTHON, os.X_OK)
    floor = _floor(release.REQUIRES_PYTHON)
    text = FIND_PYTHON.read_text()
    assert f"sys.version_info < ({floor.major}, {floor.minor})" in text
    assert f"Python {floor.major}.{floor.minor} or newer" in text
