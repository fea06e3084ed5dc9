"""Feedback that does not give the hidden tests away.

nbgrader's feedback is the autograded notebook rendered to HTML, and the autograded
notebook holds the hidden tests (nbgrader puts the instructor's test cells back before it
runs them). Two things would show them: the cell source, and the traceback of a hidden
assert that fails, which IPython prints with the lines around it. nbgrader's own
`ClearHiddenTests` removes the source; `HideHiddenTestTracebacks` (below, run before it
while the hidden block can still be seen) cuts the error outputs of those cells down to
the exception's name and message, which the graded checks write as "expected ..., got ...".

The page is read offline as well: nbgrader's feedback template loads MathJax from a CDN,
and without the network a reader sees raw LaTeX. `MathToMathML` writes each equation of
the markdown cells as MathML (with latex2mathml) while the page is made, which browsers
draw without any script, and the course's template (`FEEDBACK_TEMPLATE`, nbgrader's own
with MathJax left out) fetches nothing. (Formgrader's "generate feedback" button sets
`HTMLExporter.template_name` to nbgrader's own; the course's more specific
`GenerateFeedback.HTMLExporter` setting still wins, so its pages are these too.)
Formgrader's view of a submission gets the same
MathML, and a "formgrade" template folder of ours leaves its MathJax out.

No page made from a submission runs the student's script, the feedback pages and
formgrader's view alike: see "what a page made from a submission shows" below.
"""

import html as html_lib
import os
import re
from collections.abc import Iterable
from typing import Any

import jinja2
from jinja2 import pass_context
from nbconvert.exporters import HTMLExporter
from nbconvert.preprocessors import Preprocessor
from nbgrader.preprocessors import ClearHiddenTests
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Bool, Unicode
from traitlets.utils.importstring import import_item

from autograder.cells import is_autograded_test, is_locked, nbgrader_meta
from autograder.grading.pipeline import FEEDBACK_STEPS
from autograder.grading.testsource import BEGIN_HIDDEN, hidden_line_numbers


def hidden_test_lines(source: str) -> list[str]:
    """The lines of `source` between the hidden-test markers (markers excluded)."""
    lines = source.splitlines()
    return [lines[n - 1] for n in sorted(hidden_line_numbers(source))]


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """In every cell with hidden tests, keep of each error only `Name: message`, and drop
    printed lines that repeat a line of the hidden tests (a Python warning prints the line
    that raised it)."""

    begin_test_delimeter = Unicode(BEGIN_HIDDEN).tag(config=True)

    def preprocess_cell(self, cell: Any, resources: dict[str, Any],
                        index: int) -> tuple[Any, dict[str, Any]]:
        if cell.cell_type != "code" or self.begin_test_delimeter not in cell.source:
            return cell, resources
        if nbgrader_meta(cell) and not is_locked(cell):  # an answer: the student's code, as is
            return cell, resources
        hidden = {line.strip() for line in hidden_test_lines(cell.source) if line.strip()}
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                message = output.get("evalue", "")
                name = output.get("ename", "Error")
                output["traceback"] = [f"{name}: {message}" if message else name]
            elif output.get("output_type") == "stream":
                lines = output.get("text", "").split("\n")
                output["text"] = "\n".join(x for x in lines if x.strip() not in hidden)
        return cell, resources


