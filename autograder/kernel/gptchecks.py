"""Checks for the tiny-GPT assignments (5: the residual adds; 6: the residual stream).

A student's block, stream or lens is run on a `PiecesModel`: the weights of a microgpt
`GPT` behind the few methods the task may use (attention, mlp, embed, block, head, ...).
It is not a `GPT`, its config has no `layout`, and it has no `stream_states`, `step` or
`loss`, so the reference methods cannot be borrowed through it; the block checks switch
its `block` off too. Each check observes what the student's code gives (values,
gradients, losses) and compares them with microgpt's own `GPT` in the matching layout,
built from the same seed; the reference side is an `expected(...)`, computed only where
something compares (see `checks`), and lives inside the checks: nothing at module level
here is a task's answer, or calls one for whoever asks.

A function handed in (a block, a stream, a lens) is called through `_call`, a frame that
the answer guards of a graded kernel (`policy.switch_off`) take for notebook code: handing
a switched-off answer such as `GPT.block` to `BlockGPT` or `run_block` launders nothing.

    check_block_values(pre_norm_block, "pre")     # silent when the block is microgpt's
"""

import functools
import random
import types
from dataclasses import dataclass

from autograder.kernel.checks import (
    CheckFailed,
    backward_alone,
    check_numbers,
    check_value,
    expected,
)
from microgpt import GPT, CharTokenizer, Value, census_names, cross_entropy, train

__all__ = [
    "PiecesModel", "BlockGPT", "block_inputs", "run_block",
    "check_block_values", "check_block_gradients", "check_block_training",
    "check_stream_states", "check_logit_lens", "check_lens_ends_at_the_loss",
    "check_lens_on_the_model_states",
    "LAYOUT_NAMES", "check_docs",
]

LAYOUT_NAMES = {"pre": "pre-norm", "post": "post-norm", "none": "no-residual"}


def _call(fn, *args):
    return fn(*args)


# `fn(*args)` from a frame whose file is no path: the guards of `policy.switch_off` let a
# model answer through only when its caller is library code (see the module doc)
_call = types.FunctionType(_call.__code__.replace(co_filename="<handed-in code>"), globals(),
                           "_call")


@functools.cache
def check_docs():
    """54 fixed names for the short training runs."""
    return census_names()[::97]


@functools.cache
def _tokenizer():
    return CharTokenizer(census_names())  # 27 tokens: a-z and BOS


@dataclass(frozen=True)
class PiecesConfig:
    """The sizes a task may read; no layout and no final-norm switch."""

    vocab_size: int
    n_layer: int
    n_embd: int
    n_head: int
    block_size: int

    @property
    def head_dim(self):
        return self.n_embd // self.n_head


class PiecesModel:
    """A GPT's weights behind the pieces a task may use (see the module doc)."""

    def __init__(self, **gpt_config):
        gpt = GPT(**gpt_config)
        c = gpt.config
        self.config = PiecesConfig(c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.block_size)
        self.state_dict = gpt.state_dict
        self.attention = gpt.attention
        self.mlp = gpt.mlp
        self.embed = gpt.embed
        self.block = gpt.block
        self.head = gpt.head
        self.new_cache = gpt.new_cache
        self.parameters = gpt.parameters


class BlockGPT(GPT):
    """microgpt's GPT with each block computed by `block_fn(model, x, layer, cache)`."""

    def __init__(self, block_fn, seed=0, **config):
        super().__init__(seed=seed, **config)
        self.block_fn = block_fn

    def block(self, x, layer, cache):
        return _call(self.block_fn, self, x, layer, cache)


def block_inputs(n_pos, n_embd, seed, scale):
    """`n_pos` stream vectors of `n_embd` Values drawn from N(0, scale**2)."""
    rng = random.Random(seed)
    return [[Value(rng.gauss(0.0, scale)) for _ in range(n_embd)] for _ in range(n_pos)]


def run_block(block, model, inputs, layer):
    """`block` applied at positions 0, 1, 2, ... in turn, sharing one key/value cache."""
    cache = {"k": [], "v": []}
    return [_call(block, model, x, layer, cache) for x in inputs]


def _no_block(x, layer, cache):
    raise CheckFailed("your block called model.block, which is microgpt's own block (the "
                      "reference itself); build it from model.attention, model.mlp and rmsnorm")


def _block_pieces(**config):
    """A PiecesModel whose `block` is switched off: the block checks hand this one in."""
    model = PiecesModel(**config)
    model.block = _no_block
    return model


def _data(states):
    if isinstance(states, Value):
        return states.data
    return [_data(s) for s in states]


def _name(fn):
    return getattr(fn, "__name__", "your block")


