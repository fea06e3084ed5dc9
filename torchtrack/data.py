"""TinyShakespeare and character-level batches.

TinyShakespeare (Karpathy's char-rnn `input.txt`, 1,115,394 characters) is not shipped
with the pack. `tinyshakespeare()` reads it from a path you give, or from the download
cache, downloading it once on first use; its SHA-256 is checked every time. The
vocabulary is always the sorted set of characters of the text in hand (65 for
TinyShakespeare, but nothing here assumes so).

`offline_text()` is a small corpus that is on disk after install (the census first
names, one per line): the graded checks and the tests use it, so grading never needs
the network.
"""

import os
import shlex
import sys
from pathlib import Path

import torch

from microgpt.data import DownloadError, census_names, fetch, verify_sha256

__all__ = [
    "TINYSHAKESPEARE_URL",
    "TINYSHAKESPEARE_SHA256",
    "TINYSHAKESPEARE_CHARS",
    "DownloadError",
    "tinyshakespeare",
    "find_tinyshakespeare",
    "offline_text",
    "CharVocab",
    "split_ids",
    "get_batch",
]

TINYSHAKESPEARE_URL = (
    "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
)
TINYSHAKESPEARE_SHA256 = "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"
TINYSHAKESPEARE_CHARS = 1_115_394
TINYSHAKESPEARE_FILE = "tinyshakespeare.txt"
ENV_PATH = "TINYSHAKESPEARE"  # an environment variable that may hold the file's path


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def tinyshakespeare(path=None, cache_dir=None, url=TINYSHAKESPEARE_URL, timeout=30.0):
    """The text of TinyShakespeare, as one string.

    With `path`, read that file. Otherwise use the copy cached in `cache_dir` (default:
    microgpt's cache, ``$MICROGPT_CACHE`` or ``~/.cache/microgpt-residuals``), downloading
    it from `url` on first use. Either way the SHA-256 must be `TINYSHAKESPEARE_SHA256`
    (a `ValueError` names the file that did not match); a failed download raises
    `DownloadError` saying how to pass a copy instead.
    """
    if path is not None:
        path = Path(path).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"no TinyShakespeare file at {path}. Pass the path of a copy of char-rnn's "
                f"input.txt ({TINYSHAKESPEARE_CHARS:,} characters), or path=None to download it."
            )
        verify_sha256(path, TINYSHAKESPEARE_SHA256)
        return _read(path)
    try:
        cached = fetch(url, TINYSHAKESPEARE_SHA256, TINYSHAKESPEARE_FILE, cache_dir, timeout)
    except DownloadError as e:
        raise DownloadError(
            f"{e}\nTinyShakespeare is downloaded once and cached; that failed (no network?). "
            f"If you have a copy of input.txt, pass it: tinyshakespeare(path='.../input.txt'), "
            f"`{shlex.quote(sys.executable)} -m torchtrack.seeds --data .../input.txt`, or set "
            f"${ENV_PATH} to its path."
        ) from e.__cause__
    return _read(cached)


def find_tinyshakespeare(candidates=(), cache_dir=None, download=True, timeout=30.0):
    """TinyShakespeare from the first place that has it, or None: the paths in
    `candidates`, then ``$TINYSHAKESPEARE``, then the cache (downloading when `download`).

    Meant for notebooks, which fall back to `offline_text()` (and say so) on None.
    A file that exists but has the wrong checksum is still an error.
    """
    paths = [Path(p).expanduser() for p in candidates if p]
    if os.environ.get(ENV_PATH):
        paths.append(Path(os.environ[ENV_PATH]).expanduser())
    for p in paths:
        if p.is_file():
            return tinyshakespeare(p)
    if not download:
        return None
    try:
        return tinyshakespeare(cache_dir=cache_dir, timeout=timeout)
    except DownloadError:
        return None


def offline_text():
    """A small corpus that needs no network: the 5,163 census first names, one per line."""
    return "\n".join(census_names()) + "\n"


class CharVocab:
    """Characters to ids and back; the vocabulary is `sorted(set(text))`."""

    def __init__(self, text):
        if not text:
            raise ValueError("an empty text has no vocabulary")
        self.chars = sorted(set(text))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}

    @property
    def size(self):
        return len(self.chars)

    def encode(self, text):
        """A 1-D long tensor of ids."""
        try:
            return torch.tensor([self.stoi[ch] for ch in text], dtype=torch.long)
        except KeyError as e:
            raise ValueError(f"character {e.args[0]!r} is not in the vocabulary") from None

    def decode(self, ids):
        """The text of a sequence of ids (a tensor or a list)."""
        return "".join(self.chars[int(i)] for i in ids)


def split_ids(text, val_fraction=0.1):
    """`(vocab, train_ids, val_ids)`: the first $\\lfloor (1 - f) n \\rfloor$ ids train, the
    rest (contiguous, the end of the text) validate; $f$ = `val_fraction`."""
    vocab = CharVocab(text)
    ids = vocab.encode(text)
    n_train = int(len(ids) * (1 - val_fraction))
    return vocab, ids[:n_train], ids[n_train:]


def get_batch(ids, batch_size, block_size, generator):
    """`(x, y)`, both (batch_size, block_size): windows of `ids` starting at positions drawn
    from `generator` (a seeded `torch.Generator`); `y` is `x` shifted by one."""
    if len(ids) <= block_size + 1:
        raise ValueError(f"{len(ids)} tokens are too few for windows of {block_size} + 1")
    starts = torch.randint(len(ids) - block_size - 1, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    x = ids[starts[:, None] + offsets]
    y = ids[starts[:, None] + offsets + 1]
    return x, y
