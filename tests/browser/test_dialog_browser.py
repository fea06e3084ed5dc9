"""How a failing test reads in a student's JupyterLab, in a real browser (issue 41, item 5).

`scripts/lab` serves a copy of the course; headless Chromium (1400 x 1000) opens
exercises/01_residual_stack with every answer written as the model answer has it, except
Task 1.1, which adds the shortcut twice per layer (a registered mistake). Run All, then:

1. **the test cell's message wraps at word boundaries**: the output `pre` of Task 1.1's
   failing test cells is not styled `word-break: break-all` (JupyterLab's own rule for
   every output `pre`, which cut "m istake"), and no rendered line of the message ends
   between two letters of one word (the line boxes measured with a DOM Range);
2. **Validate's dialog**: it names the mistake (the registered hint); its body and every
   `pre` in it have no horizontal scroll (scrollWidth <= clientWidth); it does not show the
   failing test cells' source, only the line that names each of them.

Screenshots and a summary go to tests/browser/artifacts/dialog/.
"""

import json

import lab_helpers as lh
import pytest

from autograder.answers import mutants

pytestmark = pytest.mark.browser

ASSIGNMENT = "01_residual_stack"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
MISTAKE = "shortcut added twice per layer"
TESTS = ("task1_1_test_output", "task1_1_test_gradient")
STDERR = "application/vnd.jupyter.stderr"

# every rendered line of cell i's stderr output: its text and whether it was broken
# between two letters (a line that ends in a letter whose next line starts with one,
# where the text has no space or newline between them)
LINES_JS = """i => {
  const cell = document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i];
  const pre = cell.querySelector(
    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"] pre');
  if (!pre) return null;
  const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
  const chars = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let k = 0; k < node.length; k++) {
      const range = document.createRange();
      range.setStart(node, k);
      range.setEnd(node, k + 1);
      const rect = range.getClientRects()[0];
      chars.push({c: node.data[k], top: rect ? Math.round(rect.top) : null});
    }
  }
  const lines = [];
  let line = null;
  for (const ch of chars) {
    if (ch.c === '\\n' || ch.top === null) { line = null; if (ch.c === '\\n') continue; }
    if (line === null || Math.abs(ch.top - line.top) > 2) {
      const wrapped = line !== null;  // a new line box without a newline in the text
      line = {top: ch.top, text: '', wrappedFrom: wrapped ? lines.length - 1 : null};
      lines.push(line);
    }
    line.text += ch.c;
  }
  const midWord = [];
  lines.forEach((l, k) => {
    if (l.wrappedFrom === null) return;
    const before = lines[l.wrappedFrom].text;
    if (/[A-Za-z]$/.test(before) && /^[A-Za-z]/.test(l.text))
      midWord.push(before.slice(-20) + ' | ' + l.text.slice(0, 20));
  });
  return {wordBreak: getComputedStyle(pre).wordBreak, lines: lines.map(l => l.text),
          midWord, text: pre.textContent};
}"""

# the dialog's body and each pre in it: how wide their content is, and how wide they show
DIALOG_JS = """() => {
  const body = document.querySelector(
    '.nbgrader-SuccessDialog .jp-Dialog-body, .nbgrader-ErrorDialog .jp-Dialog-body');
  const box = e => ({tag: e.tagName, scroll: e.scrollWidth, client: e.clientWidth,
                     text: e.textContent.slice(0, 80)});
  return {body: box(body), pres: Array.from(body.querySelectorAll('pre')).map(box),
          text: body.innerText};
}"""


def wrong_notebook(path):
    """The release at `path` with every answer the model answer, Task 1.1 the mistake."""
    from autograder.authoring.madeup import filled_in, with_answer
    from autograder.grading.course import read_notebook

    wrong = [m for m in mutants.load(ASSIGNMENT) if m.name == MISTAKE]
    assert len(wrong) == 1, f"{ASSIGNMENT} registers no single mutant named {MISTAKE!r}"
    solved = filled_in(read_notebook(path), read_notebook(
        lh.REPO_ROOT / "source" / ASSIGNMENT / NOTEBOOK))
    path.write_text(json.dumps(with_answer(solved, wrong[0].cell, wrong[0].source)),
                    encoding="utf-8")
    return wrong[0]


def test_a_failing_tests_message_wraps_and_validates_dialog_fits(tmp_path):
    lh.require_browser()
    shots = lh.shots_dir("dialog")
    env = lh.jupyter_env(tmp_path / "jupyter")
    course, _ = lh.prepare_course(tmp_path / "course", ASSIGNMENT, env)
    path = course / "exercises" / ASSIGNMENT / NOTEBOOK
    mistake = wrong_notebook(path)
    nb = lh.read_nb(path)
    index = {lh.nbgrader_meta(c).get("grade_id"): i for i, c in enumerate(nb["cells"])}
    summary = []
    try:
        with lh.lab_page(course, env, shots) as (server, page):
            nbp = lh.NotebookPage(page, server, f"{ASSIGNMENT}/{NOTEBOOK}",
                                  len(nb["cells"]), shots)
            nbp.open()
            nbp.run_all()
            shown = {}
            for grade_id in TESTS:
                nbp.shot(f"1-{grade_id}", index[grade_id])
                message = nbp.cell(index[grade_id]).locator(
                    f'.jp-OutputArea-output[data-mime-type="{STDERR}"]').first
                message.scroll_into_view_if_needed()
                message.screenshot(path=str(shots / f"1-{grade_id}-message.png"))
                shown[grade_id] = page.evaluate(LINES_JS, index[grade_id])
                summary.append(f"{grade_id}: {json.dumps(shown[grade_id], indent=1)}")
            kind, _ = nbp.validate()
            page.wait_for_timeout(500)  # the dialog's layout
            nbp.shot("2-validate-dialog")
            dialog = page.evaluate(DIALOG_JS)
            summary.append(f"Validate ({kind}): {json.dumps(dialog, indent=1)}")
            nbp.close_dialog()
    finally:
        (shots / "summary.txt").write_text("\n\n".join(summary) + "\n", encoding="utf-8")

    # each problem found, all of them reported together
    problems = []
    # 1. the message in the test cell
    for grade_id in TESTS:
        got = shown[grade_id]
        assert got is not None, f"{grade_id} shows no error: {summary}"
        assert "This looks like a known mistake" in got["text"], (grade_id, got["text"])
        if got["wordBreak"] == "break-all":
            problems.append(f"{grade_id}'s message is styled word-break: break-all")
        if got["midWord"]:
            problems.append(f"{grade_id}'s message breaks lines inside words: "
                            f"{got['midWord']}")

    # 2. Validate's dialog
    words = " ".join(dialog["text"].split())
    assert kind == "error" and "The following cell failed" in words, words[:2000]
    if " ".join(mistake.hint.split()) not in words:
        problems.append(f"the dialog does not name the mistake ({mistake.hint})")
    wide = [b for b in [dialog["body"], *dialog["pres"]] if b["scroll"] > b["client"]]
    if wide:
        problems.append(f"the dialog scrolls sideways: {wide}")
    for grade_id in TESTS:
        source = lh.cell_text(nb["cells"][index[grade_id]]).splitlines()
        shown_lines = [line.strip() for line in source[1:]
                       if len(line.strip()) > 12 and line.strip() in dialog["text"]]
        if shown_lines:
            problems.append(f"the dialog shows {grade_id}'s source: {shown_lines}")
    assert not problems, "\n".join(problems)
