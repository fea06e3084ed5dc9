"""Pictures of what is computed: a `Value` graph, and the block diagrams of the course's layers.

`draw(out)` draws the graph that `out` was computed from, top to bottom (inputs at the top,
`out` at the bottom), in the manner of micrograd's `draw_dot`:

- one box per `Value` with its `data` and `grad` (and its name, for the ones in `names`);
- one small node per operation (`+`, `*`, `relu`, `exp`, `**2`, `dot`, `1/rms`, ...), with an
  arrow from each input carrying the local derivative, and one arrow to its result;
- a number operand (the `0.1` of `0.1 * x`) as a constant: its number in a dashed box;
- the shortcuts in colour: an arrow into an add from a `Value` that the add's other input
  was itself computed from, as `x` in `x + relu(0.1 * x)`. A plain stack has none.

Each node names the operation that made it (`Value._op`, as micrograd's `_op`: the engine
records it when it makes the node, the exponent of `**n` with it), and the drawing labels
it so. A node made by hand (`Value(data, children, local_grads)`) records none: its
operation is *inferred* from its children, data and local derivatives (an add has local
derivatives (1, 1) and the children's sum as data; `a * b` has (b, a) and their product;
`relu`, `exp`, `log`, `tanh`, `sigmoid` and `**n` from how data and derivative relate to
the child's data; the fused nodes likewise), and anything else shows as `f`. A constant is
inferred: a leaf that has no name and is used once, as the second operand of an add or a
product, is where the engine put a number operand (name a `Value` to have it drawn as a
box).

    x = Value(1.0)
    out = residual_stack(x, depth=3)
    out.backward()
    draw(out, names={x: "x", out: "out"})

With the `graphviz` package and Graphviz's `dot` program installed, the result is a
`graphviz.Digraph` (laid out by dot). Without them it is a plain SVG laid out here, in
layers, every long arrow routed through the gaps between boxes, each arrow's number where it
touches no other arrow, box or number (where such a spot exists); `backend="svg"` asks for
it. Both are shown at full size: text is 12 px (edge labels 11 px), and a drawing wider
than `MAX_WIDTH` pixels is shown unscaled with a scroll bar instead of shrunk. A text-only
front end shows the repr, the same picture in words.

`block_diagram(kind, title="")` draws one layer or block, top to bottom, as the
residual-stream picture: the main path a straight column, each branch beside it leaving the
column at a fork and coming back into its own add: "plain", "residual", "highway",
"pre-norm", "post-norm"; `title` is written above it.
"""

import html
import math
import os
import shutil
from collections.abc import Sequence
from typing import Any

__all__ = ["draw", "block_diagram", "Drawing", "graph_of", "op_label", "shortcut_edges",
           "MAX_NODES", "MAX_WIDTH", "SHORTCUT_COLOUR"]

MAX_NODES = 250  # a bigger graph is not readable as a picture
MAX_WIDTH = 900  # about the width of a notebook's output area, in pixels

SHORTCUT_COLOUR = "#1f77b4"  # the shortcuts (and a block diagram's identity path)
IDENTITY_COLOUR = SHORTCUT_COLOUR  # the old name, kept for callers that import it
FONT = "Helvetica, Arial, sans-serif"
FONT_PX = 12  # every box's text
SMALL_PX = 11  # labels on arrows: the smallest text of any drawing
CHAR_W = 0.62  # a generous average glyph width, in ems, to size boxes from their text
ARROW_GAP = 32  # the height of the gap between two rows of a graph, taller above an
# operation with more than two inputs


class Drawing:
    """An SVG picture: shown by Jupyter (`_repr_svg_`), saved with `save(path)`; its repr
    (what a text-only front end shows) is `text`, the picture in words. A picture wider than
    MAX_WIDTH is shown at full size with a scroll bar ("unconfined"), not shrunk."""

    def __init__(self, svg: str, text: str = "", width: float = 0) -> None:
        self.svg = svg
        self.text = text
        self.width = width

    def _repr_svg_(self) -> str | tuple[str, dict[str, bool]]:
        if self.width > MAX_WIDTH:
            return self.svg, {"unconfined": True}
        return self.svg

    def __repr__(self) -> str:
        return self.text or f"<Drawing: an SVG picture of {len(self.svg):,} characters>"

    def save(self, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.svg)
        return path


def graph_of(out: Any, max_nodes: int = MAX_NODES) -> tuple[list[Any], list[tuple[Any, Any, Any]]]:
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


# ---------------------------------------------------------------- what each node is


def _close(a: Any, b: Any) -> bool:
    try:
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    except TypeError:
        return False


def _all_close(xs: Sequence[Any], ys: Sequence[Any]) -> bool:
    return len(xs) == len(ys) and all(_close(a, b) for a, b in zip(xs, ys))


def _exponent(n: float) -> str:
    return f"{n:g}" if n >= 0 else f"({n:g})"


def _one_input_op(x: float, y: float, g: float) -> str | None:
    """The name of y = f(x) with local derivative g, or None."""
    if _close(y, max(0, x)) and _close(g, float(x > 0)):
        return "relu"
    if x < 709 and _close(y, math.exp(x)) and _close(g, y):
        return "exp"
    if x > 0 and _close(y, math.log(x)) and _close(g, 1 / x):
        return "log"
    if _close(y, math.tanh(x)) and _close(g, 1 - y * y):
        return "tanh"
    if -700 < x and _close(y, 1 / (1 + math.exp(-x))) and _close(g, y * (1 - y)):
        return "sigmoid"
    if x != 0 and y != 0:  # y = x**n, g = n x**(n-1): n = g x / y
        n = g * x / y
        if abs(n - round(n)) < 1e-9:
            n = round(n)
        try:
            if _close(y, x**n) and _close(g, n * x ** (n - 1)):
                return f"**{_exponent(n)}"
        except (OverflowError, ZeroDivisionError, TypeError):
            pass
    if x == 0 and y == 0 and g == 0:  # 0**n with n > 1 and relu(0) look alike
        return "relu"
    return None


