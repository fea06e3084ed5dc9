"""Assignment 1 in the JupyterLite site, in Chromium, offline (issue 44).

`residual-pack lite` builds the site of 01 with its kernel pointed at a Pyodide served
from this machine: the npm registry's `pyodide` package with the wheels the kernel loads
as it starts (`scripts/install-lite-pyodide` puts them in $LITE_PYODIDE_DIR, default
/opt/lite-pyodide). `python -m http.server` serves both on 127.0.0.1; nothing comes from a
CDN. Headless Chromium opens the site's console (JupyterLite's REPL, with the Pyodide
kernel), which installs the student wheel from the site with the start page's `%pip` line
and then runs, through the browser kernel's IPython, the code cells of 01 as the site holds
it, in order, with the tasks' cells answered:

1. with the solution's answers: every graded test cell prints its success line, with no
   error, and the drawing cell shows `microgpt.draw`'s SVG;
2. with a registered wrong answer to Task 1.1 (the plain stack returned): its two test
   cells fail with the known-mistake message registered with it.

Cells that import numpy or matplotlib are not run (they need Pyodide's package CDN): the
test lists them. Screenshots go to tests/browser/artifacts/lite/. Skipped when Chromium,
JupyterLite or the local Pyodide is missing; failed instead under LITE_REQUIRED=1.
"""

import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import lab_helpers as lh
import pytest

from autograder.answers import mutants
from autograder.authoring import lite
from autograder.kernel.diagnosis import LEAD

pytestmark = pytest.mark.browser

ASSIGNMENT = "01_residual_stack"
WRONG = "plain stack returned as the residual one"
PYODIDE = Path(os.environ.get("LITE_PYODIDE_DIR", "/opt/lite-pyodide")) / "pyodide"
NEEDS_CDN = ("import matplotlib", "import numpy", "from matplotlib", "from numpy")
END = "=== END OF RUN ==="
RUN_S = 420


def _require():
    lh.require_browser()
    why = None
    try:
        import jupyterlite_core  # noqa: F401
        import jupyterlite_pyodide_kernel  # noqa: F401
    except ImportError as e:
        why = f"JupyterLite is not installed ({e.name}; pip install -e '.[lite]')"
    if why is None and not (PYODIDE / "pyodide.mjs").is_file():
        why = f"no local Pyodide in {PYODIDE} (run scripts/install-lite-pyodide)"
    if why:
        if os.environ.get("LITE_REQUIRED") == "1":
            pytest.fail(f"LITE_REQUIRED=1, but {why}", pytrace=False)
        pytest.skip(why)


@contextlib.contextmanager
def _served(site, port):
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def _cells(notebook, answers):
    """[(label, source)]: the notebook's code cells in order, each answer cell replaced by
    `answers[grade_id]`, and the cells that need the package CDN apart."""
    run, left_out = [], []
    for i, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        meta = lh.nbgrader_meta(cell)
        label = meta.get("grade_id") or f"cell {i}"
        source = answers.get(label, lh.cell_text(cell))
        if any(line.lstrip().startswith(NEEDS_CDN) for line in source.splitlines()):
            left_out.append(label)
        else:
            run.append((label, source))
    return run, left_out


def _driver(cells):
    """The console's code: the start page's install line, then each cell through the
    kernel's IPython, a marker line before each and its error, if any, printed after it
    (the console shows one error for the whole run, the last)."""
    lines = [lite.INSTALL, "_shell = get_ipython()"]
    for label, source in cells:
        lines.append(f"print({('=== ' + label + ' ===')!r}, flush=True)")
        lines.append(f"_r = _shell.run_cell({source!r})")
        lines.append("_e = _r.error_before_exec or _r.error_in_exec")
        lines.append("if _e is not None: print(f'{type(_e).__name__}: {_e}', flush=True)")
    lines.append(f"print({END!r}, flush=True)")
    return "\n".join(lines)


