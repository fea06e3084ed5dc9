"""Pages made from a submission run none of its script (autograder/grading/feedback.py),
and the course's nbgrader_config.py sets that up for every HTMLExporter: the feedback
page's and formgrader's view, rendered here with their real templates (nbgrader's
"formgrade" and our "feedback_offline") and the config as nbgrader reads it.
tests/browser/test_pages_browser.py opens the pages of a graded hostile submission in
Chromium; tests/hostile has the same submission in the hostile class."""

import copy
import re
from pathlib import Path

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from traitlets.config.loader import PyFileConfigLoader

COURSE = Path(__file__).resolve().parents[2]

SCRIPTED = [
    "<script>window.pwned = 1</script>",
    "<img src=x onerror=\"window.pwned = 1\">",
    "<a href=\"javascript:window.pwned = 1\">a</a>",
    "<a href=\"JaVaScRiPt&colon;window.pwned = 1\">a</a>",
    "<iframe srcdoc=\"<script>window.pwned = 1</script>\"></iframe>",
    "<svg onload=\"window.pwned = 1\"><script>window.pwned = 1</script></svg>",
    "<math><mtext><table><mglyph><style><img src=x onerror=\"window.pwned = 1\">",
    "<object data=\"data:text/html,<script>window.pwned = 1</script>\"></object>",
    "<a href=\"data:text/html,<script>window.pwned = 1</script>\">a</a>",
    "<form action=\"javascript:window.pwned = 1\"><button>go</button></form>",
    "<div style=\"background:url(javascript:window.pwned = 1)\">x</div>",
    "<details open ontoggle=\"window.pwned = 1\"><summary>s</summary></details>",
]


def _live(html):
    """What in `html` could run: script elements, event handlers, script URLs, frames."""
    tags = re.findall(r"<[a-zA-Z][^>]*>", html)
    return [t for t in tags if re.search(r"\son[a-z]+\s*=", t, re.I)
            or re.search(r"(javascript|data:text)", t, re.I)
            or re.match(r"<(script|iframe|object|embed|form|svg|style)\b", t, re.I)]


@pytest.mark.parametrize("html", SCRIPTED)
def test_clean_html_leaves_no_script(html):
    from autograder.grading.feedback import clean_html

    assert _live(clean_html(html)) == [], clean_html(html)


def test_clean_html_keeps_what_a_page_shows():
    from autograder.grading.feedback import clean_html

    page = ('<h2 id="Task-1">Task 1</h2><p>a <b>b</b> <code>c</code></p>'
            '<details><summary><b>Hint</b></summary>text</details>'
            '<table><thead><tr><th style="text-align:right">h</th></tr></thead>'
            '<tbody><tr><td>1</td></tr></tbody></table>'
            '<img src="data:image/png;base64,iVBORw0KGgo=" alt="plot">'
            '<math display="block" xmlns="http://www.w3.org/1998/Math/MathML"><mrow>'
            '<msup><mi>x</mi><mn>2</mn></msup><mo stretchy="false">(</mo></mrow></math>')
    cleaned = clean_html(page)
    for kept in ('<h2 id="Task-1">', "<details>", "<summary>", '<th style="text-align:right">',
                 'src="data:image/png;base64,', "<math", "<msup>", 'stretchy="false"'):
        assert kept in cleaned, (kept, cleaned)


def _notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_markdown_cell(
        "# Title\n\nWith $x^2$ and\n\n$$\\sum_i a_i$$\n\n"
        "<img src=x onerror=\"window.pwned = 1\"> [a](javascript:window.pwned=1)"))
    cell = nbformat.v4.new_code_cell("display(...)")
    output = nbformat.v4.new_output
    cell.outputs = [
        output("display_data", data={"text/html": "<b>bold</b>" + "".join(SCRIPTED)}),
        output("display_data", data={"application/javascript": "window.pwned = 1",
                                     "text/plain": "the text version"}),
        output("display_data", data={"application/javascript": "window.pwned = 1"}),
        output("display_data", data={
            "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><script>window.pwned"
                             " = 1</script><circle r='5'/></svg>"}),
        output("display_data", data={"text/markdown": "*md* <img src=x onerror=\"window."
                                                      "pwned = 1\">"}),
        output("display_data", data={"application/vnd.jupyter.widget-view+json": {
            "model_id": "m", "version_major": 2, "version_minor": 0}, "text/plain": "w"}),
    ]
    nb.cells.append(cell)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return nb


