"""The torch-free course in a browser: `residual-pack lite DIR`.

Builds a JupyterLite site (a static folder an instructor hosts anywhere) with JupyterLite's
own build (`jupyter lite build`) and its Pyodide kernel. The site holds:

- the released notebooks of the assignments without the torch track (`exercises/`, as the
  student release has them: visible tests only), under `files/`;
- the student wheel (`release.build` makes it and checks it holds no answer) and the
  wheels of the data and tools the site needs that Pyodide does not carry (`names`,
  the census names; `tqdm`; `comm`), as piplite wheels in `pypi/`, installed with `%pip install`;
- a start page, `START.md`, saying what works there and what does not.

JupyterLite does the work: the lite folder gets a `jupyter_lite_config.json`
(`LiteBuildConfig.contents`, `PipliteAddon.piplite_urls`) and a `jupyter-lite.json` (the
Pyodide kernel's settings: where Pyodide is loaded from), and
`jupyter lite build` makes the site from them.
"""

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from autograder.authoring import release
from autograder.grading.course import CourseError, check_assignments
from autograder.grading.intake import TORCH_ASSIGNMENTS
from autograder.installs import install_it_with

__all__ = ["EXTRA_WHEELS", "KERNEL_PLUGIN", "START", "assignments", "build", "site_size",
           "site_wheels"]

# the Pyodide kernel's settings, in jupyter-lite.json's litePluginSettings
KERNEL_PLUGIN = "@jupyterlite/pyodide-kernel-extension:kernel"
# projects the site needs beside the student wheel that Pyodide's core lacks: the census
# names (`microgpt.census_names`, the data of 05 and 06), the progress bars (Pyodide's
# packages have a tqdm too, but only from its CDN) and `comm`, which the Pyodide kernel's
# own ipykernel requires and Pyodide's packages do not have (without it the kernel would
# fetch it from PyPI at every start)
EXTRA_WHEELS = ("names", "tqdm", "comm")
START = "START.md"
# the lab extensions of this environment that JupyterLite picks up but the site cannot use
DISABLED = ["@jupyter/nbgrader"]
INSTALL = "%pip install -q --no-deps residual-pack-student names tqdm"

START_TEXT = f"""\
# Residual connections, in your browser

This site runs the course's notebooks with nothing to install: Python runs inside the
browser (Pyodide, a CPython build for WebAssembly), and your work stays in this
browser's storage until you download it.

**First, in every notebook you open**, add a cell at the top and run it:

    {INSTALL}

It installs the engine (`microgpt`) and the checks the test cells call from this site
(`--no-deps`: the rest of what the package names, nbgrader and JupyterLab, is the
desktop install's). Then run the notebook's cells from the top as usual.

## What works here

- Assignments {{assignments}}: the tasks and their visible test cells, with the same
  messages and hints as on the desktop. The engine is pure Python, so it runs as it is.
- Plots: matplotlib and numpy come from Pyodide's own packages, loaded over the network
  the first time a cell imports them.

## What does not

- **The torch track** (08 and 09): PyTorch does not run in the browser. Use the
  desktop install (the student release) for it.
- **nbgrader's Validate**: there is no Assignments menu here. The visible test cells
  are the check: run them all, top to bottom.
- **Handing in**: delete the `%pip` cell, download the notebook (File, Download) and
  hand in that `.ipynb` file as your instructor says: nbgrader grades it like any other.
- Anything that needs a program or folder on your computer (Graphviz's layouts) is not
  there.
- The browser's Python is slower than the desktop's: the long training cells of 02-06
  take longer.
"""


def assignments(course: Path | str, names: list[str] | None = None) -> list[str]:
    """The assignments of the site: `names` (all by default) without the torch track."""
    chosen = check_assignments(course, names or [])
    torch = [n for n in chosen if n in TORCH_ASSIGNMENTS]
    if torch and names:
        raise CourseError(f"{', '.join(torch)} need PyTorch, which does not run in the "
                          f"browser: the site leaves the torch track out")
    return [n for n in chosen if n not in TORCH_ASSIGNMENTS]


def _pinned(project: str) -> str:
    """`project` at the version installed here (what the notebooks are tested with)."""
    try:
        return f"{project}=={metadata.version(project)}"
    except metadata.PackageNotFoundError:
        return project


