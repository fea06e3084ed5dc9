"""microgpt.draw: the graph of a Value drawn with and without Graphviz, and the block diagrams."""

import math
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET

import pytest

from microgpt import Value, dot, linear
from microgpt.draw import (
    MAX_WIDTH,
    SHORTCUT_COLOUR,
    Drawing,
    block_diagram,
    draw,
    graph_of,
    op_label,
    shortcut_edges,
)
from microgpt.nn import cross_entropy, layernorm, log_softmax, rmsnorm, softmax

SVG = "{http://www.w3.org/2000/svg}"


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


def one_add(layout):
    """Notebook 05's drawing: one add of a two-number stream, pre-norm or post-norm."""
    W = [[Value(0.5), Value(-0.2)], [Value(0.1), Value(0.4)]]
    x = [Value(0.6), Value(-0.3)]
    if layout == "pre-norm":
        y = [xi + fi for xi, fi in zip(x, linear(rmsnorm(x), W))]
    else:
        y = rmsnorm([xi + fi for xi, fi in zip(x, linear(x, W))])
    out = y[0] + y[1]
    out.backward()
    names = {x[0]: "x[0]", x[1]: "x[1]", out: "out"}
    names.update({W[i][j]: f"W[{i}][{j}]" for i in range(2) for j in range(2)})
    return x, y, out, names


def parsed(drawing):
    return ET.fromstring(drawing.svg)


def texts(root):
    return [t.text for t in root.iter(f"{SVG}text")]


def titles(root):
    return [t.text for t in root.iter(f"{SVG}title")]


def shortcut_paths(root):
    return [p for p in root.iter(f"{SVG}path") if p.get("stroke") == SHORTCUT_COLOUR]


# ---------------------------------------------------------------- operations, inferred


def test_every_operation_is_named_from_its_children_data_and_local_derivatives():
    a, b = Value(1.5), Value(-0.5)
    cases = {
        "+": a + b, "*": a * b, "relu": a.relu(), "exp": a.exp(), "log": a.log(),
        "tanh": a.tanh(), "sigmoid": b.sigmoid(), "**2": a**2, "**(-1)": a**-1,
        "**(-0.5)": a**-0.5, "sum": Value.sum([a, b, a * b]),
        "dot": dot([a, b], [b, a]), "1/rms": rmsnorm([a, b])[0]._children[1],
        "softmax": softmax([a, b])[1], "log_softmax": log_softmax([a, b])[0],
        "cross_entropy": cross_entropy([a, b], 1), "mean": layernorm([a, b])[0]
        ._children[0]._children[1]._children[0],
    }
    assert {name: op_label(v) for name, v in cases.items()} == {n: n for n in cases}
    assert op_label(linear([a, b], [[b, a]])[0]) == "dot"
    assert op_label(a - b) == "+" and op_label((a - b)._children[1]) == "*"  # a + b * -1
    assert op_label(a / b) == "*" and op_label((a / b)._children[1]) == "**(-1)"
    assert op_label(b.relu()) == "relu" and op_label(a) == ""
    assert op_label(Value(7.0, (a, b), (0.3, 0.3))) == "f"  # nothing the engine makes


def test_an_operation_is_named_by_the_node_not_guessed_from_its_numbers():
    """Where the numbers fit two operations, the node's own record decides: 0**2 and
    relu(0) are both 0 with slope 0, and a sum of 1 and 1 is also their product's
    neighbour in nothing but name."""
    zero = Value(0.0)
    assert op_label(zero**2) == "**2" and op_label(zero.relu()) == "relu"
    assert op_label(Value(2.0) ** 3) == "**3" and op_label(Value(4.0) ** 0.5) == "**0.5"
    # a hand-made node records nothing, so it is still inferred from its numbers
    assert op_label(Value(0.0, (zero,), (0.0,))) == "relu"


def test_the_drawing_labels_each_operation_and_the_relu_of_a_stack():
    x, out = built(2, residual=True)
    root = parsed(draw(out, names={x: "x", out: "out"}, backend="svg"))
    ops = [t for t in titles(root) if t.startswith("operation ")]
    assert sorted(ops) == sorted(["operation *", "operation relu", "operation +"] * 2)
    for op in ("*", "relu", "+"):
        assert op in texts(root)


# ---------------------------------------------------------------- constants


