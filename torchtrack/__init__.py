"""The torch track: the chapter's full-size experiments in PyTorch (an optional extra).

- `torchtrack.data`: TinyShakespeare (downloaded once, checked, cached, or from a path),
  a character vocabulary read off the text, seeded batches.
- `torchtrack.mlp`: the teacher task and deep MLPs (plain, highway, residual), the
  gradient norm per layer.
- `torchtrack.transformer`: a character-level LM (RMSNorm, RoPE, SwiGLU, causal
  attention) with pre-norm, post-norm and no-residual blocks; stream states, logit lens.
- `torchtrack.train`: AdamW, warmup and cosine decay, clipping, periodic validation.
- `torchtrack.studies`: the two studies at full size (and smaller configurations).
- `torchtrack.seeds`: `python -m torchtrack.seeds --seeds 0 1 2`, the multi-seed table.
- `torchtrack.lens`: `python -m torchtrack.lens --seeds 100`, the logit lens position by
  position (the chapter's per-position table) with counts over many positions.
- `torchtrack.value_mirror`: the same MLP and transformer on microgpt's `Value` engine.

Needs PyTorch, which neither the instructor's install nor a student's brings by default:
`pip install torch==2.13.0` (the version the course is tested with), or the `torch` extra
of either (`pip install -e '.[torch]'` in the instructor's clone).
"""

import shlex
import sys

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    # the install line names this Python in full: a bare `pip` is often another
    # environment's; in a notebook, `%pip install torch==2.13.0` does the same
    raise ImportError(
        "the torch track needs PyTorch, the version the course is tested with (without a "
        "GPU, PyTorch's CPU-only build is enough and much smaller, see pytorch.org; the "
        "rest of the pack works without it); install it with: "
        f"{shlex.quote(sys.executable)} -m pip install torch==2.13.0"
    ) from exc