def _many_input_op(v: Any, kids: list[Any], g: list[Any]) -> str | None:
    n = len(kids)
    y = v.data
    if all(local == 1 for local in g) and _close(y, sum(kids)):
        return "+" if n == 2 else "sum"
    if n == 2 and _close(y, kids[0] * kids[1]) and _all_close(g, (kids[1], kids[0])):
        return "*"
    if n % 2 == 0:  # dot and linear: children (*w, *x), local derivatives (*x, *w)
        h = n // 2
        if _all_close(g, kids[h:] + kids[:h]) and _close(
                y, sum(a * b for a, b in zip(kids[:h], kids[h:]))):
            return "dot"
    if _close(y, sum(a * b for a, b in zip(g, kids))):  # a dot with numbers on one side
        if all(_close(local, 1 / n) for local in g):
            return "mean"
        return "dot"
    square_mean = sum(a * a for a in kids) / n
    if square_mean > 0 and y > 0 and abs(y ** -2 - square_mean) <= 1e-3 * max(
            square_mean, 1e-2) and _all_close(g, [-(y**3) / n * a for a in kids]):
        return "1/rms"
    top = max(kids)
    lse = top + math.log(sum(math.exp(z - top) for z in kids))
    probs = [math.exp(z - lse) for z in kids]
    for i, z in enumerate(kids):
        if _close(y, probs[i]) and _all_close(
                g, [probs[i] * ((j == i) - p) for j, p in enumerate(probs)]):
            return "softmax"
        if _close(y, z - lse) and _all_close(g, [(j == i) - p for j, p in enumerate(probs)]):
            return "log_softmax"
        if _close(y, lse - z) and _all_close(g, [p - (j == i) for j, p in enumerate(probs)]):
            return "cross_entropy"
    return None


def op_label(v: Any) -> str:
    """The operation that made `v`: "+", "*", "relu", "**2", "dot", "softmax", ..., as the
    engine recorded it in the node (`Value._op`); for a node made by hand
    (`Value(data, children, local_grads)`), which records none, the operation inferred from
    its children, data and local derivatives, "f" when none fits; "" for a leaf."""
    if not v._children:
        return ""
    op = getattr(v, "_op", "")
    if op == "**":  # its exponent is kept in the node (see engine._Op)
        try:
            return f"**{_exponent(float(v._db) if not float(v._db).is_integer() else int(v._db))}"
        except (TypeError, ValueError, OverflowError):
            return "**"
    if op:
        return op
    try:
        kids = [float(c.data) for c in v._children]
        g = [float(local) for local in v._local_grads]
        if len(kids) == 1:
            found = _one_input_op(kids[0], float(v.data), g[0])
        else:
            found = _many_input_op(v, kids, g)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        found = None
    return found or "f"


def shortcut_edges(out: Any, max_nodes: int = MAX_NODES) -> set[tuple[int, int]]:
    """The shortcuts of `out`'s graph, as (child, add) pairs: an input of an add (local
    derivative 1) from which another input of the same add was itself computed, as `x` in
    `x + f(x)`. An add of two independent terms has none, and a plain stack has none."""
    nodes, _ = graph_of(out, max_nodes)
    return _shortcuts(nodes)


def _shortcuts(nodes: Sequence[Any]) -> set[tuple[int, int]]:
    """{(id(child), id(add))} of the shortcut arrows (see `shortcut_edges`)."""
    bit = {id(v): 1 << i for i, v in enumerate(nodes)}
    above: dict[int, Any] = {}  # id -> bits of every Value it was computed from (itself excluded)
    for v in nodes:
        mask = 0
        for c in v._children:
            mask |= bit[id(c)] | above[id(c)]
        above[id(v)] = mask
    found = set()
    for v in nodes:
        if len(v._children) < 2 or op_label(v) not in ("+", "sum"):
            continue
        for i, c in enumerate(v._children):
            others = 0
            for j, d in enumerate(v._children):
                if j != i and d is not c:
                    others |= above[id(d)]
            if others & bit[id(c)]:
                found.add((id(c), id(v)))
    return found


def _constants(nodes: Sequence[Any], edges: Sequence[tuple[Any, Any, Any]],
               names: dict[int, str]) -> set[int]:
    """{id} of the leaves drawn as constants: unnamed, used once, the second operand of an
    add or a product (where `Value.__add__` and `__mul__` put a number operand)."""
    uses: dict[int, Any] = {}
    for child, parent, _ in edges:
        uses.setdefault(id(child), []).append(parent)
    found = set()
    for v in nodes:
        parents = uses.get(id(v), [])
        if v._children or id(v) in names or len(parents) != 1:
            continue
        p = parents[0]
        if len(p._children) == 2 and p._children[1] is v and p._children[0] is not v \
                and op_label(p) in ("+", "*"):
            found.add(id(v))
    return found


def _number(x: Any) -> str:
    try:
        return f"{x:.4g}"
    except (TypeError, ValueError):
        return str(x)


def _label(v: Any, names: dict[int, str]) -> str:
    name = names.get(id(v), "")
    text = f"data {_number(v.data)} | grad {_number(v.grad)}"
    return f"{name}: {text}" if name else text


def _graphviz_ready() -> bool:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return False
    return shutil.which("dot") is not None


