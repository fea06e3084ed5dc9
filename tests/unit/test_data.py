"""The data loaders: census names offline, canonical names from a path or a (local) download."""

import hashlib
import http.server
import shlex
import shutil
import socket
import sys
import threading
from pathlib import Path

import pytest

from microgpt.data import (
    CANONICAL_NAMES_SHA256,
    DownloadError,
    canonical_names,
    census_names,
    fetch,
    load_docs,
    read_lines,
    sha256_of,
)

SHARED_NAMES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "names.txt"
needs_shared_names = pytest.mark.skipif(
    not SHARED_NAMES.is_file(),
    reason=f"no reference copy of names.txt at {SHARED_NAMES} (only on the team's machines)",
)

# makemore's names.txt: 32,032 newlines, and the last name has none after it
CANONICAL_COUNT = 32_033


# ---- census names (offline) ----

def test_census_names_count_and_alphabet():
    names = census_names()
    assert len(names) == 5163
    assert all(n and set(n) <= set("abcdefghijklmnopqrstuvwxyz") for n in names)
    assert names == sorted(set(names))  # sorted, no duplicates
    assert {"mary", "james", "linda"} <= set(names)


def test_census_names_are_deterministic():
    assert census_names() == census_names()


def test_load_docs_census_is_the_default():
    assert load_docs() == census_names()
    assert load_docs("census") == census_names()


def test_load_docs_reads_a_text_file(tmp_path):
    f = tmp_path / "docs.txt"
    f.write_text("  anna \n\nbob\n   \ncarl", encoding="utf-8")
    assert load_docs(str(f)) == ["anna", "bob", "carl"]
    assert load_docs(f) == ["anna", "bob", "carl"]


def test_load_docs_missing_file_says_what_is_accepted(tmp_path):
    with pytest.raises(FileNotFoundError, match="census.*canonical"):
        load_docs(str(tmp_path / "nope.txt"))


# ---- canonical names from a path ----

@needs_shared_names
def test_canonical_names_from_a_path():
    names = canonical_names(path=SHARED_NAMES)
    assert len(names) == CANONICAL_COUNT
    assert names[0] == "emma"
    assert all(set(n) <= set("abcdefghijklmnopqrstuvwxyz") for n in names)


@needs_shared_names
def test_canonical_names_rejects_a_tampered_copy(tmp_path):
    bad = tmp_path / "names.txt"
    bad.write_bytes(SHARED_NAMES.read_bytes() + b"\nmallory")
    with pytest.raises(ValueError) as info:
        canonical_names(path=bad)
    msg = str(info.value)
    assert "checksum mismatch" in msg
    assert str(bad) in msg
    assert CANONICAL_NAMES_SHA256 in msg
    assert sha256_of(bad) in msg


def test_canonical_names_rejects_any_other_file(tmp_path):
    other = tmp_path / "other.txt"
    other.write_text("anna\nbob\n")
    with pytest.raises(ValueError, match="expected sha256 " + CANONICAL_NAMES_SHA256):
        canonical_names(path=other)


# ---- downloads, against a real HTTP server on 127.0.0.1 ----

@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    """Talk to 127.0.0.1 directly even where the environment sets an HTTP proxy."""
    for var in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


class _Server:
    """A local HTTP server that serves `files` (url path -> bytes) and counts requests."""

    def __init__(self, files):
        self.files, self.requests = files, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append(self.path)
                body = outer.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):  # keep the test output quiet
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def url(self, path):
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}{path}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join()


CONTENT = b"anna\nbob\ncarl\n"
CONTENT_SHA = hashlib.sha256(CONTENT).hexdigest()


def _unused_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fetch_downloads_verifies_and_caches(tmp_path):
    cache = tmp_path / "cache"
    with _Server({"/docs.txt": CONTENT}) as server:
        url = server.url("/docs.txt")
        path = fetch(url, CONTENT_SHA, "docs.txt", cache_dir=cache, timeout=10)
        assert path == cache / "docs.txt"
        assert path.read_bytes() == CONTENT
        assert server.requests == ["/docs.txt"]

        again = fetch(url, CONTENT_SHA, "docs.txt", cache_dir=cache, timeout=10)
        assert again == path
        assert server.requests == ["/docs.txt"]  # the second call made no request
    assert sorted(p.name for p in cache.iterdir()) == ["docs.txt"]  # no temporary files left


