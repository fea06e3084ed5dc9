"""The tiny GPT: configuration, seeded init, residual layouts, depth, sampling, drop-in
compatibility with the textbook engine, and a full training run."""

import math
import random
import sys

import pytest

from microgpt import GPT, Adam, CharTokenizer, GPTConfig, Value, cross_entropy, sample, train
from microgpt.train import mean_last

TOKENIZER = CharTokenizer(["abcdefghijklmnopqrstuvwxyz"])  # vocab 27, BOS = 26
DOCS = ["isabella", "emma", "christopher", "ava", "zoe", "maximiliano"]


def encode(doc):
    return TOKENIZER.encode(doc)


def floats_of(values):
    return [v.data for v in values]


def ref_rmsnorm(x, eps=1e-5):
    rms = math.sqrt(math.fsum(a * a for a in x) / len(x) + eps)
    return [a / rms for a in x]


def n_params(vocab, n_layer, n_embd, block):
    """Embeddings, positions and head, then per layer 4 attention and 2 MLP matrices."""
    return 2 * vocab * n_embd + block * n_embd + n_layer * (4 + 2 * 4) * n_embd**2


# ---- claim 8: configuration ----


def test_config_defaults_are_microgpts():
    c = GPTConfig()
    assert (c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.block_size) == (27, 1, 16, 4, 16)
    assert (c.init_std, c.layout, c.final_norm, c.head_dim) == (0.08, "pre", False, 4)


def test_microgpts_parameter_count():
    assert len(GPT().parameters()) == 4192


@pytest.mark.parametrize(
    "sizes", [(27, 1, 16, 4, 16), (27, 2, 16, 4, 16), (5, 3, 8, 2, 4), (65, 1, 32, 8, 8)]
)
def test_parameter_count_and_shapes(sizes):
    vocab, n_layer, n_embd, n_head, block = sizes
    model = GPT(vocab_size=vocab, n_layer=n_layer, n_embd=n_embd, n_head=n_head,
                block_size=block)
    assert len(model.parameters()) == n_params(vocab, n_layer, n_embd, block)
    shapes = {k: (len(m), len(m[0])) for k, m in model.state_dict.items()}
    assert shapes["wte"] == shapes["lm_head"] == (vocab, n_embd)
    assert shapes["wpe"] == (block, n_embd)
    for i in range(n_layer):
        for name in ("attn_wq", "attn_wk", "attn_wv", "attn_wo"):
            assert shapes[f"layer{i}.{name}"] == (n_embd, n_embd)
        assert shapes[f"layer{i}.mlp_fc1"] == (4 * n_embd, n_embd)
        assert shapes[f"layer{i}.mlp_fc2"] == (n_embd, 4 * n_embd)


def test_bad_configs_are_refused():
    with pytest.raises(ValueError, match="layout"):
        GPTConfig(layout="sandwich")
    with pytest.raises(ValueError, match="multiple"):
        GPTConfig(n_embd=10, n_head=4)


# ---- claim 7: seeded initialisation ----


def weights(model):
    return floats_of(model.parameters())


def test_init_is_reproducible_from_a_seed_or_a_generator():
    a = GPT(seed=5)
    assert weights(a) == weights(GPT(seed=5)) == weights(GPT(seed=random.Random(5)))
    assert weights(a) != weights(GPT(seed=6))


MICROGPT_ORDER = ["wte", "wpe", "lm_head"] + [
    f"layer{i}.{name}"
    for i in range(2)
    for name in ("attn_wq", "attn_wk", "attn_wv", "attn_wo", "mlp_fc1", "mlp_fc2")
]


def test_init_draws_in_microgpts_order():
    """wte, wpe, lm_head, then per layer wq, wk, wv, wo, fc1, fc2, row by row: one seed
    gives the weights microgpt draws from a generator in the same state."""
    model = GPT(seed=9, n_layer=2)
    rng = random.Random(9)
    for name in MICROGPT_ORDER:
        mat = model.state_dict[name]
        want = [[rng.gauss(0, 0.08) for _ in row] for row in mat]
        assert [floats_of(row) for row in mat] == want, f"{name} is not drawn in order"
    assert [p.data for p in model.parameters()] == [
        p.data for name in MICROGPT_ORDER for row in model.state_dict[name] for p in row
    ], "parameters() lists them in microgpt's order"


