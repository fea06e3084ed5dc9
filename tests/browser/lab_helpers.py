"""Helpers for the browser test: a course copy, a JupyterLab server, and a notebook page.

The server is the README command itself (`scripts/lab`), pointed at a temporary copy of the
course, with a temporary HOME and Jupyter folders so that nothing depends on (or writes to)
the user's own. Chromium is Debian's (/usr/bin/chromium), driven by Playwright; Playwright
never downloads a browser here.
"""

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = REPO_ROOT / ".venv" / "bin"
CHROMIUM = Path("/usr/bin/chromium")
# what works on this machine (and in CI): no sandbox as root, no GPU, and no background
# connections, which the closed network refuses (Playwright adds --headless and a fresh
# temporary --user-data-dir itself)
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# generous: two shared cores, and a cold start imports nbgrader's server extensions
SERVER_START_S = 180
PAGE_LOAD_S = 180
KERNEL_S = 180
RUN_ALL_S = 300
TAKEN_S = 20  # until a cell shows [*] after its run key (it does at once when taken)
VALIDATE_S = 300

# The experiments' sizes where a browser test runs a notebook's studies (the Lite site's
# notebooks, 04 and 06 on a student's own earlier answers): the smaller ones that grading
# runs (NBGRADER_EXECUTION set in the kernel, which `microgpt.studies.grading()` and 05's
# and 06's FAST read: the same cells and code, shorter loops), unless BROWSER_FULL_SIZE=1,
# which runs them at a student's sizes (docs/testing.md: what each costs)
FULL_SIZE = os.environ.get("BROWSER_FULL_SIZE") == "1"


def at_test_sizes(env):
    """`env` for a Jupyter server whose kernels run the studies at grading's sizes (as it
    is under BROWSER_FULL_SIZE=1)."""
    return dict(env) if FULL_SIZE else dict(env, NBGRADER_EXECUTION="validate")


def missing_requirements():
    """Why the browser test cannot run here (a sentence), or None when it can."""
    if not CHROMIUM.is_file():
        return (f"Chromium is not installed at {CHROMIUM} "
                f"(run scripts/install-browser, which apt-get installs Debian's chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return ("the playwright Python package is not installed "
                "(install the browser extra: pip install -e '.[browser]'; scripts/test does)")
    return None


