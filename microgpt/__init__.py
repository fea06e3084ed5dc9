"""microgpt: a pure-Python scalar autograd engine and a tiny GPT with residual adds."""

from .data import canonical_names, census_names, load_docs
from .engine import Value, cycle_collector_paused, dot, linear, zero_grad
from .model import GPT, GPTConfig
from .nn import Adam, cross_entropy, layernorm, log_softmax, matrix, rmsnorm, softmax
from .tokenizer import CharTokenizer
from .train import sample, train

__all__ = [
    "Value", "dot", "linear", "zero_grad", "cycle_collector_paused",
    "GPT", "GPTConfig",
    "Adam", "cross_entropy", "layernorm", "log_softmax", "matrix", "rmsnorm", "softmax",
    "CharTokenizer", "sample", "train",
    "canonical_names", "census_names", "load_docs",
]
