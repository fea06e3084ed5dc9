"""Plots of the studies: training curves, validation histories, gradient per layer, the
stream per block and the logit lens. Each function draws on `ax` (a new figure when None)
and returns it."""

import numpy as np

__all__ = [
    "smooth",
    "plot_curves",
    "plot_histories",
    "plot_grad_norms",
    "plot_stream",
    "plot_logit_lens",
]


def _ax(ax, size=(7, 4)):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size)
    return ax


def smooth(values, k=25):
    """The running mean over `k` points (fewer points than `values`)."""
    values = np.asarray(values, dtype=float)
    k = max(1, min(k, len(values)))
    return np.convolve(values, np.ones(k) / k, mode="valid")


def plot_curves(curves, title="Training loss", ax=None, k=25):
    """Minibatch loss against step, smoothed over `k` steps, one line per name."""
    ax = _ax(ax)
    for name, curve in curves.items():
        s = smooth(curve, k)
        ax.plot(np.arange(len(s)) + (len(curve) - len(s)), s, label=name, lw=1.3)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats), smoothed")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def plot_histories(histories, title="Validation loss", key="val", ax=None):
    """A history's `key` ("val": at each evaluation; "train": every step, smoothed)."""
    ax = _ax(ax)
    for name, hist in histories.items():
        if key == "val":
            ax.plot(hist["step"], hist["val"], marker="o", ms=3, label=name)
        else:
            s = smooth(hist[key])
            ax.plot(np.arange(len(s)) + len(hist[key]) - len(s), s, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel(f"{key} loss (nats per character)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return ax


def plot_grad_norms(norms, title="Gradient per layer at initialisation", ax=None):
    """||dL/dW_l|| against layer (1 = next to the input), log scale, one line per name."""
    ax = _ax(ax)
    for name, g in norms.items():
        ax.plot(range(1, len(g) + 1), g, marker="o", ms=3, label=name)
    ax.set_yscale("log")
    ax.set_xlabel("layer (1 = next to the input)")
    ax.set_ylabel("||dL/dW_l||")
    ax.set_title(title)
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return ax


def plot_stream(probes, key="rms", title=None, ax=None):
    """The stream's RMS (or cosine with the embedding) after each block, per layout."""
    ax = _ax(ax, (6, 4))
    for name, p in probes.items():
        ax.plot(range(len(p[key])), p[key], marker="o", label=name)
    ax.set_xlabel("stream state (0 = embedding, k = after block k)")
    ax.set_ylabel({"rms": "RMS of the stream", "cosine": "cosine with the embedding",
                   "lens": "logit-lens loss (nats)"}.get(key, key))
    ax.set_title(title or key)
    ax.grid(alpha=0.3)
    ax.legend()
    return ax


def plot_logit_lens(probes, title="Logit lens: decode the stream after each block", ax=None):
    return plot_stream(probes, "lens", title, ax)
