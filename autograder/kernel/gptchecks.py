"""Checks for the tiny-GPT assignments (5: the residual adds; 6: the residual stream).

A student's block, stream or lens is run on a `PiecesModel`: the weights of a microgpt
`GPT` behind the few methods the task may use (attention, mlp, embed, block, head, ...).
It is not a `GPT`, its config has no `layout`, and it has no `stream_states`, `step` or
`loss`, so the reference methods cannot be borrowed through it; the block checks switch
its `block` off too. Each check observes what the student's code gives (values,
gradients, losses) and compares them with microgpt's own `GPT` in the matching layout,
built from the same seed. The expected side is an `expected(...)`, computed only where
something compares (see `checks`), and never here: for the calls the released notebooks
make it is stored numbers (`gptchecks.json`, written by `residual-pack stored`); a hidden
test hands in `reference=` the grader's `autograder.answers.gpt`, which computes it in the
reference run (a student's notebook is tested without it, `testsource`). A student's
install holds neither that module nor microgpt's answers, and nothing here is a task's
answer or calls one.

At grading time these checks run in the grader (`autograder.grading.remote`), and the
student's block, stream or lens is a proxy: each call runs in the student's kernel, and
the Values it returns are made again here from the engine's operations.

    check_block_values(pre_norm_block, "pre")     # silent when the block is microgpt's
"""

import copy
import functools
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel.checks import (
    CheckFailed,
    backward_alone,
    check_numbers,
    check_value,
    expected,
)
from microgpt import GPT, CharTokenizer, Value, census_names, train

__all__ = [
    "PiecesModel", "BlockGPT", "block_inputs", "run_block",
    "check_block_values", "check_block_gradients", "check_block_training",
    "check_stream_states", "check_logit_lens", "check_lens_on_the_model_states",
    "LAYOUT_NAMES", "check_docs", "STORED_FILE", "stored_key",
]

LAYOUT_NAMES = {"pre": "pre-norm", "post": "post-norm", "none": "no-residual"}


def _call(fn: Callable[..., Any], *args: Any) -> Any:
    """The student's function called (a frame of the checks', left out of a traceback)."""
    return fn(*args)


# the expected numbers of the calls the released notebooks make (`residual-pack stored`)
STORED_FILE = Path(__file__).resolve().with_name("gptchecks.json")


def stored_key(check: str, **args: Any) -> str:
    """The name of a check's expected observation: the check and its arguments (all of
    them but the student's function, defaults included)."""
    return f"{check}(" + ", ".join(f"{k}={args[k]!r}" for k in sorted(args)) + ")"


@functools.cache
def _stored() -> dict[str, Any]:
    return json.loads(STORED_FILE.read_text(encoding="utf-8")) if STORED_FILE.exists() else {}


def _reference(check: str, reference: Any, **args: Any) -> Any:
    """The expected observation of `check` (a name: `block_values`, ...) with `args`: the
    stored numbers when the call is one the released notebooks make, else computed by
    `reference` (`autograder.answers.gpt`, which hidden tests hand in)."""
    key = stored_key(check, **args)

    def compute() -> Any:
        if key in _stored():
            return copy.deepcopy(_stored()[key])
        if reference is None:
            raise CheckFailed(
                f"no stored numbers for {key}: the checks hold only those of the calls this "
                f"notebook's tests make (your install has no model answer to compute others "
                f"from); call the check as a test cell of this notebook does")
        return getattr(reference, check)(**args)

    return expected(compute)


@functools.cache
def check_docs() -> list[str]:
    """54 fixed names for the short training runs."""
    return census_names()[::97]


@functools.cache
def _tokenizer() -> CharTokenizer:
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
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def _within_context(embed: Callable[[int, int], list[Value]],
                    block_size: int) -> Callable[[int, int], list[Value]]:
    """`embed(token_id, pos_id)` that refuses a position outside the context in words (the
    position table has `block_size` rows: past it, microgpt's own says only "list index out
    of range", and a negative position would silently read a row from the end)."""

    def embed_within_context(token_id: int, pos_id: int) -> list[Value]:
        if isinstance(pos_id, int) and not 0 <= pos_id < block_size:
            raise IndexError(
                f"model.embed(token, {pos_id}): position {pos_id} is outside the model's "
                f"context, which holds positions 0 to {block_size - 1} "
                f"(block_size={block_size})")
        return embed(token_id, pos_id)

    return embed_within_context


