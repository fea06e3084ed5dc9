"""Rerun the studies for several seeds and print mean +- sd of every result.

    python -m torchtrack.seeds --seeds 0 1 2 [--studies mlp transformer] [--out runs/seeds]
                               [--data PATH] [--size full|medium|small] [--threads 1]

Each (study, seed) is saved as JSON in ``OUT/<study>/seed<k>.json`` with the run that made
it (`microgpt.provenance.record`: command, commit, versions, threads, CPU, load, date, wall
time) and is skipped on the next call when that file exists (``--force`` reruns it), so
an interrupted run resumes. The JSON is kept compact: the final numbers at full
precision, the per-step training losses as means over windows of `CURVE_WINDOW` steps.
The plots of each seed go to ``OUT/<study>/seed<k>.png``. The table, ``OUT/table.md``, is
rendered from the JSON files in OUT alone (`render`), so a second call with the same
arguments only redraws it. TinyShakespeare comes from ``--data``, else
``$TINYSHAKESPEARE``, else the download cache (downloaded once, checksum checked).
"""

import argparse
import io
import json
import math
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from microgpt.provenance import describe, record
from torchtrack import studies
from torchtrack.data import (
    ENV_PATH,
    TINYSHAKESPEARE_CHARS,
    TINYSHAKESPEARE_SHA256,
    DownloadError,
    tinyshakespeare,
)

__all__ = ["PUBLISHED", "PUBLISHED_3SEED", "BRIEF_REFERENCE", "CURVE_WINDOW", "RESULTS",
           "INSTALLED", "summarise", "table", "load_results", "render", "committed_folder",
           "committed_table", "main"]

# the committed seed runs, in the checkout this package runs from
RESULTS = Path(__file__).resolve().parent.parent / "results" / "torchtrack"
# their JSON files where a wheel of the pack installs them (pyproject.toml's data-files, and
# the student wheel's): notebooks 08 and 09 print their table outside a checkout too
INSTALLED = Path(sys.prefix) / "share" / "microgpt-residuals" / "seed-runs"

CURVE_WINDOW = 10  # the saved training curves are means over this many steps
PLOT_DPI = 72  # small PNGs (with a 64-colour palette): the results folder is committed

# the chapter's published values (one seed, a laptop CPU), and its three-seed table
PUBLISHED = {
    "mlp": {
        "plain 3": 0.420, "plain 10": 0.319, "plain 30": 2.208, "highway 30": 0.116,
        "residual 3": 0.649, "residual 10": 0.069, "residual 30": 0.085,
    },
    "transformer": {
        "no residual": 3.368, "post-norm": 1.951, "pre-norm": 1.985,
        "post-norm, lr 3e-2 no warmup": 3.368, "pre-norm, lr 3e-2 no warmup": 1.974,
        "logit lens pre-norm, embedding": 4.04, "logit lens pre-norm, last block": 2.04,
    },
}
PUBLISHED_3SEED = {
    "transformer": {
        "pre-norm": (1.989, 0.004), "post-norm": (1.971, 0.020), "no residual": (3.356, 0.011),
    },
}
# the course brief's full-size reference for the gradient ratio (curriculum.md, assignment 4):
# not in the chapter's published tables, so the table marks it as the brief's
BRIEF_REFERENCE = {
    "mlp": {"grad first/last, plain 30": 376.0, "grad first/last, residual 30": 2.3},
}
SIZES = {
    "full": (studies.FULL_MLP, studies.FULL_LM),
    "medium": (studies.MEDIUM_MLP, studies.MEDIUM_LM),
    "small": (studies.GRADING_MLP, studies.GRADING_LM),
}