class _Graph:
    """What both backends draw: the Values, the inferred operations, constants, shortcuts."""

    def __init__(self, out: Any, names: dict[int, str], max_nodes: int) -> None:
        self.names = names
        self.nodes, self.edges = graph_of(out, max_nodes)
        self.ops = {id(v): op_label(v) for v in self.nodes if v._children}
        self.constants = _constants(self.nodes, self.edges, names)
        self.shortcuts = _shortcuts(self.nodes)


def draw(out: Any, names: dict[Any, str] | None = None, backend: str = "auto",
         max_nodes: int = MAX_NODES) -> Any:
    """The graph `out` was computed from (see the module's docstring).

    names: {Value: "a name"} for the boxes worth naming (inputs, output, ...).
    backend: "auto" (graphviz when installed, else the plain SVG), "graphviz" or "svg".
    """
    if backend not in ("auto", "graphviz", "svg"):
        raise ValueError(f"backend must be 'auto', 'graphviz' or 'svg', not {backend!r}")
    names = {id(v): str(n) for v, n in (names or {}).items()}
    graph = _Graph(out, names, max_nodes)
    use_graphviz = backend == "graphviz" or (backend == "auto" and _graphviz_ready())
    if use_graphviz:
        return _with_graphviz(graph)
    return _as_svg(graph)


# ---------------------------------------------------------------- Graphviz


def _with_graphviz(graph: _Graph) -> Any:
    import graphviz

    names = graph.names
    dot = graphviz.Digraph(
        graph_attr={"rankdir": "TB", "nodesep": "0.25", "ranksep": "0.3"},
        node_attr={"fontname": "Helvetica", "fontsize": str(FONT_PX)},
        edge_attr={"fontname": "Helvetica", "fontsize": str(SMALL_PX), "arrowsize": "0.7"})
    for v in graph.nodes:
        key = str(id(v))
        if id(v) in graph.constants:
            dot.node(key, _number(v.data), shape="box", style="dashed,rounded",
                     color="#888888", fontcolor="#555555", tooltip="a constant",
                     width="0.3", height="0.25", margin="0.06,0.02")
            continue
        fields = [f"data {_number(v.data)}", f"grad {_number(v.grad)}"]
        if id(v) in names:
            fields.insert(0, names[id(v)])
        label = "{" + "|".join(_record_escape(f) for f in fields) + "}"
        fill = "#fff3d6" if id(v) in names else "#f4f4f4"
        dot.node(key, label, shape="record", style="filled", fillcolor=fill,
                 tooltip=_label(v, names))
        if v._children:
            dot.node(key + "op", graph.ops[id(v)], shape="box", style="rounded,filled",
                     fillcolor="#e8e8e8", fontsize=str(FONT_PX), height="0.25",
                     margin="0.06,0.02")
            dot.edge(key + "op", key)
    for child, parent, local in graph.edges:
        shortcut = (id(child), id(parent)) in graph.shortcuts
        colour = SHORTCUT_COLOUR if shortcut else "#444444"
        dot.edge(str(id(child)), str(id(parent)) + "op", label=" " + _number(local),
                 color=colour, fontcolor=colour, penwidth="2.5" if shortcut else "1")
    return dot


def _record_escape(text: str) -> str:
    for ch in "\\{}|<>":
        text = text.replace(ch, "\\" + ch)
    return text


# ---------------------------------------------------------------- our own SVG


def _text_w(text: str, px: float = FONT_PX) -> float:
    return len(text) * px * CHAR_W


class _Box:
    __slots__ = ("key", "kind", "lines", "w", "h", "rank", "x", "y", "title", "value")

    def __init__(self, key: Any, kind: str, lines: list[str], w: float, h: float,
                 title: str = "", value: Any = None) -> None:
        self.key, self.kind, self.lines, self.w, self.h = key, kind, lines, w, h
        self.title, self.value = title, value
        self.rank, self.x, self.y = 0, 0.0, 0.0


def _isotonic(targets: Sequence[float], gaps: Sequence[float]) -> list[float]:
    """The positions closest (least squares) to `targets` in which each one is at least
    gaps[i] right of the one before: pool adjacent violators on the offsets."""
    offsets = [0.0]
    for gap in gaps:
        offsets.append(offsets[-1] + gap)
    want = [t - o for t, o in zip(targets, offsets)]
    blocks: list[list[Any]] = []  # [sum, count]
    for w in want:
        blocks.append([w, 1])
        while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
            s, c = blocks.pop()
            blocks[-1][0] += s
            blocks[-1][1] += c
    out: list[float] = []
    for s, c in blocks:
        out.extend([s / c] * c)
    return [y + o for y, o in zip(out, offsets)]


