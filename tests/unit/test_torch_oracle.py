"""PyTorch as a second, independent oracle, in float64: random expression graphs and the
whole tiny GPT, values and every gradient to 1e-9. Skipped when torch is absent."""

import math
import random

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from microgpt import (
    GPT,
    CharTokenizer,
    Value,
    cross_entropy,
    dot,
    layernorm,
    linear,
    log_softmax,
    rmsnorm,
    softmax,
)

torch = pytest.importorskip(
    "torch", reason="PyTorch is the optional second oracle: pip install -e '.[torch]'"
)
F = torch.nn.functional

pytestmark = pytest.mark.torch

TOL = 1e-9
EPS = 1e-5  # the norms' epsilon


def scalar(x, grad=False):
    return torch.tensor(float(x), dtype=torch.float64, requires_grad=grad)


def assert_all_close(ours, theirs, what, scale=1.0):
    """Every entry within TOL of torch's, relative to the largest of them (and to 1, or to
    `scale` when larger)."""
    scale = max([1.0, scale, *(abs(t) for t in theirs)])
    bad = [(i, a, b) for i, (a, b) in enumerate(zip(ours, theirs)) if not abs(a - b) <= TOL * scale]
    assert len(ours) == len(theirs) and not bad, f"{what}: {len(bad)} differ, e.g. {bad[:3]}"


# ---- random expression graphs ----


class RandomGraph:
    """The same random graph built node by node in both engines, as (Value, tensor) pairs.

    Each operation picks its operands from all the nodes made so far, so nodes are reused
    by many later ones; an operation whose operands are outside its domain is skipped,
    and so is a node whose value leaves [-1e4, 1e4].
    """

    def __init__(self, rng, n_leaves):
        self.rng = rng
        xs = [rng.uniform(-2.0, 2.0) for _ in range(n_leaves)]
        self.leaves = [(Value(x), scalar(x, grad=True)) for x in xs]
        self.nodes = list(self.leaves)

    def pick(self, k=None):
        if k is None:
            return self.rng.choice(self.nodes)
        return [self.rng.choice(self.nodes) for _ in range(k)]

    def add(self, pairs):
        for v, t in pairs:
            if math.isfinite(v.data) and abs(v.data) <= 1e4:
                self.nodes.append((v, t))

    def grow(self):
        rng = self.rng
        op = rng.choice(OPS)
        made = op(self, rng)
        if made:
            self.add(made)

    def output(self):
        """A weighted sum of every node (a dot with numbers), so every node matters."""
        coeffs = [self.rng.uniform(-1.0, 1.0) for _ in self.nodes]
        v = dot(coeffs, [v for v, _ in self.nodes])
        t = (torch.tensor(coeffs, dtype=torch.float64) * torch.stack([t for _, t in self.nodes]))
        return v, t.sum()


def _unary(fn_v, fn_t, domain=lambda x: True):
    def op(g, rng):
        v, t = g.pick()
        if domain(v.data):
            return [(fn_v(v), fn_t(t))]
    return op


def _binary(fn, domain=lambda a, b: True):
    def op(g, rng):
        (a, ta), (b, tb) = g.pick(2)
        if domain(a.data, b.data):
            return [(fn(a, b), fn(ta, tb))]
    return op


def _with_number(fn, domain=lambda a, c: True):
    """`fn(a, c)` with a plain number c, on either side (fn decides)."""
    def op(g, rng):
        a, ta = g.pick()
        c = rng.choice([rng.uniform(-3.0, 3.0), 2, -1, 0.5])
        if domain(a.data, c):
            return [(fn(a, c), fn(ta, c))]
    return op


def _pow(g, rng):
    a, ta = g.pick()
    if rng.random() < 0.5:
        k = rng.choice([2, 3, -1, -2])
        if k > 0 or abs(a.data) > 0.2:
            return [(a**k, ta**k)]
    elif a.data > 0.1:
        p = rng.uniform(-1.5, 2.5)
        return [(a**p, ta**p)]


def _vector_op(fn_v, fn_t, k_min=1):
    """A fused op on a random list of nodes (repeats allowed), returning all its outputs."""
    def op(g, rng):
        pairs = g.pick(rng.randint(k_min, 5))
        vs = [v for v, _ in pairs]
        ts = torch.stack([t for _, t in pairs])
        out_v = fn_v(vs, rng)
        out_t = fn_t(ts)
        out_v = out_v if isinstance(out_v, list) else [out_v]
        out_t = list(out_t.reshape(-1).unbind())
        return list(zip(out_v, out_t))
    return op