class PiecesModel:
    """A GPT's weights behind the pieces a task may use (see the module doc)."""

    def __init__(self, **gpt_config: Any) -> None:
        gpt = GPT(**gpt_config)
        c = gpt.config
        self.config = PiecesConfig(c.vocab_size, c.n_layer, c.n_embd, c.n_head, c.block_size)
        self.state_dict = gpt.state_dict
        self.attention = gpt.attention
        self.mlp = gpt.mlp
        self.embed = _within_context(gpt.embed, c.block_size)
        self.block = gpt.block
        self.head = gpt.head
        self.new_cache = gpt.new_cache
        self.parameters = gpt.parameters


class BlockGPT(GPT):
    """microgpt's GPT with each block computed by `block_fn(model, x, layer, cache)`."""

    def __init__(self, block_fn: Callable[..., Any], seed: int = 0, **config: Any) -> None:
        super().__init__(seed=seed, **config)
        self.block_fn = block_fn

    def block(self, x: list[Value], layer: int, cache: Any) -> Any:
        return _call(self.block_fn, self, x, layer, cache)


def block_inputs(n_pos: int, n_embd: int, seed: int, scale: float) -> list[list[Value]]:
    """`n_pos` stream vectors of `n_embd` Values drawn from N(0, scale**2)."""
    rng = random.Random(seed)
    return [[Value(rng.gauss(0.0, scale)) for _ in range(n_embd)] for _ in range(n_pos)]


def run_block(block: Callable[..., Any], model: Any, inputs: list[list[Value]],
              layer: int) -> list[Any]:
    """`block` applied at positions 0, 1, 2, ... in turn, sharing one key/value cache."""
    cache: dict[str, list[Any]] = {"k": [], "v": []}
    return [_call(block, model, x, layer, cache) for x in inputs]


def _no_block(x: object, layer: object, cache: object) -> Any:
    raise CheckFailed("your block called model.block, which is microgpt's own block (the "
                      "reference itself); build it from model.attention, model.mlp and rmsnorm")


def _block_pieces(**config: Any) -> PiecesModel:
    """A PiecesModel whose `block` is switched off: the block checks hand this one in."""
    model = PiecesModel(**config)
    model.block = _no_block
    return model


def _data(states: Any) -> Any:
    """Values (in lists of lists ...) as their numbers; plain numbers stay."""
    if isinstance(states, (list, tuple)):
        return [_data(s) for s in states]
    return states.data if isinstance(states, Value) else states


def _name(fn: object) -> str:
    return getattr(fn, "__name__", "your block")


def check_block_values(block: Callable[..., Any], layout: str, n_layer: int = 1, layer: int = 0,
                       n_embd: int = 16,
                       n_head: int = 4, n_pos: int = 3,
                       seed: int = 0, scale: float = 2.0, reference: Any = None) -> None:
    """`block`'s output stream at `n_pos` positions equals microgpt's `layout` block."""
    sizes: dict[str, Any] = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    actual = run_block(block, _block_pieces(layout=layout, **sizes), inputs, layer)
    want = _reference("block_values", reference, layout=layout, n_layer=n_layer,
                      layer=layer, n_embd=n_embd, n_head=n_head, n_pos=n_pos, seed=seed,
                      scale=scale)
    check_numbers(actual, want, rtol=1e-9, atol=1e-12, labels=("position", "component"),
                  what=f"{_name(block)}: output (block {layer} of {n_layer}, n_embd {n_embd}; "
                       f"reference: microgpt's {LAYOUT_NAMES[layout]} block)")


def _block_gradients(block: Callable[..., Any], model: Any, inputs: list[list[Value]],
                     layer: int, weights: list[list[float]]) -> list[list[float]]:
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


def _backward(out: Value, leaves: list[Value]) -> None:
    """The engine's backward from `out`, the `.grad` of `leaves` set to 0 first
    (`backward_alone`); a graph with parts of the student's own fails the check."""
    problem = backward_alone(out, leaves)
    if problem is not None:
        raise CheckFailed(f"the gradient check could not run backward(): {problem}")