def test_a_number_operand_is_a_constant_not_a_box_with_data_and_grad():
    x, out = built(3, residual=False)
    drawing = draw(out, names={x: "x", out: "out"}, backend="svg")
    root = parsed(drawing)
    assert titles(root).count("constant 0.1") == 3
    dashed = [r for r in root.iter(f"{SVG}rect") if r.get("stroke-dasharray")]
    assert len(dashed) == 3
    boxes = [t for t in titles(root) if "| grad" in t]
    assert len(boxes) == 1 + 3 * 2  # x, and each layer's product and relu; no 0.1 box
    assert "constant 0.1" in repr(drawing)
    # a named leaf is a box, even where a number operand would be
    w = Value(0.1)
    y = x * w
    assert "w: data 0.1 | grad 0" in titles(parsed(draw(y, names={w: "w"}, backend="svg")))
    # a leaf used twice, or first, is not taken for a number operand
    z = x * w + w
    assert not any(t.startswith("constant") for t in titles(parsed(draw(z, backend="svg"))))


# ---------------------------------------------------------------- shortcuts


def test_a_plain_stack_has_no_shortcut_and_draws_nothing_in_colour():
    x, out = built(3, residual=False)
    assert shortcut_edges(out) == set()
    root = parsed(draw(out, names={x: "x", out: "out"}, backend="svg"))
    assert SHORTCUT_COLOUR not in ET.tostring(root, encoding="unicode")


def test_a_residual_stack_colours_exactly_its_shortcuts():
    x = Value(1.0)
    inputs, h = [], x
    for _ in range(3):
        inputs.append(h)
        h = h + layer(h)
    out = h
    out.backward()
    # each layer's input into that layer's add, and nothing else (not the branch's arrow
    # into the add, although its local derivative is 1 too)
    adds = []
    v = out
    while v is not x:
        adds.append(v)
        v = v._children[0]
    adds.reverse()
    assert shortcut_edges(out) == {(id(i), id(a)) for i, a in zip(inputs, adds)}
    root = parsed(draw(out, names={x: "x", out: "out"}, backend="svg"))
    paths = shortcut_paths(root)
    assert len(paths) == 3
    assert all(p.find(f"{SVG}title").text.startswith("shortcut, local derivative 1")
               for p in paths)
    _, edges = graph_of(out)
    into_adds = [local for _, parent, local in edges if op_label(parent) == "+"]
    assert into_adds == [1] * 6  # the branch's arrows into the adds, not coloured


def test_shortcuts_of_the_refresher_and_of_notebook_05():
    a = Value(2.0)
    b = a * a + a
    assert shortcut_edges(b) == {(id(a), id(b))}  # b = a + f(a) with f(a) = a * a
    c, d = Value(1.0), Value(2.0)
    assert shortcut_edges(c + d) == set()  # two independent terms
    x, y, out, _ = one_add("pre-norm")
    assert shortcut_edges(out) == {(id(x[0]), id(y[0])), (id(x[1]), id(y[1]))}
    x, y, out, _ = one_add("post-norm")
    adds = y[0]._children[0], y[1]._children[0]  # rmsnorm's y_i = add_i * (1/rms)
    assert shortcut_edges(out) == {(id(x[0]), id(adds[0])), (id(x[1]), id(adds[1]))}


# ---------------------------------------------------------------- data, grad, size


def test_each_value_shows_its_data_and_grad():
    x, out = built(3, residual=True)
    drawing = draw(out, names={x: "x", out: "out"}, backend="svg")
    assert isinstance(drawing, Drawing)
    root = parsed(drawing)
    assert "out: data 1.331 | grad 1" in titles(root)
    assert "x: data 1 | grad 1.331" in titles(root)
    for line in ("x", "data 1", "grad 1.331", "out", "data 1.331", "grad 1"):
        assert line in texts(root)
    nodes, _ = graph_of(out)
    boxes = [t for t in titles(root) if re.search(r"data \S+ \| grad \S+$", t)]
    assert len(boxes) == len(nodes) - 3  # every Value but the three constants


def _rects(root):
    """(x, y, w, h, title of its group) of every box."""
    found = []
    for g in root.iter(f"{SVG}g"):
        r = g.find(f"{SVG}rect")
        if r is not None:
            found.append((*(float(r.get(k)) for k in ("x", "y", "width", "height")),
                          g.find(f"{SVG}title").text))
    return found


