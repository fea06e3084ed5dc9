"""Assignments 02-07 in the JupyterLite site, in Chromium, offline, in the notebook view
(issue 44).

`residual-pack lite` builds the site of 02-07 with its kernel pointed at a Pyodide served
from this machine (`lite_site.py`: the npm registry's `pyodide`, its core only); nothing
comes from a CDN. For each notebook, headless Chromium opens it in the site's notebook view,
and the notebook is solved as a student would have it: the start page's `%pip` line in a
first cell, the solution's answer in every answer cell, and in 03, 04 and 06 the earlier
assignment's answer pasted where the notebook asks for it. 02 runs at a student's sizes;
in 03-06 a second cell sets NBGRADER_EXECUTION in the kernel, so that their experiments run
at the smaller sizes that grading runs (`microgpt.studies.grading()`, 05's and 06's
`FAST`): the same cells and the same code, shorter loops (at a student's sizes 03 took 12
minutes in the site). With BROWSER_FULL_SIZE=1 every notebook runs at a student's sizes, as
the timed run that docs/lite.md quotes did. Then Run > Run All Cells, timed, and every
cell's outputs are read from the notebook:

- no cell shows an error, and every graded test cell prints its success line;
- what needs Pyodide's package CDN (numpy, matplotlib) is not run, and the test says
  exactly what that is: the cells that use them are emptied to a comment naming why, and a
  cell that only imports them among other imports runs without those import lines. The
  report (tests/browser/artifacts/lite-notebooks/summary.txt, and printed) lists both, per
  notebook, with the cells run and the seconds Run All took.

07 has no code cell (its answers are written), so there is nothing to run in it.

01 is opened there too (the console test, test_lite_browser.py, runs its cells through the
console): solved, its test cells pass and its drawing shows; with a registered wrong answer
to Task 1.1 its first test cell fails with that mistake's message. The screenshots of those
three are the ones docs/lite.md shows (docs/images/lite-01-*.png, copied from
tests/browser/artifacts/lite-notebooks/).
"""

import json

import lab_helpers as lh
import lite_site as ls
import pytest

from autograder.answers import mutants
from autograder.kernel.diagnosis import LEAD
from microgpt.provenance import record

# slow: the whole file is one unit (116 s alone on 2 cores at grading's sizes; 2,145 s at a
# student's, at a load of 9 to 16), which the scheduler then starts first (tests/conftest.py)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = ["02_degradation", "03_highway", "04_identity_shortcut",
             "05_gpt_residual_adds", "06_residual_stream", "07_check_understanding"]
# the answer cells of an earlier assignment that a later notebook asks to be pasted
EARLIER = {"02_degradation": ("task2_2_mlp_logits",),
           "05_gpt_residual_adds": ("task5_1_pre_norm_block", "task5_2_post_norm_block",
                                    "task5_3_no_residual_block")}
FIRST = "01_residual_stack"
WRONG = "plain stack returned as the residual one"
RUN_ALL_S = 1800
LEFT_OUT = "# not run offline: this cell needs {what} (Pyodide's package CDN)"
# the experiments' sizes: a student's for 02 and grading's for the others (the suite's
# default), or a student's for all (BROWSER_FULL_SIZE=1, `lab_helpers.FULL_SIZE`)
FULL_SIZE = {*NOTEBOOKS, FIRST} if lh.FULL_SIZE else {
    FIRST, "02_degradation"}  # (01 has no experiment)
SIZES = ('import os\n'
         'os.environ["NBGRADER_EXECUTION"] = "validate"  # the test: the sizes grading runs')


def _source(name):
    return lh.read_nb(lh.REPO_ROOT / "source" / name / f"{name}.ipynb")


def pasted_earlier(cell_source: str) -> str:
    """The cell that hands the library a student's own earlier answers, with the solution's
    answers pasted in it (the functions above its use_my_answers call)."""
    call = cell_source[cell_source.index("use_my_answers("):]
    earlier = call.split('"')[1]
    answers = lh.solution_texts(_source(earlier))
    defs = "\n\n\n".join(answers[g] for g in EARLIER[earlier])
    return ("from microgpt import layernorm, linear, rmsnorm\n"
            "from microgpt.earlier import use_my_answers\n\n\n"
            f"{defs}\n\n\n{call}")


