"""The pages made from a hostile submission run none of its script, in Chromium.

A course is set up as an instructor has it (the repository's nbgrader_config.py and the
first assignment's source), a submission with script in every form a page could run it
(`hostile.script_submission`: a `<script>`, an `<img onerror>`, a `javascript:` link, an
`application/javascript` output, SVG with a script and an onload, markdown with an
`onerror`) is graded by plain `nbgrader autograde` and given feedback by plain `nbgrader
generate_feedback`, both reading only the course's config. Then headless Chromium opens
the student's feedback page (a file, as a student opens it) and formgrader's view of the
submission (JupyterLab on the course, `/formgrader/submissions/<id>`, in the instructor's
Jupyter origin). Each of the student's scripts sets `window.pwned` (and most the title):
on neither page is it set, after the page has loaded and every link of the student's has
been clicked. Both pages read offline: their equations are MathML, and neither asks any
host but the Jupyter server for anything (formgrader's own template loads MathJax from a
CDN, which the course's config leaves out).
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import lab_helpers as lh  # noqa: E402

from autograder.authoring.madeup import filled_in  # noqa: E402
from autograder.grading.course import read_notebook  # noqa: E402

ASSIGNMENT = NOTEBOOK = "01_residual_stack"
STUDENT = "script-outputs"
SETTLE_S = 3  # after load: an image's error event, a deferred script, have long fired


def _run(args, cwd, env, timeout=900):
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """The course, graded and given feedback by nbgrader's own commands."""
    lh.require_browser()
    sys.path.insert(0, str(lh.REPO_ROOT / "tests"))
    from hostile import script_submission
    from isolation import require_isolation

    require_isolation()  # nbgrader autograde runs the kernel in the course's sandbox
    base = tmp_path_factory.mktemp("pages")
    course = base / "course"
    course.mkdir()
    shutil.copy2(lh.REPO_ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(lh.REPO_ROOT / "source" / ASSIGNMENT, course / "source" / ASSIGNMENT)
    env = lh.jupyter_env(base / "jupyter")
    nbgrader = str(lh.VENV_BIN / "nbgrader")
    _run([nbgrader, "generate_assignment", ASSIGNMENT, "--force"], course, env)
    release = read_notebook(course / "exercises" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    source = read_notebook(course / "source" / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    handed_in = course / "submitted" / STUDENT / ASSIGNMENT
    handed_in.mkdir(parents=True)
    nbformat.write(script_submission(filled_in(release, source)),
                   handed_in / f"{NOTEBOOK}.ipynb")
    _run([nbgrader, "autograde", ASSIGNMENT], course, env)
    _run([nbgrader, "generate_feedback", ASSIGNMENT], course, env)
    page = course / "feedback" / STUDENT / ASSIGNMENT / f"{NOTEBOOK}.html"
    assert page.is_file(), sorted(p.name for p in (course / "feedback").rglob("*"))
    return course, env, page


def _no_script_ran(page, shots, name):
    """Load is done: wait, click every link of the student's, then read what a script of
    theirs would have set."""
    page.wait_for_timeout(SETTLE_S * 1000)
    ran = page.evaluate("() => window.pwned === undefined ? null : String(window.pwned)")
    assert ran is None, f"the student's script ran on the {name} page: {ran}"
    for text in ("link", "more"):
        links = page.get_by_text(text, exact=True)
        for i in range(links.count()):
            links.nth(i).click(timeout=5_000, no_wait_after=True)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(shots / f"{name}.png"), full_page=True)
    ran = page.evaluate("() => window.pwned === undefined ? null : String(window.pwned)")
    assert ran is None, f"the student's script ran on the {name} page: {ran}"
    assert page.title() != "pwned", f"the student's script set the {name} page's title"


def _drawings(page):
    """The sizes of the SVG outputs as the page draws them (as images): the pack's own
    drawings (three in this notebook) must still show, and the student's SVG too, as a
    picture whose script does not run."""
    images = page.locator("img[src^='data:image/svg+xml']")
    sizes = [images.nth(i).evaluate("e => [e.naturalWidth, e.naturalHeight]")
             for i in range(images.count())]
    assert len(sizes) == 4 and all(w > 0 and h > 0 for w, h in sizes), sizes
    assert sum(w > 100 for w, _ in sizes) == 3, sizes


def _outside(requests, allowed):
    return [url for url in requests if not url.startswith(allowed)]


@pytest.mark.browser
@pytest.mark.slow
def test_no_script_of_the_students_runs_on_the_feedback_page(graded):
    from playwright.sync_api import sync_playwright

    course, _, feedback = graded
    shots = lh.shots_dir("pages-feedback")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(lh.CHROMIUM), headless=True,
                                     args=lh.CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(feedback.as_uri(), wait_until="load")
            _no_script_ran(page, shots, "feedback")
            # the page shows what the student wrote, as text and sanitized markup
            assert page.get_by_text("A note of mine.").count() == 1
            assert page.locator("math").count() > 0, "no equation drawn as MathML"
            assert page.locator("iframe, embed, object").count() == 0
            _drawings(page)
            outside = _outside(requests, ("file:", "data:", "about:"))
            assert not outside, f"the feedback page asked for {outside}"
        finally:
            browser.close()


@pytest.mark.browser
@pytest.mark.slow
def test_no_script_of_the_students_runs_in_formgraders_view(graded):
    from nbgrader.api import Gradebook
    from playwright.sync_api import sync_playwright

    course, env, _ = graded
    shots = lh.shots_dir("pages-formgrader")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        submission = gb.find_submission_notebook(NOTEBOOK, ASSIGNMENT, STUDENT).id
    command = [str(lh.VENV_BIN / "jupyter-lab"), "--ServerApp.ip=127.0.0.1",
               f"--ServerApp.root_dir={course}", "--LabApp.extension_manager=readonly",
               "--LabApp.news_url=None",
               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
               *(["--allow-root"] if os.geteuid() == 0 else [])]
    server = lh.LabServer(course, env, shots / "server.log", command=command)
    try:
        server.start()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(lh.CHROMIUM), headless=True,
                                         args=lh.CHROMIUM_FLAGS)
            try:
                page = browser.new_page(
                    viewport={"width": 1400, "height": 1000},
                    extra_http_headers={"Authorization": f"token {server.token}"})
                page.set_default_timeout(120_000)
                requests = []
                page.on("request", lambda r: requests.append(r.url))
                page.goto(f"{server.url}/formgrader/submissions/{submission}/",
                          wait_until="load")
                # formgrader's own script works: its grading form shows the autograded
                # scores (as the score boxes' placeholders)
                page.wait_for_function("() => [...document.querySelectorAll('input.score')]"
                                       ".some(i => i.placeholder === '2')", timeout=60_000)
                _no_script_ran(page, shots, "formgrader")
                assert page.get_by_text("A note of mine.").count() == 1
                assert page.locator("math").count() > 0, "no equation drawn as MathML"
                _drawings(page)
                outside = _outside(requests, (server.url, "data:", "about:"))
                assert not outside, f"formgrader's view asked for {outside}"
            finally:
                browser.close()
    finally:
        server.stop()
