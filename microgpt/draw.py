"""Pictures of what is computed: a `Value` graph, and the block diagrams of the course's layers.

`draw(out)` draws the graph that `out` was computed from: one box per `Value` with its
`data` and `grad`, one arrow per child with the local derivative on it. Arrows whose local
derivative is exactly 1 (an addition's inputs: the shortcut of a residual layer) are drawn
in colour, so the path along which a gradient arrives unchanged is visible at a glance.

    x = Value(1.0)
    out = residual_stack(x, depth=3)
    out.backward()
    draw(out, names={x: "x", out: "out"})

With the `graphviz` package and Graphviz's `dot` program installed, the result is a
`graphviz.Digraph` (laid out by dot). Without them it is a plain SVG drawn here, in
layers from the inputs (left) to the output (right), which Jupyter shows the same way:
a student's laptop needs nothing extra. `backend="svg"` asks for the plain drawing.

`block_diagram(kind)` draws one layer or block as boxes and arrows: "plain", "residual",
"highway", "pre-norm", "post-norm".

A `Drawing` wider than `MAX_WIDTH` pixels is shown scaled down to that width (its viewBox
keeps the full size, so nothing is cut off), and its plain-text repr describes the same
picture in words for a front end that shows no SVG.
"""

import html
import shutil

__all__ = ["draw", "block_diagram", "Drawing", "graph_of", "MAX_NODES", "MAX_WIDTH"]

MAX_NODES = 250  # a bigger graph is not readable as a picture
MAX_WIDTH = 900  # about the width of a notebook's output area, in pixels


class Drawing:
    """An SVG picture: shown by Jupyter (`_repr_svg_`), saved with `save(path)`; its repr
    (what a text-only front end shows) is `text`, the picture in words."""

    def __init__(self, svg, text=""):
        self.svg = svg
        self.text = text

    def _repr_svg_(self):
        return self.svg

    def __repr__(self):
        return self.text or f"<Drawing: an SVG picture of {len(self.svg):,} characters>"

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)
        return path


def graph_of(out, max_nodes=MAX_NODES):
    """The nodes of `out`'s graph (inputs first) and its edges (child, parent, local grad)."""
    order, edges, visited, stack = [], [], set(), [(out, False)]
    while stack:
        v, done = stack.pop()
        if done:
            order.append(v)  # after every child: inputs come first
            continue
        if id(v) in visited:
            continue
        visited.add(id(v))
        if len(visited) > max_nodes:
            raise ValueError(
                f"the graph has more than {max_nodes} nodes: too many to draw readably. "
                f"Draw a smaller piece (fewer layers, a smaller width), or pass "
                f"max_nodes=... to try anyway.")
        stack.append((v, True))
        for child, local in zip(v._children, v._local_grads):
            edges.append((child, v, local))
            if id(child) not in visited:
                stack.append((child, False))
    return order, edges


def _svg_open(width, height):
    """The opening <svg> tag of a picture of `width` x `height` user units, shown at most
    MAX_WIDTH pixels wide (scaled down as a whole, the viewBox keeps every unit)."""
    shown_w, shown_h = width, height
    if width > MAX_WIDTH:
        shown_w, shown_h = MAX_WIDTH, round(height * MAX_WIDTH / width, 1)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{shown_w}" height="{shown_h}" '
            f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">')


def _number(x):
    try:
        return f"{x:.4g}"
    except (TypeError, ValueError):
        return str(x)


def _label(v, names):
    name = names.get(id(v), "")
    text = f"data {_number(v.data)} | grad {_number(v.grad)}"
    return f"{name}: {text}" if name else text


def _graphviz_ready():
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


IDENTITY_COLOUR = "#1f77b4"  # arrows that pass a gradient on unchanged (local grad 1)


def draw(out, names=None, backend="auto", max_nodes=MAX_NODES):
    """The graph `out` was computed from (see the module's docstring).

    names: {Value: "a name"} for the boxes worth naming (inputs, output, ...).
    backend: "auto" (graphviz when installed, else the plain SVG), "graphviz" or "svg".
    """
    if backend not in ("auto", "graphviz", "svg"):
        raise ValueError(f"backend must be 'auto', 'graphviz' or 'svg', not {backend!r}")
    names = {id(v): str(n) for v, n in (names or {}).items()}
    nodes, edges = graph_of(out, max_nodes)
    use_graphviz = backend == "graphviz" or (backend == "auto" and _graphviz_ready())
    if use_graphviz:
        return _with_graphviz(nodes, edges, names)
    return _as_svg(nodes, edges, names)