def test_nothing_touches_the_global_random_state():
    state = random.getstate()
    try:
        model = GPT(seed=0)
        train(model, DOCS, TOKENIZER, steps=2, progress=False)
        sample(model, TOKENIZER, n=3, seed=0)
        assert random.getstate() == state
        first = weights(GPT(seed=0))
        random.seed(99)  # a different global state changes nothing
        assert weights(GPT(seed=0)) == first
    finally:
        random.setstate(state)


# ---- claim 8: layouts, final norm, stream states, depth ----

LAYOUT_CONFIGS = [
    {"layout": "pre"},
    {"layout": "post"},
    {"layout": "none"},
    {"layout": "pre", "final_norm": True},
    {"layout": "post", "final_norm": True, "n_layer": 2},
    {"layout": "none", "final_norm": True, "n_layer": 2},
]


@pytest.mark.parametrize("cfg", LAYOUT_CONFIGS, ids=str)
def test_every_layout_trains_every_matrix(cfg):
    model = GPT(seed=1, **cfg)
    loss = model.loss(encode("christopher"))
    assert math.isfinite(loss.data) and 2.5 < loss.data < 4.5
    loss.backward()
    for name, mat in model.state_dict.items():
        assert any(p.grad != 0 for row in mat for p in row), f"{name} gets no gradient"


def test_layouts_compute_different_functions():
    losses = {
        layout: GPT(seed=1, layout=layout, n_layer=2).loss(encode("emma")).data
        for layout in ("pre", "post", "none")
    }
    assert len(set(losses.values())) == 3, losses


def zero_branch_outputs(model):
    """Zero every block's output projections, so each branch adds exactly nothing."""
    for i in range(model.config.n_layer):
        for name in ("attn_wo", "mlp_fc2"):
            for row in model.state_dict[f"layer{i}.{name}"]:
                for p in row:
                    p.data = 0.0


@pytest.mark.parametrize("layout", ["pre", "post", "none"])
def test_what_each_layout_does_with_silent_branches(layout):
    """With zero branch outputs: pre-norm passes the stream through unchanged, post-norm
    renormalises it twice per block, and no shortcut leaves nothing but zeros."""
    model = GPT(seed=2, layout=layout, n_layer=3)
    zero_branch_outputs(model)
    for states in model.stream_states(encode("ava")):
        for before, after in zip(states, states[1:]):
            x, y = floats_of(before), floats_of(after)
            if layout == "pre":
                assert y == x
            elif layout == "post":
                assert y == pytest.approx(ref_rmsnorm(ref_rmsnorm(x)), rel=1e-12, abs=1e-14)
            else:
                assert y == [0.0] * len(x)


def test_post_norm_stream_states_have_unit_rms():
    model = GPT(seed=3, layout="post", n_layer=3)
    for states in model.stream_states(encode("zoe")):
        for x in states[1:]:  # each block ends with an RMSNorm
            ms = math.fsum(v.data**2 for v in x) / len(x)
            assert ms == pytest.approx(1.0, rel=1e-4)


