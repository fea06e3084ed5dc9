"""Rerun the studies for several seeds and print mean +- sd of every result.

    python -m torchtrack.seeds --seeds 0 1 2 [--studies mlp transformer] [--out runs/seeds]
                               [--data PATH] [--size full|medium|small] [--threads 1]

Each (study, seed) is saved as JSON in ``OUT/<study>/seed<k>.json`` with its wall time,
and skipped on the next call when that file exists (``--force`` reruns it), so an
interrupted run resumes. The plots of each seed go to ``OUT/<study>/seed<k>.png`` and the
table to ``OUT/table.md``. TinyShakespeare comes from ``--data``, else ``$TINYSHAKESPEARE``,
else the download cache (downloaded once, checksum checked).
"""

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from . import studies
from .data import ENV_PATH, DownloadError, tinyshakespeare

__all__ = ["PUBLISHED", "PUBLISHED_3SEED", "summarise", "table", "main"]

# the chapter's published values (one seed, a laptop CPU), and its three-seed table
PUBLISHED = {
    "mlp": {
        "plain 3": 0.420, "plain 10": 0.319, "plain 30": 2.208, "highway 30": 0.116,
        "residual 3": 0.649, "residual 10": 0.069, "residual 30": 0.085,
        "grad first/last, plain 30": 376.0, "grad first/last, residual 30": 2.3,
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


def table(study, rows, seconds):
    """A markdown table: each result's mean +- sd over seeds, the values per seed and the
    published ones; then the wall time of the study per seed."""
    seeds = sorted(rows)
    names = list(dict.fromkeys(n for s in seeds for n in rows[s]))
    head = f"| {study} | mean +- sd | " + " | ".join(f"seed {s}" for s in seeds)
    head += " | published (1 seed) | published (3 seeds) |"
    lines = [head, "|" + "---|" * (len(seeds) + 4)]
    for name in names:
        vals = [rows[s][name] for s in seeds if name in rows[s]]
        mean, sd = _mean_sd(vals)
        pub = PUBLISHED.get(study, {}).get(name)
        pub3 = PUBLISHED_3SEED.get(study, {}).get(name)
        cells = [f"{mean:.3f} +- {sd:.3f}" if not math.isnan(sd) else f"{mean:.3f}"]
        cells += [f"{rows[s][name]:.3f}" if name in rows[s] else "" for s in seeds]
        cells.append("" if pub is None else f"{pub:g}")
        cells.append("" if pub3 is None else f"{pub3[0]:.3f} +- {pub3[1]:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    times = ", ".join(f"seed {s}: {seconds[s]:.0f} s" for s in seeds)
    lines.append(f"\nwall time of the {study} study: {times}")
    return "\n".join(lines)


def _save_plots(study, result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import plot

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
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _jsonable(obj):
    if isinstance(obj, dict):
        return {k: _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def run_one(study, seed, mlp_config, lm_config, text, position=0):
    """Run one study for one seed with a progress bar; returns its result with "wall"."""
    start = time.perf_counter()
    if study == "mlp":
        total = mlp_config.steps * len(mlp_config.variants)
        with tqdm(total=total, desc=f"mlp seed {seed}", position=position, leave=True,
                  mininterval=2.0) as bar:
            result = studies.mlp_study(seed, mlp_config, progress=lambda _loss: bar.update())
    else:
        runs = studies.lm_runs(lm_config)
        total = lm_config.steps * len(runs)
        with tqdm(total=total, desc=f"transformer seed {seed}", position=position,
                  leave=True, mininterval=2.0) as bar:
            result = studies.transformer_study(
                text, seed, lm_config, progress=lambda _s, _loss: bar.update(),
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
    args = parser.parse_args(argv)

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

    tables = []
    for study in args.studies:
        folder = out / study
        folder.mkdir(parents=True, exist_ok=True)
        rows, seconds = {}, {}
        for seed in args.seeds:
            path = folder / f"seed{seed}.json"
            if path.is_file() and not args.force:
                result = json.loads(path.read_text())
                if result.get("size") != args.size:
                    raise SystemExit(f"{path} holds a {result.get('size')} run, not "
                                     f"{args.size}; use another --out or --force")
                tqdm.write(f"{study} seed {seed}: loaded {path}")
            else:
                result = run_one(study, seed, mlp_config, lm_config, text)
                result["size"] = args.size
                result["seed"] = seed
                path.write_text(json.dumps(_jsonable(result)))
                if not args.no_plots:
                    _save_plots(study, result, folder / f"seed{seed}.png")
            rows[seed] = summarise(study, result)
            seconds[seed] = result["wall"]
        tables.append(table(study, rows, seconds))
        print("\n" + tables[-1] + "\n", flush=True)
    (out / "table.md").write_text(
        f"size: {args.size}, seeds {args.seeds}, torch threads {args.threads}\n\n"
        + "\n\n".join(tables) + "\n"
    )
    print(f"saved: {out / 'table.md'} and the plots in {out}/<study>/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
