"""The suite's CPU by test file, from the log the tests write with RESIDUAL_PACK_TEST_CPU
set (tests/conftest.py): each test's CPU (its process and the processes it reaped) and
wall time, summed by file, largest CPU first.

    RESIDUAL_PACK_TEST_CPU=/tmp/cpu.jsonl bash .ci/run
    .venv/bin/python benchmarks/suite_cpu.py /tmp/cpu.jsonl [TOP]
"""

import json
import sys
from collections import defaultdict


def main(path: str, top: int = 30) -> None:
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    tests = []
    with open(path, encoding="utf-8") as log:
        for line in log:
            row = json.loads(line)
            name = row["test"].split("::", 1)[0]
            cpu[name] += row["cpu"]
            wall[name] += row["wall"]
            count[name] += 1
            tests.append((row["cpu"], row["wall"], row["test"]))
    total_cpu, total_wall = sum(cpu.values()), sum(wall.values())
    print(f"{len(tests)} tests: {total_cpu:.0f} CPU seconds (their processes and the ones "
          f"they reaped), {total_wall:.0f} s of worker time")
    print(f"\n## by file, the {top} largest CPU: CPU s, share, worker s, tests")
    for name in sorted(cpu, key=cpu.get, reverse=True)[:top]:
        print(f"  {cpu[name]:8.1f}  {100 * cpu[name] / total_cpu:5.1f}%  {wall[name]:8.1f}  "
              f"{count[name]:4d}  {name}")
    print(f"\n## the {top} tests of the most CPU: CPU s, worker s")
    for seconds, spent, test in sorted(tests, reverse=True)[:top]:
        print(f"  {seconds:8.1f}  {spent:8.1f}  {test}")


if __name__ == "__main__":
    main(sys.argv[1], *(int(a) for a in sys.argv[2:3]))