def _path_points(d, steps=24):
    """Points along an SVG path of M, L and C commands."""
    tokens = re.findall(r"[MLC]|-?[\d.]+", d)
    points, i, here = [], 0, (0.0, 0.0)
    while i < len(tokens):
        cmd = tokens[i]
        if cmd in "ML":
            here = (float(tokens[i + 1]), float(tokens[i + 2]))
            points.append(here)
            i += 3
        else:
            c = [float(t) for t in tokens[i + 1:i + 7]]
            p0, p1, p2, p3 = here, c[0:2], c[2:4], c[4:6]
            for k in range(1, steps + 1):
                t = k / steps
                points.append(tuple(
                    (1 - t) ** 3 * p0[j] + 3 * (1 - t) ** 2 * t * p1[j]
                    + 3 * (1 - t) * t**2 * p2[j] + t**3 * p3[j] for j in range(2)))
            here = tuple(p3)
            i += 7
    return points


@pytest.mark.parametrize("which", ["plain", "residual", "pre-norm", "post-norm"])
def test_no_arrow_runs_behind_a_box_and_no_boxes_overlap(which):
    if which in ("plain", "residual"):
        x, out = built(3, residual=which == "residual")
        names = {x: "x", out: "out"}
    else:
        _, _, out, names = one_add(which)
    root = parsed(draw(out, names=names, backend="svg"))
    rects = _rects(root)
    for n, (x1, y1, w1, h1, _) in enumerate(rects):
        for x2, y2, w2, h2, _ in rects[n + 1:]:
            assert x1 + w1 <= x2 or x2 + w2 <= x1 or y1 + h1 <= y2 or y2 + h2 <= y1
    for p in root.iter(f"{SVG}path"):
        if p.get("d", "").startswith("M 0 0"):
            continue  # an arrow head
        for px, py in _path_points(p.get("d"))[1:-1]:
            inside = [t for x, y, w, h, t in rects
                      if x + 1 < px < x + w - 1 and y + 1 < py < y + h - 1]
            assert not inside, f"an arrow runs behind {inside} at ({px:.0f}, {py:.0f})"


def test_text_is_never_under_11_px_and_the_drawing_is_shown_unscaled():
    for out, names in [(built(3, True)[1], {}), (one_add("pre-norm")[2], {})]:
        drawing = draw(out, names=names, backend="svg")
        root = parsed(drawing)
        sizes = [float(t.get("font-size")) for t in root.iter(f"{SVG}text")]
        assert sizes and min(sizes) >= 11
        _, _, box_w, box_h = map(float, root.get("viewBox").split())
        assert (float(root.get("width")), float(root.get("height"))) == (box_w, box_h)
        assert box_w <= MAX_WIDTH  # notebook 01's and 05's graphs fit at full size
        assert drawing._repr_svg_() == drawing.svg
    for kind in ("plain", "residual", "highway", "pre-norm", "post-norm"):
        root = parsed(block_diagram(kind))
        assert min(float(t.get("font-size")) for t in root.iter(f"{SVG}text")) >= 11
        assert float(root.get("width")) <= MAX_WIDTH


def test_a_wide_graph_is_shown_full_size_with_a_scroll_bar_not_shrunk():
    xs = [Value(0.1 * i) for i in range(30)]
    out = Value.sum([v * v for v in xs])
    drawing = draw(out, backend="svg")
    assert drawing.width > MAX_WIDTH
    svg, metadata = drawing._repr_svg_()
    assert svg == drawing.svg and metadata == {"unconfined": True}
    root = parsed(drawing)
    assert float(root.get("width")) == drawing.width  # not scaled down


# ---------------------------------------------------------------- backends


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


def _graphviz_svg(out, names):
    return ET.fromstring(draw(out, names=names).pipe(format="svg").decode())


def test_with_graphviz_the_default_is_a_graphviz_drawing_that_reads():
    graphviz = _graphviz_or_skip()
    x, out = built(3, residual=True)
    dot_graph = draw(out, names={x: "x", out: "out"})
    assert isinstance(dot_graph, graphviz.Digraph)
    root = _graphviz_svg(out, {x: "x", out: "out"})
    shown = texts(root)
    for line in ("x", "data 1", "grad 1.331", "out", "data 1.331", "*", "relu", "+", "0.1"):
        assert line in shown
    coloured = [p for p in root.iter(f"{SVG}path") if p.get("stroke") == SHORTCUT_COLOUR]
    assert len(coloured) == 3
    assert min(float(t.get("font-size")) for t in root.iter(f"{SVG}text")) >= 11
    x, out = built(3, residual=False)
    root = _graphviz_svg(out, {x: "x", out: "out"})
    assert not [p for p in root.iter(f"{SVG}path") if p.get("stroke") == SHORTCUT_COLOUR]
    _, _, out, names = one_add("pre-norm")
    root = _graphviz_svg(out, names)
    assert len([p for p in root.iter(f"{SVG}path")
                if p.get("stroke") == SHORTCUT_COLOUR]) == 2
    assert {"dot", "1/rms", "W[0][1]"} <= set(texts(root))


