"""autograder/sandbox/limits.py and channel.py: limits in words, the isolation
level, uid slots, and the channel between a grading worker and nbgrader."""

import copy
from types import SimpleNamespace

import pytest

from autograder.grading.channel import Channel, NotebookRun
from autograder.sandbox import limits
from autograder.sandbox.limits import FULL, LIMITS, Limits, SandboxError, size_words


def test_sizes_in_words():
    assert size_words(2 << 30) == "2 GiB"
    assert size_words(64 << 20) == "64 MiB"
    assert size_words(int(1.5 * (1 << 20))) == "1.5 MiB"
    assert size_words(512) == "512 bytes"
    assert Limits().describe() == ("120 s per cell, 900 s per notebook, 2 GiB memory, "
                                   "256 processes, 256 MiB disk, 8 MiB output kept")


def test_the_level_can_be_forced_down(monkeypatch):
    monkeypatch.setenv("RESIDUAL_PACK_ISOLATION", "limits")
    limits.isolation_available.cache_clear()
    try:
        assert limits.isolation_available() == (LIMITS, "RESIDUAL_PACK_ISOLATION=limits")
    finally:
        limits.isolation_available.cache_clear()


def test_uid_slots_are_never_shared(monkeypatch):
    monkeypatch.setenv("RESIDUAL_PACK_SANDBOX_UIDS", "64990-64999")
    monkeypatch.setattr(limits, "_uids_in_use", lambda: {64990})
    held = len(limits._HELD_UIDS)
    try:
        first, second = limits.acquire_uid(), limits.acquire_uid()
        assert first != second and {first, second} <= set(range(64991, 65000))
    finally:
        for f in limits._HELD_UIDS[held:]:
            f.close()
        del limits._HELD_UIDS[held:]
    monkeypatch.setattr(limits, "_uids_in_use", lambda: set(range(64990, 65000)))
    with pytest.raises(SandboxError, match="no free sandbox uid"):
        limits.acquire_uid()


def test_the_channel_hands_the_sandbox_over_and_the_runs_back(monkeypatch):
    with pytest.raises(SandboxError):
        Channel().current()
    taken = []
    monkeypatch.setattr(limits, "_PROCESS_UID", {})
    monkeypatch.setattr(limits, "acquire_uid", lambda: taken.append(1) or 64123)
    box = SimpleNamespace(level=FULL)
    first, second = Channel(box), Channel(SimpleNamespace(level=FULL))
    # two runs in one worker process: one uid slot, taken once
    assert first.current() == (box, 64123) and second.current()[1] == 64123
    assert first.current()[1] == 64123 and taken == [1]
    run = NotebookRun(level=FULL)
    first.record("ann", "nb", run)
    assert first.take("ann", "nb") is run and first.take("ann", "nb") is None
    assert copy.deepcopy(first) is first  # traitlets copies config values: not this one


def test_without_namespaces_no_uid_is_taken(monkeypatch):
    monkeypatch.setattr(limits, "acquire_uid", lambda: pytest.fail("took a uid"))
    box = SimpleNamespace(level=LIMITS)
    assert Channel(box).current() == (box, None)


def test_jobs_are_one_per_core_as_many_as_fit_in_memory(monkeypatch):
    monkeypatch.setattr(limits.os, "sched_getaffinity", lambda _: {0, 1, 2, 3}, raising=False)
    pages = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": (5 << 30) // 4096}
    monkeypatch.setattr(limits.os, "sysconf", lambda name: pages[name])
    assert limits.default_jobs(memory=2 << 30) == 2  # 5 GiB holds two kernels of 2 GiB
    assert limits.default_jobs(memory=1 << 30) == 4  # then the cores are the bound
    assert limits.default_jobs(memory=8 << 30) == 1  # never none

    def unknown(name):
        raise ValueError(name)

    monkeypatch.setattr(limits.os, "sysconf", unknown)
    assert limits.default_jobs() == 4
