"""What the tiny-GPT checks of assignments 5 and 6 compare with: grader's side.

Each function here is the expected observation of one check of `autograder.kernel.gptchecks`
(named after it, without `check_`), computed from microgpt's own `GPT` in the matching
layout, and the model answer to Task 6.3 (the logit lens). A student's install holds
neither this module nor microgpt's answers (`GPT.block`, `GPT.stream_states`): the calls
that the released notebooks make are computed once and stored kernel-side
(`residual-pack stored`, `autograder/kernel/gptchecks.json`); hidden tests, run on the
grader's side, compute here.
"""

from typing import Any

from autograder.kernel.gptchecks import (
    _block_gradients,
    _data,
    _lens_observation,
    _random_states,
    _stream_coefficients,
    _stream_observation,
    _tokenizer,
    block_inputs,
    check_docs,
    run_block,
)
from microgpt import GPT, CharTokenizer, Value, cross_entropy, train

__all__ = ["block_values", "block_gradients", "block_training", "stream_states",
           "logit_lens", "lens_on_the_model_states", "lens_on_the_model_states_loss",
           "lens", "model_states"]


def _block(model: Any, x: list[Value], layer: int, cache: Any) -> list[Value]:
    return GPT.block(model, x, layer, cache)


def block_values(layout: str, n_layer: int, layer: int, n_embd: int, n_head: int, n_pos: int,
                 seed: int, scale: float) -> Any:
    sizes: dict[str, Any] = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    return _data(run_block(_block, GPT(layout=layout, **sizes), inputs, layer))


def block_gradients(layout: str, n_layer: int, layer: int, n_embd: int, n_head: int,
                    n_pos: int, seed: int, scale: float) -> list[list[float]]:
    sizes: dict[str, Any] = dict(n_layer=n_layer, n_embd=n_embd, n_head=n_head, seed=seed)
    inputs = block_inputs(n_pos, n_embd, seed + 1000, scale)
    weights = [[w.data for w in row] for row in block_inputs(n_pos, n_embd, seed + 2000, 1.0)]
    return _block_gradients(_block, GPT(layout=layout, **sizes), inputs, layer, weights)


def block_training(layout: str, steps: int, lr: float, seed: int, n_layer: int, n_embd: int,
                   n_head: int) -> list[float]:
    docs = check_docs()
    tokenizer = CharTokenizer(docs)
    config: dict[str, Any] = dict(vocab_size=tokenizer.vocab_size, n_layer=n_layer, n_embd=n_embd,
                  n_head=n_head)
    return train(GPT(layout=layout, seed=seed, **config), docs, tokenizer, steps=steps,
                 lr=lr, seed=seed, progress=False)


def stream_states(layout: str, name: str, n_layer: int, seed: int, gradients: bool,
                  **sizes: Any) -> Any:
    tokens = _tokenizer().encode(name)
    gpt = GPT(layout=layout, n_layer=n_layer, seed=seed, **sizes)
    coeffs = _stream_coefficients(gpt.config, tokens, seed) if gradients else None
    return _data(_stream_observation(GPT.stream_states(gpt, tokens), gpt, coeffs))


def lens(model: Any, states: Any, tokens: list[int]) -> list[Value]:
    """Task 6.3's answer: the mean next-token loss of each state decoded by `model.head`."""
    n = min(len(states), len(tokens) - 1)
    return [Value.sum([cross_entropy(model.head(states[p][k]), tokens[p + 1])
                       for p in range(n)]) * (1 / n)
            for k in range(len(states[0]))]


def _lens_model(layout: str, n_layer: int, seed: int, sizes: dict[str, Any]) -> GPT:
    return GPT(layout=layout, n_layer=n_layer, seed=seed, final_norm=True, **sizes)


def logit_lens(layout: str, name: str, n_layer: int, seed: int, gradients: bool,
               **sizes: Any) -> Any:
    tokens = _tokenizer().encode(name)
    gpt = _lens_model(layout, n_layer, seed, sizes)
    n_pos = min(len(tokens), gpt.config.block_size)
    states = _random_states(n_pos, n_layer + 1, gpt.config.n_embd, seed + 7)
    return _data(_lens_observation(lens, gpt, states, tokens, gradients))


def lens_on_the_model_states(layout: str, name: str, n_layer: int, seed: int,
                             **sizes: Any) -> Any:
    tokens = _tokenizer().encode(name)
    gpt = _lens_model(layout, n_layer, seed, sizes)
    return _data(lens(gpt, GPT.stream_states(gpt, tokens), tokens))


def model_states(layout: str, name: str, n_layer: int, seed: int, **sizes: Any) -> Any:
    """The states `check_lens_on_the_model_states` hands the student's lens."""
    tokens = _tokenizer().encode(name)
    return _data(GPT.stream_states(_lens_model(layout, n_layer, seed, sizes), tokens))


def lens_on_the_model_states_loss(layout: str, name: str, n_layer: int, seed: int,
                                  **sizes: Any) -> float:
    tokens = _tokenizer().encode(name)
    return GPT.loss(_lens_model(layout, n_layer, seed, sizes), tokens).data

