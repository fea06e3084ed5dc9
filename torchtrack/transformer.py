"""A character-level transformer LM with three block layouts, its stream states and logit lens.

The pieces, all without biases:

- `RMSNorm`: $y = g \\odot x / \\sqrt{\\mathrm{mean}(x^2) + \\epsilon}$, $\\epsilon = 10^{-6}$;
- `rope`: rotary positions (rotate-half form, base 10,000) on queries and keys;
- `Attention`: multi-head causal self-attention with a fused query/key/value matrix;
- `SwiGLU`: $W_2(\\mathrm{silu}(W_1 x) \\odot W_3 x)$ with hidden width $\\lfloor 8d/3 \\rfloor$.

A `Block` is attention then feed-forward, in one of three layouts:

- ``"pre"`` (GPT-2 on): $x \\leftarrow x + f(\\mathrm{Norm}(x))$ for each of the two;
- ``"post"`` (the 2017 transformer): $x \\leftarrow \\mathrm{Norm}(x + f(x))$;
- ``"none"`` (no shortcut):
  $x \\leftarrow \\mathrm{ffn}(\\mathrm{Norm}_2(\\mathrm{attn}(\\mathrm{Norm}_1(x))))$.

`TransformerLM` is token embedding, the blocks, a final RMSNorm and an untied head. There
are no learned positions (RoPE carries them) and the initialisation is PyTorch's default.
"""

import math

import torch
import torch.nn.functional as F
from torch import nn

from torchtrack.mlp import seeded

__all__ = [
    "LAYOUTS",
    "RMSNorm",
    "rope",
    "Attention",
    "SwiGLU",
    "Block",
    "ProbeBlock",
    "TransformerLM",
    "make_lm",
    "count_params",
    "stream_states",
    "logit_lens",
    "lens_top1",
    "stream_rms",
    "stream_cosine",
]

LAYOUTS = ("pre", "post", "none")


class RMSNorm(nn.Module):
    """$y = g \\odot x / \\sqrt{\\mathrm{mean}(x^2) + \\epsilon}$ over the last dimension."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rope(x, base=10000.0):
    """Rotate pairs $(x_i, x_{i+h/2})$ of each head by the angle $t\\,\\theta_i$,
    $\\theta_i = base^{-2i/h}$, at position $t$. `x` is (batch, heads, time, h), h even."""
    T, h = x.shape[-2], x.shape[-1]
    half = h // 2
    theta = base ** (-torch.arange(half, dtype=x.dtype) * 2 / h)
    angles = torch.arange(T, dtype=x.dtype)[:, None] * theta[None, :]  # (T, h/2)
    cos, sin = torch.cos(angles), torch.sin(angles)
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


class Attention(nn.Module):
    """Multi-head self-attention: softmax of $q k^T / \\sqrt{h}$, causal by default."""

    def __init__(self, dim, n_heads, causal=True, use_rope=True):
        super().__init__()
        if dim % n_heads:
            raise ValueError(f"dim ({dim}) must be a multiple of n_heads ({n_heads})")
        if (dim // n_heads) % 2 and use_rope:
            raise ValueError(f"RoPE needs an even head size, not {dim // n_heads}")
        self.n_heads, self.causal, self.use_rope = n_heads, causal, use_rope
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        B, T, D = x.shape
        q, k, v = self.qkv(x).split(D, dim=-1)
        q, k, v = (t.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2) for t in (q, k, v))
        if self.use_rope:
            q, k = rope(q), rope(k)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D // self.n_heads)
        if self.causal:
            future = torch.ones(T, T, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
        y = scores.softmax(-1) @ v  # (B, heads, T, h)
        return self.out(y.transpose(1, 2).reshape(B, T, D))


class SwiGLU(nn.Module):
    """$W_2(\\mathrm{silu}(W_1 x) \\odot W_3 x)$"""

    def __init__(self, dim, hidden=None):
        super().__init__()
        hidden = hidden or int(8 * dim / 3)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    """Attention then feed-forward, each with its norm, in the `layout` given."""

    def __init__(self, dim, n_heads, layout="pre", causal=True, use_rope=True):
        super().__init__()
        if layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
        self.layout = layout
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn = Attention(dim, n_heads, causal, use_rope)
        self.ffn = SwiGLU(dim)

    def forward(self, x):
        if self.layout == "pre":
            x = x + self.attn(self.norm1(x))
            return x + self.ffn(self.norm2(x))
        if self.layout == "post":
            x = self.norm1(x + self.attn(x))
            return self.norm2(x + self.ffn(x))
        return self.ffn(self.norm2(self.attn(self.norm1(x))))


class ProbeBlock(Block):
    """A block in no layout of Task 9.1's, tanh(attn(x) + ffn(x)): the
    blocks of a model that a check of Task 9.2 (the logit lens) runs in a student's
    install, which holds no `Block.forward` before Assignment 9's answers are released."""

    def forward(self, x):
        return torch.tanh(self.attn(x) + self.ffn(x))


