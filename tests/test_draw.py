"""microgpt.draw: the graph of a Value drawn with and without Graphviz, and the block diagrams."""

import os
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

from microgpt import Value
from microgpt.draw import IDENTITY_COLOUR, Drawing, block_diagram, draw, graph_of


def layer(x):
    return (0.1 * x).relu()


def stack(x, depth, residual):
    for _ in range(depth):
        x = x + layer(x) if residual else layer(x)
    return x


def built(depth, residual):
    x = Value(1.0)
    out = stack(x, depth, residual)
    out.backward()
    return x, out


def identity_path(x, out):
    """Is there a path from x to out along which every local derivative is exactly 1?"""
    _, edges = graph_of(out)
    ones = {}
    for child, parent, local in edges:
        if local == 1:
            ones.setdefault(id(child), []).append(parent)
    todo, seen = [x], set()
    while todo:
        v = todo.pop()
        if v is out:
            return True
        if id(v) not in seen:
            seen.add(id(v))
            todo.extend(ones.get(id(v), []))
    return False


def test_the_residual_stack_has_an_identity_path_and_the_plain_one_has_none():
    assert identity_path(*built(3, residual=True))
    assert not identity_path(*built(3, residual=False))


def test_the_plain_drawing_shows_data_grad_and_the_identity_arrows():
    x, out = built(3, residual=True)
    drawing = draw(out, names={x: "x", out: "out"}, backend="svg")
    assert isinstance(drawing, Drawing)
    root = ET.fromstring(drawing._repr_svg_())  # well-formed SVG
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "out: data 1.331 | grad 1" in texts
    assert "x: data 1 | grad 1.331" in texts
    nodes, edges = graph_of(out)
    assert sum(t.startswith(("x:", "out:", "data")) for t in texts) == len(nodes)
    coloured = [e for e in root.iter("{http://www.w3.org/2000/svg}line")
                if e.get("stroke") == IDENTITY_COLOUR]
    assert len(coloured) == sum(local == 1 for _, _, local in edges) > 0


def test_without_graphviz_the_default_is_the_plain_drawing(monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # import graphviz fails
    x, out = built(2, residual=True)
    assert isinstance(draw(out), Drawing)
    monkeypatch.setattr(shutil, "which", lambda name: None)  # the package, but no dot
    monkeypatch.delitem(sys.modules, "graphviz")
    assert isinstance(draw(out), Drawing)


def _graphviz_or_skip():
    try:
        import graphviz
    except ImportError:
        graphviz = None
    if graphviz is None or shutil.which("dot") is None:
        message = "Graphviz (the graphviz package and the dot program) is not installed"
        if os.environ.get("GRAPHVIZ_REQUIRED"):
            pytest.fail(message)
        pytest.skip(message)
    return graphviz


def test_with_graphviz_the_default_is_a_graphviz_drawing_that_renders():
    graphviz = _graphviz_or_skip()
    x, out = built(3, residual=True)
    dot = draw(out, names={x: "x", out: "out"})
    assert isinstance(dot, graphviz.Digraph)
    svg = dot.pipe(format="svg").decode()
    assert "out: data 1.331 | grad 1" in svg and IDENTITY_COLOUR in svg


def test_a_graph_too_big_to_read_says_so():
    x = Value(0.5)
    out = x
    for _ in range(300):
        out = out + layer(out)
    with pytest.raises(ValueError, match="too many to draw"):
        draw(out, backend="svg")
    with pytest.raises(ValueError, match="backend"):
        draw(x, backend="png")


@pytest.mark.parametrize("kind", ["plain", "residual", "highway", "pre-norm", "post-norm"])
def test_block_diagrams(kind):
    root = ET.fromstring(block_diagram(kind).svg)
    texts = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    shortcuts = sum(t in ("identity", "carry (1 - T)") for t in texts)
    assert shortcuts == {"plain": 0, "residual": 1, "highway": 1, "pre-norm": 2,
                         "post-norm": 2}[kind]


def test_an_unknown_block_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        block_diagram("dense")