def check_block_values(block, layout, n_layer=1, layer=0, n_embd=16, n_head=4, n_pos=3,
                       seed=0, scale=2.0):
    """`block`'s output stream at `n_pos` positions equals microgpt's `layout` block."""
    sizes = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    actual = run_block(block, _block_pieces(layout=layout, **sizes), inputs, layer)

    def reference(model, x, layer, cache):
        return GPT.block(model, x, layer, cache)

    want = expected(lambda: _data(run_block(reference, GPT(layout=layout, **sizes), inputs,
                                            layer)))
    check_numbers(actual, want, rtol=1e-9, atol=1e-12, labels=("position", "component"),
                  what=f"{_name(block)}: output (block {layer} of {n_layer}, n_embd {n_embd}; "
                       f"reference: microgpt's {LAYOUT_NAMES[layout]} block)")


def _block_gradients(block, model, inputs, layer, weights):
    """[d(sum of weights * outputs)/d(each input), then /d(each weight of the layer)]."""
    leaves = [[Value(v.data) for v in x] for x in inputs]
    outs = run_block(block, model, leaves, layer)
    terms = [w * o for ws, os in zip(weights, outs) for w, o in zip(ws, os)]
    mats = [mat for name, mat in model.state_dict.items() if name.startswith(f"layer{layer}.")]
    _backward(Value.sum(terms), [v for x in leaves for v in x]
              + [p for mat in mats for row in mat for p in row])
    grads = [[v.grad for x in leaves for v in x]]
    for mat in mats:
        grads.append([p.grad for row in mat for p in row])
    return grads


def _backward(out, leaves):
    """The engine's backward from `out`, the `.grad` of `leaves` set to 0 first
    (`backward_alone`); a graph with parts of the student's own fails the check."""
    problem = backward_alone(out, leaves)
    if problem is not None:
        raise CheckFailed(f"the gradient check could not run backward(): {problem}")


def check_block_gradients(block, layout, n_layer=1, layer=0, n_embd=16, n_head=4, n_pos=3,
                          seed=0, scale=2.0):
    """The gradients through `block` equal those through microgpt's `layout` block."""
    sizes = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    weights = [[w.data for w in row] for row in block_inputs(n_pos, n_embd, seed + 2000, 1.0)]
    actual = _block_gradients(block, _block_pieces(layout=layout, **sizes), inputs, layer,
                              weights)

    def reference(model, x, layer, cache):
        return GPT.block(model, x, layer, cache)

    want = expected(lambda: _block_gradients(reference, GPT(layout=layout, **sizes), inputs,
                                             layer, weights))
    names = ", ".join(n for n in GPT(**sizes).state_dict if n.startswith(f"layer{layer}."))
    check_numbers(actual, want, rtol=1e-7, atol=1e-10, labels=("part", "number"),
                  what=f"{_name(block)}: gradient of a weighted sum of the outputs (part 0: "
                       f"the inputs; then {names}; block {layer} of {n_layer}; reference: "
                       f"microgpt's {LAYOUT_NAMES[layout]} block)")


def check_block_training(block, layout, steps=8, lr=0.01, seed=0, n_layer=1, n_embd=16,
                         n_head=4):
    """A short seeded training run with `block` has the losses of microgpt's `layout` run."""
    docs = check_docs()
    tokenizer = CharTokenizer(docs)
    config = dict(vocab_size=tokenizer.vocab_size, n_layer=n_layer, n_embd=n_embd,
                  n_head=n_head)
    run = dict(steps=steps, lr=lr, seed=seed, progress=False)
    actual = train(BlockGPT(block, seed=seed, **config), docs, tokenizer, **run)
    want = expected(lambda: train(GPT(layout=layout, seed=seed, **config), docs, tokenizer,
                                  **run))
    check_numbers(actual, want, rtol=1e-6, atol=0.0, labels=("step",), reproducible=False,
                  what=f"{_name(block)}: training losses ({steps} steps, lr {lr}, seed {seed}, "
                       f"{n_layer} layer(s); reference: GPT(layout={layout!r}))")


# ---------------------------------------------------------------- the residual stream


def _weight_grads(model):
    grads = [p.grad for p in model.parameters()]
    for p in model.parameters():
        p.grad = 0
    return grads


def _stream_observation(states, model, coeffs):
    """The states' numbers, and (with `coeffs`) the weights' gradients of a weighted sum."""
    seen = [states]
    if coeffs is not None:
        terms = [v for position in states for state in position for v in state]
        _backward(Value.sum([c * v for c, v in zip(coeffs, terms)]), model.parameters())
        seen.append(_weight_grads(model))
    return seen