def _layout(boxes: Sequence[_Box], links: Sequence[tuple[Any, Any, Any]], gap_x: float = 22,
            gap_y: float = 32, pad: float = 12, top: float = 0,
            order_of: dict[Any, float] | None = None,
            gap_above: dict[int, float] | None = None) -> tuple[Any, Any, Any, Any]:
    """Place `boxes` in ranks (rank set on each box), left to right within a rank by the
    barycentre of their neighbours (starting from `order_of`), each long link through a
    chain of slim dummy boxes, so that no arrow crosses a box. The gap above rank r is
    `gap_above[r]` where given, else `gap_y`. Returns (width, height, routes, band),
    routes[i] being the points of links[i] and band[rank] its (top, bottom)."""
    order_of = order_of or {}
    gap_above = gap_above or {}
    ranks: dict[Any, Any] = {}
    for b in boxes:
        ranks.setdefault(b.rank, []).append(b)
    chains = []
    weight = {}
    for i, (a, b, w) in enumerate(links):
        chain = [a]
        for r in range(a.rank + 1, b.rank):
            d = _Box(("dummy", i, r), "dummy", [], 8, 0)
            d.rank = r
            order_of[id(d)] = order_of.get(id(a), 0)
            ranks[r].append(d)
            chain.append(d)
        chain.append(b)
        chains.append(chain)
        for u, v in zip(chain, chain[1:]):
            bonus = 6 if (u.kind == "dummy" or v.kind == "dummy") else 1
            weight[(id(u), id(v))] = w * bonus
    up: dict[Any, Any]
    down: dict[Any, Any]
    up, down = {}, {}
    for chain in chains:
        for u, v in zip(chain, chain[1:]):
            down.setdefault(id(u), []).append(v)
            up.setdefault(id(v), []).append(u)
    levels = [ranks[r] for r in sorted(ranks)]
    for level in levels:  # to start with: as the graph lists them, inputs left to right
        level.sort(key=lambda b: order_of.get(id(b), 0))
    pos = {}

    def number() -> None:
        for level in levels:
            for i, b in enumerate(level):
                pos[id(b)] = i

    number()
    for sweep in range(12):  # barycentre ordering, down then up
        order = levels[1:] if sweep % 2 == 0 else levels[-2::-1]
        for level in order:
            near = up if sweep % 2 == 0 else down
            keyed = []
            for i, b in enumerate(level):
                ns = near.get(id(b), [])
                keyed.append((sum(pos[id(n)] for n in ns) / len(ns) if ns else i, i, b))
            keyed.sort(key=lambda t: (t[0], t[1]))
            level[:] = [b for _, _, b in keyed]
            for i, b in enumerate(level):
                pos[id(b)] = i
    # x: start packed, then pull each box towards its neighbours, keeping order and gaps
    for level in levels:
        x = 0.0
        for b in level:
            b.x = x + b.w / 2
            x += b.w + gap_x
    for sweep in range(40):
        order = levels if sweep % 2 == 0 else levels[::-1]
        for level in order:
            targets = []
            for b in level:
                total = count = 0.0
                for n in up.get(id(b), []):
                    w = weight[(id(n), id(b))]
                    total, count = total + w * n.x, count + w
                for n in down.get(id(b), []):
                    w = weight[(id(b), id(n))]
                    total, count = total + w * n.x, count + w
                targets.append(total / count if count else b.x)
            gaps = [(a.w + b.w) / 2 + (gap_x if "dummy" not in (a.kind, b.kind) else 12)
                    for a, b in zip(level, level[1:])]
            for b, x in zip(level, _isotonic(targets, gaps)):
                b.x = x
    _straighten(chains, levels)
    left = min(b.x - b.w / 2 for level in levels for b in level)
    right = max(b.x + b.w / 2 for level in levels for b in level)
    band = {}
    y = pad + top
    for n, (r, level) in enumerate(zip(sorted(ranks), levels)):
        if n:
            y += gap_above.get(r, gap_y)
        h = max((b.h for b in level), default=0)
        band[r] = (y, y + h)
        for b in level:
            b.x += pad - left
            b.y = y + (h - b.h) / 2
        y += h
    routes = []
    for chain in chains:
        routes.append([(b.x, band[b.rank]) for b in chain])
    return right - left + 2 * pad, y + pad, routes, band


def _straighten(chains: Any, levels: Any) -> None:
    """Run each long arrow's dummies down one straight line where the boxes beside them
    leave room (at the x of its start, of its end, of their mean, or of the outermost one),
    so that a shortcut reads as one line."""
    where = {}
    for level in levels:
        for i, b in enumerate(level):
            where[id(b)] = (level, i)
    for chain in sorted(chains, key=len, reverse=True):
        dummies = chain[1:-1]
        if not dummies:
            continue
        xs = [d.x for d in dummies]
        for x in (chain[0].x, chain[-1].x, sum(xs) / len(xs), min(xs), max(xs)):
            fits = True
            for d in dummies:
                level, i = where[id(d)]
                if i > 0:  # a dummy keeps 12 units from its neighbours, as in _layout
                    n = level[i - 1]
                    fits = fits and n.x + n.w / 2 + 12 <= x - d.w / 2 + 1e-6
                if i + 1 < len(level):
                    n = level[i + 1]
                    fits = fits and x + d.w / 2 + 12 <= n.x - n.w / 2 + 1e-6
            if fits:
                for d in dummies:
                    d.x = x
                break


def _overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    """Do the rectangles (left, top, right, bottom) a and b overlap?"""
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _curve(points: Sequence[tuple[float, tuple[float, float]]], start_y: float,
           end_y: float) -> str:
    """An SVG path through `points` [(x, (band top, band bottom))]: down the first box's
    column from `start_y` to its band's bottom, a vertical S-curve across each gap, straight
    through each dummy's band, into the last box at `end_y`."""
    x0, (_, b0) = points[0]
    d = [f"M {x0:.1f} {start_y:.1f}"]
    if b0 > start_y:
        d.append(f"L {x0:.1f} {b0:.1f}")
    x, y = x0, max(b0, start_y)
    for i, (nx, (t, b)) in enumerate(points[1:], start=1):
        last = i == len(points) - 1
        ny = end_y if last and end_y < t else t
        mid = (y + ny) / 2
        d.append(f"C {x:.1f} {mid:.1f} {nx:.1f} {mid:.1f} {nx:.1f} {ny:.1f}")
        if last and end_y > ny:
            d.append(f"L {nx:.1f} {end_y:.1f}")
        elif not last:
            d.append(f"L {nx:.1f} {b:.1f}")
        x, y = nx, (b if not last else end_y)
    return " ".join(d)


