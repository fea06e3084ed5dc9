"""What a student waits for when they press Validate on a finished notebook: the student's
Validate (`python -m autograder.student.validate`, the subprocess the student's JupyterLab
runs for the Validate button) on a copy of each solved notebook, one at a time.

    .venv/bin/python benchmarks/validate_time.py [NOTEBOOK ...]

NOTEBOOK is an assignment folder name (default: every assignment with a notebook in
`solutions/`; the torch ones only when torch is installed). Prints one line per notebook:
the wall time of the whole Validate (kernel start included) and whether it passed, then
the run's provenance (`microgpt.provenance.record`) at the start and the end. Quote the
figures from the committed output in `results/benchmarks/`, not from memory.
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TORCH_NOTEBOOKS = ("08_torch_mlp", "09_torch_transformer")


def validate(folder: Path) -> tuple[float, dict]:
    """(wall seconds, Validate's JSON answer) for the notebook of `folder`, run on a copy."""
    [path] = sorted(folder.glob("*.ipynb"))
    with tempfile.TemporaryDirectory(prefix="validate-time-") as tmp:
        work = Path(tmp) / folder.name
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "autograder.student.validate",
                               str(work / path.name)], cwd=work, capture_output=True,
                              text=True, env=dict(os.environ))
        wall = time.perf_counter() - start
    lines = done.stdout.strip().splitlines()
    try:
        return wall, json.loads(lines[-1])
    except (IndexError, ValueError):
        return wall, {"success": False, "error": done.stderr[-500:]}


def main(argv: list[str] | None = None) -> int:
    from microgpt.provenance import record

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("notebooks", nargs="*")
    args = p.parse_args(argv)
    names = args.notebooks or sorted(d.name for d in (ROOT / "solutions").iterdir()
                                     if d.is_dir() and any(d.glob("*.ipynb")))
    if importlib.util.find_spec("torch") is None:
        names = [n for n in names if n not in TORCH_NOTEBOOKS]
    command = "validate_time.py " + " ".join(args.notebooks)
    print("# provenance at the start:", json.dumps(record(command.strip())), flush=True)
    rows = []
    for name in names:
        wall, answer = validate(ROOT / "solutions" / name)
        value = answer.get("value")
        passed = answer.get("success") and isinstance(value, dict) and not any(
            value.get(k) for k in ("changed", "failed", "mismatch"))
        verdict = "passed" if passed else f"did not pass: {json.dumps(answer)[:300]}"
        load = os.getloadavg()[0]
        print(f"{name}: Validate {wall:.1f} s, {verdict}, load {load:.1f}", flush=True)
        rows.append((name, wall))
    print("\n| notebook | Validate (s) |\n|---|---:|")
    for name, wall in rows:
        print(f"| {name} | {wall:.0f} |")
    print("# provenance at the end:", json.dumps(record(command.strip())), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
