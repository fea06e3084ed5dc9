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
# scripts/test runs the suite on pytest-xdist workers with `--dist loadgroup`: the tests of
# one group run on one worker, one after another. Each test file is a group (its module
# fixtures are set up once), one per value when a module fixture is parametrized (the
# literal instructor test's SQLite and PostgreSQL halves run side by side), except where
# the file's tests are independent runs per assignment (SPREAD: each test is its own unit
# of work) and where files share something of the machine (SHARED: the bubblewrap tests'
# fixed sandbox uid, whose processes they count). A test that sets its own `xdist_group`
# (the self-check, per assignment) keeps it. The tests that make unix users name them
# after their process (`os.getpid()`), so they need no group. Tests marked `alone` look at
# every process on the machine and run afterwards, in a pass of their own (scripts/test).
TESTS = Path(__file__).resolve().parent
SPREAD = {"integration/test_diagnosis.py", "hostile/test_hostile_every_assignment.py"}
SHARED = {"bubblewrap": ("sandbox/",)}


def xdist_group(path, module_params=()):
    """The group of a test in the file at `path` (relative to tests/) that uses module
    fixtures with the values `module_params`, or None when it may go to any worker."""
    if path in SPREAD:
        return None
    for group, prefixes in SHARED.items():
        if path.startswith(prefixes):
            return group
    return f"{path}[{'-'.join(map(str, module_params))}]" if module_params else path


def _module_params(item):
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return ()
    found = []
    for name, value in sorted(callspec.params.items()):
        defs = item._fixtureinfo.name2fixturedefs.get(name)
        if defs and defs[-1].scope == "module":
            found.append(value)
    return tuple(found)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        group = xdist_group(item.path.relative_to(TESTS).as_posix(), _module_params(item))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