def _with_graphviz(nodes, edges, names):
    import graphviz

    dot = graphviz.Digraph(graph_attr={"rankdir": "LR"},
                           node_attr={"shape": "box", "fontname": "Helvetica",
                                      "fontsize": "10"},
                           edge_attr={"fontname": "Helvetica", "fontsize": "9"})
    for v in nodes:
        dot.node(str(id(v)), _label(v, names))
    for child, parent, local in edges:
        colour = IDENTITY_COLOUR if local == 1 else "black"
        dot.edge(str(id(child)), str(id(parent)), label=_number(local), color=colour,
                 fontcolor=colour, penwidth="2" if local == 1 else "1")
    return dot


def _as_svg(nodes, edges, names):
    # layer = the longest path from an input; inputs on the left, the output on the right
    layer = {}
    for v in nodes:  # inputs first: children are placed before their parents
        layer[id(v)] = 1 + max((layer[id(c)] for c in v._children), default=-1)
    parents = {}
    for child, parent, _ in edges:
        parents.setdefault(id(child), []).append(parent)
    for v in reversed(nodes):  # an input sits just left of its first use, not far left
        if not v._children and id(v) in parents:
            layer[id(v)] = min(layer[id(p)] for p in parents[id(v)]) - 1
    columns = {}
    for v in nodes:
        columns.setdefault(layer[id(v)], []).append(v)
    box_w, box_h, gap_x, gap_y, pad = 150, 30, 56, 18, 12
    where = {}
    for col, members in columns.items():
        for row, v in enumerate(members):
            where[id(v)] = (pad + col * (box_w + gap_x), pad + row * (box_h + gap_y))
    width = pad * 2 + (max(columns) + 1) * (box_w + gap_x) - gap_x
    height = pad * 2 + max(len(m) for m in columns.values()) * (box_h + gap_y) - gap_y
    parts = [
        _svg_open(width, height),
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z"/>'
        '</marker></defs>',
    ]
    for child, parent, local in edges:
        (x1, y1), (x2, y2) = where[id(child)], where[id(parent)]
        x1, y1, y2 = x1 + box_w, y1 + box_h / 2, y2 + box_h / 2
        identity = local == 1
        colour = IDENTITY_COLOUR if identity else "#555555"
        parts.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{colour}" '
                     f'stroke-width="{2.5 if identity else 1}" marker-end="url(#arrow)"/>')
        parts.append(f'<text x="{(x1 + x2) / 2}" y="{(y1 + y2) / 2 - 3}" font-size="10" '
                     f'text-anchor="middle" fill="{colour}">{html.escape(_number(local))}</text>')
    for v in nodes:
        x, y = where[id(v)]
        named = id(v) in names
        parts.append(f'<rect x="{x}" y="{y}" width="{box_w}" height="{box_h}" rx="5" '
                     f'fill="{"#fff3d6" if named else "#f4f4f4"}" stroke="#333333"/>')
        parts.append(f'<text x="{x + box_w / 2}" y="{y + box_h / 2 + 4}" font-size="10" '
                     f'text-anchor="middle">{html.escape(_label(v, names))}</text>')
    parts.append("</svg>")
    return Drawing("\n".join(parts), _graph_text(nodes, edges, names))


MAX_TEXT_LINES = 40  # the text repr of a bigger graph lists this many boxes, then a count


def _graph_text(nodes, edges, names):
    """The graph in words: one line per box (inputs first) with the boxes it is computed
    from and the local derivative on each arrow."""
    number = {id(v): i for i, v in enumerate(nodes, start=1)}
    inputs = {}
    for child, parent, local in edges:
        inputs.setdefault(id(parent), []).append((child, local))
    ones = sum(local == 1 for _, _, local in edges)
    lines = [f"graph of {len(nodes)} Values and {len(edges)} arrows ({ones} with local "
             f"derivative exactly 1, drawn in colour); inputs first, each box with the "
             f"boxes it is computed from:"]
    for v in nodes[:MAX_TEXT_LINES]:
        line = f"  [{number[id(v)]}] {_label(v, names)}"
        came_from = inputs.get(id(v), [])
        if came_from:
            line += "  <- " + ", ".join(
                f"[{number[id(c)]}] (local {_number(local)})"
                for c, local in came_from)
        lines.append(line)
    if len(nodes) > MAX_TEXT_LINES:
        lines.append(f"  ... and {len(nodes) - MAX_TEXT_LINES} more")
    return "\n".join(lines)