def _extra_wheels(out: Path) -> list[Path]:
    """Wheels of EXTRA_WHEELS in `out`, made or fetched by pip (no dependencies)."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir",
         str(out), *(_pinned(p) for p in EXTRA_WHEELS)],
        check=True, stdout=subprocess.DEVNULL)
    made = sorted(out.glob("*.whl"))
    for wheel in made:
        if not wheel.name.endswith("-py3-none-any.whl"):
            raise CourseError(f"{wheel.name} is not a pure-Python wheel: Pyodide cannot "
                              f"install it")
    return made


def _jupyter_lite() -> list[str]:
    """The command that runs JupyterLite's build (the `lite` extra's)."""
    try:
        import jupyterlite_core  # noqa: F401
        import jupyterlite_pyodide_kernel  # noqa: F401
    except ImportError as e:
        raise CourseError(
            f"building the site needs JupyterLite ({e.name} is missing), the pack's 'lite' "
            f"extra; {install_it_with('microgpt-residuals[lite]')}") from e
    return [sys.executable, "-m", "jupyterlite_core"]


def site_wheels(site: Path | str) -> list[Path]:
    """The piplite wheels in a built site."""
    return sorted((Path(site) / "pypi").glob("*.whl"))


def site_size(site: Path | str) -> tuple[int, int]:
    """(bytes, files) of the built site at `site`."""
    files = [p for p in Path(site).rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def build(course: Path | str, target: Path | str, names: list[str] | None = None,
          pyodide_url: str | None = None, say: Callable[[str], object] = print) -> Path:
    """Build the JupyterLite site of `names` (every assignment but the torch track when
    empty) into the folder `target` (new or empty); `pyodide_url` is where the kernel loads
    Pyodide from (its `pyodide.mjs`; the kernel's own CDN default when None). Returns
    `target`."""
    course, target = Path(course), Path(target).resolve()
    if target.exists() and not target.is_dir():
        raise CourseError(f"{target} is a file: the site goes into a new folder")
    if target.exists() and any(target.iterdir()):
        raise CourseError(f"{target} is not empty: the site goes into a new folder")
    chosen = assignments(course, names)
    command = _jupyter_lite()
    tmp: Any  # the folder's name, then its Path
    with tempfile.TemporaryDirectory(prefix="residual-pack-lite-") as tmp:
        tmp = Path(tmp)
        # the student release: its wheel and notebooks, checked to hold no answer
        student = tmp / "release"
        release.build(course, student, chosen, say=lambda _: None)
        lite = tmp / "lite"
        contents = lite / "contents"
        contents.mkdir(parents=True)
        for name in chosen:
            shutil.copytree(student / "assignments" / name, contents / name)
        (contents / START).write_text(
            START_TEXT.format(assignments=", ".join(n[:2] for n in chosen)),
            encoding="utf-8")
        wheels = lite / "wheels"
        shutil.copytree(student / "wheels", wheels)
        _extra_wheels(wheels)
        settings = {}
        if pyodide_url:
            settings["pyodideUrl"] = pyodide_url
        (lite / "jupyter-lite.json").write_text(json.dumps({
            "jupyter-lite-schema-version": 0,
            "jupyter-config-data": {
                "appName": "Residual connections",
                # nbgrader's lab extension (installed beside JupyterLab here) needs a
                # Jupyter server, which the site has not
                "disabledExtensions": DISABLED,
                "litePluginSettings": {KERNEL_PLUGIN: settings},
            },
        }, indent=2), encoding="utf-8")
        (lite / "jupyter_lite_config.json").write_text(json.dumps({
            "LiteBuildConfig": {
                "contents": [str(contents)],
                "output_dir": str(target),
                "cache_dir": str(tmp / "cache"),
                # a smaller site: no source maps, no shared packages nothing uses
                "no_sourcemaps": True,
                "no_unused_shared_packages": True,
            },
            "PipliteAddon": {"piplite_urls": [str(wheels)]},
        }, indent=2), encoding="utf-8")
        done = subprocess.run([*command, "build", "--lite-dir", str(lite)], cwd=lite,
                              capture_output=True, text=True)
        if done.returncode:
            raise CourseError(f"jupyter lite build failed:\n{done.stdout[-3000:]}"
                              f"{done.stderr[-3000:]}")
    found = problems(target)
    if found:
        raise CourseError("the site holds what a student must not get:\n  "
                          + "\n  ".join(found))
    size, count = site_size(target)
    say(f"site: {target} ({len(chosen)} assignments, {count} files, {size / 1e6:.1f} MB)")
    return target


def problems(site: Path | str) -> list[str]:
    """What in the built site a student must not get ([] when nothing): release.py's own
    check of the wheels and notebooks, and a site without the student wheel."""
    site = Path(site)
    found = []
    with tempfile.TemporaryDirectory(prefix="residual-pack-lite-check-") as tmp:
        # release.problems reads a release folder: the site's wheels under wheels/, its
        # notebooks beside them
        view = Path(tmp)
        (view / "wheels").mkdir()
        for wheel in site_wheels(site):
            if wheel.name.startswith(("residual_pack_student-", "residual_pack_solved_")):
                shutil.copy2(wheel, view / "wheels" / wheel.name)
        if not any((view / "wheels").iterdir()):
            found.append("pypi/: no residual_pack_student wheel")
        for notebook in site.rglob("*.ipynb"):
            dest = view / "files" / notebook.relative_to(site)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(notebook, dest)
        found += release.problems(view)
    return found