def solve(page: "ls.SitePage", name: str) -> dict:
    """Put the solution in the open notebook, leave out what needs the CDN, and put the
    start page's install line first. Returns what was left out: the cells that use numpy
    or matplotlib, the cells that read a name only such a cell defines (05's `samples`
    reads `final_loss` of its numpy cell), and the import lines of cells run without them."""
    answers = lh.solution_texts(_source(name))
    left = {"cells": [], "import lines": []}
    unreachable = {}  # a name -> the left-out cell that defines it
    for i, cell in enumerate(page.sources()):
        text = answers.get(cell["grade_id"], cell["source"])
        if cell["type"] == "code" and "use_my_answers(" in text and not cell["grade_id"]:
            text = pasted_earlier(text)
        if cell["type"] == "code":
            needs, imports = ls.needs_cdn(text)
            label = cell["grade_id"] or f"cell {i}"
            defined, used = ls.defined_and_used(text)
            missing = sorted(n for n in used - defined if n in unreachable)
            if needs or missing:
                what = (" and ".join(m for m in ("matplotlib", "numpy")
                                     if m in text or (m == "matplotlib" and "plt." in text)
                                     or (m == "numpy" and "np." in text)) or "matplotlib")
                if not needs:
                    what = (f"{', '.join(missing)} of "
                            f"{', '.join(sorted({unreachable[n] for n in missing}))}, "
                            f"which needs numpy or matplotlib")
                left["cells"].append(f"{label} ({what})")
                unreachable |= {n: label for n in defined}
                text = LEFT_OUT.format(what=what)
            else:
                for n in defined:
                    unreachable.pop(n, None)
                if imports:
                    left["import lines"] += [f"{label}: {line.strip()}" for line in imports]
                    text = ls.without_cdn_imports(text)
        if text != cell["source"]:
            page.set_source(i, text)
    page.insert_code_cell(0, ls.lite.INSTALL)
    if name not in FULL_SIZE:
        page.insert_code_cell(1, SIZES)
    return left