def artifacts_dir():
    """Where screenshots and logs go: $ARTIFACTS_DIR, else tests/browser/artifacts/."""
    path = Path(os.environ.get("ARTIFACTS_DIR") or Path(__file__).parent / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    for old in list(path.glob("*.png")) + list(path.glob("*.log")) + list(path.glob("*.txt")):
        old.unlink()
    return path


# ---------------------------------------------------------------- notebooks


def read_nb(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def cell_text(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def nbgrader_meta(cell):
    return cell.get("metadata", {}).get("nbgrader", {})


def solution_texts(source_nb):
    """{grade_id: the cell as a student who solved it would leave it} for every answer
    cell of the instructor notebook: a code cell's source without the `### BEGIN SOLUTION`
    / `### END SOLUTION` marker lines; for a written answer (markdown), the first paragraph
    of the model answer (what follows it is the grader's rubric)."""
    texts = {}
    for cell in source_nb["cells"]:
        meta = nbgrader_meta(cell)
        if meta.get("solution"):
            lines = [
                line for line in cell_text(cell).split("\n")
                if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")
            ]
            text = "\n".join(lines).strip("\n")
            if cell["cell_type"] == "markdown":
                text = text.split("\n\n")[0]
            texts[meta["grade_id"]] = text
    return texts


def answer_cells(student_nb):
    """[(index, grade_id, cell type)] of the answer cells of a release: the TODO cells
    (autograded code) and the written answers (graded by hand)."""
    return [
        (i, nbgrader_meta(c)["grade_id"], c["cell_type"])
        for i, c in enumerate(student_nb["cells"])
        if nbgrader_meta(c).get("solution")
    ]


def graded_cells(student_nb):
    """[(index, grade_id, task id, success line)] of the autograded test cells: the task id
    is the name in `with task("...")` and the success line what the cell's last print()
    says when every check passed."""
    found = []
    for i, c in enumerate(student_nb["cells"]):
        meta = nbgrader_meta(c)
        if c["cell_type"] != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        text = cell_text(c)
        task = re.search(r'\btask\(\s*"([^"]+)"\s*\)', text)
        prints = re.findall(r'\bprint\(\s*"([^"]+)"\s*\)', text)
        if not task or not prints:
            raise AssertionError(
                f"graded cell {meta['grade_id']} has no `with task(\"...\")` block or no "
                f"print(\"...\") success line, so the browser test cannot tell what it "
                f"should show:\n{text}"
            )
        found.append((i, meta["grade_id"], task.group(1), prints[-1]))
    return found


# ---------------------------------------------------------------- the course copy


def jupyter_env(base):
    """The environment of a server that keeps HOME and every Jupyter folder in `base`."""
    base = Path(base)
    env = dict(os.environ)
    dirs = {
        "HOME": base / "home",
        "JUPYTER_CONFIG_DIR": base / "jupyter-config",
        "JUPYTER_DATA_DIR": base / "jupyter-data",
        "JUPYTER_RUNTIME_DIR": base / "jupyter-runtime",
        "IPYTHONDIR": base / "ipython",
        "MPLCONFIGDIR": base / "matplotlib",
        "XDG_CACHE_HOME": base / "cache",
        "XDG_CONFIG_HOME": base / "config",
    }
    for key, path in dirs.items():
        path.mkdir(parents=True, exist_ok=True)
        env[key] = str(path)
    env.pop("JUPYTER_PATH", None)
    env.pop("JUPYTER_CONFIG_PATH", None)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


def prepare_course(dest, assignment, env):
    """A copy of the course in `dest` with nbgrader_config.py and exercises/<assignment>:
    the repository's release when it has one, otherwise one generated from source/."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copy2(REPO_ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    release = REPO_ROOT / "exercises" / assignment
    if release.is_dir() and any(release.glob("*.ipynb")):
        shutil.copytree(release, dest / "exercises" / assignment)
        return dest, "copied from exercises/"
    shutil.copytree(REPO_ROOT / "source" / assignment, dest / "source" / assignment)
    cmd = [
        str(VENV_BIN / "nbgrader"), "generate_assignment", assignment, "--force", "--no-db",
        f"--CourseDirectory.root={dest}",
    ]
    proc = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 or not list((dest / "exercises" / assignment).glob("*.ipynb")):
        raise AssertionError(
            f"could not generate exercises/{assignment} with {' '.join(cmd)}:\n"
            f"{proc.stdout}\n{proc.stderr}"
        )
    return dest, "generated from source/ (the repository has no exercises/ yet)"


def write_user_settings(env, plugin, settings):
    """JupyterLab user settings for `plugin` in the server's (temporary) config folder."""
    folder = Path(env["JUPYTER_CONFIG_DIR"]) / "lab" / "user-settings"
    package, _, name = plugin.partition(":")
    path = folder / package / f"{name}.jupyterlab-settings"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings), encoding="utf-8")


# ---------------------------------------------------------------- the server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """`scripts/lab` on a course copy, on 127.0.0.1, in its own process group."""

    def __init__(self, course, env, log_path, token="browser-test-token", command=None,
                 extra_args=()):
        self.course = Path(course)
        self.command = command  # in place of scripts/lab: jupyter lab's own arguments
        self.extra_args = list(extra_args)  # more of jupyter lab's arguments (config)
        self.env = dict(env, COURSE_DIR=str(course))
        self.log_path = Path(log_path)
        self.token = token
        self.proc = None
        self.url = None

    def start(self):
        port = free_port()
        runtime = Path(self.env["JUPYTER_RUNTIME_DIR"])
        for old in runtime.glob("jpserver-*.json"):
            old.unlink()
        cmd = [
            "bash", str(REPO_ROOT / "scripts" / "lab"), "--no-browser",
            f"--ServerApp.port={port}", f"--IdentityProvider.token={self.token}",
        ]
        if self.command is not None:
            cmd = [*self.command, "--no-browser", f"--ServerApp.port={port}",
                   f"--IdentityProvider.token={self.token}"]
        cmd += self.extra_args
        self._log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen(
            cmd, cwd=REPO_ROOT if self.command is None else self.course, env=self.env,
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        deadline = time.monotonic() + SERVER_START_S
        info = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"scripts/lab exited with code {self.proc.returncode} before serving:\n"
                    f"{self.log_tail()}")
            found = list(runtime.glob("jpserver-*.json"))
            if found:
                try:
                    info = json.loads(found[0].read_text())
                except ValueError:
                    info = None  # being written
                if info:
                    break
            time.sleep(0.25)
        if not info:
            raise AssertionError(f"JupyterLab did not start in {SERVER_START_S} s:\n"
                                 f"{self.log_tail()}")
        self.info = info
        self.url = f"http://127.0.0.1:{info['port']}"
        while time.monotonic() < deadline:
            try:
                self.api("api/status")
                return self
            except OSError:
                time.sleep(0.25)
        raise AssertionError(f"JupyterLab's API did not answer:\n{self.log_tail()}")

    def api(self, path, timeout=30):
        req = urllib.request.Request(f"{self.url}/{path}",
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read().decode() or "null")

    def log_text(self):
        self._log.flush()
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def log_tail(self, lines=40):
        return "\n".join(self.log_text().splitlines()[-lines:])

    def shutdown_kernels(self):
        """Shut the server's kernels down through its API (they run in sessions of their
        own, so they are not in the server's process group)."""
        for kernel in self.api("api/kernels") or []:
            req = urllib.request.Request(
                f"{self.url}/api/kernels/{kernel['id']}", method="DELETE",
                headers={"Authorization": f"token {self.token}"})
            urllib.request.urlopen(req, timeout=60).close()

    def stop(self):
        """Stop the kernels, then the server (SIGTERM to the process group this test
        started; SIGKILL only if it is still there after 30 s)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                self.shutdown_kernels()
            except OSError as exc:
                log(f"could not shut the kernels down through the API: {exc}")
            for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._log.close()


# ---------------------------------------------------------------- the notebook page

# the text of rendered markdown outside typeset math and code, and what raw TeX looks like
# in it ($$...$$, $...$, \\commands): what a reader sees when MathJax did not run
JS_PROSE = """
const proseText = r => {
  const clone = r.cloneNode(true);
  clone.querySelectorAll('mjx-container, code, pre').forEach(e => e.remove());
  return clone.textContent;
};
const RAW_TEX = /\\$\\$|\\$[^$\\s][^$]*\\$|\\\\[a-zA-Z]{2,}/;
"""

# one JS call reads every cell's state: rendered DOM, not JupyterLab's internals
CELLS_JS = """() => { """ + JS_PROSE + """ return Array.from(
  document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')
).map(c => ({
  kind: c.classList.contains('jp-CodeCell') ? 'code'
        : (c.classList.contains('jp-MarkdownCell') ? 'markdown' : 'raw'),
  prompt: ((c.querySelector('.jp-InputPrompt') || {}).textContent || '').trim(),
  outputs: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => ({
    mime: o.getAttribute('data-mime-type') || '',
    text: o.textContent,
    images: Array.from(o.querySelectorAll('img')).map(i => ({
      loaded: i.complete && i.naturalWidth > 0, width: i.naturalWidth,
      alt: i.getAttribute('alt')})),
  })),
  markdown: c.classList.contains('jp-MarkdownCell') ? {
    rendered: !!c.querySelector('.jp-RenderedMarkdown'),
    text: (c.querySelector('.jp-RenderedMarkdown') || {}).textContent || '',
    headings: Array.from(c.querySelectorAll(
        '.jp-RenderedMarkdown h1, .jp-RenderedMarkdown h2, .jp-RenderedMarkdown h3')
      ).map(h => h.tagName + ' ' + h.textContent.replace('\u00b6', '').trim()),
    math: c.querySelectorAll('.jp-RenderedMarkdown mjx-container').length,
    mathErrors: c.querySelectorAll(
        '.jp-RenderedMarkdown mjx-merror, .jp-RenderedMarkdown [data-mjx-error]').length,
    rawTex: c.querySelector('.jp-RenderedMarkdown')
      ? (proseText(c.querySelector('.jp-RenderedMarkdown')).match(RAW_TEX) || [null])[0] : null,
  } : null,
})); }"""

NUMBERED = re.compile(r"^\[\d+\]:$")

# what a cell's SVG outputs show: JupyterLab renders an SVG as an <img> whose data: URL
# holds the drawing, so the drawing's own elements are read back from that URL
SVG_JS = """i => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]
  .querySelectorAll('.jp-OutputArea-output[data-mime-type="image/svg+xml"]')).map(o => {
  const img = o.querySelector('img');
  let svg = o.querySelector('svg');
  if (img) {
    const src = img.getAttribute('src') || '';
    const body = src.slice(src.indexOf(',') + 1);
    const text = /;base64,/.test(src.slice(0, src.indexOf(',') + 1))
      ? atob(body) : decodeURIComponent(body);
    svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
  }
  return {
    shown: img ? img.complete && img.naturalWidth > 0 : !!svg,
    width: img ? img.naturalWidth : 0,
    texts: svg ? Array.from(svg.querySelectorAll('text')).map(t => t.textContent) : [],
    titles: svg ? Array.from(svg.querySelectorAll('title')).map(t => t.textContent) : [],
    lines: svg ? Array.from(svg.querySelectorAll('line')).map(l => l.getAttribute('stroke'))
               : [],
    paths: svg ? Array.from(svg.querySelectorAll('path')).map(l => l.getAttribute('stroke'))
               : [],
  };
})"""

# how big a cell's drawings are shown: each SVG output (JupyterLab shows it as an <img>) is
# copied inline, at the size and place the <img> has on screen, and its text measured
# there, then removed: the font size as rendered (computed font size times the scale the
# SVG is drawn at, getScreenCTM) and the height of each text's box (getBoundingClientRect)
SVG_TEXT_SIZE_JS = """i => Array.from(document.querySelectorAll(
    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]
  .querySelectorAll('.jp-OutputArea-output[data-mime-type="image/svg+xml"] img')).map(img => {
  const src = img.getAttribute('src') || '';
  const body = src.slice(src.indexOf(',') + 1);
  const text = /;base64,/.test(src.slice(0, src.indexOf(',') + 1))
    ? atob(body) : decodeURIComponent(body);
  const svg = new DOMParser().parseFromString(text, 'image/svg+xml').documentElement;
  const shown = img.getBoundingClientRect();
  const holder = document.createElement('div');
  holder.style.cssText = `position:fixed;left:${shown.left}px;top:${shown.top}px;` +
    `width:${shown.width}px;height:${shown.height}px;visibility:hidden;`;
  svg.setAttribute('width', shown.width);
  svg.setAttribute('height', shown.height);
  holder.appendChild(document.importNode(svg, true));
  document.body.appendChild(holder);
  const texts = Array.from(holder.querySelectorAll('text')).filter(t => t.textContent.trim());
  const sizes = texts.map(t => ({
    text: t.textContent,
    px: parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
    box: t.getBoundingClientRect().height,
  }));
  holder.remove();
  return {shownWidth: shown.width, naturalWidth: img.naturalWidth,
          shownHeight: shown.height, naturalHeight: img.naturalHeight, sizes};
})"""


class NotebookPage:
    """One notebook open in JupyterLab, driven the way a student drives it."""

    def __init__(self, page, server, path, n_cells, shots):
        self.page = page
        self.server = server
        self.path = path
        self.n_cells = n_cells
        self.shots = Path(shots)

    # ---- reading
    def cells(self):
        return self.page.evaluate(CELLS_JS)

    def cell(self, index):
        return self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)

    def shot(self, name, index=None):
        """A screenshot of the window, or of the notebook scrolled to cell `index`: centred
        when it fits, else with its end (where an error's message is) in view."""
        path = self.shots / f"{name}.png"
        if index is not None:
            self.page.evaluate(
                """i => {
                  const cells = document.querySelectorAll(
                    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell');
                  const nb = document.querySelector(
                    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-WindowedPanel-outer');
                  const fits = !nb || cells[i].getBoundingClientRect().height
                                      < nb.getBoundingClientRect().height;
                  cells[i].scrollIntoView({block: fits ? 'center' : 'end'});
                }""", index)
            self.page.wait_for_timeout(300)  # let the scroll settle and images paint
        self.page.screenshot(path=str(path))
        return path

    def svg_outputs(self, index):
        """The SVG outputs of cell `index`: [{shown, width, texts, titles, lines, paths}],
        where texts are the drawing's <text> elements, titles its <title>s (a box's tooltip)
        and lines and paths the stroke colour of each <line> and <path>."""
        return self.page.evaluate(SVG_JS, index)

    def svg_text_sizes(self, index):
        """How the SVG outputs of cell `index` are shown: [{shownWidth, naturalWidth,
        shownHeight, naturalHeight, sizes: [{text, px, box}]}], px being each text's font
        size as rendered and box the height of its bounding box, in CSS pixels."""
        return self.page.evaluate(SVG_TEXT_SIZE_JS, index)

    # ---- opening
    def open(self):
        url = f"{self.server.url}/lab/tree/{self.path}?token={self.server.token}"
        self.page.goto(url, timeout=PAGE_LOAD_S * 1000)
        self.page.wait_for_function(
            "n => document.querySelectorAll("
            "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell').length >= n",
            arg=self.n_cells, timeout=PAGE_LOAD_S * 1000)
        self.wait_idle(first=True)
        self.wait_rendered()  # the checks that follow say what did not render

    def wait_rendered(self, timeout_s=PAGE_LOAD_S):
        """Until every markdown cell is rendered, with its TeX typeset (markdown and
        MathJax render asynchronously); returns False when that did not happen in time."""
        try:
            self.page.wait_for_function(
                """() => { """ + JS_PROSE + """ return Array.from(document.querySelectorAll(
                    '.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-MarkdownCell')
                  ).every(c => {
                    const r = c.querySelector('.jp-RenderedMarkdown');
                    if (!r || !r.textContent.trim()) return false;
                    return !RAW_TEX.test(proseText(r));
                  }); }""", timeout=timeout_s * 1000)
            return True
        except Exception:
            return False

    def wait_idle(self, first=False):
        """Until the kernel is idle; fails at once on a dialog (say, a kernel picker)."""
        deadline = time.monotonic() + KERNEL_S
        indicator = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator").first
        while time.monotonic() < deadline:
            dialog = self.page.locator(".jp-Dialog")
            if first and dialog.count():
                self.shot("failure-dialog")
                raise AssertionError(
                    "a dialog opened instead of the kernel starting (is the course's "
                    f"`python3` kernel there?): {dialog.first.text_content()!r}")
            if indicator.count() and indicator.get_attribute("data-status") == "idle":
                return
            time.sleep(0.2)
        raise AssertionError(f"the kernel was not idle within {KERNEL_S} s")

    # ---- running
    def _wait_run_finished(self, changed_index, before_prompt, timeout_s):
        """Until cell `changed_index` shows a new execution count, no cell is queued or
        running ([*]) and the kernel is idle."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            cells = self.cells()
            prompt = cells[changed_index]["prompt"]
            busy = any(c["prompt"] == "[*]:" for c in cells if c["kind"] == "code")
            if NUMBERED.match(prompt) and prompt != before_prompt and not busy:
                self.wait_idle()
                if not any(c["prompt"] == "[*]:" for c in self.cells()):
                    return self.cells()
            time.sleep(0.2)
        # what the page showed at the end, for a run that did finish but whose prompts
        # did not say so (seen once in CI: the kernel idle, the notebook saved)
        cells = self.cells()
        queued = [i for i, c in enumerate(cells) if c["prompt"] == "[*]:"]
        raise AssertionError(
            f"the cells did not finish running within {timeout_s} s: cell {changed_index} "
            f"shows {cells[changed_index]['prompt']!r} (before: {before_prompt!r}), "
            f"[*] on cells {queued} of the {len(cells)} read")

    def run_all(self):
        """Run > Run All Cells, from the menu bar; returns the cells when it is done."""
        first_code = next(i for i, c in enumerate(self.cells()) if c["kind"] == "code")
        before = self.cells_up_to(first_code)[first_code]["prompt"]
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()
        return self._wait_run_finished(first_code, before, RUN_ALL_S)

    def cells_up_to(self, index, timeout_s=30):
        """The cells, once the notebook shows cell `index`: right after a notebook opens or
        a kernel restarts, JupyterLab may still be rendering the later ones (a browser test
        in CI once read 4 of them)."""
        deadline = time.monotonic() + timeout_s
        cells = self.cells()
        while len(cells) <= index and time.monotonic() < deadline:
            self.page.wait_for_timeout(200)
            cells = self.cells()
        return cells

    def run_cell(self, index):
        """Select cell `index` and run it with Ctrl+Enter (run, do not advance).

        JupyterLab marks a cell [*] as soon as it sends it to the kernel. A key press that
        shows no [*] and no new count within `TAKEN_S` was not taken, and is pressed again:
        seen in two whole runs of .ci/run, right after a notebook opened on a loaded
        machine (the cell still "[ ]:" 300 s later, the kernel idle, no cell queued; the
        screenshot showed the cell selected in command mode)."""
        before = self.cells_up_to(index)[index]["prompt"]
        for _ in range(3):
            prompt = self.cell(index).locator(".jp-InputPrompt")
            prompt.scroll_into_view_if_needed(timeout=30_000)
            prompt.click()
            self.page.keyboard.press("Control+Enter")
            if self._run_taken(index, before):
                break
        return self._wait_run_finished(index, before, RUN_ALL_S)

    def _run_taken(self, index, before_prompt):
        """Whether, within `TAKEN_S`, cell `index` shows [*] or another count than before,
        or some cell is queued."""
        deadline = time.monotonic() + TAKEN_S
        while time.monotonic() < deadline:
            cells = self.cells_up_to(index)
            if cells[index]["prompt"] != before_prompt or any(
                    c["prompt"] == "[*]:" for c in cells if c["kind"] == "code"):
                return True
            time.sleep(0.2)
        return False

    # ---- editing
    def replace_cell_text(self, index, text):
        """Open the cell's editor, select all, and type `text` in one insertion (as a paste
        does: CodeMirror does not re-indent it line by line); a written answer (markdown)
        is rendered again afterwards."""
        cell = self.cell(index)
        markdown = "jp-MarkdownCell" in (cell.get_attribute("class") or "")
        cell.scroll_into_view_if_needed(timeout=30_000)
        if markdown:  # a rendered written answer opens its editor on a double click
            cell.locator(".jp-RenderedMarkdown").dblclick()
            cell.locator(".cm-content").wait_for(state="visible", timeout=30_000)
        cell.locator(".cm-content").click()
        self.page.wait_for_function(
            "i => document.querySelectorAll("
            "'.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]"
            ".querySelector('.cm-editor.cm-focused') !== null", arg=index, timeout=30_000)
        self.page.keyboard.press("Control+a")
        self.page.keyboard.insert_text(text)
        if markdown:
            self.page.keyboard.press("Control+Enter")  # render it, stay on it
            cell.locator(".jp-RenderedMarkdown").wait_for(state="visible", timeout=30_000)
        else:
            self.page.keyboard.press("Escape")

    def save(self):
        self.page.keyboard.press("Escape")
        self.page.keyboard.press("Control+s")

    # ---- a console on the notebook's kernel
    def run_in_console(self, code, done_text, timeout_s=RUN_ALL_S):
        """File > New Console for Notebook (the notebook's kernel, started in the
        notebook's folder), run `code` there, and return the console's output texts once
        one of them holds `done_text` and the kernel is idle again."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="filemenu:create-console"]').click()
        console = self.page.locator(".jp-CodeConsole").first
        prompt = console.locator(".jp-CodeConsole-promptCell .cm-content")
        prompt.wait_for(state="visible", timeout=KERNEL_S * 1000)
        prompt.click()
        self.page.keyboard.insert_text(code)
        self.page.keyboard.press("Shift+Enter")
        self.page.wait_for_function(
            """t => Array.from(document.querySelectorAll('.jp-CodeConsole .jp-OutputArea-output'))
                 .some(o => o.textContent.includes(t))""", arg=done_text,
            timeout=timeout_s * 1000)
        self.wait_idle()
        return console.locator(".jp-OutputArea-output").evaluate_all(
            "os => os.map(o => o.textContent)")

    def close_console(self):
        """Close the console opened by run_in_console (the kernel stays: it is the
        notebook's); the notebook is the current tab again."""
        self.page.locator(".jp-CodeConsole .jp-CodeConsole-promptCell").first.click()
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="application:close"]').click()
        self.page.locator(".jp-CodeConsole").first.wait_for(state="detached", timeout=30_000)

    # ---- stopping the kernel
    def interrupt(self):
        """Kernel > Interrupt Kernel, from the menu bar (what the toolbar's Stop does)."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Kernel$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="kernelmenu:interrupt"]').click()

    def run_all_below(self, index):
        """Select cell `index`, then Run > Run Selected Cell and All Below; returns at once."""
        prompt = self.cell(index).locator(".jp-InputPrompt")
        prompt.scroll_into_view_if_needed(timeout=30_000)
        prompt.click()
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="notebook:run-all-below"]').click()

    def start_run_all(self):
        """Run > Run All Cells; returns at once."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Run$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="runmenu:run-all"]').click()

    def wait_running(self, index, timeout_s=RUN_ALL_S):
        """Until cell `index` shows [*] (running or queued)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.cells()[index]["prompt"] == "[*]:":
                return
            time.sleep(0.2)
        raise AssertionError(f"cell {index} did not start within {timeout_s} s")

    def wait_quiet(self, timeout_s):
        """Until no cell shows [*] and the kernel is idle; returns the seconds it took,
        or None when that did not happen within `timeout_s`."""
        started = time.monotonic()
        indicator = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator").first
        while time.monotonic() - started < timeout_s:
            busy = any(c["prompt"] == "[*]:" for c in self.cells() if c["kind"] == "code")
            if not busy and indicator.get_attribute("data-status") == "idle":
                return time.monotonic() - started
            time.sleep(0.2)
        return None

    # ---- nbgrader's Validate
    def start_validate(self):
        """Press Validate in the notebook toolbar; returns at once (`validate_result`)."""
        button = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-NotebookPanel-toolbar "
            "jp-button.validate-button")
        button.wait_for(state="visible", timeout=30_000)
        button.click()

    def validate_result(self, timeout_s=VALIDATE_S):
        """(dialog kind, message text) of the Validate pressed by `start_validate`."""
        dialog = self.page.locator(".nbgrader-SuccessDialog, .nbgrader-ErrorDialog")
        dialog.first.wait_for(state="visible", timeout=timeout_s * 1000)
        kind = "success" if self.page.locator(".nbgrader-SuccessDialog").count() else "error"
        return kind, dialog.first.locator(".jp-Dialog-body").text_content()

    def validate(self):
        """Press Validate in the notebook toolbar; returns (dialog kind, message text)."""
        button = self.page.locator(
            ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-NotebookPanel-toolbar "
            "jp-button.validate-button")
        try:
            button.wait_for(state="visible", timeout=30_000)
        except Exception as exc:
            labels = self.page.locator(
                ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-NotebookPanel-toolbar "
                ".jp-Toolbar-item").evaluate_all(
                "es => es.map(e => e.getAttribute('data-jp-item-name') || e.textContent)")
            self.shot("failure-no-validate-button")
            raise AssertionError(
                "no Validate button (jp-button.validate-button) in the notebook toolbar: is "
                "nbgrader's labextension (@jupyter/nbgrader:validate-assignment) installed "
                f"and enabled? Toolbar items: {labels}") from exc
        button.click()
        dialog = self.page.locator(".nbgrader-SuccessDialog, .nbgrader-ErrorDialog")
        dialog.first.wait_for(state="visible", timeout=VALIDATE_S * 1000)
        kind = "success" if self.page.locator(".nbgrader-SuccessDialog").count() else "error"
        message = dialog.first.locator(".jp-Dialog-body").text_content()
        return kind, message

    def close_dialog(self):
        self.page.locator(".jp-Dialog .jp-Dialog-button.jp-mod-accept, "
                          ".jp-Dialog button.jp-Dialog-button").first.click()
        self.page.locator(".jp-Dialog").first.wait_for(state="detached", timeout=30_000)


def wait_for_file(path, predicate, timeout_s=60):
    """The notebook at `path` once `predicate(nb)` holds (the last one read otherwise)."""
    deadline = time.monotonic() + timeout_s
    nb = None
    while time.monotonic() < deadline:
        try:
            nb = read_nb(path)
            if predicate(nb):
                return nb, True
        except (ValueError, OSError):
            pass
        time.sleep(0.25)
    return nb, False


def log(msg):
    print(f"[browser-test] {msg}", file=sys.stderr, flush=True)


def require_browser():
    """Skip, saying why, when Chromium or Playwright is missing; fail instead where the
    run demands the browser tests (CI sets BROWSER_TEST_REQUIRED=1)."""
    import pytest

    missing = missing_requirements()
    if missing is None:
        return
    if os.environ.get("BROWSER_TEST_REQUIRED") == "1":
        pytest.fail(f"BROWSER_TEST_REQUIRED=1 but {missing}", pytrace=False)
    pytest.skip(f"browser test skipped: {missing}")


def shots_dir(name):
    """An empty folder for one test's screenshots: artifacts/<name> beside the tests, or
    under $ARTIFACTS_DIR."""
    base = Path(os.environ.get("ARTIFACTS_DIR") or Path(__file__).parent / "artifacts")
    path = base / name
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


@contextlib.contextmanager
def lab_page(course, env, shots, extra_args=(), command=None):
    """JupyterLab serving `course` and a page of headless Chromium in a student's laptop
    window (1400 x 1000: the notebook's output area is about 880 px wide), both closed on
    the way out. Yields (server, page); the server's log goes to shots/server.log.
    `command`: jupyter lab's own command in place of scripts/lab, run in `course`."""
    from playwright.sync_api import sync_playwright

    server = LabServer(course, env, Path(shots) / "server.log", extra_args=extra_args,
                       command=command)
    try:
        server.start()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True,
                                         args=CHROMIUM_FLAGS)
            try:
                page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
                page.set_default_timeout(60_000)
                yield server, page
            finally:
                browser.close()
    finally:
        server.stop()


