"""A made-up course for the tests of `residual-pack generate` (tests/unit/test_generate.py,
tests/integration/test_generate.py): notebooks, a git repository, the command in a
subprocess, and a Python without torch."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat

from autograder.grading.course import CONFIG_FILE

COURSE = Path(__file__).resolve().parents[1]
HIDE_TORCH = textwrap.dedent('''
    import sys

    class HideTorch:
        """torch is not installed, as far as this Python can tell."""

        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, HideTorch())
''')


def notebook(*cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    for i, cell in enumerate(nb.cells):
        cell.id = f"cell-{i}"
    return nb


def git(course, *args):
    return subprocess.run(["git", "-C", str(course), *args], check=True, capture_output=True,
                          text=True).stdout


def make_course(root, assignments):
    """A course of {name: notebook} with made-up committed exercises/ and solutions/, in
    a git repository with everything committed."""
    course = root / "course"
    course.mkdir()
    (course / CONFIG_FILE).write_text((COURSE / CONFIG_FILE).read_text())
    for name, nb in assignments.items():
        for kind in ("source", "exercises", "solutions"):
            (course / kind / name).mkdir(parents=True)
            nbformat.write(nb, str(course / kind / name / f"{name}.ipynb"))
    git(course, "init", "-q")
    commit(course)
    return course


def commit(course):
    git(course, "add", "-A")
    git(course, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "state",
        "--allow-empty")


def env_without_torch(tmp_path):
    """Environment variables for a subprocess whose Python has no torch."""
    hook = tmp_path / "hide-torch"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HIDE_TORCH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(hook), *filter(None, [os.environ.get("PYTHONPATH")])]))
    probe = subprocess.run([sys.executable, "-c", "import torch"], env=env,
                           capture_output=True, text=True)
    assert probe.returncode == 1 and "No module named 'torch'" in probe.stderr
    return env


def residual_pack(course, *args, env=None):
    return subprocess.run(
        [sys.executable, "-c", "import sys; from autograder.cli import main; "
                               "sys.exit(main(sys.argv[1:]))", "--course", str(course), *args],
        env=env, capture_output=True, text=True, timeout=600)


