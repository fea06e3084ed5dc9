"""The tiny GPT: microgpt's architecture, any depth, three residual layouts.

One token at a time with a key/value cache, as in microgpt: token and position
embeddings, an RMSNorm, then per block multi-head causal self-attention and a ReLU MLP,
no biases, and a linear head. The residual layout of each block is an option:

- ``"pre"`` (microgpt, GPT-2 on): $x \\leftarrow x + f(\\mathrm{Norm}(x))$
- ``"post"`` (the 2017 transformer): $x \\leftarrow \\mathrm{Norm}(x + f(x))$
- ``"none"`` (no shortcut at all): $x \\leftarrow f(\\mathrm{Norm}(x))$
"""

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .engine import Value, dot, linear
from .nn import cross_entropy, make_rng, matrix, rmsnorm, softmax

__all__ = ["GPTConfig", "GPT", "LAYOUTS"]

LAYOUTS = ("pre", "post", "none")


@dataclass(frozen=True)
class GPTConfig:
    """Sizes and options; the defaults are microgpt's."""

    vocab_size: int = 27
    n_layer: int = 1
    n_embd: int = 16
    n_head: int = 4
    block_size: int = 16
    init_std: float = 0.08
    layout: str = "pre"
    final_norm: bool = False

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {self.layout!r}")
        if self.n_embd % self.n_head:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