@contextlib.contextmanager
def shot_on_failure(nbp):
    """A screenshot named "failure" when the block raises (the page itself may be gone)."""
    try:
        yield
    except BaseException:
        try:
            nbp.shot("failure")
        except Exception:  # noqa: BLE001
            pass
        raise


def restart_kernel(nbp):
    """Kernel > Restart Kernel..., and the dialog's Restart."""
    page = nbp.page
    page.locator(".lm-MenuBar-item", has_text=re.compile(r"^Kernel$")).first.click()
    page.locator('.lm-Menu-item[data-command="kernelmenu:restart"]').click()
    page.locator(".jp-Dialog .jp-mod-accept").first.click()
    page.locator(".jp-Dialog").first.wait_for(state="detached", timeout=30_000)
    time.sleep(2)  # the indicator goes busy, then idle again
    nbp.wait_idle()


# ---------------------------------------------------------------- a student's install

STDERR = "application/vnd.jupyter.stderr"
STDOUT = "application/vnd.jupyter.stdout"
INSTALL_S = 1200  # pip fills a fresh environment from the package index


def out_text(cell, mime=None):
    """The text of a cell's outputs as `NotebookPage.cells` read them (of one MIME type)."""
    return "".join(o["text"] for o in cell["outputs"] if mime is None or o["mime"] == mime)