def _path_points(d: str, steps: int = 16) -> list[tuple[float, ...]]:
    """Points along an SVG path made of M, L and C commands (as `_curve` writes them)."""
    tokens = d.split()
    points: list[tuple[float, ...]]
    here: tuple[float, ...]
    points, i, here = [], 0, (0.0, 0.0)
    while i < len(tokens):
        if tokens[i] in ("M", "L"):
            here = (float(tokens[i + 1]), float(tokens[i + 2]))
            points.append(here)
            i += 3
            continue
        c = [float(t) for t in tokens[i + 1:i + 7]]
        p0, p1, p2, p3 = here, c[0:2], c[2:4], c[4:6]
        for k in range(1, steps + 1):
            t = k / steps
            points.append(tuple((1 - t) ** 3 * p0[j] + 3 * (1 - t) ** 2 * t * p1[j]
                                + 3 * (1 - t) * t * t * p2[j] + t**3 * p3[j]
                                for j in range(2)))
        here = tuple(p3)
        i += 7
    return points


def _crosses(points: Sequence[tuple[float, ...]], box: Sequence[float]) -> bool:
    """Does the line through `points` pass through the rectangle `box` (left, top, right,
    bottom)? Each segment clipped against it (Liang-Barsky)."""
    for (x1, y1), (x2, y2) in zip(points, points[1:]):
        dx, dy = x2 - x1, y2 - y1
        lo, hi = 0.0, 1.0
        for p, q in ((-dx, x1 - box[0]), (dx, box[2] - x1), (-dy, y1 - box[1]),
                     (dy, box[3] - y1)):
            if p == 0:
                if q < 0:
                    break
                continue
            r = q / p
            if p < 0:
                lo = max(lo, r)
            else:
                hi = min(hi, r)
            if lo > hi:
                break
        else:
            return True
    return False


# where along its arrow a label is tried: a share of the arrow's last gap, nearest the
# middle first (in the last gap the arrows into one operation are still apart), then
# higher up, where an arrow from a box with many uses has not yet met the others
_LABEL_AT = (0.3, 0.5, 0.15, 0.65, 0.05, 0.8)


def _label_spot(route: Sequence[tuple[float, tuple[float, float]]], start_y: float,
                end_y: float, w: float, h: float, taken: Sequence[Any],
                others: Sequence[Any]) -> tuple[float, ...]:
    """The rectangle for a label of size w x h beside the arrow through `route`: the first
    spot, along its last gap then up its earlier ones, left or right of the arrow, that
    overlaps no box or label in `taken` and no other arrow (`others`: the points along
    each); failing that, the one that crosses the fewest other arrows."""
    pad = 2  # the white halo around the glyphs
    legs = []  # (x1, y1, x2, y2) of each gap the arrow crosses, the last first
    for k in range(len(route) - 1, 0, -1):
        (x1, (_, b1)), (x2, (t2, _)) = route[k - 1], route[k]
        y1 = max(b1, start_y) if k == 1 else b1
        y2 = end_y if k == len(route) - 1 else t2
        legs.append((x1, y1, x2, y2))
    best = None
    for x1, y1, x2, y2 in legs:
        for t in _LABEL_AT:
            # the point of the S-curve `_curve` draws across this gap, at parameter t
            cx = x1 + (x2 - x1) * (3 * t * t - 2 * t**3)
            cy = y1 + (y2 - y1) * (1.5 * t * (1 - t) + t**3)
            for right in ((x1 <= x2), not (x1 <= x2)):
                left = cx + 4 if right else cx - 4 - w
                box = (left, cy - h / 2, left + w, cy + h / 2)
                if any(_overlap(box, other) for other in taken):
                    continue
                halo = (box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad)
                hits = sum(_crosses(line, halo) for line in others)
                if hits == 0:
                    return box
                if best is None or hits < best[0]:
                    best = (hits, box)
    if best is not None:
        return best[1]
    x1, y1, _, y2 = legs[0]
    cy = y1 + (y2 - y1) * 0.3
    return (x1 + 4, cy - h / 2, x1 + 4 + w, cy + h / 2)


def _svg_open(width: float, height: float,
              marker_colours: Sequence[tuple[str, str]] = ()) -> str:
    """The opening <svg> tag of a picture shown at its own size (1 unit = 1 px), with an
    arrow head per colour."""
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
             f'font-family="{FONT}">', "<defs>"]
    for name, colour in marker_colours:
        parts.append(f'<marker id="{name}" viewBox="0 0 10 10" refX="10" refY="5" '
                     f'markerWidth="7" markerHeight="7" markerUnits="userSpaceOnUse" '
                     f'orient="auto"><path d="M 0 0 L 10 5 L 0 10 z" fill="{colour}"/>'
                     f'</marker>')
    parts.append("</defs>")
    return "\n".join(parts)


def _text(x: float, y: float, s: str, px: float = FONT_PX, anchor: str = "middle",
          fill: str = "#111111",
          extra: str = "") -> str:
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{px}" text-anchor="{anchor}" '
            f'fill="{fill}"{extra}>{html.escape(s)}</text>')