class ClearHiddenTestsInTestCells(ClearHiddenTests):
    """nbgrader's ClearHiddenTests on the graded test cells only. Hidden tests live there
    (nbgrader put them back from the source); a student's own cell that merely contains the
    marker text (say, in a string) is the student's code, not a test, and nbgrader's
    preprocessor would refuse the whole page for it."""

    def preprocess_cell(self, cell: Any, resources: dict[str, Any],
                        cell_index: int) -> tuple[Any, dict[str, Any]]:
        if not is_autograded_test(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


# code in markdown, where a $ is a dollar: fenced blocks, then inline code spans
_CODE = re.compile(r"^(?P<fence>```|~~~)[^\n]*\n.*?^(?P=fence)[^\n]*$|(?P<ticks>`+).+?(?P=ticks)",
                   re.MULTILINE | re.DOTALL)
# $$display$$ and $inline$ (not an escaped \$, not a price such as "$5 and $6")
_MATH = re.compile(r"\$\$(?P<display>.+?)\$\$"
                   r"|(?<![\\$])\$(?P<inline>[^\s$][^$\n]*?)(?<!\\)\$(?!\d)", re.DOTALL)


def _mathml(match: re.Match[str]) -> str:
    from latex2mathml.converter import convert

    display = match.group("display") is not None
    tex = match.group("display") if display else match.group("inline")
    try:
        return convert(tex.strip(), display="block" if display else "inline")
    except Exception:  # noqa: BLE001 (an equation it cannot read stays readable LaTeX)
        return f"<code>{html_lib.escape(match.group(0))}</code>"


def markdown_with_mathml(source: str) -> str:
    """`source` (markdown) with each $...$ and $$...$$ outside code written as MathML."""
    out, last = [], 0
    for code in _CODE.finditer(source):
        out.append(_MATH.sub(_mathml, source[last:code.start()]))
        out.append(code.group(0))
        last = code.end()
    out.append(_MATH.sub(_mathml, source[last:]))
    return "".join(out)


class MathToMathML(Preprocessor):
    """The equations of every markdown cell as MathML, which a browser draws without
    MathJax (the feedback page loads no script from the network). An nbconvert
    preprocessor (enabled, as nbgrader's steps are), so that formgrader's HTMLExporter can
    run it too without a warning about nbgrader's own options."""

    enabled = Bool(True)

    def preprocess_cell(self, cell: Any, resources: dict[str, Any],
                        index: int) -> tuple[Any, dict[str, Any]]:
        if cell.cell_type == "markdown":
            cell.source = markdown_with_mathml(cell.source)
        return cell, resources


# ---- what a page made from a submission shows of the student's HTML
#
# A submission's notebook is the student's: its markdown cells, its outputs' HTML and
# markdown, and whatever a kernel the student controls sent. The pages made from it (the
# student's feedback page, formgrader's view for the instructor, in the instructor's
# Jupyter origin) must run none of it. Three parts, set for every HTMLExporter in the
# course's nbgrader_config.py (and by `course.WorkCourse.config` for the batch path):
# `DropScriptOutputs` takes every output that is code for the browser out of the notebook
# (JavaScript, widget views and state), nbconvert's `sanitize_html` makes its templates
# write no script for what is left, and the templates' `clean_html` and `markdown2html`
# filters are ours: nh3 (ammonia's HTML5 parser and allow-list), which keeps ordinary
# markup, tables, images and the MathML of the equations, and drops scripts, event
# handlers, `javascript:` URLs, styles, forms and frames. (nbconvert's own `clean_html`,
# bleach with a dozen tags, writes headings, paragraphs and MathML out as escaped text,
# and nbgrader's templates render markdown cells without it.)

# ammonia's own allow-list, and MathML (latex2mathml's elements)
_MATHML = {
    "math", "mi", "mn", "mo", "ms", "mtext", "mspace", "mrow", "mfrac", "msqrt", "mroot",
    "msub", "msup", "msubsup", "munder", "mover", "munderover", "mtable", "mtr", "mtd",
    "mstyle", "merror", "mpadded", "mphantom", "menclose", "mmultiscripts", "mprescripts",
    "none", "semantics", "annotation",
}
_MATHML_ATTRIBUTES = {
    "display", "xmlns", "mathvariant", "mathsize", "stretchy", "fence", "separator",
    "lspace", "rspace", "columnalign", "rowalign", "columnspacing", "rowspacing",
    "columnlines", "rowlines", "frame", "displaystyle", "scriptlevel", "accent",
    "accentunder", "movablelimits", "largeop", "symmetric", "minsize", "maxsize", "width",
    "height", "depth", "linethickness", "notation", "form", "encoding", "align",
}
# URL schemes a link or image of the student's may use; `data:` only for an image's src
_SCHEMES = {"http", "https", "mailto", "data"}


def _attribute(tag: str, name: str, value: str) -> str | None:
    """nh3's attribute filter: a `data:` URL only as an image's source (a browser does not
    run script in an image, SVG included)."""
    if value.strip().lower().startswith("data:") and not (
            tag == "img" and name == "src" and value.strip().lower().startswith("data:image/")):
        return None
    return value


def _cleaner_options() -> dict[str, Any]:
    import nh3

    attributes = {tag: set(names) for tag, names in nh3.ALLOWED_ATTRIBUTES.items()}
    attributes["*"] = {"class", "title", "dir", "lang"}
    for tag in ("h1", "h2", "h3", "h4", "h5", "h6"):  # markdown's heading anchors
        attributes.setdefault(tag, set()).add("id")
    for tag in ("th", "td"):  # a markdown table's column alignment, and no other style
        attributes[tag].add("style")
    for tag in _MATHML:
        attributes.setdefault(tag, set()).update(_MATHML_ATTRIBUTES)
    return dict(tags=set(nh3.ALLOWED_TAGS) | _MATHML, attributes=attributes,
                attribute_filter=_attribute, url_schemes=_SCHEMES,
                clean_content_tags={"script", "style"}, link_rel="noopener noreferrer nofollow",
                filter_style_properties={"text-align"})


_OPTIONS = None


def clean_html(html: str | bytes) -> str:
    """`html` (a string, or bytes in UTF-8) with no script left: the student's markup
    through nh3's allow-list (see above). Named in the templates' place of nbconvert's
    `clean_html` filter (`HTMLExporter.filters`)."""
    import nh3

    global _OPTIONS
    if _OPTIONS is None:
        _OPTIONS = _cleaner_options()
    text = html.decode("utf-8", "replace") if isinstance(html, bytes) else str(html)
    return nh3.clean(text, **_OPTIONS)


@pass_context
def markdown2html(context: Any, source: str) -> str:
    """nbconvert's markdown rendering (the cell's attachments, math left for MathToMathML)
    with the result through `clean_html`: nbgrader's feedback and formgrade templates
    render markdown cells with this filter and no other cleaning."""
    from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

    cell = context.get("cell", {}) or {}
    path = context.get("resources", {}).get("metadata", {}).get("path", "")
    renderer = IPythonRenderer(escape=False, attachments=cell.get("attachments", {}),
                               path=path)
    return clean_html(MarkdownWithMath(renderer=renderer).render(source))


# output types that are code for the browser: kept out of every page
SCRIPT_TYPES = ("application/javascript", "text/javascript", "application/x-javascript",
                "application/ecmascript", "text/ecmascript",
                "application/vnd.jupyter.widget-view+json",
                "application/vnd.jupyter.widget-state+json")


class DropScriptOutputs(Preprocessor):
    """Every output's JavaScript and widget data out of the notebook before a page is made
    (an output with nothing else left goes; one with a text version shows that), and the
    notebook's widget state. Script in any other form (HTML, SVG, markdown) is for
    `clean_html`; an SVG output is drawn as an image, which runs no script. Grading's
    own records (`notebook_record.KEY`: a failed hidden check in full, for the instructor) go too:
    no page shows metadata, and none made from a submission carries them."""

    enabled = Bool(True)

    def preprocess(self, nb: Any, resources: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        from autograder.grading.notebook_record import forget

        nb.metadata.pop("widgets", None)
        forget(nb)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: Any, resources: dict[str, Any],
                        index: int) -> tuple[Any, dict[str, Any]]:
        if cell.cell_type != "code":
            return cell, resources
        kept = []
        for output in cell.get("outputs", []):
            data = output.get("data")
            if isinstance(data, dict):
                for key in [k for k in data if k.lower() in SCRIPT_TYPES
                            or "javascript" in k.lower() or "ecmascript" in k.lower()]:
                    del data[key]
                if not data and output.get("output_type") in ("display_data",
                                                              "execute_result"):
                    continue
            kept.append(output)
        cell.outputs = kept
        return cell, resources


# the page settings above, for every HTMLExporter that renders a submission (the batch
# path's; the course's nbgrader_config.py says the same for nbgrader's own commands)
PAGE_SAFETY = {
    "sanitize_html": True,
    "skip_svg_encoding": False,  # SVG as an image (no script), never inline
    "filters": {"clean_html": "autograder.grading.feedback.clean_html",
                "markdown2html": "autograder.grading.feedback.markdown2html"},
}


# the feedback page's template: nbgrader's ("feedback"), without MathJax; the template
# folders hold ours, then nbgrader's (which names its own only when none are configured)
FEEDBACK_TEMPLATE = "feedback_offline"
TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def template_dirs() -> list[str]:
    """HTMLExporter.extra_template_basedirs for the feedback page: ours and nbgrader's."""
    import nbgrader

    return [TEMPLATE_DIR, os.path.join(os.path.dirname(os.path.abspath(nbgrader.__file__)),
                                       "server_extensions", "formgrader", "templates")]


class _CompiledTemplates(jinja2.BytecodeCache):
    """Jinja's compiled templates, kept in this process's memory. A template is found by
    its name and file; its code is used only while its source is the same (Jinja checks
    a hash of the source), so a template changed on disk is compiled again."""

    def __init__(self) -> None:
        self._code: dict[tuple, bytes] = {}

    def _key(self, bucket: jinja2.bccache.Bucket) -> tuple:
        # the compiled code depends on the environment's settings as well
        env = bucket.environment
        return (bucket.key, env.is_async, tuple(sorted(env.extensions)), env.autoescape,
                env.trim_blocks, env.lstrip_blocks, env.optimized)

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        code = self._code.get(self._key(bucket))
        if code is not None:
            bucket.bytecode_from_string(code)

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        self._code[self._key(bucket)] = bucket.bytecode_to_string()


_COMPILED = _CompiledTemplates()


class FeedbackPage(HTMLExporter):
    """nbconvert's HTMLExporter, whose templates are compiled once per process.

    nbgrader makes a new exporter for each feedback page, and each new exporter compiled
    the nine templates of the page again: about half of the page's CPU time for the
    first assignment, a quarter for the fifth (`benchmarks/feedback_page.py`). It reads
    the same configuration as HTMLExporter (its class name included) and writes the same
    page."""

    @property
    def environment(self) -> jinja2.Environment:
        env: jinja2.Environment = HTMLExporter.environment.fget(self)  # type: ignore[attr-defined]
        env.bytecode_cache = _COMPILED
        return env


# GenerateFeedback's own list (GetGrades, CSSHTMLHeaderPreprocessor) with the hidden
# tests taken out in between, and the equations written as MathML: the classes of
# `pipeline.FEEDBACK_STEPS`, where the list is written
FEEDBACK_PREPROCESSORS = [import_item(name) for name in FEEDBACK_STEPS]


def html_text(html: str) -> str:
    """The text a reader of an HTML page sees (tags dropped, entities decoded): syntax
    highlighting splits code into many tags, so a leak check must look at this."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


def leaked_lines(html: str, hidden_lines: Iterable[str], visible_text: str = "",
                 min_length: int = 8) -> list[str]:
    """The hidden-test lines that the feedback page shows.

    A line counts when it is long enough to mean something and does not also appear in
    what the student had anyway (`visible_text`: their notebook, which already shows the
    visible tests and their own code)."""
    # what the page shows, and its raw text (attributes, scripts) for good measure
    pages = (html_text(html), html_lib.unescape(html))
    leaks = []
    for line in hidden_lines:
        text = line.strip()
        if len(text) < min_length or text in visible_text:
            continue
        if any(text in page for page in pages):
            leaks.append(text)
    return leaks