@pytest.fixture(scope="module")
def site_browser(tmp_path_factory):
    ls.require()
    port = lh.free_port()
    site = ls.build_offline(tmp_path_factory.mktemp("lite") / "site", [FIRST, *NOTEBOOKS],
                            port)
    shots = lh.shots_dir("lite-notebooks")
    report = []
    from playwright.sync_api import sync_playwright

    with ls.served(site, port) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(lh.CHROMIUM), args=lh.CHROMIUM_FLAGS)
        try:
            yield site, base, browser, shots, report
        finally:
            browser.close()
            (shots / "summary.txt").write_text("\n".join(report) + "\n", encoding="utf-8")
            print("\n" + "\n".join(report))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_a_solved_notebook_runs_in_the_site_offline(site_browser, name):
    site, base, browser, shots, report = site_browser
    released = lh.read_nb(site / "files" / name / f"{name}.ipynb")
    graded = lh.graded_cells(released)
    if not any(c["cell_type"] == "code" for c in released["cells"]):
        assert not graded
        report.append(f"{name}: no code cell (written answers only): nothing to run")
        return
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        nbp = ls.SitePage(page, base, f"{name}/{name}.ipynb", shots)
        opened = nbp.open()
        left = solve(nbp, name)
        seconds = nbp.run_all_timed(RUN_ALL_S)
        nbp.shot(f"{name}-solved")
        cells = nbp.sources()
        outputs = nbp.outputs()
        by_id = {c["grade_id"]: o for c, o in zip(cells, outputs) if c["grade_id"]}
        errors = [(c["grade_id"] or f"cell {i}", ls.text_of(o)[-1500:])
                  for i, (c, o) in enumerate(zip(cells, outputs))
                  if any(x.get("output_type") == "error" for x in o)]
        stderr = [(c["grade_id"] or f"cell {i}", ls.text_of(
                      [x for x in o if x.get("name") == "stderr"]))
                  for i, (c, o) in enumerate(zip(cells, outputs))
                  if any(x.get("name") == "stderr" for x in o)]
        ran = sum(1 for c in cells if c["type"] == "code"
                  and not c["source"].startswith("# not run offline"))
        report.append(
            f"{name}: {ran} code cells run (the %pip cell included"
            f"{'' if name in FULL_SIZE else ' and the one that sets the sizes grading runs'})"
            f" at {'a student' if name in FULL_SIZE else 'grading'}'s sizes with Run All in "
            f"{seconds:.1f} s, after {opened:.1f} s to open the notebook and start the "
            f"kernel; not run offline (Pyodide's CDN): cells {left['cells']}, import lines "
            f"{left['import lines']}; stderr shown in {[s[0] for s in stderr]}")
        (shots / f"{name}.json").write_text(json.dumps(
            {"seconds": seconds, "open_seconds": opened, "left_out": left,
             "stderr": [(g, t[-600:]) for g, t in stderr], "errors": errors,
             "install": ls.text_of(outputs[0]), "full_size": name in FULL_SIZE,
             # the machine that ran Chromium: the command, commit, load and date
             "provenance": record(
                 command=f"pytest tests/browser/test_lite_notebooks_browser.py -k {name}",
                 wall_seconds=seconds)}, indent=1))
        assert not errors, f"{name}: cells with an error: {errors}"
        for _, grade_id, _, success in graded:
            assert grade_id in by_id, f"{name}: {grade_id} is not in the notebook"
            assert success in ls.text_of(by_id[grade_id]), (
                f"{name}: {grade_id} did not pass: {ls.text_of(by_id[grade_id])[-1500:]}")
        # stderr holds the progress bars (tqdm's text bars: no widgets here); a warning or a
        # traceback there is what a student should not see
        assert not [s for s in stderr if "Traceback" in s[1] or "Warning" in s[1]], stderr
    finally:
        context.close()


def _index(page, grade_id):
    return next(i for i, c in enumerate(page.sources()) if c["grade_id"] == grade_id)


def test_01_in_the_notebook_view_a_pass_a_known_mistake_and_a_drawing(site_browser):
    site, base, browser, shots, report = site_browser
    released = lh.read_nb(site / "files" / FIRST / f"{FIRST}.ipynb")
    graded = lh.graded_cells(released)
    [wrong] = [m for m in mutants.load(FIRST) if m.name == WRONG]
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(60_000)
        nbp = ls.SitePage(page, base, f"{FIRST}/{FIRST}.ipynb", shots)
        opened = nbp.open()
        left = solve(nbp, FIRST)
        seconds = nbp.run_all_timed(RUN_ALL_S)
        outputs = dict(zip([c["grade_id"] for c in nbp.sources()], nbp.outputs()))
        for _, grade_id, _, success in graded:
            assert success in ls.text_of(outputs[grade_id]), ls.text_of(outputs[grade_id])
        graph = _index(nbp, "task1_1_graph")
        assert nbp.svg_outputs(graph), "microgpt.draw's drawing is not shown"
        nbp.shot("lite-01-passing", _index(nbp, "task1_1_test_output"))
        nbp.shot("lite-01-drawing", graph)
        report.append(f"{FIRST} (notebook view): Run All {seconds:.1f} s after {opened:.1f} s "
                      f"to open; not run offline: {left}")
        # the registered wrong answer to Task 1.1, run again from the top
        nbp.set_source(_index(nbp, wrong.cell), wrong.source)
        nbp.run_all_timed(RUN_ALL_S)
        outputs = dict(zip([c["grade_id"] for c in nbp.sources()], nbp.outputs()))
        first = wrong.loses[0]
        message = LEAD + " ".join(wrong.hint.split())
        assert message in " ".join(ls.text_of(outputs[first]).split()), (
            ls.text_of(outputs[first]))
        nbp.shot("lite-01-known-mistake", _index(nbp, first))
        report.append(f"{FIRST} with the wrong answer ({WRONG}): {first} fails with its "
                      f"known-mistake message")
    finally:
        context.close()