def _as_svg(graph: _Graph) -> Drawing:
    names, line_h = graph.names, FONT_PX + 3
    boxes, box_of, op_of = [], {}, {}
    for v in graph.nodes:
        if id(v) in graph.constants:
            s = _number(v.data)
            b = _Box(id(v), "constant", [s], _text_w(s) + 14, FONT_PX + 8,
                     f"constant {s}", v)
        else:
            lines = [f"data {_number(v.data)}", f"grad {_number(v.grad)}"]
            if id(v) in names:
                lines.insert(0, names[id(v)])
            w = max(_text_w(s) for s in lines) + 16
            b = _Box(id(v), "value", lines, w, line_h * len(lines) + 8, _label(v, names), v)
        boxes.append(b)
        box_of[id(v)] = b
        if v._children:
            s = graph.ops[id(v)]
            o = _Box(("op", id(v)), "op", [s], max(_text_w(s) + 14, 28), FONT_PX + 8,
                     f"operation {s}", v)
            boxes.append(o)
            op_of[id(v)] = o
    # ranks: an operation one below its lowest input, its result one below it; a leaf
    # just above its first use, not at the very top
    for v in graph.nodes:
        if v._children:
            op = op_of[id(v)]
            op.rank = 1 + max(box_of[id(c)].rank for c in v._children)
            box_of[id(v)].rank = op.rank + 1
    first_use: dict[Any, Any] = {}
    for child, parent, _ in graph.edges:
        r = op_of[id(parent)].rank
        first_use[id(child)] = min(first_use.get(id(child), r), r)
    for v in graph.nodes:
        if not v._children and id(v) in first_use:
            box_of[id(v)].rank = first_use[id(v)] - 1
    shift = min(b.rank for b in boxes)
    for b in boxes:
        b.rank -= shift
    links: list[Any]
    kinds: list[Any]
    links, kinds = [], []
    seen = set()
    for v in graph.nodes:
        if v._children:
            links.append((op_of[id(v)], box_of[id(v)], 8))  # the op sits on its result
            kinds.append(None)
    for child, parent, local in graph.edges:
        key = (id(child), id(parent))
        if key in seen and child is not None:
            pass  # a Value used twice by one operation: two arrows, as in the graph
        seen.add(key)
        links.append((box_of[id(child)], op_of[id(parent)], 1))
        kinds.append((child, parent, local))
    legend = "a shortcut: a Value added to what was computed from it" if graph.shortcuts else ""
    top = line_h + 6 if legend else 0
    # left to right as each operation lists its inputs: a depth-first walk from `out`
    order_of: dict[Any, Any]
    order_of, stack, seen_walk = {}, [graph.nodes[-1]], set()
    while stack:
        v = stack.pop()
        if id(v) in seen_walk:
            continue
        seen_walk.add(id(v))
        order_of[id(box_of[id(v)])] = len(order_of)
        if v._children:
            order_of[id(op_of[id(v)])] = len(order_of)
        stack.extend(reversed(v._children))
    # a taller gap above an operation that many arrows come into: room for their labels
    # where the arrows are still apart
    into: dict[Any, Any] = {}
    for i, (_, b, _) in enumerate(links):
        if kinds[i] is not None:
            into[id(b)] = into.get(id(b), 0) + 1
    gap_above: dict[int, float] = {}
    for b in boxes:
        if b.kind == "op" and into.get(id(b), 0) > 2:
            gap = min(ARROW_GAP + 8 * (into[id(b)] - 2), 2 * ARROW_GAP)
            gap_above[b.rank] = max(gap_above.get(b.rank, ARROW_GAP), gap)
    width, height, routes, band = _layout(boxes, links, gap_y=ARROW_GAP, top=top,
                                          order_of=None, gap_above=gap_above)
    width = math.ceil(max(width, 46 + _text_w(legend) + 12))
    height = math.ceil(height)
    # where arrows end on an operation: spread over its top, in the order they arrive
    arriving: dict[Any, Any] = {}
    for i, (_, b, _) in enumerate(links):
        if kinds[i] is not None:
            arriving.setdefault(id(b), []).append(i)
    end_x = {}
    for idx in arriving.values():
        idx.sort(key=lambda i: routes[i][-2][0])
        op = links[idx[0]][1]
        step = min(10.0, (op.w - 10) / max(1, len(idx) - 1))
        for k, i in enumerate(idx):
            end_x[i] = op.x + (k - (len(idx) - 1) / 2) * step
    heads = [("arrow", "#444444")] + ([("shortcut", SHORTCUT_COLOUR)] if legend else [])
    parts = [_svg_open(width, height, heads)]
    if legend:
        parts.append(f'<line x1="12" y1="{12 + line_h / 2 - 4}" x2="40" '
                     f'y2="{12 + line_h / 2 - 4}" stroke="{SHORTCUT_COLOUR}" '
                     f'stroke-width="2.5"/>')
        parts.append(_text(46, 12 + line_h / 2, legend, anchor="start", fill=SHORTCUT_COLOUR))
    labels = []
    taken: list[tuple[float, ...]] = [(b.x - b.w / 2 - 2, b.y - 2, b.x + b.w / 2 + 2, b.y + b.h + 2)
             for b in boxes if b.kind != "dummy"]
    paths: list[str]
    paths, lines = [], []  # each arrow's SVG path, and the points along it
    for i, ((a, b, _), route) in enumerate(zip(links, routes)):
        if i in end_x:
            route = route[:-1] + [(end_x[i], route[-1][1])]
            routes[i] = route
        paths.append(_curve(route, a.y + a.h, b.y))
        lines.append(_path_points(paths[-1]))  # type: ignore[arg-type]
    for i, (a, b, _) in enumerate(links):
        path, route = paths[i], routes[i]
        start_y, end_y = a.y + a.h, b.y
        if kinds[i] is None:
            parts.append(f'<path d="{path}" fill="none" stroke="#444444" stroke-width="1.2" '
                         f'marker-end="url(#arrow)"/>')
            continue
        child, parent, local = kinds[i]
        shortcut = (id(child), id(parent)) in graph.shortcuts
        colour = SHORTCUT_COLOUR if shortcut else "#444444"
        parts.append(f'<path d="{path}" fill="none" stroke="{colour}" '
                     f'stroke-width="{2.5 if shortcut else 1.2}" '
                     f'marker-end="url(#{"shortcut" if shortcut else "arrow"})">'
                     f'<title>{"shortcut, " if shortcut else ""}local derivative '
                     f'{html.escape(_number(local))}</title></path>')
        text = _number(local)
        others = [line for k, line in enumerate(lines) if k != i]
        box = _label_spot(route, start_y, end_y, _text_w(text, SMALL_PX), SMALL_PX, taken,
                          others)
        taken.append(box)
        labels.append(_text(box[0], box[3] - 1.5, text, px=SMALL_PX, anchor="start",
                            fill=colour,
                            extra=' stroke="white" stroke-width="3" paint-order="stroke"'))
    for b in boxes:
        if b.kind == "dummy":
            continue
        x, y = b.x - b.w / 2, b.y
        parts.append(f"<g><title>{html.escape(b.title)}</title>")
        if b.kind == "op":
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{b.w:.1f}" height="{b.h}" '
                         f'rx="{b.h / 2}" fill="#e8e8e8" stroke="#444444"/>')
            parts.append(_text(b.x, y + b.h / 2 + FONT_PX * 0.35, b.lines[0],
                               extra=' font-weight="bold"'))
        elif b.kind == "constant":
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{b.w:.1f}" height="{b.h}" '
                         f'rx="3" fill="#ffffff" stroke="#888888" stroke-dasharray="3 2"/>')
            parts.append(_text(b.x, y + b.h / 2 + FONT_PX * 0.35, b.lines[0], fill="#555555"))
        else:
            named = id(b.value) in names
            parts.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{b.w:.1f}" height="{b.h}" '
                         f'rx="4" fill="{"#fff3d6" if named else "#f7f7f7"}" '
                         f'stroke="#333333"/>')
            for k, s in enumerate(b.lines):
                bold = ' font-weight="bold"' if named and k == 0 else ""
                parts.append(_text(b.x, y + 4 + line_h * (k + 1) - 3.5, s, extra=bold))
            if named:
                sep = y + 4 + line_h + 1
                parts.append(f'<line x1="{x:.1f}" y1="{sep:.1f}" x2="{x + b.w:.1f}" '
                             f'y2="{sep:.1f}" stroke="#bbbbbb"/>')
        parts.append("</g>")
    parts.extend(labels)  # over the arrows, each on a white halo
    parts.append("</svg>")
    return Drawing("\n".join(parts), _graph_text(graph), width)


