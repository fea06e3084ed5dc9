"""A command the pack prints for something missing is one that works as printed: it names
the Python that runs the pack in full (a bare `pip` is often another environment's, or
refused by PEP 668), and it asks for an extra of the pack as it is installed, from a wheel
or a checkout alike (not `pip install -e .`, which needs the clone and its folder).

The messages: `--cluster` without Dask, `--db-url` without psycopg2, `residual-pack lite`
without JupyterLite, `progress`, `generate` and `import torchtrack` without PyTorch (their
lines are `autograder.installs`', but for torchtrack's, which may not import it). Each printed
command is run here as printed, with pip's `--dry-run --no-index` added: in this
environment every extra is installed, so pip resolves it offline, and fails on a name or
an extra the pack does not have."""

import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from autograder.grading.course import CourseError

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def _command(message: str) -> list[str]:
    """The install command that ends `message` (so that it is copied whole): the running
    Python's path, `-m pip install` and one requirement."""
    python = shlex.quote(sys.executable)
    assert f"{python} -m pip install " in message, message
    words = shlex.split(message[message.rindex(python):])
    assert len(words) == 5, (words, message)  # python -m pip install REQUIREMENT, no more
    return words


def _resolves(command: list[str]) -> None:
    assert command[:4] == [sys.executable, "-m", "pip", "install"], command
    done = subprocess.run([*command, "--dry-run", "--no-index", "--no-deps", "-q"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (command, done.stdout[-2000:], done.stderr[-2000:])


def _extra(command: list[str], extra: str) -> None:
    assert command[4] == f"{PROJECT['name']}[{extra}]", command
    assert extra in PROJECT["optional-dependencies"], extra
    _resolves(command)


def test_cluster_without_dask(monkeypatch):
    from autograder.grading import classrun
    from autograder.grading.cluster import client

    monkeypatch.setattr(client, "have_dask", lambda: False)
    with pytest.raises(CourseError) as refused:
        classrun._check_cluster("local")
    _extra(_command(str(refused.value)), "dask")


def test_a_postgresql_gradebook_without_psycopg2(monkeypatch):
    from autograder.grading import classrun

    monkeypatch.setitem(sys.modules, "psycopg2", None)  # its import fails, as uninstalled
    with pytest.raises(CourseError) as refused:
        classrun._check_db_url("postgresql+psycopg2://grader@localhost:5432/gradebook")
    assert "needs the Python module psycopg2" in str(refused.value)
    _extra(_command(str(refused.value)), "postgres")


def test_lite_without_jupyterlite(monkeypatch):
    from autograder.authoring import lite

    monkeypatch.setitem(sys.modules, "jupyterlite_core", None)
    with pytest.raises(CourseError) as refused:
        lite._jupyter_lite()
    _extra(_command(str(refused.value)), "lite")


def test_progress_and_the_torch_track_without_torch():
    import importlib.util

    from autograder.student.progress import TORCH_HINT

    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['torch'] = None; import torchtrack"],
        capture_output=True, text=True, cwd=ROOT, timeout=300)
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("ImportError: the torch track needs PyTorch"), done.stderr

    from autograder.authoring.generate import refusal

    refused = refusal("08_torch_mlp", ["torch"])  # generate's, for an assignment needing it
    *_, asks, line = refused.splitlines()  # the line on its own, to be copied whole
    assert asks.endswith("Install it with:") and line == "    " + shlex.join(_command(refused))
    commands = [_command(message) for message in (TORCH_HINT, said, refused)]
    for command in commands:
        assert command[4] == "torch==2.13.0", command  # the version the course is tested with
    if importlib.util.find_spec("torch") is None:
        pytest.skip("no torch here: pip cannot resolve torch==2.13.0 offline")
    for command in commands:
        _resolves(command)


def test_who_may_install_where_this_account_may_not_write(monkeypatch):
    """A shared environment under /opt that root made, an instructor grading as their own
    account: pip would stop with "Permission denied", so the line says who may run it."""
    from autograder import installs

    assert installs.install_it_with("x").startswith("install it with: ")  # here: root's own
    monkeypatch.setattr(installs.os, "access", lambda path, mode: False)
    from autograder.authoring.generate import refusal

    refused = refusal("08_torch_mlp", ["torch"])
    assert "Install it, as root or as the environment's owner (this account may not write to " \
        "it), with:\n" in refused, refused
    said = installs.install_it_with("microgpt-residuals[dask]")
    assert said.startswith("install it, as root or as the environment's owner (this account "
                           "may not write to it), with: "), said
    _extra(_command(said), "dask")
