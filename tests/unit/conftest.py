"""Fixtures shared by the unit tests."""

import pytest


@pytest.fixture
def notebook_bars(monkeypatch):
    """The bars the code makes, as JupyterLab shows them (tqdm.auto's in a notebook)."""
    from tqdm.notebook import tqdm

    made = []

    class Recorded(tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr("tqdm.auto.tqdm", Recorded)
    return made
