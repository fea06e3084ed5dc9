"""Training the tiny GPT on a list of documents, and sampling from it."""

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from .engine import Value, cycle_collector_paused
from .nn import Adam, make_rng, softmax

__all__ = ["train", "sample"]


def train(model: Any, docs: Sequence[str], tokenizer: Any, steps: int = 1000, lr: float = 0.01,
          betas: tuple[float, float] = (0.85, 0.99), eps: float = 1e-8, seed: int = 42,
          progress: bool = True,
          callback: Callable[[int, float], object] | None = None) -> list[float]:
    """Train `model` for `steps` steps, one document per step, and return the loss history.

    The documents are shuffled once with `seed` and taken in turn (microgpt's loop);
    Adam's learning rate decays linearly to 0 over `steps`. `callback(step, loss)` is
    called after each step when given.
    """
    order = list(docs)
    make_rng(seed).shuffle(order)
    opt = Adam(model.parameters(), lr=lr, betas=betas, eps=eps, total_steps=steps)
    history = []
    with progress_bar(steps, progress) as bar, cycle_collector_paused():  # (the graphs are
        # acyclic: reference counting frees them)
        for step in range(steps):
            loss = model.loss(tokenizer.encode(order[step % len(order)]))
            loss.backward()
            opt.step()
            history.append(loss.data)
            if callback is not None:
                callback(step, loss.data)
            if step % 10 == 0:
                bar.set_postfix(loss=f"{loss.data:.4f}", refresh=False)
            bar.update(1)
    return history


@contextlib.contextmanager
def progress_bar(total: int, enabled: Any = True, desc: str = "training",
                 unit: str = "it") -> Iterator[Any]:
    """A tqdm bar of `total` steps (tqdm.auto's: a widget in a notebook), advanced by hand,
    and closed however the work ends: when an error stops it part-way (an earlier answer
    not released yet, say), tqdm turns a notebook's bar red at the step it stopped at,
    above the error, where a bar left open would seem to be still running."""
    from tqdm.auto import tqdm  # here: `import microgpt` need not import tqdm

    bar = tqdm(total=total, desc=desc, unit=unit, mininterval=0.5, disable=not enabled)
    try:
        yield bar
    finally:
        bar.close()


def sample(model: Any, tokenizer: Any, n: int = 20, temperature: float = 0.5,
           seed: int = 0) -> list[str]:
    """`n` documents drawn from the model, each up to block_size tokens, stopping at BOS."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, not {temperature}")
    rng = make_rng(seed)
    out = []
    for _ in range(n):
        cache, tok, ids = model.new_cache(), tokenizer.bos, []
        for pos in range(model.config.block_size):
            logits = model.step(tok, pos, cache)
            probs = softmax([Value(z.data / temperature) for z in logits])
            tok = rng.choices(range(len(probs)), weights=[p.data for p in probs])[0]
            if tok == tokenizer.bos:
                break
            ids.append(tok)
        out.append(tokenizer.decode(ids))
    return out


def mean_last(history: Sequence[float], k: int = 100) -> float:
    """The mean of the last `k` losses (or of all of them when there are fewer)."""
    tail = history[-k:]
    return math.fsum(tail) / len(tail)