def readme_commands(readme):
    """The commands of the ```bash blocks of a README, in order: what it tells a student to
    type (its comments left out)."""
    lines = [line.split(" #")[0].strip()
             for block in re.findall(r"```bash\n(.*?)```", readme, re.S)
             for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def student_install(tmp, assignment, earlier):
    """(release folder, environment): `residual-pack student-release`'s release of
    `assignment` with the wheel of `earlier`'s answers beside it, and a fresh virtual
    environment made there by the README's first two commands, typed as it prints them."""
    from autograder.authoring.release import build

    tmp = Path(tmp)
    release = tmp / "release"
    build(REPO_ROOT, release, [assignment], say=lambda *_: None, solved=[earlier])
    readme = (release / "README.md").read_text(encoding="utf-8")
    [wheel] = sorted((release / "wheels").glob("residual_pack_student-*.whl"))
    commands = readme_commands(readme)[:2]
    assert commands == ["python3 -m venv .venv", f".venv/bin/pip install wheels/{wheel.name}"], \
        commands
    env = jupyter_env(tmp / "jupyter")
    tools = tmp / "bin"  # the student's `python3`: the Python running this test
    tools.mkdir()
    (tools / "python3").symlink_to(getattr(sys, "_base_executable", sys.executable))
    env["PATH"] = f"{release / '.venv' / 'bin'}{os.pathsep}{tools}{os.pathsep}/usr/bin:/bin"
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    if os.geteuid() == 0:  # Jupyter's server refuses root unless told
        Path(env["JUPYTER_CONFIG_DIR"], "jupyter_server_config.json").write_text(
            json.dumps({"ServerApp": {"allow_root": True}}), encoding="utf-8")
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=release, env=env,
                              capture_output=True, text=True, timeout=INSTALL_S)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    return release, env


