"""autograder/grading/feedback.py: the feedback preprocessors on single cells (the whole
pages are checked by the self-check's leak test)."""

from pathlib import Path

import nbformat

from autograder.grading.feedback import (
    ClearHiddenTestsInTestCells,
    HideHiddenTestTracebacks,
    html_text,
    leaked_lines,
)

HIDDEN = "check(f(1), 2)\n### BEGIN HIDDEN TESTS\ncheck(f(7), 49)\n### END HIDDEN TESTS"


def _cell(kind="code", source=HIDDEN, **nbgrader):
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    cell = make(source)
    if nbgrader:
        cell.metadata["nbgrader"] = {"schema_version": 3, "grade": False, "solution": False,
                                     "locked": False, **nbgrader}
    return cell


def _test_cell():
    return _cell(grade_id="t", grade=True, locked=True, points=1)


def _clear(cell):
    return ClearHiddenTestsInTestCells().preprocess_cell(cell, {}, 0)[0]


def test_hidden_tests_leave_a_test_cell():
    cell = _clear(_test_cell())
    assert "check(f(7), 49)" not in cell.source and "check(f(1), 2)" in cell.source


def test_only_test_cells_are_cleared():
    """A student's answer or own cell holding the marker text is their code, shown as is;
    a markdown cell is never a test cell (nbgrader's own rule: tests are code)."""
    for cell in (_cell(grade_id="a", solution=True), _cell(),
                 _cell("markdown", grade_id="m", grade=True, locked=True, points=1)):
        assert _clear(cell).source == HIDDEN


def _with_error(cell):
    cell.outputs = [nbformat.v4.new_output(
        "error", ename="CheckFailed", evalue="expected 49, got 48",
        traceback=["Traceback ...", "check(f(7), 49)", "CheckFailed: expected 49, got 48"])]
    return cell


def test_a_test_cells_traceback_is_cut_to_its_message():
    cell = HideHiddenTestTracebacks().preprocess_cell(_with_error(_test_cell()), {}, 0)[0]
    assert cell.outputs[0]["traceback"] == ["CheckFailed: expected 49, got 48"]


def test_an_answer_cells_traceback_is_left_alone():
    cell = _with_error(_cell(grade_id="a", solution=True))
    kept = list(cell.outputs[0]["traceback"])
    cell = HideHiddenTestTracebacks().preprocess_cell(cell, {}, 0)[0]
    assert cell.outputs[0]["traceback"] == kept


def test_feedback_filter_keeps_only_the_message_of_hidden_test_errors():
    hidden = nbformat.v4.new_code_cell(
        "check(1)\n### BEGIN HIDDEN TESTS\nsecret_check(-2.5)\n### END HIDDEN TESTS"
    )
    visible = nbformat.v4.new_code_cell("check(1)")
    for cell in (hidden, visible):
        cell.outputs = [nbformat.v4.new_output(
            "error", ename="CheckFailed", evalue="expected 1, got 2",
            traceback=["Traceback", "----> 3 secret_check(-2.5)", "CheckFailed: expected 1, got 2"],
        )]
    hidden.outputs.append(nbformat.v4.new_output(
        "stream", name="stderr", text="x.py:3: RuntimeWarning: overflow\n  secret_check(-2.5)\n"
    ))
    nb = nbformat.v4.new_notebook(cells=[hidden, visible])
    nb, _ = HideHiddenTestTracebacks().preprocess(nb, {})
    assert nb.cells[0].outputs[0].traceback == ["CheckFailed: expected 1, got 2"]
    assert nb.cells[0].outputs[1].text == "x.py:3: RuntimeWarning: overflow\n"
    assert len(nb.cells[1].outputs[0].traceback) == 3  # no hidden test there: untouched


def test_leak_check_sees_through_syntax_highlighting():
    line = "check_value(residual_stack(Value(2.5), depth=20), 2.5 * 1.1**20)"
    html = ('<span class="n">check_value</span><span class="p">(</span>residual_stack(Value('
            '<span class="mf">2.5</span>), depth=20), 2.5 &#42; 1.1**20)')
    assert leaked_lines(html, [line]) == [line]
    assert leaked_lines(html, [line], visible_text=line) == []  # the student saw it anyway
    assert leaked_lines("<p>nothing</p>", [line]) == []


def _feedback_page(cfg, notebook):
    """`notebook` as nbgrader's GenerateFeedback, configured by `cfg`, renders it (its
    exporter, template and preprocessors; GetGrades's scores, which need a gradebook, given
    by hand)."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    converter = GenerateFeedback(coursedir=CourseDirectory(config=cfg), config=cfg)
    exporter = converter.exporter_class(parent=converter, config=converter.config)
    for step in converter.preprocessors:
        if "GetGrades" not in str(step):
            exporter.register_preprocessor(step, enabled=True)
    resources = {"nbgrader": {"notebook": notebook.stem, "assignment": "a", "student": "s",
                              "score": 1.0, "max_score": 2.0, "late_penalty": 0.0}}
    nb = nbformat.read(notebook, as_version=4)
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.nbgrader["score"] = 0.0
    page, _ = exporter.from_notebook_node(nb, resources=resources)
    return page


def test_a_feedback_page_reads_offline(tmp_path):
    """Offline, nbgrader's feedback page showed raw LaTeX: its template loads MathJax from
    a CDN. The course's page (nbgrader_config.py for nbgrader's commands, the work course
    for `residual-pack grade`) loads no script from another host, and its equations are
    MathML, which the browser draws by itself."""
    import re

    from traitlets.config.loader import PyFileConfigLoader

    from autograder.grading.course import WorkCourse

    root = Path(__file__).resolve().parents[2]
    notebook = root / "exercises" / "02_degradation" / "02_degradation.ipynb"
    configs = {"nbgrader_config.py": PyFileConfigLoader("nbgrader_config.py",
                                                        path=str(root)).load_config(),
               "residual-pack grade": WorkCourse(root, tmp_path, ["02_degradation"]).config()}
    for name, cfg in configs.items():
        page = _feedback_page(cfg, notebook)
        remote = re.findall(r"<(?:script|link)[^>]*(?:src|href)=\"(?:https?:)?//[^\"]*\"", page)
        assert not remote, (name, remote)
        scripts = re.findall(r"<script[^>]*>", page, flags=re.IGNORECASE)
        assert not [t for t in scripts if "mathjax" in t.lower()], (name, scripts)
        assert page.count("<math ") > 20, name
        shown = html_text(page)
        assert "\\mathrm{relu}" not in shown and "$$" not in shown, name
        assert "Score: 1.0 / 2.0" in page, name  # still nbgrader's feedback page
        # ...and only the feedback page: formgrader renders its manual grading view with an
        # HTMLExporter of its own (no GenerateFeedback parent) and nbgrader's "formgrade"
        # template, which a course-wide HTMLExporter setting replaced (a 500 in formgrader)
        from nbconvert.exporters import HTMLExporter

        assert HTMLExporter(config=cfg).template_name != "feedback_offline", name


def test_equations_in_code_stay_as_written():
    from autograder.grading.feedback import markdown_with_mathml

    text = "cost $5 and $6; `a $x$ b`;\n```\n$$y$$\n```\nand $x^2$ and $$\\frac{a}{b}$$"
    out = markdown_with_mathml(text)
    assert out.startswith("cost $5 and $6; `a $x$ b`;\n```\n$$y$$\n```\nand <math")
    assert out.count("<math") == 2 and 'display="block"' in out