# ---------------------------------------------------------------- block diagrams

# kind -> (boxes on the main path, from input to output; the shortcut's kind)
_BLOCKS = {
    "plain": (["h", "LayerNorm", "W", "ReLU", "h'"], None),
    "residual": (["h", "LayerNorm", "W", "ReLU", "+", "h'"], "identity"),
    "highway": (["h", "LayerNorm", "W", "ReLU", "T H + (1 - T) h", "h'"], "gate"),
    "pre-norm": (["x", "RMSNorm", "attention", "+", "RMSNorm", "MLP", "+", "x'"], "pre"),
    "post-norm": (["x", "attention", "+", "RMSNorm", "MLP", "+", "RMSNorm", "x'"], "post"),
}


# what the path drawn above the main one is called: post-norm's is not labelled "identity",
# since a norm follows its add on the main path
_SHORTCUT_LABELS = {"identity": "identity", "gate": "carry (1 - T)", "pre": "identity",
                    "post": "shortcut"}


def _block_text(kind, boxes, shortcut, starts, adds):
    lines = [f"{kind} block diagram", "  main path: " + " -> ".join(boxes)]
    for start, end in zip(starts, adds):
        lines.append(f"  {_SHORTCUT_LABELS[shortcut]}: {boxes[start]} -> {boxes[end]} "
                     f"(box {start + 1} to box {end + 1}, drawn above)")
    return "\n".join(lines)


def block_diagram(kind):
    """One layer or block as boxes and arrows: the main path in a row, the shortcut (the
    identity path of a residual layer or block, or the carry path of a highway layer) in
    colour above it."""
    if kind not in _BLOCKS:
        raise ValueError(f"kind must be one of {sorted(_BLOCKS)}, not {kind!r}")
    boxes, shortcut = _BLOCKS[kind]
    box_w, box_h, gap, pad, top = 96, 32, 26, 14, 56
    xs = [pad + i * (box_w + gap) for i in range(len(boxes))]
    width = xs[-1] + box_w + pad
    height = top + box_h + pad
    mid = top + box_h / 2
    parts = [
        _svg_open(width, height),
        '<defs><marker id="head" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
    ]
    for x, name in zip(xs, boxes):
        wide = name in ("h", "h'", "x", "x'")
        fill = "#ffffff" if wide else ("#d8ecff" if name == "+" else "#f4f4f4")
        parts.append(f'<rect x="{x}" y="{top}" width="{box_w}" height="{box_h}" rx="6" '
                     f'fill="{fill}" stroke="#333333"/>')
        parts.append(f'<text x="{x + box_w / 2}" y="{mid + 4}" font-size="11" '
                     f'text-anchor="middle">{html.escape(name)}</text>')
    for a, b in zip(xs, xs[1:]):
        parts.append(f'<line x1="{a + box_w}" y1="{mid}" x2="{b}" y2="{mid}" stroke="#333333" '
                     f'marker-end="url(#head)"/>')
    adds = [i for i, name in enumerate(boxes) if name in ("+", "T H + (1 - T) h")]
    # where each shortcut leaves the main path: the input, and in a transformer block
    # also the box after the first add (pre-norm: its sum; post-norm: its norm)
    starts = [] if not shortcut else [0, 3] if shortcut in ("pre", "post") else [0]
    if shortcut:
        for start, end in zip(starts, adds):
            x1 = xs[start] + box_w / 2
            x2 = xs[end] + box_w / 2
            y = 20
            label = _SHORTCUT_LABELS[shortcut]
            parts.append(f'<path d="M {x1} {top} L {x1} {y} L {x2} {y} L {x2} {top}" '
                         f'fill="none" stroke="{IDENTITY_COLOUR}" stroke-width="2.5" '
                         f'marker-end="url(#head)"/>')
            parts.append(f'<text x="{(x1 + x2) / 2}" y="{y - 5}" font-size="10" '
                         f'text-anchor="middle" fill="{IDENTITY_COLOUR}">{label}</text>')
    parts.append("</svg>")
    return Drawing("\n".join(parts), _block_text(kind, boxes, shortcut, starts, adds))
