"""Shared fixtures: the names to train on, and the textbook baseline engine."""

import importlib.util
from pathlib import Path

import pytest
import strategies  # noqa: F401  (registers and loads the hypothesis profile)

REPO_ROOT = Path(__file__).resolve().parents[1]
# the canonical names list: in CI a copy of shared/ lies beside the clone
SHARED_NAMES = REPO_ROOT.parent / "shared" / "data" / "names.txt"

# a stand-in when the shared list is absent: common first names, lower case a-z
BUILT_IN_NAMES = """
anna ben carla david elena frank grace henry iris jack karen leo maria nathan olga paul
quinn rosa samuel tina ulrich vera walter xena yusuf zoe amelia bruno clara dmitri
eliza felix gemma hugo isabel jonas kira lucas mila noah oscar penny ruby silas talia
victor willa yara zachary beatrice cornelius dorothy evangeline
""".split()


def read_names(path=SHARED_NAMES):
    """The non-empty, stripped lines of the names file."""
    with open(path, encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


@pytest.fixture(scope="session")
def names():
    """The canonical names when the shared copy is here, otherwise the built-in list."""
    return read_names() if SHARED_NAMES.is_file() else list(BUILT_IN_NAMES)


@pytest.fixture(scope="session")
def canonical_names():
    """microgpt's own names list (32,032 names); the test skips when it is absent."""
    if not SHARED_NAMES.is_file():
        pytest.skip(f"the canonical names list is not at {SHARED_NAMES} (shared/ beside the clone)")
    return read_names()


@pytest.fixture(scope="session")
def textbook():
    """`benchmarks/textbook.py`, the one-node-per-operation baseline, loaded by path."""
    path = REPO_ROOT / "benchmarks" / "textbook.py"
    spec = importlib.util.spec_from_file_location("textbook", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module



# ---------------------------------------------------------------- several test processes
# scripts/test runs the suite on pytest-xdist workers with `--dist loadfile`: the tests of a
# file run on one worker, so its module fixtures (a graded class, an exchange with unix
# users) are set up once. (`--dist loadgroup`, which would let a file's per-assignment
# tests spread, groups nothing with pytest 9.2 and pytest-xdist 3.8: two tests marked
# with one `xdist_group` ran on two workers, and module fixtures were set up once per
# worker.) Tests that run side by side must not share anything of the machine: the ones
# that make unix users name them after their process (`os.getpid()`), and checks of what
# a test left in /tmp look only at folders whose `owner` is the test's process. Tests
# marked `alone` count every process on the machine and run afterwards, in a pass of
# their own (scripts/test).
