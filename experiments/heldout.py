"""The held-out table: each claim's criteria (results/heldout/CRITERIA.md) counted over the
held-out seeds of the committed runs in results/heldout/, with effect sizes.

    python -m experiments.heldout results/heldout --out results/heldout/RESULTS.md

Read from the JSON files alone, so the table cannot drift from the runs.
"""

import argparse
import json
import statistics
import sys
from pathlib import Path

from microgpt.provenance import describe

from .common import fmt

__all__ = ["depth_counts", "stress_counts", "collapse_counts", "deletion_counts",
           "stream_counts", "highway_counts", "torch_counts", "lens_counts", "merge", "render",
           "main"]

SEARCHED = "0-4"
CRITERIA_COMMIT = "10272ff"


def _held(result):
    return [p for p in result["per_seed"] if p["seed"] >= 100]


def _median_worst(xs, worst=max):
    return f"median {fmt(statistics.median(xs))}, worst {fmt(worst(xs))}"


def highway_counts(result):
    """H1 and H2 (the addendum of results/heldout/CRITERIA.md): highway 30 beside residual."""
    rows = _held(result)
    n = len(rows)
    h1 = h2 = 0
    ratio, cells = [], []
    for p in rows:
        loss = {k: v["loss"] for k, v in p["runs"].items()}
        h1 += loss["highway 30"] < loss["residual 3"]
        h2 += loss["highway 30"] <= 2 * loss["residual 30"]
        ratio.append(loss["highway 30"] / loss["residual 30"])
        cells.append(f"seed {p['seed']}: {fmt(loss['residual 3'])} / {fmt(loss['residual 30'])}"
                     f" / {fmt(loss['highway 30'])}")
    return [("residual 3 / residual 30 / highway 30, per seed", "; ".join(cells)),
            ("H1: highway 30 below residual 3", f"{h1} of {n}"),
            ("H2: highway 30 at most 2 x residual 30", f"{h2} of {n}"),
            ("highway 30 / residual 30", _median_worst(ratio))]


def depth_counts(result):
    """B1-B3, the ratios, the order of 10 and 30, P1 and P2 (results/heldout/CRITERIA.md)."""
    if "highway 30" in result["per_seed"][0]["runs"]:
        return highway_counts(result)
    rows = _held(result)
    n = len(rows)
    r10, r30, b1, b2, b3, swap, p1, p2 = [], [], 0, 0, 0, 0, 0, 0
    for p in rows:
        loss = {k: v["loss"] for k, v in p["runs"].items()}
        a, b = loss["residual 10"] / loss["residual 3"], loss["residual 30"] / loss["residual 3"]
        r10.append(a)
        r30.append(b)
        b1 += a < 1 and b < 1
        b2 += a <= 0.5 and b <= 0.5
        b3 += a <= 0.2 and b <= 0.2
        swap += loss["residual 30"] < loss["residual 10"]
        if "plain 30" in loss:
            p1 += loss["plain 30"] >= 0.9 * p["entropy"] and loss["plain 3"] <= 0.5 * p["entropy"]
            p2 += loss["plain 10"] < loss["plain 3"]
    out = [("B1: residual 10 and 30 below residual 3", f"{b1} of {n}"),
           ("B2: both at most half of residual 3 (the pack's criterion)", f"{b2} of {n}"),
           ("B3: both at most a fifth of residual 3 (notebook 04's wording)", f"{b3} of {n}"),
           ("residual 10 / residual 3", _median_worst(r10)),
           ("residual 30 / residual 3", _median_worst(r30)),
           ("residual 30 below residual 10", f"{swap} of {n}")]
    if "plain 30" in rows[0]["runs"]:
        out += [("P1: plain 30 >= 0.9 H(y) and plain 3 <= 0.5 H(y)", f"{p1} of {n}"),
                ("P2: plain 10 below plain 3 (moderate depth helps)", f"{p2} of {n}")]
    return out