def summarise(study, result):
    """The numbers of one study's result that go in the table: name -> float."""
    row = dict(result["final"])
    if study == "mlp":
        for kind in ("plain", "residual"):
            g = result["grad_norms"][kind]
            row[f"grad first/last, {kind} {len(g)}"] = g[0] / g[-1]
    else:
        for layout, name in (("pre", "pre-norm"), ("post", "post-norm")):
            p = result["probes"].get(layout)
            if p:
                row[f"logit lens {name}, embedding"] = p["lens"][0]
                row[f"logit lens {name}, last block"] = p["lens"][-1]
                row[f"stream RMS {name}, last block"] = p["rms"][-1]
    return row


def _mean_sd(values):
    mean = statistics.fmean(values)
    sd = statistics.stdev(values) if len(values) > 1 else float("nan")
    return mean, sd


def _num(value):
    """Three decimals for losses; one for large ratios (hundreds)."""
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"


def _reference(study, name):
    pub = PUBLISHED.get(study, {}).get(name)
    if pub is not None:
        return f"{pub:g}"
    brief = BRIEF_REFERENCE.get(study, {}).get(name)
    return "" if brief is None else f"{brief:g} (course brief)"


def table(study, rows, seconds, provenance=None):
    """A markdown table: each result's mean +- sd over our seeds and its value per seed,
    beside the chapter's published values (labelled as the chapter's); then the wall time
    of each seed and, given `provenance` (seed -> `record()`), the run behind each seed."""
    seeds = sorted(rows)
    names = list(dict.fromkeys(n for s in seeds for n in rows[s]))
    head = f"| {study} | ours: mean +- sd | " + " | ".join(f"ours: seed {s}" for s in seeds)
    head += " | the chapter's (published, 1 seed) | the chapter's (published, 3 seeds) |"
    lines = [head, "|" + "---|" * (len(seeds) + 4)]
    for name in names:
        vals = [rows[s][name] for s in seeds if name in rows[s]]
        mean, sd = _mean_sd(vals)
        pub3 = PUBLISHED_3SEED.get(study, {}).get(name)
        cells = [f"{_num(mean)} +- {_num(sd)}" if not math.isnan(sd) else _num(mean)]
        cells += [_num(rows[s][name]) if name in rows[s] else "" for s in seeds]
        cells.append(_reference(study, name))
        cells.append("" if pub3 is None else f"{pub3[0]:.3f} +- {pub3[1]:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    times = ", ".join(f"seed {s}: {seconds[s]:.0f} s" for s in seeds)
    lines.append(f"\nwall time of the {study} study: {times}")
    for s in seeds:
        if provenance and provenance.get(s):
            lines.append(f"\n- seed {s}: {describe(provenance[s])}")
    return "\n".join(lines)


def load_results(out):
    """Every saved result under `out`: ``{study: {seed: result}}``, studies in the
    order of the protocol, seeds ascending."""
    out = Path(out)
    found = {}
    for study in ("mlp", "transformer"):
        paths = sorted((out / study).glob("seed*.json"), key=lambda p: int(p.stem[4:]))
        if paths:
            found[study] = {int(p.stem[4:]): json.loads(p.read_text()) for p in paths}
    return found


def render(out):
    """The text of ``OUT/table.md``, from the JSON files under `out` alone."""
    results = load_results(out)
    parts = []
    for study, by_seed in results.items():
        sizes = {r.get("size") for r in by_seed.values()}
        if len(sizes) != 1:
            raise ValueError(f"{out}/{study} mixes sizes {sorted(map(str, sizes))}")
        rows = {s: summarise(study, r) for s, r in by_seed.items()}
        seconds = {s: r["wall"] for s, r in by_seed.items()}
        provenance = {s: r.get("provenance") for s, r in by_seed.items()}
        threads = sorted({str((p or {}).get("threads", "?")) for p in provenance.values()})
        parts.append(f"## {study}: size {sizes.pop()}, seeds {sorted(by_seed)}, "
                     f"torch threads {', '.join(threads)}\n\n"
                     + table(study, rows, seconds, provenance))
    notes = (
        "Ours: this repository's `torchtrack` code, one run per seed (JSON beside this "
        "file). The chapter's: the published values of the chapter the course follows "
        "(one seed on a laptop CPU; its three-seed table for the transformer), given for "
        "comparison, not measured here. (course brief): the course brief's full-size "
        "reference, not the chapter's table.\n"
    )
    return "# Torch track: seed runs\n\n" + notes + "\n" + "\n\n".join(parts) + "\n"


def committed_folder():
    """Where the committed seed runs are: ``results/torchtrack`` of this checkout, else
    what a wheel of the pack installed (`INSTALLED`), else None (the grading sandbox)."""
    for folder in (RESULTS, INSTALLED):
        if any(folder.glob("*/seed*.json")):
            return folder
    return None


def committed_table(study, folder=None):
    """The table of the committed seed runs of `study` (rendered from the JSON files under
    `folder`, by default `committed_folder()`), or None when they are not there."""
    folder = folder or committed_folder()
    by_seed = load_results(folder).get(study) if folder else None
    if not by_seed:
        return None
    sizes = ", ".join(sorted({str(r.get("size")) for r in by_seed.values()}))
    head = (f"The committed seed runs of the {study} study (results/torchtrack/{study}/, "
            f"size {sizes}, seeds {', '.join(map(str, sorted(by_seed)))}):\n\n")
    return head + table(study, {s: summarise(study, r) for s, r in by_seed.items()},
                        {s: r["wall"] for s, r in by_seed.items()},
                        {s: r.get("provenance") for s, r in by_seed.items()})


def _save_plots(study, result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from torchtrack import plot

    if study == "mlp":
        fig, axes = plt.subplots(1, 2, figsize=(13, 4.2))
        plot.plot_curves(result["curves"], "MLP study: training loss", axes[0])
        plot.plot_grad_norms(result["grad_norms"], ax=axes[1])
    else:
        fig, axes = plt.subplots(1, 4, figsize=(22, 4.2))
        plot.plot_histories(result["histories"], "Transformer study: validation loss",
                            ax=axes[0])
        plot.plot_stream(result["probes"], "rms", "Stream RMS per block", axes[1])
        plot.plot_stream(result["probes"], "cosine", "Cosine with the embedding", axes[2])
        plot.plot_logit_lens(result["probes"], ax=axes[3])
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, dpi=PLOT_DPI)
    plt.close(fig)
    # a 64-colour palette keeps a line plot legible at a quarter of the bytes
    from PIL import Image

    buffer.seek(0)
    Image.open(buffer).convert("RGB").quantize(colors=64).save(path, optimize=True)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def _window_means(values, k=CURVE_WINDOW):
    """Means of consecutive windows of `k` values (the last one may be shorter), to 4
    decimals."""
    return [round(statistics.fmean(values[i:i + k]), 4) for i in range(0, len(values), k)]


def compact(study, result):
    """`result` as saved: the per-step curves become means over `CURVE_WINDOW` steps and
    the learning rate per step (given by the protocol) is dropped; every number the table
    uses is kept as it is."""
    out = _jsonable(result)
    if study == "mlp":
        out["curves"] = {n: _window_means(c) for n, c in out["curves"].items()}
        out["curve_window"] = CURVE_WINDOW
    else:
        for hist in out["histories"].values():
            hist["train"] = _window_means(hist["train"])
            hist.pop("lr", None)
        out["train_window"] = CURVE_WINDOW
    return out


def _shown_command(argv, prog="python -m torchtrack.seeds"):
    """The command as typed, with a --data path cut to its file name (a machine path says
    nothing to a reader; the data's checksum is recorded beside it)."""
    shown, hide = [], False
    for a in argv:
        if hide:
            shown.append(f".../{Path(a).name}")
            hide = False
            continue
        if a.startswith("--data="):
            a = f"--data=.../{Path(a.split('=', 1)[1]).name}"
        hide = a == "--data"
        shown.append(a)
    return " ".join([prog, *map(shlex.quote, shown)])


def _load():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def run_one(study, seed, mlp_config, lm_config, text, position=0, cure=False):
    """Run one study for one seed with a progress bar; returns its result with "wall"."""
    start = time.perf_counter()
    if study == "mlp":
        total = mlp_config.steps * len(mlp_config.variants)
        with tqdm(total=total, desc=f"mlp seed {seed}", position=position, leave=True,
                  mininterval=2.0) as bar:
            result = studies.mlp_study(seed, mlp_config, progress=lambda _loss: bar.update())
    else:
        runs = studies.lm_runs(lm_config, cure)
        total = lm_config.steps * len(runs)
        with tqdm(total=total, desc=f"transformer seed {seed}", position=position,
                  leave=True, mininterval=2.0) as bar:
            result = studies.transformer_study(
                text, seed, lm_config, cure=cure, progress=lambda _s, _loss: bar.update(),
                on_run=lambda name: bar.set_postfix_str(name),
            )
    result["wall"] = time.perf_counter() - start
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchtrack.seeds", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--studies", nargs="+", choices=["mlp", "transformer"],
                        default=["mlp", "transformer"])
    parser.add_argument("--out", default="runs/seeds", help="where results and plots go")
    parser.add_argument("--data", default=None, help="path of TinyShakespeare's input.txt")
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1 is fastest for these small models)")
    parser.add_argument("--force", action="store_true", help="rerun saved (study, seed) pairs")
    parser.add_argument("--no-plots", action="store_true")
    parser.add_argument("--warmup-cure", action="store_true",
                        help="add post-norm at lr 3e-2 with warmup to the transformer study")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    command = _shown_command(argv)

    torch.set_num_threads(args.threads)
    mlp_config, lm_config = SIZES[args.size]
    out = Path(args.out)
    text = None
    if "transformer" in args.studies:
        try:
            text = tinyshakespeare(args.data or os.environ.get(ENV_PATH) or None)
        except (DownloadError, FileNotFoundError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    data = {
        "mlp": {"name": "synthetic teacher task (torchtrack.mlp.teacher_task)"},
        "transformer": {"name": "TinyShakespeare", "characters": TINYSHAKESPEARE_CHARS,
                        "sha256": TINYSHAKESPEARE_SHA256},
    }

    for study in args.studies:
        folder = out / study
        folder.mkdir(parents=True, exist_ok=True)
        rows, seconds, provenance = {}, {}, {}
        for seed in args.seeds:
            path = folder / f"seed{seed}.json"
            if path.is_file() and not args.force:
                result = json.loads(path.read_text())
                if result.get("size") != args.size:
                    raise SystemExit(f"{path} holds a {result.get('size')} run, not "
                                     f"{args.size}; use another --out or --force")
                tqdm.write(f"{study} seed {seed}: loaded {path}")
            else:
                # recorded before the run: the commit and tree state of the code imported now
                prov = record(command=command, study=study, seed=seed, size=args.size,
                              data=data[study])
                result = run_one(study, seed, mlp_config, lm_config, text,
                                 cure=args.warmup_cure)
                prov["wall_seconds"] = round(result["wall"], 1)
                prov["load_average_end"] = _load()
                result["size"] = args.size
                result["seed"] = seed
                result["provenance"] = prov
                if not args.no_plots:
                    _save_plots(study, result, folder / f"seed{seed}.png")
                result = compact(study, result)
                path.write_text(json.dumps(result, indent=1) + "\n")
            rows[seed] = summarise(study, result)
            seconds[seed] = result["wall"]
            provenance[seed] = result.get("provenance")
        print("\n" + table(study, rows, seconds, provenance) + "\n", flush=True)
    (out / "table.md").write_text(render(out))
    print(f"saved: {out / 'table.md'} (every result in {out}) and the plots in {out}/<study>/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