class GPT:
    """A tiny GPT of `Value` parameters, initialised from `seed` (an int or a `random.Random`)."""

    # the weights' numbers while a forward pass reuses them (see _applying_fixed_weights): a
    # cache, private to each copy of a model (at grading time, to each end of the wire)
    _weight_numbers: dict | None = None

    def __init__(self, config: GPTConfig | None = None, seed: Any = 0, **overrides: Any) -> None:
        config = config or GPTConfig()
        if overrides:
            config = GPTConfig(**{**config.__dict__, **overrides})
        self.config = c = config
        rng = make_rng(seed)
        std = c.init_std
        # the order of creation is microgpt's, so one seed gives the same weights
        sd = {
            "wte": matrix(c.vocab_size, c.n_embd, rng, std),
            "wpe": matrix(c.block_size, c.n_embd, rng, std),
            "lm_head": matrix(c.vocab_size, c.n_embd, rng, std),
        }
        for i in range(c.n_layer):
            for name in ("attn_wq", "attn_wk", "attn_wv", "attn_wo"):
                sd[f"layer{i}.{name}"] = matrix(c.n_embd, c.n_embd, rng, std)
            sd[f"layer{i}.mlp_fc1"] = matrix(4 * c.n_embd, c.n_embd, rng, std)
            sd[f"layer{i}.mlp_fc2"] = matrix(c.n_embd, 4 * c.n_embd, rng, std)
        self.state_dict = sd
        self._weight_numbers = None

    @contextlib.contextmanager
    def _applying_fixed_weights(self) -> Iterator[None]:
        """Inside, each weight matrix's numbers are read once and reused at every position.

        A whole sequence's forward pass applies the same matrices at each position, and
        reading the numbers out of thousands of `Value`s per position is a large share of
        its time. The weights must not change inside the block (they do not in a forward
        pass); outside it, every call reads them afresh.
        """
        self._weight_numbers = {}
        try:
            yield
        finally:
            self._weight_numbers = None

    def _linear(self, x: Sequence[Value], name: str) -> list[Value]:
        rows, numbers = self.state_dict[name], self._weight_numbers
        if numbers is None:
            return linear(x, rows)
        known = numbers.get(name)
        if known is None:
            data = [[p.data for p in row] for row in rows]
            leaves = not any(p._children for row in rows for p in row)
            known = numbers[name] = (data, leaves)
        return linear(x, rows, *known)

    def parameters(self) -> list[Value]:
        """Every parameter, in microgpt's order."""
        return [p for mat in self.state_dict.values() for row in mat for p in row]

    # ---- the pieces of a block ----

    def attention(self, x: list[Value], layer: int, cache: dict) -> list[Value]:
        """Multi-head causal self-attention of one position over the cached ones."""
        c = self.config
        q = self._linear(x, f"layer{layer}.attn_wq")
        cache["k"].append(self._linear(x, f"layer{layer}.attn_wk"))
        cache["v"].append(self._linear(x, f"layer{layer}.attn_wv"))
        hd = c.head_dim
        scale = (hd**0.5) ** -1
        out = []
        for h in range(0, c.n_embd, hd):
            q_h = q[h : h + hd]
            logits = [dot(q_h, k[h : h + hd]) * scale for k in cache["k"]]
            weights = softmax(logits)
            for j in range(h, h + hd):
                out.append(dot(weights, [v[j] for v in cache["v"]]))
        return self._linear(out, f"layer{layer}.attn_wo")

    def mlp(self, x: list[Value], layer: int) -> list[Value]:
        """$W_2\\, \\mathrm{relu}(W_1 x)$"""
        h = [v.relu() for v in self._linear(x, f"layer{layer}.mlp_fc1")]
        return self._linear(h, f"layer{layer}.mlp_fc2")

    def block(self, x: list[Value], layer: int, cache: dict) -> list[Value]:
        """One transformer block in the configured residual layout."""
        layout = self.config.layout
        if layout == "pre":
            a = self.attention(rmsnorm(x), layer, cache)
            x = [xi + ai for xi, ai in zip(x, a)]
            m = self.mlp(rmsnorm(x), layer)
            return [xi + mi for xi, mi in zip(x, m)]
        if layout == "post":
            a = self.attention(x, layer, cache)
            x = rmsnorm([xi + ai for xi, ai in zip(x, a)])
            m = self.mlp(x, layer)
            return rmsnorm([xi + mi for xi, mi in zip(x, m)])
        x = self.attention(rmsnorm(x), layer, cache)
        return self.mlp(rmsnorm(x), layer)

    # ---- whole model ----

    def new_cache(self) -> list[dict]:
        """An empty key/value cache, one per layer."""
        return [{"k": [], "v": []} for _ in range(self.config.n_layer)]

    def embed(self, token_id: int, pos_id: int) -> list[Value]:
        """The stream's first state: RMSNorm of token plus position embedding."""
        sd = self.state_dict
        return rmsnorm([t + p for t, p in zip(sd["wte"][token_id], sd["wpe"][pos_id])])

    def head(self, x: list[Value]) -> list[Value]:
        """Logits from a stream state (through the final norm when the model has one)."""
        if self.config.final_norm:
            x = rmsnorm(x)
        return self._linear(x, "lm_head")

    def step(self, token_id: int, pos_id: int, cache: list[dict]) -> list[Value]:
        """Logits for the next token after `token_id` at `pos_id`; appends to `cache`."""
        x = self.embed(token_id, pos_id)
        for layer in range(self.config.n_layer):
            x = self.block(x, layer, cache[layer])
        return self.head(x)

    def stream_states(self, tokens: Sequence[int]) -> list[list[list[Value]]]:
        """For each position, the stream after the embedding and after every block
        (n_layer + 1 lists of n_embd Values per position)."""
        cache = self.new_cache()
        out = []
        with self._applying_fixed_weights():
            for pos, tok in enumerate(tokens[: self.config.block_size]):
                x = self.embed(tok, pos)
                states = [x]
                for layer in range(self.config.n_layer):
                    x = self.block(x, layer, cache[layer])
                    states.append(x)
                out.append(states)
        return out

    def loss(self, tokens: Sequence[int]) -> Value:
        """Mean next-token cross-entropy over a token sequence (at most block_size targets)."""
        n = min(self.config.block_size, len(tokens) - 1)
        if n < 1:
            raise ValueError("a sequence needs at least two tokens for a next-token loss")
        cache = self.new_cache()
        with self._applying_fixed_weights():
            losses = [cross_entropy(self.step(tokens[p], p, cache), tokens[p + 1])
                      for p in range(n)]
        return Value.sum(losses) * (1 / n)
