"""Where the grader's side of a notebook's graded test cells spends its time: cProfile of
`remote.run_test` (the test threads of the grading process) during one assignment's
reference run (`grading.reference_run.run_reference`, the solution through the path a
submission takes, in a local kernel), with the time grouped by what the code does.

    .venv/bin/python benchmarks/graded_test_profile.py ASSIGNMENT [TOP]

The kernel's side is another process and is not in the profile; time spent waiting for it
shows as the socket's `recv`. cProfile slows pure-Python code several-fold, so read the
shares, not the seconds (`graded_test_cost.py` gives the seconds).
"""

import cProfile
import pstats
import sys
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# (a function's file and name, the group its own time counts in), first match wins
GROUPS = [
    (("_socket", "recv"), "waiting for the kernel (socket recv)"),
    (("_socket", "sendall"), "sending to the kernel (socket sendall)"),
    (("json/",), "JSON encoding and decoding"),
    (("autograder/kernel/wire.py", "_take_nodes"), "wire: making the kernel's nodes again"),
    (("autograder/kernel/wire.py", "_replay"), "wire: making the kernel's nodes again"),
    (("autograder/kernel/wire.py", "replay"), "wire: making the kernel's nodes again"),
    (("autograder/kernel/wire.py",), "wire: naming and syncing what is sent"),
    (("autograder/grading/remote.py",), "wire: naming and syncing what is sent"),
    (("microgpt/engine.py",), "engine: the grader's own arithmetic and backward()"),
    (("microgpt/",), "microgpt: the model and training loop around the block"),
    (("autograder/kernel/",), "checks and comparisons"),
]


def group_of(filename: str, function: str) -> str:
    """The group of a profiled function (a built-in one's "filename" is "~" and its name
    says whose method it is: "<method 'recv' of '_socket.socket' objects>")."""
    where = f"{filename}:{function}"
    for keys, group in GROUPS:
        if all(k in where for k in keys):
            return group
    return "other (built-ins called from any of the above, and the rest)"


def main(assignment: str, top: int = 20) -> None:
    from autograder.grading import remote
    from autograder.grading.reference_run import run_reference

    profile = cProfile.Profile()
    original = remote.run_test
    one_at_a_time = threading.Lock()  # cProfile profiles one thread at a time

    def profiled(*args, **kwargs):
        with one_at_a_time:
            profile.enable()
            try:
                return original(*args, **kwargs)
            finally:
                profile.disable()

    remote.run_test = profiled
    run_reference(str(ROOT / "source" / assignment), assignment)
    stats = pstats.Stats(profile)
    groups: Counter = Counter()
    for (filename, _line, function), row in stats.stats.items():  # type: ignore[attr-defined]
        groups[group_of(filename, function)] += row[2]  # own time
    total = sum(groups.values())
    print(f"{assignment}: {total:.1f} s of profiled own time in the grader's test threads")
    for group, seconds in groups.most_common():
        print(f"  {100 * seconds / total:5.1f}%  {seconds:6.2f} s  {group}")
    print()
    stats.sort_stats("tottime").print_stats(top)


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