def _c_rows(pairs, P, U):
    """C1-C3 and the margins from (post, pre) validation losses at lr 0.03."""
    n = len(pairs)
    c1 = sum(post >= P and pre < P for post, pre in pairs)
    c2 = sum(post > U - 0.1 and pre < U - 0.3 for post, pre in pairs)
    c3 = sum(post - P >= 0.05 and P - pre >= 0.05 for post, pre in pairs)
    posts, pres = [a for a, _ in pairs], [b for _, b in pairs]
    return [
        (f"references: unigram U {fmt(U)}, position-only P {fmt(P)}", ""),
        ("C1: lr 0.03, post >= P and pre < P (the pack's criterion)", f"{c1} of {n}"),
        ("C2: lr 0.03, post > U - 0.1 and pre < U - 0.3 (the criterion of 432c0d3)",
         f"{c2} of {n}"),
        ("C3: C1 with both margins >= 0.05", f"{c3} of {n}"),
        ("lr 0.03, post - P", _median_worst([a - P for a in posts], min)),
        ("lr 0.03, P - pre", _median_worst([P - b for b in pres], min)),
        ("lr 0.03, post-norm validation loss", f"{fmt(min(posts))} to {fmt(max(posts))}"),
        ("lr 0.03, pre-norm validation loss", f"{fmt(min(pres))} to {fmt(max(pres))}"),
    ]


def stress_counts(result):
    """D1 (and C1-C3 when the run has lr 0.03) from an lr_stress result."""
    rows = _held(result)
    n = len(rows)
    P, U = result["position_loss"], result["unigram_loss"]

    def key(layout, lr):
        return f"{layout}, lr {lr:g}, no warmup"

    if key("none", 0.01) in rows[0]["runs"]:
        none = [p["runs"][key("none", 0.01)]["val_loss"] for p in rows]
        return [(f"references: unigram U {fmt(U)}, position-only P {fmt(P)}", ""),
                ("no residual, 4 blocks, lr 0.01: validation loss",
                 ", ".join(f"seed {p['seed']}: {fmt(v)}" for p, v in zip(rows, none))),
                ("I1: within 0.05 of U", f"{sum(abs(v - U) <= 0.05 for v in none)} of {n}"),
                ("I2: at or above P", f"{sum(v >= P for v in none)} of {n}")]
    out = []
    if key("post", 0.03) in rows[0]["runs"]:
        out += _c_rows([(p["runs"][key("post", 0.03)]["val_loss"],
                         p["runs"][key("pre", 0.03)]["val_loss"]) for p in rows], P, U)
    else:
        out.append((f"references: unigram U {fmt(U)}, position-only P {fmt(P)}", ""))
    post1 = [p["runs"][key("post", 0.01)]["val_loss"] for p in rows]
    pre1 = [p["runs"][key("pre", 0.01)]["val_loss"] for p in rows]
    gap = [a - b for a, b in zip(post1, pre1)]
    out += [
        ("D1: lr 0.01, post < P and pre < P",
         f"{sum(a < P and b < P for a, b in zip(post1, pre1))} of {n}"),
        ("lr 0.01, post-norm / pre-norm validation loss",
         f"{fmt(min(post1))} to {fmt(max(post1))} / {fmt(min(pre1))} to {fmt(max(pre1))}"),
        ("lr 0.01, pre-norm ahead of post-norm", f"{sum(g > 0 for g in gap)} of {n}"),
        ("lr 0.01, post - pre", f"median {fmt(statistics.median(gap))}, from "
         f"{fmt(min(gap))} to {fmt(max(gap))}"),
    ]
    return out


