"""Helpers for the JupyterLite site's browser tests: the site built and served offline, and a
notebook of it open in the site's own notebook view (JupyterLab's, on the Pyodide kernel).

The site is `residual-pack lite`'s, with its kernel pointed at a Pyodide served from this
machine (the npm registry's `pyodide`, from `scripts/install-lite-pyodide`), so nothing
comes from a CDN. The page is driven as a student drives it: the menu bar's Run All, File >
Save and Download. Cell text is set through JupyterLab's own notebook model (the site is
built here with `exposeAppInBrowser`, JupyterLab's page option for that), where the
JupyterLab test types it: typing 20 cells adds minutes and tests nothing about the site.
"""

import ast
import contextlib
import json
import os
import re
import subprocess
import symtable
import sys
import time
from pathlib import Path

import lab_helpers as lh
import pytest

from autograder.authoring import lite

PYODIDE = Path(os.environ.get("LITE_PYODIDE_DIR", "/opt/lite-pyodide")) / "pyodide"
# a cell needs Pyodide's package CDN when it names these (matplotlib and numpy are built for
# WebAssembly and come only from there; microgpt.trainstats.plot_layer_stats draws with
# matplotlib)
CDN_IMPORT = re.compile(r"^\s*(import|from)\s+(matplotlib|numpy)\b")
CDN_USE = re.compile(r"\b(plt|np)\.|\bplot_layer_stats\(")
OPEN_S = 240
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"


def require():
    """Skip (or fail under LITE_REQUIRED=1) when Chromium, JupyterLite or the local Pyodide
    is missing."""
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


def build_offline(site: Path, names: list[str], port: int) -> Path:
    """The site of `names` in `site`, its kernel loading Pyodide from 127.0.0.1:`port`, the
    local Pyodide linked in, and the app exposed to the test's scripts."""
    lite.build(lh.REPO_ROOT, site, names,
               pyodide_url=f"http://127.0.0.1:{port}/pyodide/pyodide.mjs", say=lambda _: None)
    (site / "pyodide").symlink_to(PYODIDE, target_is_directory=True)
    config_path = site / "jupyter-lite.json"
    config = json.loads(config_path.read_text())
    config["jupyter-config-data"]["exposeAppInBrowser"] = True
    config_path.write_text(json.dumps(config, indent=2))
    return site


