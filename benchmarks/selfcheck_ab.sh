#!/bin/bash
# The self-check of one assignment on BASELINE's autograder/ and on HEAD's, alternated on
# one machine, each with its CPU (user and system of the whole process tree):
#
#     benchmarks/selfcheck_ab.sh BASELINE ASSIGNMENT [ROUNDS] [OVERLAY]
#
# OVERLAY (optional): a folder put first on PYTHONPATH for the BASELINE runs only, holding
# the versions of packages BASELINE was installed with (`pip install --target OVERLAY
# --no-deps PACKAGE==VERSION`). It checks out BASELINE's autograder/ into the working tree
# for each "before" run and HEAD's back after it, so it refuses to start when autograder/
# holds uncommitted changes.
set -euo pipefail
cd "$(dirname "$0")/.."
base=$1; assignment=$2; rounds=${3:-2}; overlay=${4:-}
if ! git diff --quiet HEAD -- autograder; then
    echo "autograder/ has uncommitted changes: commit or stash them first" >&2
    exit 2
fi
trap 'git checkout -q HEAD -- autograder' EXIT
work=$(mktemp -d)
run() {  # label, then the environment's extra assignments
    local label=$1; shift
    rm -rf "$work/course"
    env "$@" /usr/bin/time -f "$label $assignment: %e s wall, %U s user, %S s system, load $(cut -d' ' -f1 /proc/loadavg)" \
        .venv/bin/residual-pack selfcheck "$assignment" -j 2 --workdir "$work/course" \
        > "$work/log" 2> "$work/err" || true
    tail -1 "$work/err"
    grep "^time:\|self-check" "$work/log" | tr '\n' ' '; echo
}
for _ in $(seq 1 "$rounds"); do
    git checkout -q "$base" -- autograder
    run "before ($(git rev-parse --short "$base"))" ${overlay:+PYTHONPATH=$overlay}
    git checkout -q HEAD -- autograder
    run "after  ($(git rev-parse --short HEAD))"
done
rm -rf "$work"