def test_drop_script_outputs():
    from autograder.grading.feedback import DropScriptOutputs

    nb, _ = DropScriptOutputs().preprocess(_notebook(), {})
    data = [o["data"] for o in nb.cells[1].outputs]
    assert {"text/plain": "the text version"} in data  # the text version shows instead
    assert not any(k for d in data for k in d if "javascript" in k or "widget" in k)
    assert len(data) == 5  # the output with nothing but JavaScript is gone
    assert "widgets" not in nb.metadata


@pytest.mark.parametrize("template", ["formgrade", "feedback_offline"])
def test_the_course_config_renders_no_script_and_loads_nothing(template):
    """formgrader's exporter takes c.HTMLExporter (its template name from formgrader);
    the feedback page's is GenerateFeedback's (its template named there, and nbgrader's
    stylesheet folder, which GenerateFeedback adds)."""
    import nbgrader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()
    config = copy.deepcopy(cfg)
    config.HTMLExporter.template_name = template
    if template == "feedback_offline":
        config.HTMLExporter.merge(cfg.GenerateFeedback.HTMLExporter)
        config.HTMLExporter.extra_template_paths = [str(
            Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static" /
            "node_modules" / "bootstrap" / "dist" / "css")]
    resources = {"base_url": "", "index": 0, "total": 1, "notebook_id": "nb",
                 "nbgrader": {"notebook": "nb", "score": 0, "max_score": 1,
                              "late_penalty": 0}}
    html, _ = HTMLExporter(config=config).from_notebook_node(_notebook(), resources=resources)
    assert "pwned" not in "".join(re.findall(r"<script\b[^>]*>.*?</script>", html, re.S))
    assert [t for t in _live(html) if "pwned" in t] == []
    assert "cdnjs" not in html and "mathjax/" not in html.lower()  # read offline
    assert html.count("<math") >= 2  # the equations, as MathML
    assert "the text version" in html and "<b>bold</b>" in html
    assert 'src="data:image/svg+xml;base64,' in html  # SVG as an image: no script runs


def _feedback_config():
    import nbgrader

    cfg = PyFileConfigLoader("nbgrader_config.py", path=str(COURSE)).load_config()
    config = copy.deepcopy(cfg)
    config.HTMLExporter.merge(cfg.GenerateFeedback.HTMLExporter)
    config.HTMLExporter.extra_template_paths = [str(
        Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "static" /
        "node_modules" / "bootstrap" / "dist" / "css")]
    return cfg, config


RESOURCES = {"base_url": "", "index": 0, "total": 1, "notebook_id": "nb",
             "nbgrader": {"notebook": "nb", "score": 0, "max_score": 1, "late_penalty": 0}}


def test_the_feedback_page_compiles_its_templates_once_and_is_the_same_page(monkeypatch):
    """The course's GenerateFeedback exporter (FeedbackPage) writes HTMLExporter's page;
    a second exporter, as nbgrader makes one per page, compiles no template again."""
    import jinja2
    from traitlets.utils.importstring import import_item

    from autograder.grading import feedback

    cfg, config = _feedback_config()
    page_class = import_item(cfg.GenerateFeedback.exporter_class)
    assert page_class is feedback.FeedbackPage
    monkeypatch.setattr(feedback, "_COMPILED", feedback._CompiledTemplates())
    compiled = []
    compile_template = jinja2.Environment.compile

    def counted(self, source, name=None, *args, **kwargs):
        compiled.append(name)
        return compile_template(self, source, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "compile", counted)

    nb = _notebook()

    def page(cls):
        html, _ = cls(config=config).from_notebook_node(copy.deepcopy(nb),
                                                        resources=copy.deepcopy(RESOURCES))
        return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "U", html)

    plain = page(HTMLExporter)
    compiled.clear()
    first = page(page_class)
    assert len(compiled) >= 5, compiled  # the page's templates, compiled the first time
    compiled.clear()
    second = page(page_class)
    assert compiled == [], compiled
    assert first == second == plain


