"""Experiments behind the pack's pure-Python configurations (not part of the installed pack).

Each module is a command, run from the repository root:

    python -m experiments.depth_search --seeds 0 1 2 --out results/pure_python/depth.json
    python -m experiments.lr_stress --seeds 0 1 2 --out results/pure_python/lr_stress.json

and writes a JSON result carrying `microgpt.provenance.record(...)` beside a markdown
table rendered from that JSON (same stem, `.md`).
"""
