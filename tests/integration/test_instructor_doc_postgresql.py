"""The instructors' doc followed with a PostgreSQL gradebook: every test of
test_instructor_doc.py, against a private PostgreSQL server named in the course config as
the doc's step says. A file of its own so that pytest-xdist (`--dist loadfile`, a file per
worker) follows the doc with each gradebook at the same time: each takes minutes."""

import pytest
from test_instructor_doc import *  # noqa: F403 (its tests, collected here too)
from test_instructor_doc import follow_the_doc


@pytest.fixture(scope="module", params=["postgresql"])
def followed(request, tmp_path_factory):
    yield from follow_the_doc(request, tmp_path_factory)
