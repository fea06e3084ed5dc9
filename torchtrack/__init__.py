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
- `torchtrack.value_mirror`: the same MLP and transformer on microgpt's `Value` engine.

Install with `pip install -e '.[torch]'`.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "the torch track needs PyTorch: pip install -e '.[torch]' "
        "(the rest of the pack works without it)"
    ) from exc