def collapse_counts(result):
    """C1-C3 from the retrained lr 0.03 runs' validation losses, and C4."""
    rows = _held(result)
    n = len(rows)
    out = _c_rows([(p["runs"]["post"]["val_loss"], p["runs"]["pre"]["val_loss"])
                   for p in rows], result["position_loss"], result["unigram_loss"])
    full = sum(p["runs"]["post"]["head_input_cosine"] >= 0.99
               and p["runs"]["post"]["kl_from_mean"] <= 0.01 for p in rows)
    cos = [p["runs"]["post"]["head_input_cosine"] for p in rows]
    kl = [p["runs"]["post"]["kl_from_mean"] for p in rows]
    pre_cos = [p["runs"]["pre"]["head_input_cosine"] for p in rows]
    return out + [
        ("C4: post-norm collapsed completely (cosine >= 0.99, KL <= 0.01)", f"{full} of {n}"),
        ("post-norm cosine between positions", f"{fmt(min(cos))} to {fmt(max(cos))}"),
        ("post-norm KL from its mean prediction", f"{fmt(min(kl))} to {fmt(max(kl))}"),
        ("pre-norm cosine between positions", f"{fmt(min(pre_cos))} to {fmt(max(pre_cos))}")]


def deletion_counts(result):
    rows = _held(result)
    n = len(rows)
    g1 = sum(sum(v > p["entropy"] for v in p["plain"]["deleted"]) >= 8 for p in rows)
    g2 = sum(all(v < p["entropy"] for v in p["residual"]["deleted"]) for p in rows)
    above = [sum(v > p["entropy"] for v in p["plain"]["deleted"]) for p in rows]
    worst = [max(p["residual"]["deleted"]) / p["entropy"] for p in rows]
    return [("G1: plain 10, one layer out, above H(y) for >= 8 of 10 layers", f"{g1} of {n}"),
            ("plain 10: layers whose deletion puts it above H(y)",
             f"{min(above)} to {max(above)} of 10"),
            ("G2: residual 10, every single deletion below H(y)", f"{g2} of {n}"),
            ("residual 10: worst deletion / H(y)", _median_worst(worst))]


def stream_counts(result):
    rows = _held(result)
    n = len(rows)
    keys = [("E1_pre_lens_falls", "E1: pre-norm lens loss falls at every block"),
            ("E1_post_lens_falls", "E1: post-norm lens loss falls at every block"),
            ("E2", "E2: pre-norm, the first block gives >= 75% of the lens drop"),
            ("E3", "E3: pre-norm top-1 accuracy rises >= 5 points from block 1 to 3"),
            ("F1", "F1: pre-norm stream RMS rises at every block"),
            ("F2", "F2: post-norm stream RMS within 0.01 of 1 at every depth"),
            ("F3_pre", "F3: pre-norm cosine with the embedding falls at every block"),
            ("F3_post", "F3: post-norm cosine with the embedding falls at every block")]
    out = [(text, f"{sum(bool(p['verdicts'][k]) for p in rows)} of {n}") for k, text in keys]
    lens = [[p["runs"]["pre"]["lens"][k] for p in rows] for k in range(4)]
    top1 = [[p["runs"]["pre"]["top1_next"][k] for p in rows] for k in range(4)]
    final = [[p["runs"]["pre"]["top1_final"][k] for p in rows] for k in range(4)]
    rms = [[p["runs"]["pre"]["rms"][k] for p in rows] for k in range(4)]
    share = [p["verdicts"]["E2_first_block_share"] for p in rows]
    out += [("pre-norm lens loss, k = 0..3 (median)",
             " -> ".join(fmt(statistics.median(x), 3) for x in lens)),
            ("pre-norm first block's share of the lens drop", _median_worst(share, min)),
            ("pre-norm top-1 = next letter, k = 0..3 (median; range)",
             " / ".join(f"{statistics.median(x):.0%}" for x in top1)
             + f"; {min(min(x) for x in top1[1:]):.0%} to {max(max(x) for x in top1[1:]):.0%}"
             " after block 1 on"),
            ("pre-norm top-1 = final guess, k = 0..3 (median)",
             " / ".join(f"{statistics.median(x):.0%}" for x in final)),
            ("pre-norm stream RMS, k = 0..3 (median)",
             " / ".join(fmt(statistics.median(x)) for x in rms))]
    return out