def test_a_template_changed_on_disk_is_compiled_again(tmp_path):
    """The compiled code is kept per template and used only for the same source."""
    from autograder.grading import feedback

    (tmp_path / "page.html.j2").write_text("one {{ x }}", encoding="utf-8")
    cache = feedback._CompiledTemplates()

    def render():
        import jinja2

        env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(tmp_path)),
                                 bytecode_cache=cache, auto_reload=True)
        return env.get_template("page.html.j2").render(x=1)

    assert render() == "one 1" and render() == "one 1"
    (tmp_path / "page.html.j2").write_text("two {{ x }}", encoding="utf-8")
    assert render() == "two 1"


# ---- the output limit counts every way a message reaches the notebook (execute.py)


def _message(msg_type, content, parent="cell"):
    return {"msg_type": msg_type, "header": {"msg_type": msg_type},
            "parent_header": {"msg_id": parent}, "content": content, "buffers": []}


def _executor(nb, output):
    from autograder.grading.execute import SandboxedExecute
    from autograder.grading.execute_state import NotebookState
    from autograder.grading.notebook_record import NotebookRun
    from autograder.sandbox.limits import Limits

    ex = SandboxedExecute()
    ex.nb = nb
    ex.reset_execution_trackers()
    ex.state = NotebookState.begin(Limits(output=output), plan=None, run=NotebookRun(),
                                   reference={}, last=len(nb.cells))
    ex.clear_before_next_output = False  # what nbclient sets as a cell starts
    return ex


def test_display_updates_count_against_the_output_limit():
    """nbclient writes a display update into every earlier output with its id: with 40
    of them, one 100 kB update would be 4 MB in the notebook; the limit (1 MB here) holds
    and the cell says what was left out."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x")]
    cell = nb.cells[0]
    ex = _executor(nb, 1 << 20)
    shown = {"data": {"text/plain": "."}, "metadata": {}, "transient": {"display_id": "d"}}
    for _ in range(40):
        ex.process_message(_message("display_data", shown), cell, 0)
    update = dict(shown, data={"text/plain": "u" * 100_000})
    ex.process_message(_message("update_display_data", update), cell, 0)
    size = len(nbformat.writes(nb))
    assert size < 1 << 20, size
    assert any("left out" in o.get("text", "") for o in cell.outputs)
    assert ex.state.budget.dropped[0] >= 40 * 100_000
    # a small update that fits is made, in every output with the id
    ex.process_message(_message("update_display_data", dict(shown, data={
        "text/plain": "small"})), cell, 0)
    assert [o["data"]["text/plain"] for o in cell.outputs if "data" in o] == ["small"] * 40


def test_widget_messages_and_odd_execution_counts_do_not_reach_the_notebook():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x")]
    cell = nb.cells[0]
    ex = _executor(nb, 1 << 20)
    state = {"_model_name": "HTMLModel", "_model_module": "@jupyter-widgets/controls",
             "_model_module_version": "2.0.0", "value": "w" * 100_000}
    for i in range(30):
        ex.process_message(_message("comm_open", {
            "comm_id": f"c{i}", "target_name": "jupyter.widget",
            "data": {"state": state, "buffer_paths": []}}), cell, 0)
    ex.set_widgets_metadata()
    assert "widgets" not in nb.metadata and not ex.widget_state
    ex.process_message(_message("execute_input", {"code": "", "execution_count": "n" * 1000}),
                       cell, 0)
    assert cell.execution_count is None
    ex.process_message(_message("execute_input", {"code": "", "execution_count": 7}), cell, 0)
    assert cell.execution_count == 7