def test_a_graph_too_big_to_read_says_so():
    x = Value(0.5)
    out = x
    for _ in range(300):
        out = out + layer(out)
    with pytest.raises(ValueError, match="too many to draw"):
        draw(out, backend="svg")
    with pytest.raises(ValueError, match="backend"):
        draw(x, backend="png")


def test_the_text_repr_describes_the_picture():
    x, out = built(2, residual=True)
    drawing = draw(out, names={x: "x", out: "out"}, backend="svg")
    nodes, edges = graph_of(out)
    lines = repr(drawing).splitlines()
    assert len(lines) == 1 + len(nodes)  # a heading, then one line per Value
    assert lines[-1].startswith("  [") and "out: data 1.21 | grad 1  = + <- " in lines[-1]
    assert "(local 1, shortcut)" in lines[-1]
    assert "= relu <- " in repr(drawing) and "= * <- " in repr(drawing)
    assert f"{len(edges)} arrows (2 of them shortcuts" in lines[0]
    assert "object at 0x" not in repr(Drawing("<svg/>"))  # no address, even without a text


# ---------------------------------------------------------------- block diagrams


@pytest.mark.parametrize("kind", ["plain", "residual", "highway", "pre-norm", "post-norm"])
def test_block_diagrams(kind):
    root = parsed(block_diagram(kind))
    shown = texts(root)
    shortcuts = sum(t in ("identity", "carry (1 - T)", "shortcut") for t in shown)
    assert shortcuts == {"plain": 0, "residual": 1, "highway": 1, "pre-norm": 2,
                         "post-norm": 2}[kind]
    # post-norm's shortcut is not an identity path: a norm follows its add
    assert ("identity" in shown) == (kind in ("residual", "pre-norm"))


def _main_column(root):
    """The main path's boxes (y, name), top to bottom, the forks' y, and the coloured
    segments (y from, y to)."""
    widths = [float(r.get("width")) for r in root.iter(f"{SVG}rect")]
    main_w = max(widths)
    rects = [r for r in root.iter(f"{SVG}rect") if float(r.get("width")) == main_w]
    names = {round(float(t.get("y")) - 19.5): t.text for t in root.iter(f"{SVG}text")}
    boxes = [(float(r.get("y")), names.get(round(float(r.get("y"))))) for r in rects]
    forks = sorted(float(c.get("cy")) for c in root.iter(f"{SVG}circle"))
    coloured = sorted((float(e.get("y1")), float(e.get("y2"))) for e in root.iter(f"{SVG}line")
                      if e.get("stroke") == SHORTCUT_COLOUR)
    return sorted(boxes), forks, coloured


@pytest.mark.parametrize("kind", ["pre-norm", "post-norm"])
def test_a_transformer_block_cannot_be_read_as_the_parallel_block(kind):
    """The MLP's branch leaves the main path below the first add (it reads the stream after
    it), and each identity line runs from its own fork into its own add."""
    boxes, forks, coloured = _main_column(parsed(block_diagram(kind)))
    adds = [y for y, name in boxes if name == "+"]
    assert len(adds) == 2 and len(forks) == 2 and len(coloured) == 2
    assert forks[0] < adds[0] < forks[1] < adds[1]
    for (y1, y2), fork, add in zip(coloured, forks, adds):
        assert y1 == pytest.approx(fork, abs=20) and y2 == add  # from its fork into its add
    assert coloured[0][1] < coloured[1][0]  # two separate lines, not one
    branches = [line.strip() for line in repr(block_diagram(kind)).splitlines()
                if line.strip().startswith("branch:")]
    assert branches[0].startswith("branch: x -> ")
    # the second branch leaves after the first add (pre-norm: from it; post-norm: its norm)
    assert branches[1].startswith("branch: + -> " if kind == "pre-norm" else
                                  "branch: RMSNorm -> MLP")


def test_the_text_repr_of_a_block_diagram():
    assert repr(block_diagram("plain")).splitlines()[1:] == [
        "  main path: h -> LayerNorm -> W -> ReLU -> h'"]
    residual = repr(block_diagram("residual"))
    assert "main path: h -> + -> h'" in residual
    assert "branch: h -> LayerNorm -> W -> ReLU -> +" in residual
    assert "identity: h -> +" in residual
    post = repr(block_diagram("post-norm"))
    assert post.count("shortcut:") == 2 and "identity" not in post
    pre = repr(block_diagram("pre-norm"))
    assert pre.count("identity:") == 2
    assert "branch: x -> RMSNorm -> attention -> +" in pre
    assert "branch: + -> RMSNorm -> MLP -> +" in pre


