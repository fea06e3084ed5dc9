"""Shared fixtures: the names to train on, and the textbook baseline engine."""

import os
from pathlib import Path

import pytest
import strategies  # noqa: F401  (registers and loads the hypothesis profile)
from benchmarkparts import load_benchmark

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


@pytest.fixture(scope="session", autouse=True)
def shared_reference_runs(tmp_path_factory):
    """One reference run per assignment for the whole test run: every work course made in
    it (in this process, a worker of the same run, or a `residual-pack grade` they start)
    keeps the solution's expected observations in one folder of the run's tmp
    ($RESIDUAL_PACK_REFERENCE_CACHE, `grading.reference_run.cached_reference`) instead of its
    own `.grading/`. A run with new source or kernel code makes them anew (the key)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the workers' folders share a parent
        base = base.parent
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RESIDUAL_PACK_REFERENCE_CACHE", str(base / "reference-runs"))
        yield


@pytest.fixture(scope="session")
def textbook():
    """`benchmarks/textbook.py`, the one-node-per-operation baseline, loaded by path."""
    return load_benchmark("textbook")



# ---------------------------------------------------------------- several test processes
# scripts/test runs the suite on pytest-xdist workers with `--dist loadfile`: the tests of a
# file run on one worker, so its module fixtures (a graded class, an exchange with unix
# users) are set up once. Two refinements, both in the hooks below:
# - the per-assignment tests that grade a whole class (SPREAD) are a unit of their own per
#   assignment, so the nine self-checks do not queue on one worker; the tests that read
#   one assignment's graded class (GRADED_CLASS, from three files) are one unit, so that
#   one process grades it and the others read it from its memory. The list is
#   here, by name, because xdist's scheduler sees test ids only, not markers.
#   (`--dist loadgroup` would have done this, but groups nothing with pytest 9.2 and
#   pytest-xdist 3.8: two tests marked with one `xdist_group` ran on two workers.)
# - units holding a `slow` test are handed out first, the spread ones of later (heavier)
#   assignments before earlier ones, so that no long unit starts last and runs alone.
# Tests that run side by side must not share anything of the machine: the ones that make
# unix users name them after their process (`os.getpid()`), and checks of what a test left
# in /tmp look only at folders whose `owner` is the test's process. Tests marked `alone`
# count every process on the machine and run afterwards, in a pass of their own
# (scripts/test).

# the tests that read an assignment's one graded class of the run (tests/gradedclass.py),
# parametrized by the assignment: a unit per assignment across their files, so that one
# process grades the class and the others of the unit read it from that process's memory
GRADED_CLASS = (
    "tests/integration/test_pipeline.py::test_selfcheck_passes",
    "tests/integration/test_pipeline.py::test_selfcheck_leaves_out_only_the_courses_cells_that_cannot_change_a_score",
    "tests/hostile/test_hostile_every_assignment.py::test_attacks_on_the_verdict_earn_nothing",
    "tests/integration/test_diagnosis.py::test_every_mutant_a_visible_test_catches_is_named_when_graded",
)
SPREAD = (
    *GRADED_CLASS,
    "tests/integration/test_diagnosis.py::test_every_mutant_a_visible_test_catches_is_named",
)


def _unit(nodeid):
    """The scheduling unit of a test: its file, or its file and parameter when spread, or
    the graded class of its assignment when it reads one."""
    path = nodeid.split("::", 1)[0]
    test = nodeid.split("[", 1)[0]
    if test in GRADED_CLASS:
        return f"graded-class[{nodeid.split('[', 1)[1]}"
    if test in SPREAD:
        return f"{path}[{nodeid.split('[', 1)[1]}"
    return path


def pytest_collection_modifyitems(config, items):
    """Order the tests so that units with slow tests come first, later assignments' spread
    units before earlier ones (a stable sort: otherwise the collection order stays)."""
    units = {}
    for item in items:
        units.setdefault(_unit(item.nodeid), []).append(item)
    slow = {u for u, members in units.items()
            if any(i.get_closest_marker("slow") for i in members)}
    spread = sorted((u for u in units if u.endswith("]")), key=lambda u: u.rsplit("[", 1)[1])
    later_first = {u: -rank for rank, u in enumerate(spread)}
    items.sort(key=lambda item: (_unit(item.nodeid) not in slow,
                                 later_first.get(_unit(item.nodeid), 0)))


def pytest_xdist_make_scheduler(config, log):
    """xdist's file scheduler with the units above, handed out in collection order
    (instead of xdist's largest-count-of-tests first)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SpreadScheduling(LoadFileScheduling):
        # xdist's private hook: registered in autograder/compat.py (PRIVATE_NAMES)
        def _split_scope(self, nodeid):
            return _unit(nodeid)

    config.option.loadscopereorder = False
    return SpreadScheduling(config, log)


# issue 43: where the suite's CPU goes. With RESIDUAL_PACK_TEST_CPU set to a file, each
# test process appends, per test, the CPU of its own process and of the processes it has
# reaped (grading workers, servers, commands: os.times' children; not the sandboxed
# kernels, killed with bwrap, their parent, so that nothing waits for them, nor Chromium:
# benchmarks/process_cpu.py counts those) during the test's setup,
# call and teardown, with its wall time; benchmarks/suite_cpu.py sums it by file. A shared
# fixture counts in the test that made it; CPU of what the test leaves running counts later.
CPU_LOG = os.environ.get("RESIDUAL_PACK_TEST_CPU")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if not CPU_LOG:
        yield
        return
    import json
    import time

    before, started = os.times(), time.monotonic()
    yield
    after = os.times()
    cpu = sum(after[:4]) - sum(before[:4])
    with open(CPU_LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps({"test": item.nodeid, "cpu": round(cpu, 2),
                              "wall": round(time.monotonic() - started, 2),
                              "worker": os.environ.get("PYTEST_XDIST_WORKER", "")}) + "\n")


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
