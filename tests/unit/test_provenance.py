"""The provenance line of a run made with the pack installed (not a checkout): it says the
commit is unknown, in words, rather than "at unknown (n" or another repository's commit."""

from microgpt import provenance


def test_an_installed_copy_names_no_commit_and_says_so_in_full(tmp_path, monkeypatch):
    monkeypatch.setattr(provenance, "_REPO", tmp_path / "site-packages")
    prov = provenance.record(command="python -m torchtrack.seeds", wall_seconds=1.0)
    assert prov["commit"] == "unknown (not a git checkout)"
    assert prov["uncommitted_changes"] is None
    assert "` at unknown (not a git checkout);" in provenance.describe(prov)


def test_a_checkouts_commit_is_shortened():
    prov = {"command": "x", "commit": "0123456789abcdef0123456789abcdef01234567"}
    assert "` at 0123456789;" in provenance.describe(prov)