TORCH_CRITERIA = "the addendum on the torch track, committed at 1d3059d"


def _count_row(label, seeds, test, per_seed):
    """(label, "hits of n (per seed)") for `test` over `seeds` ({seed: result})."""
    hits = sum(bool(test(seeds[s])) for s in seeds)
    shown = "; ".join(f"seed {s}: {per_seed(seeds[s])}" for s in sorted(seeds))
    return label, f"{hits} of {len(seeds)} ({shown})" if seeds else "no runs"


def _criteria_section(title, seeds, criteria, note, rows):
    """The head of a torch-track section: its held-out seeds, criteria and count table."""
    return [title, "",
            f"Held-out seeds: {', '.join(map(str, seeds))} ({len(seeds)}); criteria: "
            f"{criteria} (before these runs) in CRITERIA.md. {note}", "",
            "| criterion | held-out result |", "|---|---|",
            *(f"| {a} | {b} |" for a, b in rows), ""]


def torch_counts(runs):
    """T1-T9 (results/heldout/CRITERIA.md, the torch track's addendum) over the held-out
    seeds of `runs`: {study: {seed: result of torchtrack.seeds}}."""
    mlp = {s: r for s, r in runs.get("mlp", {}).items() if s >= 100}
    lm = {s: r for s, r in runs.get("transformer", {}).items() if s >= 100}
    out = []

    def count(label, seeds, test, per_seed):
        out.append(_count_row(label, seeds, test, per_seed))

    def ratio(r, kind):
        g = r["grad_norms"][kind]
        return g[0] / g[-1]

    f = lambda r, name: r["final"][name]  # noqa: E731
    count("T1: plain 30 > plain 3", mlp, lambda r: f(r, "plain 30") > f(r, "plain 3"),
          lambda r: f"{fmt(f(r, 'plain 3'))} / {fmt(f(r, 'plain 30'))}")
    count("T2: residual 10 and 30 < residual 3", mlp,
          lambda r: max(f(r, "residual 10"), f(r, "residual 30")) < f(r, "residual 3"),
          lambda r: " / ".join(fmt(f(r, f"residual {d}")) for d in (3, 10, 30)))
    count("T3: highway 30 < residual 3 and <= 2 x residual 30", mlp,
          lambda r: f(r, "highway 30") < f(r, "residual 3")
          and f(r, "highway 30") <= 2 * f(r, "residual 30"),
          lambda r: f"highway 30 {fmt(f(r, 'highway 30'))}, residual 30 "
                    f"{fmt(f(r, 'residual 30'))}")
    count("T4: gradient first/last: plain 30 >= 10, residual 30 <= 5", mlp,
          lambda r: ratio(r, "plain") >= 10 and ratio(r, "residual") <= 5,
          lambda r: f"{ratio(r, 'plain'):.1f} / {ratio(r, 'residual'):.2f}")
    count("T5: no residual >= pre-norm + 1.0", lm,
          lambda r: f(r, "no residual") >= f(r, "pre-norm") + 1.0,
          lambda r: f"{fmt(f(r, 'no residual'))} / {fmt(f(r, 'pre-norm'))}")
    hi_post, hi_pre = "post-norm, lr 3e-2 no warmup", "pre-norm, lr 3e-2 no warmup"
    cured = "post-norm, lr 3e-2 with warmup"
    count("T6: lr 3e-2 no warmup: post-norm within 0.05 of no residual, pre-norm within "
          "0.1 of pre-norm at 3e-3", lm,
          lambda r: abs(f(r, hi_post) - f(r, "no residual")) <= 0.05
          and abs(f(r, hi_pre) - f(r, "pre-norm")) <= 0.1,
          lambda r: f"post {fmt(f(r, hi_post))}, pre {fmt(f(r, hi_pre))}")
    with_cure = {s: r for s, r in lm.items() if cured in r["final"]}
    count("T7a: post-norm lr 3e-2 with warmup >= 1.0 below without", with_cure,
          lambda r: f(r, cured) <= f(r, hi_post) - 1.0,
          lambda r: f"{fmt(f(r, cured))} against {fmt(f(r, hi_post))}")
    count("T7b: post-norm lr 3e-2 with warmup within 0.1 of post-norm at 3e-3", with_cure,
          lambda r: abs(f(r, cured) - f(r, "post-norm")) <= 0.1,
          lambda r: f"{fmt(f(r, cured))} against {fmt(f(r, 'post-norm'))}")
    count("T8: lr 3e-3 with warmup: post-norm < pre-norm", lm,
          lambda r: f(r, "post-norm") < f(r, "pre-norm"),
          lambda r: f"post - pre = {f(r, 'post-norm') - f(r, 'pre-norm'):+.3f}")
    count("T9: pre-norm lens at the embedding >= 1.0 above the last block", lm,
          lambda r: r["probes"]["pre"]["lens"][0] >= r["probes"]["pre"]["lens"][-1] + 1.0,
          lambda r: f"{fmt(r['probes']['pre']['lens'][0])} -> "
                    f"{fmt(r['probes']['pre']['lens'][-1])}")
    return out