@pytest.mark.parametrize("final_norm", [False, True])
def test_the_head_reads_the_last_state_through_the_final_norm(final_norm):
    model = GPT(seed=4, layout="post", n_layer=2, final_norm=final_norm)
    tokens = encode("emma")
    states = model.stream_states(tokens)
    cache = model.new_cache()
    for pos, tok in enumerate(tokens):
        logits = floats_of(model.step(tok, pos, cache))
        x = floats_of(states[pos][-1])
        if final_norm:
            x = ref_rmsnorm(x)
        head = model.state_dict["lm_head"]
        want = [math.fsum(p.data * a for p, a in zip(row, x)) for row in head]
        assert logits == pytest.approx(want, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("n_layer", [1, 3])
def test_stream_states_shape_and_first_state(n_layer):
    model = GPT(seed=5, n_layer=n_layer, block_size=6)
    tokens = encode("maximiliano")  # 13 tokens: cut to the block size
    states = model.stream_states(tokens)
    assert len(states) == 6
    assert all(len(s) == n_layer + 1 for s in states)
    assert all(len(x) == 16 and all(isinstance(v, Value) for v in x) for s in states for x in s)
    sd = model.state_dict
    for pos, s in enumerate(states):
        emb = [t.data + p.data for t, p in zip(sd["wte"][tokens[pos]], sd["wpe"][pos])]
        assert floats_of(s[0]) == pytest.approx(ref_rmsnorm(emb), rel=1e-12)


def test_loss_is_the_mean_cross_entropy_over_at_most_block_size_targets():
    model = GPT(seed=6, block_size=5)
    tokens = encode("christopher")
    states = model.stream_states(tokens)
    per_position = [
        cross_entropy(model.head(states[p][-1]), tokens[p + 1]).data for p in range(5)
    ]
    assert model.loss(tokens).data == pytest.approx(math.fsum(per_position) / 5, rel=1e-12)
    with pytest.raises(ValueError):
        model.loss(tokens[:1])


def test_any_depth_works_at_the_default_recursion_limit():
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        model = GPT(seed=7, n_layer=8)
        loss = model.loss(encode("isabella"))
        loss.backward()
    finally:
        sys.setrecursionlimit(old)
    assert math.isfinite(loss.data)
    assert any(p.grad != 0 for row in model.state_dict["layer0.attn_wq"] for p in row)


# ---- claim 8: sampling ----


def greedy(model):
    cache, tok, ids = model.new_cache(), TOKENIZER.bos, []
    for pos in range(model.config.block_size):
        logits = floats_of(model.step(tok, pos, cache))
        tok = max(range(len(logits)), key=logits.__getitem__)
        if tok == TOKENIZER.bos:
            break
        ids.append(tok)
    return TOKENIZER.decode(ids)


@pytest.fixture(scope="module")
def trained():
    model = GPT(seed=0)
    train(model, DOCS * 5, TOKENIZER, steps=30, progress=False)
    return model


def test_samples_are_strings_and_reproducible(trained):
    out = sample(trained, TOKENIZER, n=8, temperature=0.7, seed=11)
    assert len(out) == 8 and all(isinstance(s, str) for s in out)
    assert all(set(s) <= set(TOKENIZER.chars) and len(s) <= 16 for s in out)
    assert out == sample(trained, TOKENIZER, n=8, temperature=0.7, seed=11)
    assert out == sample(trained, TOKENIZER, n=8, temperature=0.7, seed=random.Random(11))
    assert out != sample(trained, TOKENIZER, n=8, temperature=0.7, seed=12)


def test_a_tiny_temperature_samples_the_argmax(trained):
    out = sample(trained, TOKENIZER, n=3, temperature=1e-6, seed=0)
    assert out == [greedy(trained)] * 3


def test_temperature_must_be_positive(trained):
    with pytest.raises(ValueError, match="temperature"):
        sample(trained, TOKENIZER, temperature=0)


# ---- claim 9: drop-in compatibility with the textbook engine ----


def textbook_run(textbook, value_cls, start, steps, n_layer):
    """microgpt's model and Adam as plain operator code, on `value_cls` scalars."""
    sd = {k: [[value_cls(p.data) for p in row] for row in m] for k, m in start.state_dict.items()}
    params = [p for m in sd.values() for row in m for p in row]
    m, v = [0.0] * len(params), [0.0] * len(params)
    losses = []
    for step in range(steps):
        tokens = encode(DOCS[step % len(DOCS)])
        loss = textbook.gpt_loss(sd, tokens, n_layer=n_layer, n_head=4, block_size=16)
        loss.backward()
        textbook.adam_step(params, m, v, step, steps)
        losses.append(loss.data)
    return losses


@pytest.fixture(scope="module")
def textbook_losses(textbook):
    """`textbook_run` from GPT(seed=1) weights, each (engine, depth, steps) run once."""
    done = {}

    def run(value_cls, n_layer, steps):
        key = (value_cls, n_layer, steps)
        if key not in done:
            done[key] = textbook_run(textbook, value_cls, GPT(seed=1, n_layer=n_layer), steps,
                                     n_layer)
        return done[key]

    return run


def test_textbook_gradients_are_bitwise_the_same_on_our_value(textbook):
    """One backward of the textbook model: every gradient identical to the last bit.

    Float addition is not associative, so this needs each node's gradient summed in the
    recursive sort's order: an iterative sort must visit children left to right too.
    """
    start = GPT(seed=1)

    def grads(value_cls):
        sd = {k: [[value_cls(p.data) for p in row] for row in m]
              for k, m in start.state_dict.items()}
        textbook.gpt_loss(sd, encode("christopher"), 1, 4, 16).backward()
        return {(k, i, j): p.grad for k, m in sd.items()
                for i, row in enumerate(m) for j, p in enumerate(row)}

    ours, theirs = grads(Value), grads(textbook.TextbookValue)
    differ = [k for k in theirs if ours[k] != theirs[k]]
    assert not differ, f"{len(differ)} of {len(theirs)} gradients differ, e.g. {differ[:3]}"


def test_textbook_training_is_bitwise_the_same_on_our_value(textbook, textbook_losses):
    """Five steps of the textbook model and Adam: the same losses to the last bit."""
    theirs = textbook_losses(textbook.TextbookValue, 1, 5)
    ours = textbook_losses(Value, 1, 5)
    assert [x.hex() for x in ours] == [x.hex() for x in theirs]


@pytest.mark.parametrize(("n_layer", "steps"), [(1, 5), (2, 3)])
def test_fused_model_trains_like_the_textbook_model(textbook, textbook_losses, n_layer, steps):
    """Our GPT.loss and Adam from the same weights: the textbook's losses to 1e-12."""
    theirs = textbook_losses(textbook.TextbookValue, n_layer, steps)
    model = GPT(seed=1, n_layer=n_layer)
    opt = Adam(model.parameters(), total_steps=steps)
    ours = []
    for step in range(steps):
        loss = model.loss(encode(DOCS[step % len(DOCS)]))
        loss.backward()
        opt.step()
        ours.append(loss.data)
    assert ours == pytest.approx(theirs, rel=0, abs=1e-12)
    assert len(set(ours)) == steps  # the weights changed between steps


# ---- claim 11: microgpt's training run ----


@pytest.mark.slow
def test_training_on_the_canonical_names_reaches_microgpts_loss(canonical_names):
    """1000 steps, one name a step, as microgpt trains (its own run: 3.40 at step 1,
    2.23 over the last 100 steps, with other initial weights)."""
    tok = CharTokenizer(canonical_names)
    assert tok.vocab_size == 27
    model = GPT(vocab_size=tok.vocab_size)
    history = train(model, canonical_names, tok, steps=1000, seed=42, progress=False)
    assert len(history) == 1000
    assert 3.1 <= history[0] <= 3.6, f"first-step loss {history[0]:.4f}, expected about 3.3"
    last = mean_last(history, 100)
    assert last <= 2.35, f"mean loss of the last 100 steps {last:.4f}, expected <= 2.35"


def test_train_pauses_the_cycle_collector_only_while_it_runs_and_frees_every_graph(names):
    """train() runs with the cyclic collector paused (safe: graphs are acyclic), restores it
    after, and still leaves no graph behind: as many Values are alive after as before."""
    import gc

    def live_values():
        gc.disable()
        try:
            return sum(isinstance(o, Value) for o in gc.get_objects())
        finally:
            gc.enable()

    tok = CharTokenizer(names)
    model = GPT(vocab_size=tok.vocab_size, seed=3)
    seen = []

    def watch(step, loss):
        seen.append(gc.isenabled())

    before = live_values()
    assert gc.isenabled()
    train(model, names[:50], tok, steps=20, progress=False, callback=watch)
    assert seen == [False] * 20 and gc.isenabled()
    after = live_values()
    assert after == before, f"{after - before} Values outlived training (graphs not freed)"


def test_loss_reads_weights_once_yet_handles_weights_that_are_not_leaves():
    """`loss` caches each matrix's numbers for the sequence; weights made from other
    weights (here a scaled copy of the head) still pass their gradient on."""
    model = GPT(seed=3)
    base = model.state_dict["lm_head"]
    model.state_dict["lm_head"] = [[p * 0.5 for p in row] for row in base]
    tokens = encode("emma")

    def head_grads(loss):
        for p in [p for row in base for p in row] + model.parameters():
            p.grad = 0
        loss.backward()
        return [p.grad for row in base for p in row]

    cached = model.loss(tokens)  # through the per-sequence cache of weight numbers
    cache = model.new_cache()
    n = len(tokens) - 1
    plain = Value.sum([cross_entropy(model.step(tokens[p], p, cache), tokens[p + 1])
                       for p in range(n)]) * (1 / n)  # reads every weight at every position
    assert cached.data == plain.data
    assert head_grads(cached) == head_grads(plain)
    assert any(head_grads(cached))



def test_training_stopped_by_an_error_leaves_its_bar_red_not_running(notebook_bars):
    """A bar at 0 of its steps above the error (a block whose earlier answer is not
    released yet, say) is closed, so a notebook shows it red, not seemingly running."""
    class Unreleased(GPT):
        def block(self, x, layer, cache):
            raise RuntimeError("not released yet")

    tok = CharTokenizer(["ab", "ba"])
    model = Unreleased(vocab_size=tok.vocab_size, n_embd=4, n_head=1, seed=0)
    with pytest.raises(RuntimeError, match="not released yet"):
        train(model, ["ab", "ba"], tok, steps=3, progress=True)
    assert len(notebook_bars) == 1 and notebook_bars[0].disable
    assert notebook_bars[0].container.children[1].bar_style == "danger"