def _run_in_console(page, base, cells, shot):
    code = urllib.parse.quote(_driver(cells))
    url = f"{base}/repl/index.html?kernel=python&toolbar=1&code={code}"
    start = time.perf_counter()
    page.goto(url)
    # the marker printed, not the console's own copy of the code
    page.wait_for_function(
        "[...document.querySelectorAll('.jp-OutputArea-output')]"
        f".some(e => e.innerText.includes({json.dumps(END)}))", timeout=RUN_S * 1000)
    seconds = time.perf_counter() - start
    page.screenshot(path=str(shot), full_page=True)
    outputs = page.query_selector_all(".jp-OutputArea-output")
    text = "\n".join(o.inner_text() for o in outputs)
    # JupyterLab shows an image/svg+xml output as an <img> of it
    svgs = len(page.query_selector_all(".jp-OutputArea-output svg, "
                                       ".jp-OutputArea-output img[src^='data:image/svg']"))
    shown, label = {}, None
    for line in text.splitlines():
        if line.startswith("=== ") and line.endswith(" ==="):
            label = line[4:-4]
            shown[label] = []
        elif label is not None:
            shown[label].append(line)
    shown = {k: "\n".join(v) for k, v in shown.items()}
    shown["(shown as the error)"] = "\n".join(
        o.inner_text() for o in page.query_selector_all(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"))
    return shown, svgs, seconds


def test_assignment_1_runs_in_the_site_offline(tmp_path):
    _require()
    port = lh.free_port()
    site = tmp_path / "site"
    lite.build(lh.REPO_ROOT, site, [ASSIGNMENT],
               pyodide_url=f"http://127.0.0.1:{port}/pyodide/pyodide.mjs", say=lambda _: None)
    (site / "pyodide").symlink_to(PYODIDE, target_is_directory=True)
    notebook = lh.read_nb(site / "files" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    solutions = lh.solution_texts(lh.read_nb(
        lh.REPO_ROOT / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"))
    graded = lh.graded_cells(notebook)
    [wrong] = [m for m in mutants.load(ASSIGNMENT) if m.name == WRONG]
    shots = lh.shots_dir("lite")
    report = []
    from playwright.sync_api import sync_playwright

    with _served(site, port) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(lh.CHROMIUM), args=lh.CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            # 1. the solution's answers
            cells, left_out = _cells(notebook, solutions)
            shown, svgs, seconds = _run_in_console(page, base, cells, shots / "solved.png")
            report.append(f"solved 01: {len(cells)} code cells run in {seconds:.0f} s "
                          f"(page load, kernel start and %pip install included); not run "
                          f"offline (numpy/matplotlib from Pyodide's CDN): {left_out}")
            for _, grade_id, _, success in graded:
                assert grade_id in shown, f"{grade_id} did not run:\n{shown}"
                assert success in shown[grade_id], f"{grade_id}: {shown[grade_id]}"
                assert "Error" not in shown[grade_id], f"{grade_id}: {shown[grade_id]}"
            assert not shown["(shown as the error)"], shown["(shown as the error)"]
            assert svgs >= 2, "microgpt.draw's SVG drawings are not shown"
            # 2. a registered wrong answer to Task 1.1
            answers = {**solutions, wrong.cell: wrong.source}
            cells, _ = _cells(notebook, answers)
            shown, _, seconds = _run_in_console(page, base, cells, shots / "wrong.png")
            report.append(f"wrong answer ({WRONG}): run in {seconds:.0f} s")
            message = LEAD + " ".join(wrong.hint.split())
            for grade_id in [*wrong.loses, "(shown as the error)"]:
                assert message in " ".join(shown[grade_id].split()), (
                    f"{grade_id}: {shown[grade_id]}")
            kept = [g for _, g, _, _ in graded if g not in wrong.loses]
            for grade_id in kept:
                assert LEAD not in shown[grade_id], f"{grade_id}: {shown[grade_id]}"
        finally:
            browser.close()
            (shots / "summary.txt").write_text("\n".join(report) + "\n", encoding="utf-8")
            print("\n" + "\n".join(report))
