"""microgpt.draw: the graph of a Value drawn with and without Graphviz, and the block diagrams."""

import os
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

from microgpt import Value
from microgpt.draw import IDENTITY_COLOUR, MAX_WIDTH, Drawing, block_diagram, draw, graph_of


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
    shortcuts = sum(t in ("identity", "carry (1 - T)", "shortcut") for t in texts)
    assert shortcuts == {"plain": 0, "residual": 1, "highway": 1, "pre-norm": 2,
                         "post-norm": 2}[kind]
    # post-norm's shortcut is not an identity path: a norm follows its add
    assert ("identity" in texts) == (kind in ("residual", "pre-norm"))


def _size(drawing):
    """(shown width, shown height, viewBox width, viewBox height) of a drawing."""
    root = ET.fromstring(drawing.svg)
    _, _, box_w, box_h = map(float, root.get("viewBox").split())
    return float(root.get("width")), float(root.get("height")), box_w, box_h


def test_a_drawing_wider_than_the_output_area_is_scaled_to_fit():
    x, out = built(3, residual=True)  # notebook 01's residual graph: ten columns of boxes
    shown_w, shown_h, box_w, box_h = _size(draw(out, backend="svg"))
    assert box_w > MAX_WIDTH  # it needs the room ...
    assert shown_w == MAX_WIDTH  # ... and is shown at the output area's width
    assert shown_h / shown_w == pytest.approx(box_h / box_w, rel=0.01)  # not distorted
    wide_block = _size(block_diagram("pre-norm"))
    assert wide_block[0] == MAX_WIDTH < wide_block[2]
    # a picture that fits is shown at its own size
    shown_w, shown_h, box_w, box_h = _size(block_diagram("plain"))
    assert (shown_w, shown_h) == (box_w, box_h) and box_w < MAX_WIDTH


def test_the_text_repr_describes_the_picture():
    x, out = built(2, residual=True)
    drawing = draw(out, names={x: "x", out: "out"}, backend="svg")
    nodes, edges = graph_of(out)
    lines = repr(drawing).splitlines()
    assert len(lines) == 1 + len(nodes)  # a heading, then one line per box
    assert lines[-1].startswith("  [") and "out: data 1.21 | grad 1" in lines[-1]
    assert "(local 0.1)" in repr(drawing) and "<-" in lines[-1]
    assert f"{len(edges)} arrows" in lines[0]

    assert repr(block_diagram("plain")).splitlines()[1:] == [
        "  main path: h -> LayerNorm -> W -> ReLU -> h'"]
    residual = repr(block_diagram("residual"))
    assert "main path: h -> LayerNorm -> W -> ReLU -> + -> h'" in residual
    assert "identity: h -> +" in residual
    post = repr(block_diagram("post-norm"))
    assert post.count("shortcut:") == 2 and "identity" not in post
    assert repr(block_diagram("pre-norm")).count("identity:") == 2
    assert "object at 0x" not in repr(Drawing("<svg/>"))  # no address, even without a text


def test_an_unknown_block_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        block_diagram("dense")
