"""Feedback that does not give the hidden tests away.

nbgrader's feedback is the autograded notebook rendered to HTML, and the autograded
notebook holds the hidden tests (nbgrader puts the instructor's test cells back before it
runs them). Two things would show them: the cell source, and the traceback of a hidden
assert that fails, which IPython prints with the lines around it. nbgrader's own
`ClearHiddenTests` removes the source; `HideHiddenTestTracebacks` (below, run before it
while the hidden block can still be seen) cuts the error outputs of those cells down to
the exception's name and message, which the graded checks write as "expected ..., got ...".
"""

import html as html_lib
import re

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from nbgrader.preprocessors.base import NbGraderPreprocessor
from traitlets import Unicode

from autograder.cells import is_autograded_test, is_locked, nbgrader_meta
from autograder.grading.testsource import BEGIN_HIDDEN, hidden_line_numbers


def hidden_test_lines(source):
    """The lines of `source` between the hidden-test markers (markers excluded)."""
    lines = source.splitlines()
    return [lines[n - 1] for n in sorted(hidden_line_numbers(source))]


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """In every cell with hidden tests, keep of each error only `Name: message`, and drop
    printed lines that repeat a line of the hidden tests (a Python warning prints the line
    that raised it)."""

    begin_test_delimeter = Unicode(BEGIN_HIDDEN).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
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

    def preprocess_cell(self, cell, resources, cell_index):
        if not is_autograded_test(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


# GenerateFeedback's own list (GetGrades, CSSHTMLHeaderPreprocessor) with the hidden
# tests taken out in between
FEEDBACK_PREPROCESSORS = [
    GetGrades,
    HideHiddenTestTracebacks,
    ClearHiddenTestsInTestCells,
    CSSHTMLHeaderPreprocessor,
]


def html_text(html):
    """The text a reader of an HTML page sees (tags dropped, entities decoded): syntax
    highlighting splits code into many tags, so a leak check must look at this."""
    return html_lib.unescape(re.sub(r"<[^>]+>", "", html))


def leaked_lines(html, hidden_lines, visible_text="", min_length=8):
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