class TransformerLM(nn.Module):
    """Embedding, `n_layers` blocks, final RMSNorm, head. `block_cls(dim, n_heads, layout)`
    makes each block (a subclass of `Block` with its own `forward`, say)."""

    def __init__(self, vocab_size, dim=64, n_layers=6, n_heads=4, layout="pre", block_cls=Block):
        super().__init__()
        self.layout = layout
        self.embed = nn.Embedding(vocab_size, dim)
        self.blocks = nn.ModuleList(block_cls(dim, n_heads, layout) for _ in range(n_layers))
        self.norm = RMSNorm(dim)
        self.head = nn.Linear(dim, vocab_size, bias=False)

    def decode(self, x):
        """Logits from a stream state: the final norm, then the head."""
        return self.head(self.norm(x))

    def forward(self, idx, targets=None):
        """`(logits, loss)`; `loss` is the mean next-character cross-entropy, or None."""
        x = self.embed(idx)
        for block in self.blocks:
            x = block(x)
        logits = self.decode(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    @torch.no_grad()
    def generate(self, idx, n_new, temperature=1.0, generator=None, context=None):
        """Append `n_new` sampled ids to `idx` (batch, time), attending to the last `context`."""
        for _ in range(n_new):
            window = idx if context is None else idx[:, -context:]
            logits, _ = self(window)
            probs = (logits[:, -1] / temperature).softmax(-1)
            idx = torch.cat([idx, torch.multinomial(probs, 1, generator=generator)], dim=1)
        return idx


def make_lm(vocab_size, layout="pre", dim=64, n_layers=6, n_heads=4, seed=0, block_cls=Block):
    """A `TransformerLM` initialised from `seed` (the global generator is left alone)."""
    with seeded(seed):
        return TransformerLM(vocab_size, dim, n_layers, n_heads, layout, block_cls)


def count_params(model):
    return sum(p.numel() for p in model.parameters())


def stream_states(model, idx):
    """The residual stream after the embedding and after every block: n_layers + 1 tensors
    of shape (batch, time, dim)."""
    x = model.embed(idx)
    states = [x]
    for block in model.blocks:
        x = block(x)
        states.append(x)
    return states


def logit_lens(model, idx, targets):
    """The loss of decoding each stream state with the model's own final norm and head:
    a list of n_layers + 1 floats, the last one the model's loss."""
    with torch.no_grad():
        losses = []
        for x in stream_states(model, idx):
            logits = model.decode(x)
            losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)),
                                          targets.reshape(-1)).item())
    return losses


def lens_top1(model, idx):
    """The top-1 next character of decoding each stream state with the model's final norm
    and head: a long tensor of shape (n_layers + 1, batch, time), the embedding's first."""
    with torch.no_grad():
        return torch.stack([model.decode(x).argmax(-1) for x in stream_states(model, idx)])


def stream_rms(states):
    """The root mean square of each state, over batch, time and dimension."""
    return [x.detach().pow(2).mean().sqrt().item() for x in states]


def stream_cosine(states):
    """The mean cosine between each state and the embedding (the first state), per token."""
    first = states[0].detach()
    return [F.cosine_similarity(x.detach(), first, dim=-1).mean().item() for x in states]