def check_stream_states(stream_states, layout="pre", name="emma", n_layer=2, seed=0,
                        gradients=False, **sizes):
    """`stream_states(model, tokens)` has the values (and gradients) of GPT.stream_states."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, **sizes)
    model = PiecesModel(**config)
    n_embd = model.config.n_embd
    n_states = min(len(tokens), model.config.block_size) * (n_layer + 1) * n_embd
    rng = random.Random(seed + 1)
    coeffs = [rng.gauss(0, 1) for _ in range(n_states)] if gradients else None
    actual = _stream_observation(_call(stream_states, model, tokens), model, coeffs)

    def reference():
        gpt = GPT(**config)
        return _stream_observation(GPT.stream_states(gpt, tokens), gpt, coeffs)

    where = f"stream_states for {name!r} ({n_layer} layers, {LAYOUT_NAMES[layout]})"
    part = "; part 1: the weights' gradients of a weighted sum of all states" if gradients \
        else ""
    check_numbers(actual, expected(reference), rtol=1e-7, atol=1e-10,
                  labels=("part", "position", "state", "component"),
                  what=f"{where} (part 0: the states{part})")


def _random_states(n_pos, n_states, n_embd, seed):
    rng = random.Random(seed)
    return [[[Value(rng.gauss(0.0, 1.0)) for _ in range(n_embd)] for _ in range(n_states)]
            for _ in range(n_pos)]


def _lens_observation(lens, model, states, tokens, gradients):
    losses = _call(lens, model, states, tokens)
    seen = [losses]
    if gradients and isinstance(losses, (list, tuple)) and losses \
            and all(isinstance(v, Value) for v in losses):
        flat = [v for position in states for state in position for v in state]
        for k in sorted({0, len(losses) // 2, len(losses) - 1}):
            # each backward starts from 0 in the states and the weights (`_backward`)
            _backward(losses[k], flat + list(model.parameters()))
            seen.append([v.grad for v in flat])
            seen.append(_weight_grads(model))
    return seen


def check_logit_lens(logit_lens, layout="pre", name="emma", n_layer=2, seed=0,
                     gradients=False, **sizes):
    """`logit_lens(model, states, tokens)` decodes every state as the reference lens does,
    on states drawn at random (so that the check does not depend on Task 6.1); with
    `gradients`, backward() from three of its losses reaches the states and the head as
    from the reference."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)
    model = PiecesModel(**config)
    n_pos = min(len(tokens), model.config.block_size)

    def states():
        return _random_states(n_pos, n_layer + 1, model.config.n_embd, seed + 7)

    actual = _lens_observation(logit_lens, model, states(), tokens, gradients)

    def reference(model, states, tokens):
        n = min(len(states), len(tokens) - 1)
        return [Value.sum([cross_entropy(model.head(states[p][k]), tokens[p + 1])
                           for p in range(n)]) * (1 / n)
                for k in range(len(states[0]))]

    want = expected(lambda: _lens_observation(reference, GPT(**config), states(), tokens,
                                              gradients))
    where = (f"logit_lens for {name!r} on random states ({n_layer} layers, "
             f"{LAYOUT_NAMES[layout]}, final_norm=True)")
    part = ("; then per tested state, the gradients of its loss in every state number and "
            "in every weight") if gradients else ""
    check_numbers(actual, want, rtol=1e-7, atol=1e-10, labels=("part", "item"),
                  what=f"{where} (part 0: the losses{part})")


def check_lens_ends_at_the_loss(logit_lens, stream_states, layout="pre", name="emma",
                                n_layer=2, seed=0, **sizes):
    """With the student's own stream, the last lens loss is the model's own loss."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)
    model = PiecesModel(**config)
    losses = _call(logit_lens, model, _call(stream_states, model, tokens), tokens)
    last = losses[-1] if isinstance(losses, (list, tuple)) and losses else losses
    check_value(last, expected(lambda: GPT.loss(GPT(**config), tokens)), rtol=1e-9,
                what=f"the last entry of logit_lens(model, stream_states(model, tokens), "
                     f"tokens) for {name!r} ({n_layer} layers, {LAYOUT_NAMES[layout]})",
                expected_text="the model's own loss, GPT.loss(tokens)")


def check_lens_on_the_model_states(logit_lens, layout="pre", name="emma", n_layer=2, seed=0,
                                   **sizes):
    """On microgpt's own states of the model (GPT.stream_states, computed here, so that the
    check does not depend on Task 6.1), `logit_lens(model, states, tokens)` gives the
    reference lens losses, and the last of them is the model's own loss, GPT.loss."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)
    model = PiecesModel(**config)
    states = GPT.stream_states(model.head.__self__, tokens)  # the GPT behind the pieces
    losses = _call(logit_lens, model, states, tokens)

    def reference():
        gpt = GPT(**config)
        states = GPT.stream_states(gpt, tokens)
        n = min(len(states), len(tokens) - 1)
        return [Value.sum([cross_entropy(gpt.head(states[p][k]), tokens[p + 1])
                           for p in range(n)]) * (1 / n)
                for k in range(len(states[0]))]

    where = (f"logit_lens for {name!r} on the model's own states ({n_layer} layers, "
             f"{LAYOUT_NAMES[layout]}, final_norm=True)")
    check_numbers(losses, expected(reference), rtol=1e-9, atol=1e-12, labels=("state",),
                  what=where)
    last = losses[-1] if isinstance(losses, (list, tuple)) and losses else losses
    check_value(last, expected(lambda: GPT.loss(GPT(**config), tokens)), rtol=1e-9,
                what=f"{where}: the last entry",
                expected_text="the model's own loss, GPT.loss(tokens)")