@contextlib.contextmanager
def served(site: Path, port: int):
    server = subprocess.Popen(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
         "--directory", str(site)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def needs_cdn(source: str) -> tuple[bool, list[str]]:
    """(whether the cell needs the package CDN once its matplotlib/numpy import lines are
    left out, those import lines)."""
    imports = [line for line in source.splitlines() if CDN_IMPORT.match(line)]
    rest = "\n".join(line for line in source.splitlines() if not CDN_IMPORT.match(line))
    return bool(CDN_USE.search(rest)), imports


def defined_and_used(source: str) -> tuple[set[str], set[str]]:
    """(the names a cell's top level defines, every name it reads) for the cells' own
    dependencies; IPython's magics (a line starting with % or !) are left out."""
    code = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(("%", "!")))
    tree = ast.parse(code)
    defined = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            defined |= {n.id for n in ast.walk(node)
                        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    # the global names it reads, at the top level or inside its functions (a function's
    # own parameters and locals are not the notebook's names)
    used, tables = set(), [symtable.symtable(code, "<cell>", "exec")]
    while tables:
        table = tables.pop()
        top = table.get_type() == "module"  # a str, or a StrEnum equal to it (3.13+)
        used |= {s.get_name() for s in table.get_symbols() if s.is_referenced()
                 and (top or s.is_global())}
        tables += table.get_children()
    return defined, used


def without_cdn_imports(source: str) -> str:
    return "\n".join(line for line in source.splitlines() if not CDN_IMPORT.match(line))


class SitePage(lh.NotebookPage):
    """A notebook of the site open in its notebook view (`lh.NotebookPage`'s reading,
    running and screenshots, which are JupyterLab's, hold here too)."""

    def __init__(self, page, base: str, path: str, shots: Path):
        super().__init__(page, server=None, path=path, n_cells=1, shots=shots)
        self.base = base

    def open(self, timeout_s: float = OPEN_S) -> float:
        """Open the notebook and wait until its kernel (Pyodide, started in the page) is
        idle; returns the seconds that took."""
        start = time.perf_counter()
        self.page.goto(f"{self.base}/lab/index.html?path={self.path}",
                       timeout=timeout_s * 1000)
        self.page.wait_for_function(
            f"() => window.jupyterapp && document.querySelectorAll("
            f"'{NOTEBOOK} .jp-Notebook .jp-Cell').length > 0", timeout=timeout_s * 1000)
        self.page.wait_for_function(
            "() => { const w = window.jupyterapp.shell.currentWidget;"
            " const k = w && w.sessionContext && w.sessionContext.session"
            " && w.sessionContext.session.kernel; return !!k && k.status === 'idle'; }",
            timeout=timeout_s * 1000)
        return time.perf_counter() - start

    def _model_call(self, body: str, arg=None):
        return self.page.evaluate(
            "([arg]) => { const nb = window.jupyterapp.shell.currentWidget.content;"
            f" {body} }}", [arg])

    def sources(self) -> list[dict]:
        """[{type, source, grade_id}] of the notebook's cells, from its model."""
        return self._model_call(
            "return nb.model.sharedModel.cells.map(c => ({type: c.cell_type,"
            " source: c.getSource(),"
            " grade_id: ((c.getMetadata('nbgrader') || {}).grade_id) || null}));")

    def set_source(self, index: int, text: str) -> None:
        self._model_call("nb.model.sharedModel.cells[arg[0]].setSource(arg[1]);",
                         [index, text])

    def insert_code_cell(self, index: int, text: str) -> None:
        self._model_call(
            "nb.model.sharedModel.insertCell(arg[0], {cell_type: 'code', source: arg[1]});",
            [index, text])

    def delete_cell(self, index: int) -> None:
        self._model_call("nb.model.sharedModel.deleteCell(arg);", index)

    def outputs(self) -> list[list[dict]]:
        """The outputs of every cell, as the notebook file holds them ([] for markdown)."""
        return self._model_call(
            "return nb.model.sharedModel.cells.map(c => c.cell_type === 'code'"
            " ? JSON.parse(JSON.stringify(c.toJSON().outputs)) : []);")

    def run_all_timed(self, timeout_s: float) -> float:
        """Run > Run All Cells from the menu bar; the seconds until every cell has run and
        the kernel is idle."""
        before = self._model_call(
            "return Math.max(0, ...nb.model.sharedModel.cells.map("
            "c => c.execution_count || 0));")
        start = time.perf_counter()
        self.start_run_all()
        # done: the kernel idle, no cell running or queued ([*]), and every code cell run
        # again, or the run stopped at a cell that failed (Run All stops there)
        self.page.wait_for_function(
            "before => { const w = window.jupyterapp.shell.currentWidget;"
            " const cells = w.content.model.sharedModel.cells.filter("
            "   c => c.cell_type === 'code');"
            " const busy = [...document.querySelectorAll('" + NOTEBOOK + " .jp-InputPrompt')]"
            "   .some(p => p.textContent.includes('*'));"
            " const ran = c => (c.execution_count || 0) > before;"
            " const stopped = cells.some("
            "   c => ran(c) && c.outputs.some(o => o.output_type === 'error'));"
            " return w.sessionContext.session.kernel.status === 'idle' && !busy"
            "   && (stopped || cells.every(ran)); }",
            arg=before, timeout=timeout_s * 1000, polling=1000)
        return time.perf_counter() - start

    def save(self) -> None:
        """File > Save Notebook, from the menu bar."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).first.click()
        self.page.locator('.lm-Menu-item[data-command="docmanager:save"]').click()
        self.page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty",
            timeout=60_000)

    def download(self, dest: Path) -> Path:
        """File > Download, as a student hands the notebook in; the file it saves."""
        self.page.locator(".lm-MenuBar-item", has_text=re.compile(r"^File$")).first.click()
        with self.page.expect_download(timeout=60_000) as got:
            self.page.locator('.lm-Menu-item[data-command="docmanager:download"]').click()
        dest.parent.mkdir(parents=True, exist_ok=True)
        got.value.save_as(dest)
        return dest


def text_of(outputs: list[dict]) -> str:
    """What a cell's outputs say, as text (streams, plain text, errors)."""
    parts = []
    for o in outputs:
        if o.get("output_type") == "stream":
            parts.append("".join(o["text"]) if isinstance(o["text"], list) else o["text"])
        elif o.get("output_type") == "error":
            parts.append(f"{o['ename']}: {o['evalue']}")
        elif "data" in o:
            plain = o["data"].get("text/plain", "")
            parts.append("".join(plain) if isinstance(plain, list) else plain)
    return "\n".join(parts)