def _dot_op(g, rng):
    k = rng.randint(1, 5)
    (a, b) = g.pick(k), g.pick(k)
    if rng.random() < 0.3:  # plain numbers on one side
        nums = [rng.uniform(-2.0, 2.0) for _ in range(k)]
        v = dot(nums, [v for v, _ in b]) if rng.random() < 0.5 else dot([v for v, _ in b], nums)
        t = (torch.tensor(nums, dtype=torch.float64) * torch.stack([t for _, t in b])).sum()
        return [(v, t)]
    v = dot([v for v, _ in a], [v for v, _ in b])
    t = (torch.stack([t for _, t in a]) * torch.stack([t for _, t in b])).sum()
    return [(v, t)]


def _linear_op(g, rng):
    n_in, n_out = rng.randint(1, 4), rng.randint(1, 3)
    x = g.pick(n_in)
    rows = [g.pick(n_in) for _ in range(n_out)]
    out_v = linear([v for v, _ in x], [[v for v, _ in row] for row in rows])
    w_t = torch.stack([torch.stack([t for _, t in row]) for row in rows])
    out_t = w_t @ torch.stack([t for _, t in x])
    return list(zip(out_v, out_t.unbind()))


def _cross_entropy_op(g, rng):
    pairs = g.pick(rng.randint(2, 5))
    target = rng.randrange(len(pairs))
    v = cross_entropy([v for v, _ in pairs], target)
    t = F.cross_entropy(torch.stack([t for _, t in pairs])[None], torch.tensor([target]))
    return [(v, t)]


def _torch_rms(x):
    return x / torch.sqrt((x * x).mean() + EPS)


OPS = [
    _unary(lambda a: -a, lambda t: -t),
    _unary(lambda a: a.exp(), torch.exp, lambda x: x < 8),
    _unary(lambda a: a.log(), torch.log, lambda x: x > 1e-2),
    _unary(lambda a: a.relu(), torch.relu),
    _unary(lambda a: a.tanh(), torch.tanh),
    _unary(lambda a: a.sigmoid(), torch.sigmoid),
    _pow,
    _binary(lambda a, b: a + b),
    _binary(lambda a, b: a - b),
    _binary(lambda a, b: a * b),
    _binary(lambda a, b: a / b, lambda a, b: abs(b) > 0.1),
    _with_number(lambda a, c: a + c),
    _with_number(lambda a, c: c + a),
    _with_number(lambda a, c: a - c),
    _with_number(lambda a, c: c - a),
    _with_number(lambda a, c: a * c),
    _with_number(lambda a, c: c * a),
    _with_number(lambda a, c: a / c, lambda a, c: abs(c) > 0.1),
    _with_number(lambda a, c: c / a, lambda a, c: abs(a) > 0.1),
    _vector_op(lambda vs, rng: Value.sum(vs), lambda ts: ts.sum()),
    _dot_op,
    _linear_op,
    _vector_op(lambda vs, rng: softmax(vs), lambda ts: torch.softmax(ts, 0)),
    _vector_op(lambda vs, rng: log_softmax(vs), lambda ts: torch.log_softmax(ts, 0)),
    _cross_entropy_op,
    _vector_op(lambda vs, rng: rmsnorm(vs), _torch_rms),
    _vector_op(
        lambda vs, rng: layernorm(vs), lambda ts: F.layer_norm(ts, ts.shape, eps=EPS), k_min=2
    ),
]


@given(seed=st.integers(0, 2**32 - 1), n_leaves=st.integers(1, 5), n_ops=st.integers(5, 60))
@example(seed=38803360, n_leaves=1, n_ops=26)  # contributions of 1e4 that cancel to 0.71
def test_random_graphs_agree_with_torch(seed, n_leaves, n_ops):
    g = RandomGraph(random.Random(seed), n_leaves)
    for _ in range(n_ops):
        g.grow()
    assert_all_close([v.data for v, _ in g.nodes], [t.item() for _, t in g.nodes], "values")
    out_v, out_t = g.output()
    assert_all_close([out_v.data], [out_t.item()], "output")
    for _, t in g.nodes:
        if t.requires_grad and not t.is_leaf:
            t.retain_grad()
    out_v.backward()
    out_t.backward()
    theirs = [0.0 if t.grad is None else t.grad.item() for _, t in g.leaves]
    # A leaf's gradient sums what reaches it along every path; the two engines add those
    # contributions in different orders, so where large ones cancel, their size (not the
    # sum's) bounds the rounding: the largest gradient of any node in the graph joins the
    # scale. The tolerance stays 1e-9 of it.
    inner = [abs(t.grad.item()) for _, t in g.nodes if t.grad is not None]
    assert_all_close([v.grad for v, _ in g.leaves], theirs, "leaf gradients",
                     scale=max(inner, default=0.0))