def test_an_unknown_block_is_refused():
    with pytest.raises(ValueError, match="kind must be one of"):
        block_diagram("dense")


def test_math_is_not_needed_for_a_leaf():
    assert math.isfinite(Value(3.0).data) and op_label(Value(3.0)) == ""


# ---------------------------------------------------------------- labels on arrows


def _crosses(seg, box):
    """Does the segment ((x1, y1), (x2, y2)) pass through the rectangle box (l, t, r, b)?
    Clipped against the rectangle (Liang-Barsky)."""
    (x1, y1), (x2, y2) = seg
    dx, dy = x2 - x1, y2 - y1
    lo, hi = 0.0, 1.0
    for p, q in ((-dx, x1 - box[0]), (dx, box[2] - x1), (-dy, y1 - box[1]), (dy, box[3] - y1)):
        if p == 0:
            if q < 0:
                return False
            continue
        r = q / p
        if p < 0:
            lo = max(lo, r)
        else:
            hi = min(hi, r)
        if lo > hi:
            return False
    return True


def _label_boxes(root):
    """(text, box) of every number on an arrow: 11 px text on a white halo. The box is
    the glyphs' extent with 2 px around them: an arrow passing closer than that reads as
    the one the number belongs to."""
    found = []
    for t in root.iter(f"{SVG}text"):
        if t.get("font-size") == "11" and t.get("stroke") == "white":
            x, y = float(t.get("x")), float(t.get("y"))
            found.append((t.text, (x - 2, y - 10, x + len(t.text) * 11 * 0.55 + 2, y + 2)))
    return found


def _arrows(root):
    """(local derivative shown in its title, the points along it) of every arrow that has
    a label."""
    found = []
    for p in root.iter(f"{SVG}path"):
        title = p.find(f"{SVG}title")
        if title is not None and "local derivative " in title.text:
            found.append((title.text.rsplit("local derivative ", 1)[1],
                          _path_points(p.get("d"))))
    return found


def _distance(points, box):
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return min(math.hypot(px - cx, py - cy) for px, py in points)


@pytest.mark.parametrize("which", ["residual", "pre-norm", "post-norm"])
def test_no_label_sits_on_another_arrow(which):
    """Notebook 05's drawings had the numbers on the arrows into each `dot` written across
    the arrows that cross them there: every label touches its own arrow only."""
    if which == "residual":
        x, out = built(3, residual=True)
        names = {x: "x", out: "out"}
    else:
        _, _, out, names = one_add(which)
    root = parsed(draw(out, names=names, backend="svg"))
    arrows = _arrows(root)
    labels = _label_boxes(root)
    assert len(labels) == len(arrows)
    on_others = []
    for text, box in labels:
        own = min((a for a in arrows if a[0] == text), key=lambda a: _distance(a[1], box))
        for arrow in arrows:
            if arrow is own:
                continue
            if any(_crosses(seg, box) for seg in zip(arrow[1], arrow[1][1:])):
                on_others.append(f"{text} at ({box[0]:.0f}, {box[3]:.0f})")
                break
    assert not on_others, f"labels written across another arrow: {on_others}"
    for n, (_, a) in enumerate(labels):  # and no two labels overlap
        for _, b in labels[n + 1:]:
            assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3])


@pytest.mark.parametrize("kind", ["pre-norm", "post-norm"])
def test_a_block_diagram_says_which_block_it_is(kind):
    """Notebook 05 shows the pre-norm and the post-norm block one after the other: each
    carries its name above it, in the picture and in the text repr, and the title takes
    room of its own (nothing drawn over it)."""
    title = f"{kind}: one block of the tiny GPT"
    drawing = block_diagram(kind, title=title)
    root = parsed(drawing)
    shown = [t for t in root.iter(f"{SVG}text") if t.text == title]
    assert len(shown) == 1 and float(shown[0].get("font-size")) >= 12
    below = float(shown[0].get("y")) + 2
    assert all(float(r.get("y")) > below for r in root.iter(f"{SVG}rect"))
    assert all(float(c.get("cy")) > below for c in root.iter(f"{SVG}circle"))
    assert len(title) * 14 * 0.55 < float(root.get("width"))
    assert repr(drawing).splitlines()[0] == title
    assert title not in repr(block_diagram(kind))  # untitled as before unless asked
    # the rest of the diagram is the untitled one, moved down
    assert texts(root)[1:] == texts(parsed(block_diagram(kind)))