def test_fetch_replaces_a_corrupt_cached_copy(tmp_path):
    (tmp_path / "docs.txt").write_bytes(b"garbage")
    with _Server({"/docs.txt": CONTENT}) as server:
        path = fetch(server.url("/docs.txt"), CONTENT_SHA, "docs.txt", cache_dir=tmp_path)
        assert server.requests == ["/docs.txt"]
    assert path.read_bytes() == CONTENT


def test_fetch_bad_checksum_caches_nothing(tmp_path):
    cache = tmp_path / "cache"
    with _Server({"/docs.txt": b"not what was expected\n"}) as server:
        url = server.url("/docs.txt")
        with pytest.raises(ValueError) as info:
            fetch(url, CONTENT_SHA, "docs.txt", cache_dir=cache, timeout=10)
    msg = str(info.value)
    assert "checksum mismatch" in msg and url in msg and CONTENT_SHA in msg
    assert list(cache.iterdir()) == []  # neither the file nor a temporary part


def test_fetch_http_error_is_a_download_error(tmp_path):
    with _Server({}) as server:
        with pytest.raises(DownloadError, match="404"):
            fetch(server.url("/missing.txt"), CONTENT_SHA, "x.txt", cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_fetch_server_down_is_a_clear_error(tmp_path):
    url = f"http://127.0.0.1:{_unused_port()}/docs.txt"
    with pytest.raises(DownloadError, match="could not download " + url):
        fetch(url, CONTENT_SHA, "docs.txt", cache_dir=tmp_path, timeout=5)
    assert list(tmp_path.iterdir()) == []


@needs_shared_names
def test_canonical_names_download_then_cache(tmp_path):
    cache = tmp_path / "cache"
    with _Server({"/names.txt": SHARED_NAMES.read_bytes()}) as server:
        url = server.url("/names.txt")
        first = canonical_names(cache_dir=cache, url=url, timeout=10)
        second = canonical_names(cache_dir=cache, url=url, timeout=10)
        assert server.requests == ["/names.txt"]
    assert len(first) == CANONICAL_COUNT
    assert first == second == read_lines(SHARED_NAMES)
    assert sha256_of(cache / "names.txt") == CANONICAL_NAMES_SHA256


@needs_shared_names
def test_canonical_names_uses_the_cache_without_a_server(tmp_path):
    shutil.copy(SHARED_NAMES, tmp_path / "names.txt")  # a cache entry, only inside tmp_path
    url = f"http://127.0.0.1:{_unused_port()}/names.txt"  # nothing listens here
    assert len(canonical_names(cache_dir=tmp_path, url=url)) == CANONICAL_COUNT


def test_canonical_names_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MICROGPT_CACHE", str(tmp_path / "envcache"))
    url = f"http://127.0.0.1:{_unused_port()}/names.txt"
    with pytest.raises(DownloadError):
        canonical_names(url=url, timeout=5)
    assert (tmp_path / "envcache").is_dir()  # the default cache dir followed the variable
    assert list((tmp_path / "envcache").iterdir()) == []


def test_canonical_names_offline_error_says_what_to_do(tmp_path):
    url = f"http://127.0.0.1:{_unused_port()}/names.txt"
    with pytest.raises(DownloadError) as info:
        canonical_names(cache_dir=tmp_path, url=url, timeout=5)
    msg = str(info.value)
    assert url in msg
    assert "path=" in msg
    # the command names this Python, as an unactivated environment needs it
    assert f"{shlex.quote(sys.executable)} -m microgpt --data .../names.txt" in msg, msg
    assert "census_names()" in msg and "offline" in msg
    assert list(tmp_path.iterdir()) == []


def test_canonical_names_wrong_download_is_not_cached(tmp_path):
    with _Server({"/names.txt": b"emma\nolivia\n"}) as server:
        with pytest.raises(ValueError, match="checksum mismatch"):
            canonical_names(cache_dir=tmp_path, url=server.url("/names.txt"), timeout=10)
    assert list(tmp_path.iterdir()) == []