def test_every_op_appears_in_random_graphs():
    """The graphs above really exercise each op (a guard against a dead op table)."""
    used = set()
    for seed in range(40):
        g = RandomGraph(random.Random(seed), 3)
        for _ in range(60):
            n = len(g.nodes)
            op = g.rng.choice(OPS)
            made = op(g, g.rng)
            if made:
                g.add(made)
                if len(g.nodes) > n:
                    used.add(OPS.index(op))
    assert used == set(range(len(OPS)))


# ---- the whole tiny GPT, written again in torch ----


def torch_gpt_loss(w, tokens, c):
    """microgpt's forward, one position at a time with a key/value cache, on tensors `w`."""
    n = min(c.block_size, len(tokens) - 1)
    hd = c.n_embd // c.n_head
    keys = [[] for _ in range(c.n_layer)]
    values = [[] for _ in range(c.n_layer)]

    def attention(x, i):
        q = w[f"layer{i}.attn_wq"] @ x
        keys[i].append(w[f"layer{i}.attn_wk"] @ x)
        values[i].append(w[f"layer{i}.attn_wv"] @ x)
        k = torch.stack(keys[i]).view(-1, c.n_head, hd)  # (positions, heads, head_dim)
        v = torch.stack(values[i]).view(-1, c.n_head, hd)
        scores = (k * q.view(c.n_head, hd)).sum(-1) / math.sqrt(hd)  # (positions, heads)
        att = torch.softmax(scores, dim=0)
        heads = (att[:, :, None] * v).sum(0).reshape(c.n_embd)
        return w[f"layer{i}.attn_wo"] @ heads

    def mlp(x, i):
        return w[f"layer{i}.mlp_fc2"] @ torch.relu(w[f"layer{i}.mlp_fc1"] @ x)

    losses = []
    for pos in range(n):
        x = _torch_rms(w["wte"][tokens[pos]] + w["wpe"][pos])
        for i in range(c.n_layer):
            if c.layout == "pre":
                x = x + attention(_torch_rms(x), i)
                x = x + mlp(_torch_rms(x), i)
            elif c.layout == "post":
                x = _torch_rms(x + attention(x, i))
                x = _torch_rms(x + mlp(x, i))
            else:
                x = mlp(_torch_rms(attention(_torch_rms(x), i)), i)
        if c.final_norm:
            x = _torch_rms(x)
        logits = w["lm_head"] @ x
        losses.append(F.cross_entropy(logits[None], torch.tensor([tokens[pos + 1]])))
    return torch.stack(losses).mean()


TOKENIZER = CharTokenizer(["abcdefghijklmnopqrstuvwxyz"])


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"n_layer": 2, "layout": "post", "final_norm": True},
        {"n_layer": 2, "layout": "none"},
        {"n_layer": 3, "layout": "pre", "final_norm": True, "n_embd": 8, "n_head": 2},
    ],
    ids=["microgpt", "post-2-final-norm", "none-2", "pre-3-final-norm-narrow"],
)
@pytest.mark.parametrize("doc", ["christopher", "abcdefghijklmnopqrstuvwxyz"])
def test_whole_gpt_agrees_with_torch(cfg, doc):
    """Loss and every parameter's gradient; the long doc runs past the block size."""
    model = GPT(seed=3, **cfg)
    tokens = TOKENIZER.encode(doc)
    loss = model.loss(tokens)
    loss.backward()
    w = {
        name: torch.tensor([[p.data for p in row] for row in mat], dtype=torch.float64,
                           requires_grad=True)
        for name, mat in model.state_dict.items()
    }
    loss_t = torch_gpt_loss(w, tokens, model.config)
    loss_t.backward()
    assert abs(loss.data - loss_t.item()) <= TOL, f"loss {loss.data} vs torch {loss_t.item()}"
    for name, mat in model.state_dict.items():
        ours = [p.grad for row in mat for p in row]
        theirs = w[name].grad.reshape(-1).tolist()
        assert_all_close(ours, theirs, f"gradient of {name}")
    assert any(g != 0 for g in w["layer0.attn_wq"].grad.reshape(-1).tolist())
