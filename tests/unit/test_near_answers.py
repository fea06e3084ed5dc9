"""No model answer's lines in what a student installs (issue 41, item 7).

Every solution line of every source notebook (between `### BEGIN SOLUTION` and `### END
SOLUTION` in `source/*/*.ipynb`), whitespace normalised, is looked for in every file of
the student wheel, staged as `release.build` stages it (`release._stage`):

- a line over MIN_CHARS characters, found as it is;
- what a `return` or an assignment of a line computes, over MIN_EXPRESSION characters
  and with an arithmetic operator or a loop in it (`h + self.branch(h)`, Task 8.1's,
  quoted in a hint);
- two or three consecutive solution lines, over MIN_CHARS together (a loop whose lines are
  short one by one, such as Task 2.2's);
- a line of code with the answer's shape under other names (`probe_layer` for
  `plain_layer`): names that are neither Python's nor an attribute's become `_`, and the
  shapes are compared when they hold at least MIN_STRUCTURE operators and comprehension
  keywords, so that a plain call such as `x = f(a, b)` does not count.

A hit fails the test, unless it is in ALLOWED with the reason the student may see it.
"""

import builtins
import io
import json
import keyword
import re
import tokenize
from pathlib import Path

import pytest

from autograder.authoring.release import _stage

ROOT = Path(__file__).resolve().parents[2]
MIN_CHARS = 25
MIN_STRUCTURE = 3
MIN_EXPRESSION = 16
OPERATORS = {"+", "-", "*", "/", "@", "for"}  # not `**`, which also unpacks a call's keywords
EXPRESSION = re.compile(r"^(?:return|[A-Za-z_][\w, ]*=(?!=))\s*(.+)$")
STRUCTURE = {"+", "-", "*", "/", "**", "@", "for", "in", "if", "lambda"}
SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)

# (file in the wheel, the line as it stands there, whitespace normalised): why a student
# may read it
ALLOWED = {
    ("microgpt/draw.py", "return [y + o for y, o in zip(out, offsets)]"):
        "the drawing's coordinates moved by their offsets, not a residual add",
    ("microgpt/trainstats.py", "for x in X: h = linear(x, net.w_in)"):
        "layer_rms, which the watch cells of 02 and 04 call: the RMS of each layer's output "
        "over the points, walking the layers as the task text says a forward pass does; "
        "no gate (Task 3.4) and no head (Task 2.2) in it",
}


def _flat(text):
    return " ".join(text.split())


def _solution_lines():
    """{notebook: [solution block as a list of whitespace-normalised lines]}"""
    found = {}
    for path in sorted(ROOT.glob("source/*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            text = "".join(cell["source"])
            for block in SOLUTION.findall(text):
                lines = [_flat(line) for line in block.splitlines() if line.strip()]
                found.setdefault(path.parent.name, []).append(lines)
    return found


def _shape(line):
    """The line's tokens with every name that is not Python's nor an attribute as `_`
    (None for a line that does not tokenize alone)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line + "\n").readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    out, previous = [], None
    for t in tokens:
        if t.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER, tokenize.COMMENT,
                      tokenize.INDENT, tokenize.DEDENT):
            continue
        if (t.type == tokenize.NAME and not keyword.iskeyword(t.string)
                and not hasattr(builtins, t.string) and previous != "."):
            out.append("_")
        else:
            out.append(t.string)
        previous = t.string
    return " ".join(out)


def _structure(shape):
    return sum(token in STRUCTURE for token in shape.split())


def _needles():
    """[(kind, text to find, where it comes from)] of every solution line and window."""
    needles = []
    for notebook, blocks in _solution_lines().items():
        for lines in blocks:
            for i, line in enumerate(lines):
                if len(line) > MIN_CHARS:
                    needles.append(("line", line, notebook))
                expression = EXPRESSION.match(line)
                if expression and len(expression[1]) >= MIN_EXPRESSION and set(
                        (_shape(expression[1]) or "").split()) & OPERATORS:
                    needles.append(("expression", expression[1], notebook))
                for n in (2, 3):
                    window = " ".join(lines[i:i + n])
                    if i + n <= len(lines) and len(window) > MIN_CHARS and not any(
                            len(x) > MIN_CHARS for x in lines[i:i + n]):
                        needles.append(("lines", window, notebook))
    return needles


def _shapes():
    shapes = {}
    for notebook, blocks in _solution_lines().items():
        for lines in blocks:
            for line in lines:
                shape = _shape(line)
                if shape and len(line) > MIN_CHARS and _structure(shape) >= MIN_STRUCTURE:
                    shapes.setdefault(shape, (line, notebook))
    return shapes


@pytest.fixture(scope="module")
def wheel_files(tmp_path_factory):
    """{path in the student wheel: its text}, staged as `release.build` stages it."""
    stage = tmp_path_factory.mktemp("stage")
    _stage(ROOT, stage)
    return {p.relative_to(stage).as_posix(): p.read_text(encoding="utf-8")
            for p in sorted(stage.rglob("*"))
            if p.is_file() and p.name != "pyproject.toml" and p.suffix in (".py", ".json")}


def near_answers(files, allowed=ALLOWED):
    """["file: what of which answer it holds: the text"] of `files` ({name: text}), less
    the `allowed` ones."""
    needles, shapes = _needles(), _shapes()
    hits = []
    for name, text in files.items():
        flat = _flat(text)
        for kind, needle, notebook in needles:
            if needle in flat and (name, needle) not in allowed:
                hits.append(f"{name}: the {kind} of {notebook}'s answer: {needle}")
        if not name.endswith(".py"):
            continue
        for line in text.splitlines():
            line = _flat(line)
            shape = _shape(line) if len(line) > MIN_CHARS else None
            if shape in shapes and (name, line) not in allowed:
                answer, notebook = shapes[shape]
                hits.append(f"{name}: {line} || {notebook}'s answer, renamed: {answer}")
    return sorted(set(hits))


def test_the_checker_finds_an_answer_quoted_or_renamed():
    found = near_answers({
        "a.py": "def f(h, W):\n    return [a + b for a, b in zip(h, probe_layer(h, W))]\n",
        "b.py": '"""\n    h = linear(x, net.w_in)\n    for params in net.layers:\n'
                '        h = layer(h, **params)\n"""\n',
        "c.py": "m = model.mlp(rmsnorm(x), layer)  # quoted in a comment\n",
        "d.py": "x = f(a, b, c)\nreturn x\nfor p in model.parameters():\n",
        "e.py": 'HINT = "write h + self.branch(h)"\n',
    })
    assert sorted({h.split(":")[0] for h in found}) == ["a.py", "b.py", "c.py", "e.py"], found
    assert "04_identity_shortcut's answer, renamed" in found[0]
    assert ("b.py: the lines of 02_degradation's answer: h = linear(x, net.w_in) for params "
            "in net.layers: h = layer(h, **params)") in found


def test_the_student_wheel_holds_no_answers_lines(wheel_files):
    assert "autograder/kernel/probes.py" in wheel_files  # the staging worked
    assert near_answers(wheel_files) == []


def test_every_allowance_is_still_needed(wheel_files):
    """An allowance for a line that is gone goes with it."""
    found = "\n".join(near_answers(wheel_files, allowed={}))
    for name, line in ALLOWED:
        assert f"{name}: " in found and line in found, (name, line)
