"""The drawings as a student sees them: notebooks 01 and 05 in JupyterLab, in Chromium.

`scripts/lab` serves a temporary copy of the course whose exercises/ holds the instructor's
notebooks from source/ (their answer cells filled in, so that the residual stack of 01 is
drawn too); headless Chromium opens each notebook and runs the cells that draw, with the
cells they need above them; in 01 a cell added to the copy draws the residual stack again
with Graphviz (when Graphviz is installed; GRAPHVIZ_REQUIRED=1 makes its absence fail), so
that both backends are seen. For every drawing the test

- takes a screenshot of the window (the drawing in the notebook, at a student's window
  size) and one of the drawing itself, into tests/browser/artifacts/drawings/;
- measures its text as rendered: the SVG is shown as an <img>, so its markup is copied
  inline at the place and size of the <img>, and each <text>'s font size times the scale it
  is drawn at (getScreenCTM) is read, and its box height (getBoundingClientRect);
- asserts that no text is under 9 px, that the drawing is not shrunk (shown at its own
  size), and what it must show: operations named, data and grad, constants, and the
  shortcuts coloured where they are, and only there.

The smallest text size of each drawing is printed and written to drawings/summary.txt.
"""

import json
import os
import re
import shutil

import lab_helpers as lh
import pytest

from microgpt.draw import SHORTCUT_COLOUR, _graphviz_ready

pytestmark = pytest.mark.browser

MIN_TEXT_PX = 9.0
NODE_LABEL = re.compile(r"^(?:(?P<name>[^:]+): )?data (?P<data>\S+) \| grad (?P<grad>\S+)$")

# notebook -> the cells to run, by grade id (nbgrader's cell names), in order: the ones
# that draw and the ones they need
NOTEBOOKS = {
    "01_residual_stack": ["imports", "value_refresher", "plain_stack",
                          "task1_1_residual_stack", "task1_1_graph", "graphviz_drawing",
                          "wide_drawing"],
    "05_gpt_residual_adds": ["block_diagrams", "imports", "drawn_add"],
}
# grade id -> per SVG output of that cell: (what it is, shortcut arrows in colour, or None
# for a block diagram)
DRAWINGS = {
    "value_refresher": [("b = a * a + a", 1)],
    "task1_1_graph": [("plain stack", 0), ("residual stack", 3)],
    "block_diagrams": [("pre-norm block", None), ("post-norm block", None)],
    "drawn_add": [("pre-norm add", 2), ("post-norm add", 2)],
    "graphviz_drawing": [("residual stack by Graphviz", 3)],
    "wide_drawing": [("a sum of 30 squares, wider than the notebook", 0)],
}
# a cell added to the copy of 01, after the two stacks' drawing: the residual stack drawn by
# the other backend, Graphviz (what draw() gives by default where Graphviz is installed)
GRAPHVIZ_CELL = {
    "cell_type": "code", "execution_count": None, "id": "graphviz_drawing", "metadata": {},
    "outputs": [], "source": 'draw(out, names={x: "x", out: "out"}, backend="graphviz")',
}
# and one too wide for the output area: shown at full size with a scroll bar, not shrunk
WIDE_CELL = {
    "cell_type": "code", "execution_count": None, "id": "wide_drawing", "metadata": {},
    "outputs": [], "source": "xs = [Value(0.1 * i) for i in range(30)]\n"
                             "wide = Value.sum([v * v for v in xs])\n"
                             "wide.backward()\n"
                             'draw(wide, backend="svg")',
}
EXTRA_CELLS = {"graphviz_drawing": GRAPHVIZ_CELL, "wide_drawing": WIDE_CELL}




