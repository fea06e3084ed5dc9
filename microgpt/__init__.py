"""microgpt: a pure-Python scalar autograd engine and a tiny GPT with residual adds."""

from .data import canonical_names, census_names, load_docs
from .engine import Value, cycle_collector_paused, dot, linear, zero_grad
from .model import GPT, GPTConfig
from .nn import Adam, cross_entropy, layernorm, log_softmax, matrix, rmsnorm, softmax
from .tokenizer import CharTokenizer
from .train import sample, train


def _no_tqdm_monitor() -> None:
    """In a browser's Python (Pyodide, the course's JupyterLite site) no thread can start:
    tqdm's monitor thread, which each progress bar starts, would print a warning (its
    "can't start new thread") over every training cell's bar. It only watches for stalled
    bars, so it is switched off there."""
    try:
        from tqdm import std
    except ImportError:
        return
    std.tqdm.monitor_interval = 0


if __import__("sys").platform == "emscripten":
    _no_tqdm_monitor()

__all__ = [
    "Value", "dot", "linear", "zero_grad", "cycle_collector_paused",
    "GPT", "GPTConfig",
    "Adam", "cross_entropy", "layernorm", "log_softmax", "matrix", "rmsnorm", "softmax",
    "CharTokenizer", "sample", "train",
    "canonical_names", "census_names", "load_docs",
]
