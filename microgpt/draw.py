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
"""

import html
import shutil

__all__ = ["draw", "block_diagram", "Drawing", "graph_of", "MAX_NODES"]

MAX_NODES = 250  # a bigger graph is not readable as a picture


class Drawing:
    """An SVG picture: shown by Jupyter (`_repr_svg_`), saved with `save(path)`."""

    def __init__(self, svg):
        self.svg = svg

    def _repr_svg_(self):
        return self.svg

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
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">',
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
    return Drawing("\n".join(parts))


# ---------------------------------------------------------------- block diagrams

# kind -> (boxes on the main path, from input to output; the shortcut's kind)
_BLOCKS = {
    "plain": (["h", "LayerNorm", "W", "ReLU", "h'"], None),
    "residual": (["h", "LayerNorm", "W", "ReLU", "+", "h'"], "identity"),
    "highway": (["h", "LayerNorm", "W", "ReLU", "T F + (1 - T) h", "h'"], "gate"),
    "pre-norm": (["x", "RMSNorm", "attention", "+", "RMSNorm", "MLP", "+", "x'"], "pre"),
    "post-norm": (["x", "attention", "+", "RMSNorm", "MLP", "+", "RMSNorm", "x'"], "post"),
}


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
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="Helvetica, Arial, sans-serif">',
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
    adds = [i for i, name in enumerate(boxes) if name in ("+", "T F + (1 - T) h")]
    if shortcut:
        # where each shortcut leaves the main path: the input, and in a transformer block
        # also the box after the first add (pre-norm: its sum; post-norm: its norm)
        starts = [0, 3] if shortcut in ("pre", "post") else [0]
        for start, end in zip(starts, adds):
            x1 = xs[start] + box_w / 2
            x2 = xs[end] + box_w / 2
            y = 20
            label = "carry (1 - T)" if shortcut == "gate" else "identity"
            parts.append(f'<path d="M {x1} {top} L {x1} {y} L {x2} {y} L {x2} {top}" '
                         f'fill="none" stroke="{IDENTITY_COLOUR}" stroke-width="2.5" '
                         f'marker-end="url(#head)"/>')
            parts.append(f'<text x="{(x1 + x2) / 2}" y="{y - 5}" font-size="10" '
                         f'text-anchor="middle" fill="{IDENTITY_COLOUR}">{label}</text>')
    parts.append("</svg>")
    return Drawing("\n".join(parts))
