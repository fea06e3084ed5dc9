"""`residual-pack lite DIR`: the JupyterLite site of the torch-free course, built with
JupyterLite's own build (the `lite` extra) into a folder, and what it holds:

- the released notebooks of 01-07 as `exercises/` has them, and none of the torch track;
- the student wheel, which holds no answer (release.py's own check, run on the site's
  wheels and notebooks), with the data the notebooks read (`names`), `tqdm` and the
  kernel's `comm` beside it, all in the piplite index the Pyodide kernel installs from;
- the start page; the kernel's settings (Pyodide's URL as given);
- its size, measured and printed.

Skipped, with the reason, when JupyterLite is not installed (`pip install -e '.[lite]'`);
failed instead when LITE_REQUIRED=1 (CI sets it).
"""

import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from autograder.authoring import lite
from autograder.cli import main

ROOT = Path(__file__).resolve().parents[2]
SITE_ASSIGNMENTS = ["01_residual_stack", "02_degradation", "03_highway",
                    "04_identity_shortcut", "05_gpt_residual_adds", "06_residual_stream",
                    "07_check_understanding"]
PYODIDE_URL = "http://127.0.0.1:8765/pyodide/pyodide.mjs"

pytestmark = pytest.mark.slow


def _need_jupyterlite():
    try:
        import jupyterlite_core  # noqa: F401
        import jupyterlite_pyodide_kernel  # noqa: F401
    except ImportError as e:
        why = f"JupyterLite is not installed ({e.name}; pip install -e '.[lite]')"
        if os.environ.get("LITE_REQUIRED") == "1":
            pytest.fail(f"LITE_REQUIRED=1, but {why}")
        pytest.skip(why)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    _need_jupyterlite()
    target = tmp_path_factory.mktemp("lite") / "site"
    status = main(["--course", str(ROOT), "lite", str(target), "--pyodide-url", PYODIDE_URL])
    assert status == 0
    size, count = lite.site_size(target)
    print(f"\nJupyterLite site: {count} files, {size:,} bytes ({size / 1e6:.1f} MB)")
    return target


def test_the_notebooks_of_01_to_07_are_there_as_released(site):
    files = site / "files"
    found = sorted(p.parent.name for p in files.glob("*/*.ipynb"))
    assert found == SITE_ASSIGNMENTS
    for name in SITE_ASSIGNMENTS:
        released = ROOT / "exercises" / name / f"{name}.ipynb"
        assert (files / name / released.name).read_bytes() == released.read_bytes()
    assert not list(site.rglob("*torch*.ipynb"))
    # JupyterLite's contents index lists them, so the file browser shows them
    index = json.loads((site / "api" / "contents" / "all.json").read_text())
    assert {c["name"] for c in index["content"]} >= {*SITE_ASSIGNMENTS, lite.START}


def test_the_student_wheel_is_there_and_holds_no_answer(site):
    wheels = {w.name.split("-")[0]: w for w in lite.site_wheels(site)}
    assert set(wheels) == {"residual_pack_student", "names", "tqdm", "comm"}
    with zipfile.ZipFile(wheels["residual_pack_student"]) as z:
        names = z.namelist()
    assert "microgpt/engine.py" in names and "autograder/kernel/checks.py" in names
    assert not [n for n in names if n.startswith(("autograder/answers/", "autograder/grading/",
                                                  "autograder/sandbox/"))]
    assert lite.problems(site) == []
    with zipfile.ZipFile(wheels["names"]) as z:  # the census names of 05 and 06
        assert {"names/dist.female.first", "names/dist.male.first"} <= set(z.namelist())
    index = json.loads((site / "pypi" / "all.json").read_text())
    assert {"residual-pack-student", "names", "tqdm", "comm"} <= set(index)


def test_the_check_finds_an_answer_put_back_in_the_wheel(site, tmp_path):
    """The site's check is release.py's: a student wheel with microgpt's own deepnet.py
    (which has Assignment 2's answer) in it is caught."""
    copy = tmp_path / "site"
    shutil.copytree(site / "pypi", copy / "pypi")
    wheel = next((copy / "pypi").glob("residual_pack_student-*.whl"))
    changed = tmp_path / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(changed, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "microgpt/deepnet.py":
                data = (ROOT / "microgpt" / "deepnet.py").read_bytes()
            dst.writestr(item, data)
    shutil.move(changed, wheel)
    found = lite.problems(copy)
    assert any("microgpt/deepnet.py holds the answer" in p for p in found), found


def test_the_start_page_says_what_works_and_what_does_not(site):
    text = (site / "files" / lite.START).read_text()
    assert lite.INSTALL in text
    for said in ("torch track", "Validate", "visible test cells", "download the notebook",
                 "nbgrader grades it"):
        assert said in text, said


def test_the_kernel_loads_pyodide_from_the_given_url(site):
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"][lite.KERNEL_PLUGIN]
    assert kernel["pyodideUrl"] == PYODIDE_URL
    assert any(u.startswith("./pypi/all.json") for u in kernel["pipliteUrls"])
    assert "@jupyter/nbgrader" in config["disabledExtensions"]


def test_the_site_goes_into_a_new_folder_and_leaves_the_torch_track_out(tmp_path):
    _need_jupyterlite()
    (tmp_path / "old").write_text("x")
    with pytest.raises(lite.CourseError, match="not empty"):
        lite.build(ROOT, tmp_path)
    with pytest.raises(lite.CourseError, match="PyTorch"):
        lite.build(ROOT, tmp_path / "new", ["01_residual_stack", "08_torch_mlp"])
