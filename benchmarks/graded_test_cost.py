"""What running a notebook's graded test cells in the grader costs: one assignment's
reference run (`grading.reference_run.run_reference`, the solution through the same path a
submission takes, in a local kernel), with the CPU of the grader process, of its test
threads and of the kernels, and the requests the tests made of the kernel.

    .venv/bin/python benchmarks/graded_test_cost.py ASSIGNMENT

CPU times are printed beside the wall time because they depend less on what else runs on
the machine: to compare two versions of the code, alternate their runs on one machine and
compare the CPU figures of the same run pairs.
"""

import collections
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(assignment: str) -> None:
    from autograder.grading import remote
    from autograder.grading.reference_run import run_reference

    thread_cpu = [0.0, 0.0]
    per_cell: collections.Counter = collections.Counter()
    requests: collections.Counter = collections.Counter()
    run_test, request = remote.run_test, remote.Session.request

    def timed_test(sock, source, filename, *args, **kw):
        cpu, wall = time.thread_time(), time.perf_counter()
        try:
            return run_test(sock, source, filename, *args, **kw)
        finally:
            thread_cpu[0] += time.thread_time() - cpu
            thread_cpu[1] += time.perf_counter() - wall
            per_cell[filename] += time.perf_counter() - wall

    def counted(self, kind, **kw):
        requests[kind] += 1
        return request(self, kind, **kw)

    remote.run_test, remote.Session.request = timed_test, counted
    start = time.perf_counter()
    run_reference(str(ROOT / "source" / assignment), assignment)
    wall = time.perf_counter() - start
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"{assignment}: wall {wall:.1f} s; CPU: grader process {me.ru_utime + me.ru_stime:.1f}"
          f" s (its test threads {thread_cpu[0]:.1f} s of {thread_cpu[1]:.1f} s wall), "
          f"kernels {kids.ru_utime + kids.ru_stime:.1f} s; requests {dict(requests)}")
    for cell, seconds in per_cell.most_common():
        print(f"    {seconds:6.1f} s  {cell}")


if __name__ == "__main__":
    main(sys.argv[1])
