#!/bin/bash
# graded_test_cost.py on the code at BASELINE and at HEAD, alternated on one machine, so
# that both see the same load (the load averages are printed beside each line):
#
#     benchmarks/graded_test_cost_ab.sh BASELINE ASSIGNMENT...
#
# It checks out BASELINE's autograder/, microgpt/ and source/ (the test cells) into the
# working tree for each "before" run and HEAD's back after it, so it refuses to start when
# those folders hold uncommitted changes. Compare the CPU figures of neighbouring lines.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1; shift
if ! git diff --quiet HEAD -- autograder microgpt source; then
    echo "autograder/, microgpt/ or source/ has uncommitted changes: commit or stash them first" >&2
    exit 2
fi
trap 'git checkout -q HEAD -- autograder microgpt source' EXIT
run() { .venv/bin/python benchmarks/graded_test_cost.py "$1" 2>&1 | grep "wall"; }
echo "# baseline $(git rev-parse --short "$base"), HEAD $(git rev-parse --short HEAD), $(date -u +%FT%TZ), $(nproc) cores, $(.venv/bin/python -V)"
for a in "$@"; do
    git checkout -q "$base" -- autograder microgpt source
    echo "before (load $(cut -d' ' -f1-3 /proc/loadavg)) :: $(run "$a")"
    git checkout -q HEAD -- autograder microgpt source
    echo "after  (load $(cut -d' ' -f1-3 /proc/loadavg)) :: $(run "$a")"
done