MAX_TEXT_LINES = 40  # the text repr of a bigger graph lists this many boxes, then a count


def _graph_text(graph: _Graph) -> str:
    """The graph in words: one line per Value (inputs first) with the operation that made
    it and the Values it is computed from, the local derivative on each arrow."""
    nodes, edges, names = graph.nodes, graph.edges, graph.names
    number = {id(v): i for i, v in enumerate(nodes, start=1)}
    inputs: dict[int, list[Any]] = {}
    for child, parent, local in edges:
        inputs.setdefault(id(parent), []).append((child, local))
    lines = [f"graph of {len(nodes)} Values and {len(edges)} arrows "
             f"({len(graph.shortcuts)} of them shortcuts, drawn in colour); inputs first, "
             f"each Value with the operation that made it and its inputs:"]
    for v in nodes[:MAX_TEXT_LINES]:
        if id(v) in graph.constants:
            lines.append(f"  [{number[id(v)]}] constant {_number(v.data)}")
            continue
        line = f"  [{number[id(v)]}] {_label(v, names)}"
        came_from = inputs.get(id(v), [])
        if came_from:
            line += f"  = {graph.ops[id(v)]} <- " + ", ".join(
                f"[{number[id(c)]}] (local {_number(local)}"
                f"{', shortcut' if (id(c), id(v)) in graph.shortcuts else ''})"
                for c, local in came_from)
        lines.append(line)
    if len(nodes) > MAX_TEXT_LINES:
        lines.append(f"  ... and {len(nodes) - MAX_TEXT_LINES} more")
    return "\n".join(lines)


# ---------------------------------------------------------------- block diagrams

# kind -> the main path (top to bottom) as a list of steps: a box name, or a branch
# ("branch", [boxes on it], the add's label, the shortcut's label or None, identity?) that
# leaves the main path at a fork and comes back into its own add
_BLOCKS: dict[str, Any] = {
    "plain": ["h", "LayerNorm", "W", "ReLU", "h'"],
    "residual": ["h", ("branch", ["LayerNorm", "W", "ReLU"], "+", "identity"), "h'"],
    "highway": ["h", ("branch", ["LayerNorm", "W", "ReLU"], "T H + (1 - T) h",
                      "carry (1 - T)"), "h'"],
    "pre-norm": ["x", ("branch", ["RMSNorm", "attention"], "+", "identity"),
                 ("branch", ["RMSNorm", "MLP"], "+", "identity"), "x'"],
    "post-norm": ["x", ("branch", ["attention"], "+", "shortcut"), "RMSNorm",
                  ("branch", ["MLP"], "+", "shortcut"), "RMSNorm", "x'"],
}


def _main_path(kind: str) -> tuple[list[Any], Any]:
    """The boxes of the main path, with the index of each add and of where its branch leaves."""
    boxes: list[Any]
    forks: list[Any]
    boxes, forks = [], []
    for step in _BLOCKS[kind]:
        if isinstance(step, tuple):
            _, branch, add, label = step
            forks.append((len(boxes) - 1, branch, len(boxes), label))
            boxes.append(add)
        else:
            boxes.append(step)
    return boxes, forks