def release_lab(release, env, shots):
    """`lab_page` on the release folder, served by its own `.venv/bin/jupyter lab` (the
    README's command), in the folder with the README."""
    return lab_page(release, env, shots, command=[str(Path(release) / ".venv" / "bin" /
                                                      "jupyter"), "lab"])


def own_answers_cell(cell_source, earlier, grade_ids):
    """The cell for the earlier answers with its stubs replaced by the answers `grade_ids`
    of `earlier` (the model answers, as a student pastes their own), its imports and its
    call to use_my_answers kept."""
    answers = solution_texts(read_nb(REPO_ROOT / "source" / earlier / f"{earlier}.ipynb"))
    head = cell_source[:cell_source.index("\ndef ")]
    call = cell_source[cell_source.index("\nuse_my_answers("):]
    mine = "\n\n\n".join(answers[g] for g in grade_ids)
    return f"{head.rstrip()}\n\n\n{mine}\n\n\n{call.lstrip()}"


def install_released(release, env, earlier):
    """The wheel of `earlier`'s answers, saved in the release folder and installed with the
    README's command (for another assignment's file, "the same with the other file name",
    as the README says); returns the command run."""
    readme = (Path(release) / "README.md").read_text(encoding="utf-8")
    [line] = [c for c in readme_commands(readme) if "pip install residual_pack_solved_" in c]
    named = re.search(r"residual_pack_solved_(\S+?)-\S+\.whl", line)
    [wheel] = sorted((Path(release) / "wheels").glob(f"residual_pack_solved_{earlier}-*.whl"))
    if named.group(1) == earlier:
        assert named.group(0) == wheel.name, (line, wheel.name)  # the README's own file
    command = line.replace(named.group(0), wheel.name)
    shutil.copy2(wheel, Path(release) / wheel.name)  # "Save the file in this folder"
    done = subprocess.run(["bash", "-c", command], cwd=release, env=env, capture_output=True,
                          text=True, timeout=INSTALL_S)
    assert done.returncode == 0, (command, done.stderr[-3000:])
    return command
