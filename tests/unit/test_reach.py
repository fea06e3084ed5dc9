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
    MAKE_IT,
    Identity,
    advice,
    own_trees,
    refused_on_the_way,
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
    assert MAKE_IT in text
    only_outside = "\n".join(advice([Path("/root")], [env], Path("/root")))
    assert "chmod" not in only_outside and MAKE_IT in only_outside
