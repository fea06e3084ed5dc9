"""Training a language model: AdamW, linear warmup then cosine decay, clipping, validation.

`train_lm` follows the chapter's protocol: AdamW (betas 0.9/0.95, weight decay 0.1 on
every parameter), the learning rate ramped up linearly over the first 10% of the steps
then decayed along a cosine to 0.1 x lr, gradients clipped to norm 1.0, and the
validation loss measured before training, every `eval_every` steps and after the last
step, each time as the mean over `eval_iters` batches.

Randomness: training batches come from a generator seeded with `seed`, validation
batches from their own generator seeded with `eval_seed` (the same batches at every
evaluation). The model's weights are whatever it was built with; no global seed is set.
"""

import math
import time

import torch

from torchtrack.data import get_batch

__all__ = ["lr_at", "evaluate", "train_lm"]


def lr_at(step, steps, lr, warmup_frac=0.1, floor=0.1):
    """The learning rate of update `step` (0-based) of `steps`.

    Warmup $w = \\max(1, \\lfloor steps \\cdot warmup\\_frac \\rfloor)$ updates rising
    linearly to `lr` (none when `warmup_frac` is 0), then
    $lr\\,(floor + (1 - floor)\\,\\tfrac12(1 + \\cos \\pi p))$ with $p$ going from 0 to 1.
    """
    warmup = max(1, int(steps * warmup_frac)) if warmup_frac > 0 else 0
    if step < warmup:
        return lr * (step + 1) / warmup
    p = (step - warmup) / max(1, steps - warmup - 1)
    p = min(p, 1.0)
    return lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


@torch.no_grad()
def evaluate(model, ids, batch_size, block_size, iters, seed):
    """Mean loss over `iters` batches of `ids` drawn from a generator seeded with `seed`."""
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(iters):
        x, y = get_batch(ids, batch_size, block_size, g)
        total += model(x, y)[1].item()
    model.train(was_training)
    return total / iters


def train_lm(model, train_ids, val_ids, steps=300, lr=3e-3, batch_size=32, block_size=64,
             eval_every=50, eval_iters=10, warmup_frac=0.1, seed=0, eval_seed=1234,
             clip=1.0, weight_decay=0.1, progress=None):
    """Train `model` (called as `model(x, y) -> (logits, loss)`) and return its history:
    ``{"step", "val"}`` at each evaluation, ``"train"`` (the loss of every update),
    ``"lr"`` (every update's learning rate) and ``"seconds"``.

    `progress`, if given, is called after each update with (step, loss), a tqdm bar's
    hook, say.
    """
    start = time.perf_counter()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95),
                            weight_decay=weight_decay)
    g = torch.Generator().manual_seed(seed)
    hist = {"step": [], "val": [], "train": [], "lr": []}

    def validate(step):
        hist["step"].append(step)
        hist["val"].append(evaluate(model, val_ids, batch_size, block_size, eval_iters,
                                    eval_seed))

    model.train()
    validate(0)
    for step in range(steps):
        rate = lr_at(step, steps, lr, warmup_frac)
        for group in opt.param_groups:
            group["lr"] = rate
        x, y = get_batch(train_ids, batch_size, block_size, g)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        hist["train"].append(loss.item())
        hist["lr"].append(rate)
        if progress is not None:
            progress(step, loss.item())
        done = step + 1
        if done % eval_every == 0 or done == steps:
            validate(done)
    hist["seconds"] = time.perf_counter() - start
    return hist