def course_copy(dest, notebooks):
    """nbgrader_config.py and exercises/<notebook>/ holding source/'s notebook, with the
    extra cells that `notebooks` asks for after 01's drawing of the two stacks."""
    dest.mkdir(parents=True)
    shutil.copy2(lh.REPO_ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    for assignment, run in notebooks.items():
        folder = dest / "exercises" / assignment
        folder.mkdir(parents=True)
        nb = lh.read_nb(lh.REPO_ROOT / "source" / assignment / f"{assignment}.ipynb")
        extra = [EXTRA_CELLS[key] for key in run if key in EXTRA_CELLS]
        if extra:
            at = next(i for i, c in enumerate(nb["cells"])
                      if lh.nbgrader_meta(c).get("grade_id") == "task1_1_graph")
            nb["cells"][at + 1:at + 1] = extra
        (folder / f"{assignment}.ipynb").write_text(json.dumps(nb, indent=1), encoding="utf-8")
    return dest


def test_drawings_read_at_notebook_width(tmp_path):
    lh.require_browser()
    notebooks = {name: list(run) for name, run in NOTEBOOKS.items()}
    summary = []
    if not _graphviz_ready():  # our own SVG is drawn and checked all the same
        message = "Graphviz (the graphviz package and the dot program) is not installed"
        if os.environ.get("GRAPHVIZ_REQUIRED"):
            pytest.fail(message, pytrace=False)
        summary.append(f"not drawn by Graphviz: {message}")
        for run in notebooks.values():
            if "graphviz_drawing" in run:
                run.remove("graphviz_drawing")
    shots = lh.shots_dir("drawings")
    env = lh.jupyter_env(tmp_path / "jupyter")
    course = course_copy(tmp_path / "course", notebooks)
    try:
        with lh.lab_page(course, env, shots) as (server, page):
            for assignment, run in notebooks.items():
                nb_path = course / "exercises" / assignment / f"{assignment}.ipynb"
                nb = lh.read_nb(nb_path)
                index = {lh.nbgrader_meta(c).get("grade_id") or c.get("id"): i
                         for i, c in enumerate(nb["cells"])}
                nbp = lh.NotebookPage(page, server, f"{assignment}/{assignment}.ipynb",
                                      len(nb["cells"]), shots)
                try:
                    nbp.open()
                    for grade_id in run:
                        cells = nbp.run_cell(index[grade_id])
                        errors = [o["text"] for o in cells[index[grade_id]]["outputs"]
                                  if o["mime"] == "application/vnd.jupyter.stderr"]
                        assert not errors, f"{assignment} {grade_id} failed: {errors}"
                        if grade_id in DRAWINGS:
                            check_drawings(nbp, assignment, grade_id, index[grade_id],
                                           summary)
                except BaseException:
                    nbp.shot(f"failure-{assignment}")
                    raise
                server.shutdown_kernels()
    finally:
        (shots / "summary.txt").write_text("\n".join(summary) + "\n", encoding="utf-8")
        print("\n" + "\n".join(summary))


def check_drawings(nbp, assignment, grade_id, index, summary):
    want = DRAWINGS[grade_id]
    svgs = nbp.svg_outputs(index)
    sizes = nbp.svg_text_sizes(index)
    assert len(svgs) == len(want) == len(sizes), (
        f"{grade_id} should show {len(want)} drawings, it shows {len(svgs)}")
    nbp.shot(f"{assignment}-{grade_id}-cell", index)
    outputs = nbp.cell(index).locator(
        '.jp-OutputArea-output[data-mime-type="image/svg+xml"] img')
    for n, ((what, shortcuts), svg, size) in enumerate(zip(want, svgs, sizes)):
        name = f"{assignment}-{grade_id}-{n + 1}"
        outputs.nth(n).scroll_into_view_if_needed()
        nbp.page.wait_for_timeout(200)
        nbp.page.screenshot(path=str(nbp.shots / f"{name}-window.png"))
        # the whole drawing: a window tall enough for it (JupyterLab paints only what is in
        # its scrolled view), then the student's window again
        viewport = nbp.page.viewport_size
        tall = max(viewport["height"], int(size["shownHeight"]) + 300)
        nbp.page.set_viewport_size({"width": viewport["width"], "height": tall})
        outputs.nth(n).scroll_into_view_if_needed()
        nbp.page.wait_for_timeout(300)
        outputs.nth(n).screenshot(path=str(nbp.shots / f"{name}.png"))
        nbp.page.set_viewport_size(viewport)
        assert svg["shown"], f"{what}: the drawing did not render"
        smallest = min(size["sizes"], key=lambda s: s["px"])
        summary.append(
            f"{name} ({what}): shown {size['shownWidth']:.0f} x {size['shownHeight']:.0f} px "
            f"(its own size {size['naturalWidth']} x {size['naturalHeight']}), "
            f"{len(size['sizes'])} texts, smallest {smallest['px']:.1f} px "
            f"({smallest['text']!r}, box {smallest['box']:.1f} px high)")
        assert smallest["px"] >= MIN_TEXT_PX, (
            f"{what}: text {smallest['text']!r} is shown {smallest['px']:.1f} px high")
        if "wider than" in what:
            scroll = nbp.cell(index).locator(".jp-OutputArea-output").last.evaluate(
                "o => [o.scrollWidth, o.clientWidth]")
            summary.append(f"{name}: its output area scrolls {scroll[0]} px in {scroll[1]} px")
            assert scroll[0] > scroll[1], f"{what}: no scroll bar, {scroll}"
        assert abs(size["shownWidth"] - size["naturalWidth"]) <= 1, (
            f"{what}: shown {size['shownWidth']:.0f} px wide, not at its own size "
            f"{size['naturalWidth']} px")
        if shortcuts is None:  # a block diagram: an add per branch, shortcuts in colour
            assert svg["texts"].count("+") == 2 and (
                svg["lines"].count(SHORTCUT_COLOUR) == 2), f"{what}: {svg}"
            continue
        if "Graphviz" in what:  # dot's SVG: a record per Value, a node per operation
            for shown in ("x", "data 1", "grad 1.331", "out", "*", "relu", "+", "0.1"):
                assert shown in svg["texts"], f"{what}: {shown!r} not shown: {svg['texts']}"
            assert svg["paths"].count(SHORTCUT_COLOUR) == shortcuts, f"{what}: {svg}"
            continue
        labels = [m for m in map(NODE_LABEL.match, svg["titles"]) if m]
        assert labels and all(f"data {m['data']}" in svg["texts"] and f"grad {m['grad']}"
                              in svg["texts"] for m in labels), f"{what}: {svg['texts']}"
        ops = {t.removeprefix("operation ") for t in svg["titles"]
               if t.startswith("operation ")}
        assert ops and ops <= set(svg["texts"]), f"{what}: operations {ops} not shown"
        assert svg["paths"].count(SHORTCUT_COLOUR) == shortcuts, (
            f"{what}: {svg['paths'].count(SHORTCUT_COLOUR)} arrows in colour, "
            f"expected {shortcuts}")
        if what in ("plain stack", "residual stack"):
            assert ops == {"*", "relu"} | ({"+"} if shortcuts else set())
            assert svg["titles"].count("constant 0.1") == 3, "the 0.1s are not constants"
        if what.endswith("add"):
            assert {"dot", "1/rms", "+", "*"} <= ops
