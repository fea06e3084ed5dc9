"""Documents to train on: an offline names list, microgpt's canonical names, or a text file.

- `census_names()` needs no network: the US census first names that the installed
  PyPI package `names` ships (5,163 of them).
- `canonical_names()` is microgpt's own `names.txt` (32,033 names). It is read from a
  path you give, or from a local cache, or downloaded once into that cache; its
  SHA-256 is checked every time.
- `load_docs(source)` picks one of the two by name, or reads any text file with one
  document per line.

`fetch()` is the general download-once helper (checksum, cache, atomic rename) that any
other fixed data file, such as TinyShakespeare, can use too.
"""

import hashlib
import importlib.resources
import os
import shlex
import sys
import tempfile
from pathlib import Path

__all__ = [
    "CANONICAL_NAMES_SHA256",
    "CANONICAL_NAMES_URL",
    "DownloadError",
    "canonical_names",
    "census_names",
    "default_cache_dir",
    "fetch",
    "load_docs",
    "read_lines",
    "sha256_of",
    "verify_sha256",
]

CANONICAL_NAMES_URL = "https://raw.githubusercontent.com/karpathy/makemore/988aa59/names.txt"
CANONICAL_NAMES_SHA256 = "0a30b5557f192f32ab962680889aac5f6fda0f4cecf40a6d0b5694f58ea8cc4d"
CANONICAL_NAMES_FILE = "names.txt"

_CENSUS_FILES = ("dist.female.first", "dist.male.first")
_LETTERS = frozenset("abcdefghijklmnopqrstuvwxyz")


class DownloadError(OSError):
    """A data file could not be downloaded (no network, server down, HTTP error, time-out)."""


# ---- the offline default ----

def census_names() -> list[str]:
    """US census first names: 5,163 distinct lower-case names of letters a-z, sorted.

    Source: the files ``dist.female.first`` and ``dist.male.first`` inside the PyPI
    package ``names`` (a dependency of this pack, so they are on disk after install).
    They are the US Census Bureau's lists of frequently occurring first names from the
    1990 census, a work of the US government and so in the public domain. Each line is
    ``NAME  freq  cumfreq  rank``; only the name is kept. Both lists are lower-cased and
    merged, names with anything other than a-z are dropped, and duplicates (names on
    both lists) are kept once.
    """
    package = importlib.resources.files("names")
    found = set()
    for filename in _CENSUS_FILES:
        for line in package.joinpath(filename).read_text(encoding="ascii").splitlines():
            fields = line.split()
            if not fields:
                continue
            name = fields[0].lower()
            if set(name) <= _LETTERS:
                found.add(name)
    return sorted(found)


# ---- checksums, the cache and downloads ----

def sha256_of(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of a file's bytes, as 64 hex digits."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_sha256(path: str | os.PathLike[str], sha256: str) -> None:
    """Raise `ValueError` unless the file at `path` has SHA-256 `sha256`."""
    actual = sha256_of(path)
    if actual != sha256.lower():
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {sha256.lower()}, "
            f"got {actual}. The file is not the expected one (changed, truncated or "
            f"a different file)."
        )


def default_cache_dir() -> Path:
    """Where downloads are kept: ``$MICROGPT_CACHE``, else ``~/.cache/microgpt-residuals``."""
    env = os.environ.get("MICROGPT_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "microgpt-residuals"


def fetch(url: str, sha256: str, filename: str,
          cache_dir: str | os.PathLike[str] | None = None,
          timeout: float = 30.0) -> Path:
    """Return the path of `filename` in the cache, downloading it from `url` if needed.

    A cached copy is used only if its SHA-256 matches (a copy that does not match is
    downloaded again). A download goes to a temporary file in the cache directory, is
    checked, and only then renamed into place (an atomic rename), so a failed or wrong
    download never lands in the cache.

    Raises `DownloadError` when the download fails and `ValueError` when the downloaded
    bytes have the wrong checksum.
    """
    cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    target = cache_dir / filename
    if target.is_file() and sha256_of(target) == sha256.lower():
        return target
    # only a download needs them (importing urllib.request and http.client costs every
    # `import microgpt`, and every graded kernel, a few hundredths of a second)
    import http.client
    import urllib.request

    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".part", dir=cache_dir)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        try:
            with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as r:
                for block in iter(lambda: r.read(1 << 16), b""):
                    digest.update(block)
                    out.write(block)
        except (OSError, http.client.HTTPException) as e:  # URLError, HTTPError, time-outs
            raise DownloadError(f"could not download {url}: {e}") from e
        actual = digest.hexdigest()
        if actual != sha256.lower():
            raise ValueError(
                f"checksum mismatch for the download of {url}: expected sha256 "
                f"{sha256.lower()}, got {actual}. Nothing was saved to the cache."
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


# ---- documents ----

def read_lines(path: str | os.PathLike[str]) -> list[str]:
    """The stripped, non-empty lines of a UTF-8 text file."""
    with open(path, encoding="utf-8") as f:
        return [s for s in (line.strip() for line in f) if s]


def canonical_names(path: str | os.PathLike[str] | None = None,
                    cache_dir: str | os.PathLike[str] | None = None,
                    url: str = CANONICAL_NAMES_URL, timeout: float = 30.0) -> list[str]:
    """microgpt's names list, makemore's ``names.txt``: 32,033 names, in file order.

    (``wc -l`` says 32,032: there is no newline after the last name.)

    With `path`, read that file. Otherwise use the copy cached in `cache_dir` (default
    `default_cache_dir()`), downloading it from `url` on first use. Either way the file's
    SHA-256 must be `CANONICAL_NAMES_SHA256` (a `ValueError` says which file did not
    match). Without a network, pass the path of a copy, or use `census_names()`, which
    works offline.
    """
    if path is not None:
        verify_sha256(path, CANONICAL_NAMES_SHA256)
        return read_lines(path)
    try:
        cached = fetch(url, CANONICAL_NAMES_SHA256, CANONICAL_NAMES_FILE, cache_dir, timeout)
    except DownloadError as e:
        raise DownloadError(
            f"{e}\nThe canonical names list is downloaded once and cached; that failed. "
            f"If you have a copy of names.txt, pass it: canonical_names(path='.../names.txt') "
            f"or `{shlex.quote(sys.executable)} -m microgpt --data .../names.txt`. "
            f"census_names() (the default, "
            f"`--data census`) works offline."
        ) from e.__cause__
    return read_lines(cached)


def load_docs(source: str = "census") -> list[str]:
    """Documents by name: ``"census"``, ``"canonical"``, or the path of a text file.

    A text file holds one document per line; lines are stripped and empty ones dropped.
    """
    if source == "census":
        return census_names()
    if source == "canonical":
        return canonical_names()
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(
            f"no such file: {source!r} (data must be 'census', 'canonical' or the path "
            f"of a text file with one document per line)"
        )
    return read_lines(path)
