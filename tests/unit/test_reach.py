"""The parts of `residual-pack check-exchange` that need no second unix user: the path a
student would be refused on the way to a file (by mode bits, for an identity), the Python
a venv was made from, and the advice, which never names a chmod outside the environment.
The check itself, run as a student, is tests/integration/test_shared_host.py."""

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from autograder.grading.reach import (
    Identity,
    advice,
    make_it,
    own_trees,
    pack_source,
    refused_on_the_way,
    system_python,
    venv_home,
)

STUDENT = Identity("student", 54321, 54321)


@pytest.fixture
def tmp_path():
    """A folder others can enter (pytest's own are mode 700)."""
    folder = Path(tempfile.mkdtemp(prefix="rp-reach-"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder)


def test_the_first_folder_a_student_may_not_enter_is_named(tmp_path):
    home = tmp_path / "home"
    package = home / "venv" / "lib" / "pkg"
    package.mkdir(parents=True)
    (package / "mod.py").write_text("x = 1\n")
    os.chmod(package / "mod.py", 0o644)
    os.chmod(home, 0o700)
    assert refused_on_the_way(package / "mod.py", STUDENT) == home
    os.chmod(home, 0o711)  # enter, not list: enough to reach a file by its name
    assert refused_on_the_way(package / "mod.py", STUDENT) is None
    os.chmod(package / "mod.py", 0o600)
    assert refused_on_the_way(package / "mod.py", STUDENT) == package / "mod.py"
    assert refused_on_the_way(package / "mod.py", Identity("root", 0, 0)) is None


def test_a_link_into_a_closed_folder_is_followed(tmp_path):
    closed = tmp_path / "root" / "python" / "bin"
    closed.mkdir(parents=True)
    (closed / "python3").write_text("")
    os.chmod(closed / "python3", 0o755)
    os.chmod(tmp_path / "root", 0o700)
    link = tmp_path / "opt" / "venv" / "bin" / "python"
    link.parent.mkdir(parents=True)
    link.symlink_to(closed / "python3")
    assert refused_on_the_way(link, STUDENT, bit=1) == tmp_path / "root"


def test_the_python_a_venv_was_made_from_is_read_from_pyvenv_cfg(tmp_path):
    (tmp_path / "pyvenv.cfg").write_text(
        "home = /root/.pyenv/versions/3.11.7/bin\ninclude-system-site-packages = false\n")
    assert venv_home(tmp_path) == Path("/root/.pyenv/versions/3.11.7/bin")
    assert own_trees(tmp_path) == [tmp_path, Path("/root/.pyenv/versions/3.11.7")]
    (tmp_path / "pyvenv.cfg").write_text("home = /usr/bin\n")
    assert own_trees(tmp_path) == [tmp_path]  # /usr is the system's, never "own"
    assert venv_home(tmp_path / "nothing") is None


def test_the_advice_names_a_chmod_only_inside_the_environment(tmp_path):
    env = tmp_path / "opt" / "residuals"
    inside = env / "lib" / "python3.11" / "site-packages"
    lines = advice([inside, Path("/etc/ssl/private"), Path("/root")], [env], None)
    text = "\n".join(lines)
    assert f"`chmod -R o+rX {env}`" in text
    assert text.count("chmod") == 1
    assert "/etc/ssl/private, /root are not part of this environment" in text
    assert make_it() in text
    only_outside = "\n".join(advice([Path("/root")], [env], Path("/root")))
    assert "chmod" not in only_outside and make_it() in only_outside


def _fake_python(folder, name, version):
    """A `python3` that answers a version check as Python `version` would."""
    path = folder / name
    path.write_text(f"#!/bin/sh\nexec {shutil.which('python3')} -c "
                    f"\"import sys; sys.exit({version} < (3, 11))\"\n")
    path.chmod(0o755)


def test_the_environment_is_made_from_a_system_python_the_pack_installs_on(tmp_path):
    """Ubuntu 22.04's /usr/bin/python3 is 3.10, where pip finds no nbgrader 0.9.6: the
    printed line names the newest python3.N of the system's that is 3.11 or newer."""
    _fake_python(tmp_path, "python3", (3, 10))
    assert system_python(str(tmp_path)) == f"{tmp_path}/python3"  # none better: as it is
    _fake_python(tmp_path, "python3.11", (3, 11))
    _fake_python(tmp_path, "python3.12", (3, 12))
    assert system_python(str(tmp_path)) == f"{tmp_path}/python3.12"
    _fake_python(tmp_path, "python3", (3, 13))
    assert system_python(str(tmp_path)) == f"{tmp_path}/python3"


def test_the_pack_is_installed_again_from_where_pip_took_it():
    """This checkout's environment has the pack installed from this folder (editable): the
    line names the folder, not a stand-in. (From a wheel, the wheel's path:
    tests/integration/test_wheel_install.py.)"""
    root = Path(__file__).resolve().parents[2]
    assert pack_source() == str(root)
    assert make_it().endswith(f"/opt/residuals/bin/pip install {root}")