LENS_CRITERIA = "the addendum on the per-position lens, committed at 4f3fab2"


def lens_counts(results):
    """L1-L4 (results/heldout/CRITERIA.md, the per-position lens addendum) over the
    held-out seeds of `results`: {seed: result of torchtrack.lens}."""
    held = {s: r["stats"] for s, r in results.items() if s >= 100}
    out = []

    def count(label, test, per_seed):
        out.append(_count_row(label, held, test, per_seed))

    later = lambda st: range(3, len(st["states"]))  # noqa: E731  blocks 3 to the last
    count("L1: accuracy at the embedding <= half the last block's",
          lambda st: st["accuracy"][0] <= st["accuracy"][-1] / 2,
          lambda st: f"{st['accuracy'][0]:.3f} against {st['accuracy'][-1]:.3f}")
    count("L2: after block 2, agreement >= 0.5 and accuracy >= 0.75 x the last block's",
          lambda st: st["agreement"][2] >= 0.5
          and st["accuracy"][2] >= 0.75 * st["accuracy"][-1],
          lambda st: f"agreement {st['agreement'][2]:.3f}, accuracy "
                     f"{st['accuracy'][2]:.3f} against {st['accuracy'][-1]:.3f}")
    count("L3: blocks 3 on each change the top-1 at fewer than a third of positions",
          lambda st: all(st["changed"][k] < 1 / 3 for k in later(st)),
          lambda st: " / ".join(f"{st['changed'][k]:.3f}" for k in later(st)))
    count("L4: the lens loss falls at each of blocks 3 on",
          lambda st: all(st["loss"][k] < st["loss"][k - 1] for k in later(st)),
          lambda st: " -> ".join(f"{x:.3f}" for x in st["loss"][2:]))
    return out


def load_lens(folder):
    """{seed: result} of `torchtrack.lens` runs under `folder`/torchtrack/lens."""
    return {r["seed"]: r for r in (json.loads(p.read_text(encoding="utf-8")) for p in
                                   sorted(Path(folder, "torchtrack", "lens").glob("seed*.json")))}


def load_torch(folder):
    """{study: {seed: result}} of the torch track's runs under `folder`/torchtrack."""
    found = {}
    for path in sorted(Path(folder, "torchtrack").glob("*/seed*.json")):
        if path.parent.name == "lens":  # `load_lens`
            continue
        result = json.loads(path.read_text(encoding="utf-8"))
        found.setdefault(path.parent.name, {})[result["seed"]] = result
    return found


