"""autograder/sandbox/limits.py: limits in words, and jobs per machine."""

from autograder.sandbox import limits
from autograder.sandbox.limits import Limits, size_words


def test_sizes_in_words():
    assert size_words(2 << 30) == "2 GiB"
    assert size_words(64 << 20) == "64 MiB"
    assert size_words(int(1.5 * (1 << 20))) == "1.5 MiB"
    assert size_words(512) == "512 bytes"
    assert Limits().describe() == ("120 s per cell, 900 s per notebook, 2 GiB memory, "
                                   "256 processes, 256 MiB disk, 8 MiB output kept")


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
