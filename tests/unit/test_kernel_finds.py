"""Where a kernel's Python finds the pack, when the grading process found it elsewhere: in
a course that is a checkout, nbgrader puts the course folder first on sys.path, so the
grader imports the checkout's `autograder` and `microgpt`; a kernel (started from /, the
working folder off sys.path) imports the installed ones, and the sandbox must show them
there (a fresh clone graded with an environment installed from another checkout had every
student's kernel die before it replied)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import autograder
import microgpt
from autograder.grading.plan import _where_a_kernel_finds


def test_a_kernel_finds_the_installed_pack_not_the_course_checkout(tmp_path):
    for name in ("autograder", "microgpt"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text("")
    # the grading process, in the course folder with it first on sys.path (as nbgrader)
    code = ("import sys, json; sys.path.insert(0, '.'); "
            "from autograder.grading.plan import _our_packages, _where_a_kernel_finds; "
            "p = _our_packages(); "
            "print(json.dumps([p, _where_a_kernel_finds(p)]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=""), check=True)
    grader, found = json.loads(done.stdout)
    # this process found the course's copies...
    assert grader["autograder"] == str(tmp_path / "autograder")
    assert grader["microgpt"] == str(tmp_path / "microgpt")
    # ... a kernel finds the installed ones
    installed = {module.__name__: str(Path(module.__file__).resolve().parent)
                 for module in (autograder, microgpt)}
    assert {name: found[name] for name in installed} == installed
    assert str(tmp_path) not in str(found)


def test_it_says_nothing_of_a_package_it_cannot_find():
    assert _where_a_kernel_finds({"no_such_package_here": "x"}) == {}