def check_block_gradients(block: Callable[..., Any], layout: str, n_layer: int = 1, layer: int = 0,
                          n_embd: int = 16,
                          n_head: int = 4, n_pos: int = 3,
                          seed: int = 0, scale: float = 2.0, reference: Any = None) -> None:
    """The gradients through `block` equal those through microgpt's `layout` block."""
    sizes: dict[str, Any] = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    weights = [[w.data for w in row] for row in block_inputs(n_pos, n_embd, seed + 2000, 1.0)]
    actual = _block_gradients(block, _block_pieces(layout=layout, **sizes), inputs, layer,
                              weights)
    want = _reference("block_gradients", reference, layout=layout, n_layer=n_layer,
                      layer=layer, n_embd=n_embd, n_head=n_head, n_pos=n_pos, seed=seed,
                      scale=scale)
    names = ", ".join(n for n in GPT(**sizes).state_dict if n.startswith(f"layer{layer}."))
    check_numbers(actual, want, rtol=1e-7, atol=1e-10, labels=("part", "number"),
                  what=f"{_name(block)}: gradient of a weighted sum of the outputs (part 0: "
                       f"the inputs; then {names}; block {layer} of {n_layer}; reference: "
                       f"microgpt's {LAYOUT_NAMES[layout]} block)")


def check_block_training(block: Callable[..., Any], layout: str, steps: int = 8, lr: float = 0.01,
                         seed: int = 0,
                         n_layer: int = 1, n_embd: int = 16,
                         n_head: int = 4, reference: Any = None) -> None:
    """A short seeded training run with `block` has the losses of microgpt's `layout` run."""
    docs = check_docs()
    tokenizer = CharTokenizer(docs)
    config: dict[str, Any] = dict(vocab_size=tokenizer.vocab_size, n_layer=n_layer, n_embd=n_embd,
                  n_head=n_head)
    run: dict[str, Any] = dict(steps=steps, lr=lr, seed=seed, progress=False)
    actual = train(BlockGPT(block, seed=seed, **config), docs, tokenizer, **run)
    want = _reference("block_training", reference, layout=layout, steps=steps, lr=lr,
                      seed=seed, n_layer=n_layer, n_embd=n_embd, n_head=n_head)
    check_numbers(actual, want, rtol=1e-6, atol=0.0, labels=("step",), reproducible=False,
                  what=f"{_name(block)}: training losses ({steps} steps, lr {lr}, seed {seed}, "
                       f"{n_layer} layer(s); reference: GPT(layout={layout!r}))")


# ---------------------------------------------------------------- the residual stream


def _weight_grads(model: Any) -> list[float]:
    grads = [p.grad for p in model.parameters()]
    for p in model.parameters():
        p.grad = 0
    return grads


def _stream_observation(states: Any, model: Any, coeffs: list[float] | None) -> list[Any]:
    """The states' numbers, and (with `coeffs`) the weights' gradients of a weighted sum."""
    seen = [states]
    if coeffs is not None:
        terms = [v for position in states for state in position for v in state]
        _backward(Value.sum([c * v for c, v in zip(coeffs, terms)]), model.parameters())
        seen.append(_weight_grads(model))
    return seen