def render_torch(runs):
    """The torch track's section of the table ([] without runs)."""
    if not runs:
        return []
    seeds = sorted({s for r in runs.values() for s in r if s >= 100})
    lines = _criteria_section(
        "## `torchtrack/` (torchtrack.seeds, torch, full size)", seeds, TORCH_CRITERIA,
        "Searched (seen) seeds 0-2 are in `results/torchtrack/`, without the warmup run.",
        torch_counts(runs))
    for study in sorted(runs):
        for seed in sorted(runs[study]):
            lines.append(f"Run ({study}, seed {seed}): "
                         + describe(runs[study][seed]["provenance"]))
    return lines + [""]


def render_lens(results):
    """The per-position lens's section of the table ([] without runs)."""
    if not results:
        return []
    seeds = sorted(s for s in results if s >= 100)
    lines = _criteria_section(
        "## `torchtrack/lens/` (torchtrack.lens, torch, full size, pre-norm)", seeds,
        LENS_CRITERIA, "Per seed, its tables and the phrase: `torchtrack/lens/lens.md`.",
        lens_counts(results))
    lines += [f"Run (lens, seed {s}): " + describe(results[s]["provenance"])
              for s in sorted(results)]
    return lines + [""]


COUNTERS = {"depth_search": depth_counts, "lr_stress": stress_counts,
            "collapse_probe": collapse_counts, "deletion_probe": deletion_counts,
            "stream_probe": stream_counts}


def merge(results):
    """One result per experiment and configuration: the per-seed rows of several files (runs
    of the same command on other seeds) together, with every file's provenance."""
    merged = {}
    for name, result in results:
        k = (result["experiment"], json.dumps(result.get("config"), sort_keys=True),
             result.get("engine"))
        if k not in merged:
            merged[k] = (name, {**result, "per_seed": list(result["per_seed"]),
                                "seeds": list(result["seeds"]),
                                "provenances": [result["provenance"]]})
        else:
            first = merged[k][1]
            first["per_seed"] += result["per_seed"]
            first["seeds"] += result["seeds"]
            first["provenances"].append(result["provenance"])
            merged[k] = (merged[k][0] + " + " + name, first)
    return list(merged.values())


def render(results):
    lines = ["# Held-out confirmation: each claim counted on seeds no search used", "",
             f"Criteria: `results/heldout/CRITERIA.md`, committed at {CRITERIA_COMMIT} before "
             f"every run below. Searched seeds: {SEARCHED} (every search and committed run "
             "before issue 29). Held out: 100-119. Rendered from the JSON files by "
             "`python -m experiments.heldout results/heldout --out "
             "results/heldout/RESULTS.md`.", ""]
    for name, result in merge(results):
        seeds = [s for s in result["seeds"] if s >= 100]
        other = [s for s in result["seeds"] if s < 100]
        engine = result.get("engine", "Value")
        engine = "`Value`" if engine == "Value" else engine
        names = " + ".join(f"`{n}`" for n in name.split(" + "))
        lines += [f"## {names} ({result['experiment']}, {engine})", "",
                  f"Held-out seeds: {', '.join(map(str, seeds))} ({len(seeds)})"
                  + (f"; also run, as a check against the committed run: seed(s) "
                     f"{', '.join(map(str, other))} (searched, not counted)" if other else "")
                  + ".", "", "| criterion | held-out result |", "|---|---|"]
        lines += [f"| {a} | {b} |" for a, b in COUNTERS[result["experiment"]](result)]
        lines += [""] + ["Run: " + describe(prov) for prov in result["provenances"]] + [""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    results = []
    for path in sorted(Path(args.folder).glob("*.json")):
        result = json.loads(path.read_text(encoding="utf-8"))
        if result.get("experiment") in COUNTERS:
            results.append((path.name, result))
    text = (render(results) + "\n".join(render_torch(load_torch(args.folder)))
            + "\n".join(render_lens(load_lens(args.folder))))
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    sys.stdout.write(text)
    return text


if __name__ == "__main__":
    main()