def _block_text(kind: str, title: str = "") -> str:
    boxes, forks = _main_path(kind)
    lines = ([title] if title else []) + [f"{kind} block diagram, top to bottom",
             "  main path: " + " -> ".join(boxes)]
    for start, branch, end, label in forks:
        lines.append(f"  branch: {boxes[start]} -> " + " -> ".join(branch) +
                     f" -> {boxes[end]} (box {end + 1}, beside the main path)")
        lines.append(f"  {label}: {boxes[start]} -> {boxes[end]} (box {start + 1} to box "
                     f"{end + 1}, straight down the main path)")
    return "\n".join(lines)


def block_diagram(kind: str, title: str = "") -> Drawing:
    """One layer or block, top to bottom: the main path in a straight column, each branch
    to its right, leaving the column at a fork and coming back into its own add. The column
    from a fork to its add is the shortcut (the identity path of a residual layer or block,
    the carry path of a highway layer), drawn in colour. In a transformer block the second
    branch leaves the column below the first add: the MLP reads the stream after it.
    `title`, if given, is written above the block (and first in the text repr), so that
    two diagrams shown one after the other say which is which."""
    if kind not in _BLOCKS:
        raise ValueError(f"kind must be one of {sorted(_BLOCKS)}, not {kind!r}")
    box_h, gap, pad, step_gap = 30, 22, 14, 14
    title_px = 14
    main_w, branch_w = 150, 110
    main_x = pad + 40  # room on the left for the shortcut's label, beside the column
    branch_x = main_x + main_w / 2 + 40 + branch_w / 2
    parts, y = [], pad + (title_px + 12 if title else 0)
    centre = main_x + main_w / 2
    label_x = centre - 8
    items = []  # (y top, kind, name)
    fork_ys = []
    for step in _BLOCKS[kind]:
        if not isinstance(step, tuple):
            items.append((y, "box", step))
            y += box_h + gap
            continue
        _, branch, add, label = step
        fork_y = y - gap / 2 + 2  # just below the box above: where the branch leaves
        by = y + step_gap
        branch_tops = []
        for _ in branch:
            branch_tops.append(by)
            by += box_h + step_gap
        add_y = by
        items.append((add_y, "add", add))
        fork_ys.append((fork_y, branch_tops, branch, add_y, label))
        y = add_y + box_h + gap
    height = math.ceil(y - gap + pad)
    width = math.ceil(max(branch_x + branch_w / 2, pad + _text_w(title, title_px)) + pad)
    parts.append(_svg_open(width, height, [("head", "#333333"), ("idhead", SHORTCUT_COLOUR)]))
    if title:
        parts.append(_text(pad, pad + title_px, title, px=title_px, anchor="start",
                           extra=' font-weight="bold"'))
    # the main path's segments: coloured from a fork down to its add (the shortcut)
    tops = [t for t, _, _ in items]
    in_shortcut = {i for i, (_, k, _) in enumerate(items) if k == "add"}
    for i in range(len(items) - 1):
        y1, y2 = tops[i] + box_h, tops[i + 1]
        shortcut = (i + 1) in in_shortcut
        colour = SHORTCUT_COLOUR if shortcut else "#333333"
        parts.append(f'<line x1="{centre}" y1="{y1}" x2="{centre}" y2="{y2}" '
                     f'stroke="{colour}" stroke-width="{2.5 if shortcut else 1.3}" '
                     f'marker-end="url(#{"idhead" if shortcut else "head"})"/>')
    for fork_y, branch_tops, branch, add_y, label in fork_ys:
        bx = branch_x
        # fork: a dot on the main path, a line to the right and down into the branch
        parts.append(f'<circle cx="{centre}" cy="{fork_y}" r="4" fill="#333333"/>')
        parts.append(f'<path d="M {centre} {fork_y} L {bx} {fork_y} L {bx} {branch_tops[0]}" '
                     f'fill="none" stroke="#333333" stroke-width="1.3" '
                     f'marker-end="url(#head)"/>')
        for t1, t2 in zip(branch_tops, branch_tops[1:]):
            parts.append(f'<line x1="{bx}" y1="{t1 + box_h}" x2="{bx}" y2="{t2}" '
                         f'stroke="#333333" stroke-width="1.3" marker-end="url(#head)"/>')
        last = branch_tops[-1] + box_h
        # back into this branch's own add, from the right
        parts.append(f'<path d="M {bx} {last} L {bx} {add_y + box_h / 2} '
                     f'L {main_x + main_w} {add_y + box_h / 2}" fill="none" stroke="#333333" '
                     f'stroke-width="1.3" marker-end="url(#head)"/>')
        for t, name in zip(branch_tops, branch):
            parts.append(f'<rect x="{bx - branch_w / 2}" y="{t}" width="{branch_w}" '
                         f'height="{box_h}" rx="6" fill="#f4f4f4" stroke="#333333"/>')
            parts.append(_text(bx, t + box_h / 2 + 4, name, px=13))
        parts.append(_text(label_x, (fork_y + add_y) / 2 + 4, label, px=FONT_PX,
                           anchor="end", fill=SHORTCUT_COLOUR))
    for t, k, name in items:
        fill = "#d8ecff" if k == "add" else (
            "#ffffff" if name in ("h", "h'", "x", "x'") else "#f4f4f4")
        parts.append(f'<rect x="{main_x}" y="{t}" width="{main_w}" height="{box_h}" rx="6" '
                     f'fill="{fill}" stroke="#333333"/>')
        parts.append(_text(centre, t + box_h / 2 + 4.5, name, px=13))
    parts.append("</svg>")
    return Drawing("\n".join(parts), _block_text(kind, title), width)