def check_stream_states(stream_states: Callable[..., Any], layout: str = "pre", name: str = "emma",
                        n_layer: int = 2,
                        seed: int = 0,
                        gradients: bool = False, reference: Any = None, **sizes: Any) -> None:
    """`stream_states(model, tokens)` has the values (and gradients) of GPT.stream_states."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, **sizes)
    model = PiecesModel(**config)
    coeffs = _stream_coefficients(model.config, tokens, seed) if gradients else None
    actual = _stream_observation(_call(stream_states, model, tokens), model, coeffs)
    want = _reference("stream_states", reference, layout=layout, name=name,
                      n_layer=n_layer, seed=seed, gradients=gradients, **sizes)
    where = f"stream_states for {name!r} ({n_layer} layers, {LAYOUT_NAMES[layout]})"
    part = "; part 1: the weights' gradients of a weighted sum of all states" if gradients \
        else ""
    check_numbers(actual, want, rtol=1e-7, atol=1e-10,
                  labels=("part", "position", "state", "component"),
                  what=f"{where} (part 0: the states{part})")


def _stream_coefficients(config: Any, tokens: list[int], seed: int) -> list[float]:
    """The fixed weights of the sum of every state number whose gradients are checked."""
    n_states = min(len(tokens), config.block_size) * (config.n_layer + 1) * config.n_embd
    rng = random.Random(seed + 1)
    return [rng.gauss(0, 1) for _ in range(n_states)]


def _random_states(n_pos: int, n_states: int, n_embd: int,
                   seed: int) -> list[list[list[Value]]]:
    rng = random.Random(seed)
    return [[[Value(rng.gauss(0.0, 1.0)) for _ in range(n_embd)] for _ in range(n_states)]
            for _ in range(n_pos)]


def _lens_observation(lens: Callable[..., Any], model: Any, states: Any, tokens: list[int],
                      gradients: bool) -> list[Any]:
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


def check_logit_lens(logit_lens: Callable[..., Any], layout: str = "pre", name: str = "emma",
                     n_layer: int = 2,
                     seed: int = 0,
                     gradients: bool = False, reference: Any = None, **sizes: Any) -> None:
    """`logit_lens(model, states, tokens)` decodes every state as the reference lens does,
    on states drawn at random (so that the check does not depend on Task 6.1); with
    `gradients`, backward() from three of its losses reaches the states and the head as
    from the reference."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)
    model = PiecesModel(**config)
    n_pos = min(len(tokens), model.config.block_size)

    def states() -> list[list[list[Value]]]:
        return _random_states(n_pos, n_layer + 1, model.config.n_embd, seed + 7)

    actual = _lens_observation(logit_lens, model, states(), tokens, gradients)
    want = _reference("logit_lens", reference, layout=layout, name=name, n_layer=n_layer,
                      seed=seed, gradients=gradients, **sizes)
    where = (f"logit_lens for {name!r} on random states ({n_layer} layers, "
             f"{LAYOUT_NAMES[layout]}, final_norm=True)")
    part = ("; then per tested state, the gradients of its loss in every state number and "
            "in every weight") if gradients else ""
    check_numbers(actual, want, rtol=1e-7, atol=1e-10, labels=("part", "item"),
                  what=f"{where} (part 0: the losses{part})")


def check_lens_on_the_model_states(logit_lens: Callable[..., Any], layout: str = "pre",
                                   name: str = "emma",
                                   n_layer: int = 2, seed: int = 0,
                                   reference: Any = None, **sizes: Any) -> None:
    """On microgpt's own states of the model (GPT.stream_states, stored or computed here, so
    that the check does not depend on Task 6.1), `logit_lens(model, states, tokens)` gives
    the reference lens losses, and the last of them is the model's own loss, GPT.loss."""
    tokens = _tokenizer().encode(name)
    config = dict(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)
    model = PiecesModel(**config)
    args = dict(layout=layout, name=name, n_layer=n_layer, seed=seed, **sizes)
    key = stored_key("model_states", **args)
    if key in _stored():  # a student's install has no GPT.stream_states (Task 6.1's answer)
        states = [[[Value(x) for x in state] for state in position]
                  for position in _stored()[key]]
    else:
        # the GPT behind the pieces
        states = GPT.stream_states(model.head.__self__, tokens)  # type: ignore[attr-defined]
    losses = _call(logit_lens, model, states, tokens)
    where = (f"logit_lens for {name!r} on the model's own states ({n_layer} layers, "
             f"{LAYOUT_NAMES[layout]}, final_norm=True)")
    check_numbers(losses, _reference("lens_on_the_model_states", reference, **args),
                  rtol=1e-9, atol=1e-12, labels=("state",), what=where)
    last = losses[-1] if isinstance(losses, (list, tuple)) and losses else losses
    check_value(last, _reference("lens_on_the_model_states_loss", reference, **args),
                rtol=1e-9,
                what=f"{where}: the last entry",
                expected_text="the model's own loss, GPT.loss(tokens)")
