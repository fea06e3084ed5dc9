"""The torch track's MLP and transformer rebuilt on microgpt's `Value` engine.

Given the weights of a `torchtrack` model (`value_params(model)` turns each parameter
into nested lists of `Value`s under the same name), these functions compute the same
loss with the scalar engine, so that `backward()` gives every parameter's gradient for
comparison with torch's. Nothing here is fast; it is a second, independent oracle.
"""

import math

from microgpt import Value, cross_entropy, dot, linear, softmax
from microgpt.nn import layernorm, rmsnorm

__all__ = [
    "value_params",
    "grads",
    "mlp_loss",
    "lm_loss",
]


def _values(x):
    if isinstance(x, list):
        return [_values(v) for v in x]
    return Value(float(x))


def _numbers(x, attr):
    if isinstance(x, list):
        return [_numbers(v, attr) for v in x]
    return getattr(x, attr)


def value_params(model):
    """name -> the parameter's numbers as nested lists of `Value` (rows for a matrix)."""
    return {name: _values(p.detach().double().tolist()) for name, p in model.named_parameters()}


def grads(params):
    """name -> the `.grad` of each `Value` of `params`, as nested lists of floats."""
    return {name: _numbers(v, "grad") for name, v in params.items()}


# ---------------------------------------------------------------- pieces


def _affine(x, W, b=None):
    """$W x + b$ (W a list of rows, as torch stores `Linear.weight`)."""
    y = linear(x, W)
    return y if b is None else [yi + bi for yi, bi in zip(y, b)]


def _layernorm(x, g, b, eps=1e-5):
    """LayerNorm with a gain and a bias, as `torch.nn.LayerNorm`."""
    return [gi * yi + bi for gi, yi, bi in zip(g, layernorm(x, eps), b)]


def _rmsnorm(x, g, eps=1e-6):
    """$g \\odot x / \\sqrt{\\mathrm{mean}(x^2) + \\epsilon}$"""
    return [gi * yi for gi, yi in zip(g, rmsnorm(x, eps))]


def _silu(a):
    """$a\\,\\sigma(a)$"""
    return a * a.sigmoid()


def _mean(losses):
    return Value.sum(losses) * (1 / len(losses))


# ---------------------------------------------------------------- the MLP


def _mlp_logits(P, kind, depth, x):
    h = _affine(x, P["inp.weight"], P["inp.bias"])
    for i in range(depth):
        p = f"layers.{i}."
        normed = _layernorm(h, P[p + "norm.weight"], P[p + "norm.bias"])
        f = [v.relu() for v in _affine(normed, P[p + "linear.weight"], P[p + "linear.bias"])]
        if kind == "plain":
            h = f
        elif kind == "residual":
            h = [a + b for a, b in zip(h, f)]
        elif kind == "highway":
            t = [v.sigmoid() for v in _affine(h, P[p + "gate.weight"], P[p + "gate.bias"])]
            h = [ti * fi + (1 - ti) * hi for ti, fi, hi in zip(t, f, h)]
        else:
            raise ValueError(f"unknown layer kind {kind!r}")
    return _affine(h, P["out.weight"], P["out.bias"])


def mlp_loss(P, kind, depth, X, Y):
    """Mean cross-entropy of a `torchtrack.mlp.DeepMLP` of `depth` `kind` layers on
    `(X, Y)` (lists of lists of floats and class indices)."""
    return _mean([cross_entropy(_mlp_logits(P, kind, depth, x), y) for x, y in zip(X, Y)])


# ---------------------------------------------------------------- the transformer


def _rope(v, pos, base=10000.0):
    """Rotate pairs $(v_i, v_{i+h/2})$ by $pos\\,base^{-2i/h}$ (rotate-half)."""
    h = len(v)
    half = h // 2
    out_a, out_b = [], []
    for i in range(half):
        angle = pos * base ** (-2 * i / h)
        c, s = math.cos(angle), math.sin(angle)
        out_a.append(v[i] * c - v[i + half] * s)
        out_b.append(v[i + half] * c + v[i] * s)
    return out_a + out_b


def _attention(P, p, xs, n_heads):
    """Causal multi-head self-attention over the sequence `xs` (a list of vectors)."""
    D = len(xs[0])
    hd = D // n_heads
    qkv = [linear(x, P[p + "qkv.weight"]) for x in xs]
    outs = []
    for t in range(len(xs)):
        heads = []
        for h in range(0, D, hd):
            q = _rope(qkv[t][h : h + hd], t)
            keys = [_rope(qkv[s][D + h : D + h + hd], s) for s in range(t + 1)]
            weights = softmax([dot(q, k) * (1 / math.sqrt(hd)) for k in keys])
            for j in range(h, h + hd):
                heads.append(dot(weights, [qkv[s][2 * D + j] for s in range(t + 1)]))
        outs.append(linear(heads, P[p + "out.weight"]))
    return outs


def _ffn(P, p, x):
    a = linear(x, P[p + "w1.weight"])
    b = linear(x, P[p + "w3.weight"])
    return linear([_silu(ai) * bi for ai, bi in zip(a, b)], P[p + "w2.weight"])


def _block(P, i, xs, layout, n_heads):
    p = f"blocks.{i}."
    g1, g2 = P[p + "norm1.weight"], P[p + "norm2.weight"]

    def add(a, b):
        return [[u + v for u, v in zip(ra, rb)] for ra, rb in zip(a, b)]

    if layout == "pre":
        xs = add(xs, _attention(P, p + "attn.", [_rmsnorm(x, g1) for x in xs], n_heads))
        return add(xs, [_ffn(P, p + "ffn.", _rmsnorm(x, g2)) for x in xs])
    if layout == "post":
        xs = [_rmsnorm(x, g1) for x in add(xs, _attention(P, p + "attn.", xs, n_heads))]
        return [_rmsnorm(x, g2) for x in add(xs, [_ffn(P, p + "ffn.", x) for x in xs])]
    if layout == "none":
        xs = _attention(P, p + "attn.", [_rmsnorm(x, g1) for x in xs], n_heads)
        return [_ffn(P, p + "ffn.", _rmsnorm(x, g2)) for x in xs]
    raise ValueError(f"unknown layout {layout!r}")


def lm_loss(P, layout, n_layers, n_heads, idx, targets):
    """Mean next-character cross-entropy of a `torchtrack.transformer.TransformerLM` on
    `idx`/`targets` (lists of equal-length lists of ids)."""
    losses = []
    for row, row_targets in zip(idx, targets):
        xs = [list(P["embed.weight"][i]) for i in row]
        for i in range(n_layers):
            xs = _block(P, i, xs, layout, n_heads)
        for x, y in zip(xs, row_targets):
            logits = linear(_rmsnorm(x, P["norm.weight"]), P["head.weight"])
            losses.append(cross_entropy(logits, y))
    return _mean(losses)
