"""One markdown index of every result file in a folder: what ran, what it showed, what it cost.

    python -m experiments.summarize results/pure_python/search \\
        --out results/pure_python/search/INDEX.md

Each row is read from a JSON result (its config, per-seed numbers, verdicts and provenance),
so the index cannot drift from the runs.
"""

import argparse
import json
from pathlib import Path

from . import lr_stress
from .common import fmt

__all__ = ["summarize", "main"]


def _depth_row(r):
    c = r["config"]
    engine = r.get("engine", "Value")
    if engine != "Value":  # the numpy mirror, or a variant of it: say which
        engine = "mirror" + (" " + engine[engine.index("("):] if "(" in engine else "")
    what = (f"{engine}; w{c['width']}, teacher {c['teacher_depth']}x{c['teacher_hidden']}, "
            f"d_in {c['d_in']}, {c['n_classes']} cl, n {c['n']}, batch {c['batch']}, "
            f"lr {c['lr']}, {c['steps']} steps")
    seeds = []
    for p in r["per_seed"]:
        losses = "/".join(fmt(v["loss"], 2) for v in p["runs"].values())
        seeds.append(f"s{p['seed']} H {fmt(p['entropy'], 2)}: {losses}")
    nets = ", ".join(r["per_seed"][0]["runs"]) if r["per_seed"] else ""
    held = r["holds_on_every_seed"]
    shown = f"(a) {fmt(held['a'])}, (b) {fmt(held['b'])}"
    return what, f"{nets} = " + "; ".join(seeds), shown


def _lr_row(r):
    c = r["config"]
    data = "names" if c["data"] == "census" else Path(c["data"]).name
    what = (f"{c['n_layer']} blocks w{c['n_embd']}, {data}, ctx {c['block_size']}, betas "
            f"{c['beta1']}/{c['beta2']}, final norm {'yes' if c['final_norm'] else 'no'}, "
            f"batch {c['batch']}, {c['steps']} steps")
    seeds = []
    for p in r["per_seed"]:
        vals = ", ".join(f"{n} {fmt(v['val_loss'], 2)}" for n, v in p["runs"].items())
        seeds.append(f"s{p['seed']}: {vals}")
    held, note = r["holds_on_every_seed"], ""
    position = r.get("position_loss")
    if position is None:  # judged by an earlier criterion: judge again by today's
        position = _position_loss(c)
        held = _rejudge(r, position)
        note = " (re-judged by the position-only loss)"
    refs = f"unigram {fmt(r['unigram_loss'], 2)}, position-only {fmt(position, 2)}"
    return what, f"({refs}) " + "; ".join(seeds), f"(c) {fmt(held)}{note}"


def _position_loss(c):
    config = lr_stress.StressConfig(**{k: tuple(map(tuple, v)) if k == "settings" else
                                       tuple(v) if isinstance(v, list) else v
                                       for k, v in c.items()})
    train, val, vocab = lr_stress.load_data(config)
    return lr_stress.position_loss(train, val[: config.val_seqs], config.block_size, vocab)


def _rejudge(r, position):
    lr, warmup = r["config"]["settings"][-1]
    stress = lr_stress.setting_name(lr, warmup)
    verdicts = []
    for p in r["per_seed"]:
        runs = {layout: p["runs"][f"{layout}, {stress}"] for layout in r["config"]["layouts"]}
        verdicts.append(lr_stress.verdict(runs, position))
    return None if any(v is None for v in verdicts) else all(verdicts)


def summarize(folder):
    rows = ["| file | configuration | final loss per seed | holds on every seed | "
            "s per seed | load | command |", "|---|---|---|---|---|---|---|"]
    for path in sorted(Path(folder).glob("*.json")):
        r = json.loads(path.read_text(encoding="utf-8"))
        row = _depth_row(r) if r["experiment"] == "depth_search" else _lr_row(r)
        prov = r["provenance"]
        load = prov.get("load_average") or ["?"]
        rows.append(f"| {path.stem} | {row[0]} | {row[1]} | {row[2]} | "
                    f"{r['seconds_per_seed']} | {load[0]} | `{prov['command']}` |")
    return "\n".join(rows) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m experiments.summarize",
                                description=__doc__.split("\n")[0])
    p.add_argument("folder")
    p.add_argument("--out")
    a = p.parse_args(argv)
    text = summarize(a.folder)
    if a.out:
        Path(a.out).write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
