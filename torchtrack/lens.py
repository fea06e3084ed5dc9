"""The logit lens position by position: what the trained pre-norm model guesses next after
the embedding and after each block (the chapter's per-position table), and how often a
block changes the guess.

    python -m torchtrack.lens --seeds 100 101 102 [--threads 1] [--out DIR] [--data PATH]
                              [--size full|medium|small]

For each seed the full-size pre-norm model of the transformer study is trained again (the
same model as `torchtrack.seeds`' pre-norm run of that seed: its final validation loss is
recorded beside, to compare), then decoded at every state on 10 validation batches
(`position_stats`) and on one fixed phrase (`phrase_table`). Each seed is saved as
``OUT/seed<k>.json`` with the run that made it (`microgpt.provenance.record`), skipped on
the next call when it exists; ``OUT/lens.md`` is rendered from those files alone. The
criteria the held-out seeds are judged by (L1-L4) are in ``results/heldout/CRITERIA.md``
and counted by ``experiments.heldout``.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from microgpt.provenance import describe, record
from torchtrack import studies
from torchtrack.data import (
    ENV_PATH,
    TINYSHAKESPEARE_CHARS,
    TINYSHAKESPEARE_SHA256,
    DownloadError,
    get_batch,
    split_ids,
    tinyshakespeare,
)
from torchtrack.seeds import SIZES, _shown_command
from torchtrack.transformer import lens_top1, stream_states

__all__ = ["BATCHES", "PHRASE_START", "SHOWN", "position_stats", "phrase_table", "render",
           "main"]

BATCHES = 10  # validation batches of the config's size per seed
PHRASE_START = 1000  # the phrase: one context of validation ids from here
SHOWN = 8  # the phrase's last positions shown


def state_names(n_layers):
    return ["embedding"] + [f"block {k}" for k in range(1, n_layers + 1)]


def position_stats(model, val_ids, seed, config, batches=BATCHES):
    """Per stream state, over `batches` validation batches drawn in turn from a generator
    seeded with `seed`: accuracy (top-1 is the next character), agreement (top-1 is the last
    state's top-1), changed (top-1 differs from the state before; 0 for the embedding) and
    the lens loss (mean cross-entropy of decoding the state)."""
    gen = torch.Generator().manual_seed(seed)
    tops, targets, losses = [], [], []
    with torch.no_grad():
        for _ in range(batches):
            x, y = get_batch(val_ids, config.batch_size, config.block_size, gen)
            # each state decoded once: its top-1 (as `lens_top1`) and its loss
            logits = [model.decode(s).reshape(-1, model.head.out_features)
                      for s in stream_states(model, x)]
            tops.append(torch.stack([lg.argmax(-1) for lg in logits]))
            targets.append(y.reshape(-1))
            losses.append([F.cross_entropy(lg, y.reshape(-1)).item() for lg in logits])
    top, y = torch.cat(tops, dim=1), torch.cat(targets)
    mean = lambda t: t.float().mean().item()  # noqa: E731
    return {
        "states": state_names(config.n_layers),
        "positions": int(y.numel()),
        "accuracy": [mean(t == y) for t in top],
        "agreement": [mean(t == top[-1]) for t in top],
        "changed": [0.0] + [mean(top[k] != top[k - 1]) for k in range(1, len(top))],
        "loss": [sum(col) / len(col) for col in zip(*losses)],
    }


def phrase_table(model, vocab, val_ids, block_size, start=PHRASE_START, shown=SHOWN):
    """The phrase `val_ids[start:start + block_size]` through the model: for its last
    `shown` positions, the character read, the true next character and the top-1 after
    each state. Returns ``{"text": ..., "rows": [{"read", "next", "top1": [...]}, ...]}``."""
    x = val_ids[start:start + block_size][None]
    y = val_ids[start + 1:start + block_size + 1]
    top = lens_top1(model, x)[:, 0]  # (states, time)
    rows = [{"read": vocab.decode([x[0, t]]), "next": vocab.decode([y[t]]),
             "top1": [vocab.decode([top[s, t]]) for s in range(top.shape[0])]}
            for t in range(block_size - shown, block_size)]
    return {"text": vocab.decode(x[0]), "start": start, "rows": rows}


def _char(c):
    return {"\n": "\\n", " ": "␣", "|": "\\|"}.get(c, c)


def render(folder):
    """The text of ``lens.md`` from the JSON files in `folder` alone."""
    results = [json.loads(p.read_text(encoding="utf-8"))
               for p in sorted(Path(folder).glob("seed*.json"), key=lambda p: int(p.stem[4:]))]
    lines = ["# Torch track: the logit lens position by position", "",
             "Ours: this repository's `torchtrack.lens`, the full-size pre-norm model of each "
             "seed. The chapter's example (a 6-block pre-norm model on a Shakespeare phrase: "
             "the embedding decodes to noise, sensible guesses from block 2 on, later blocks "
             "mostly refine) is theirs and is not reproduced here. ␣ is a space, \\n a line "
             "break.", ""]
    for r in results:
        st = r["stats"]
        lines += [f"## Seed {r['seed']} (size {r.get('size', 'full')})", "",
                  f"Final validation loss of the model: {r['final_val']:.4f}. "
                  f"{st['positions']:,} validation positions.", "",
                  "| state | accuracy | agreement with the last block | changed | lens loss |",
                  "|---|---|---|---|---|"]
        for k, name in enumerate(st["states"]):
            lines.append(f"| {name} | {st['accuracy'][k]:.3f} | {st['agreement'][k]:.3f} | "
                         f"{st['changed'][k]:.3f} | {st['loss'][k]:.3f} |")
        ph = r["phrase"]
        lines += ["", f"The phrase (validation ids {ph['start']}-"
                      f"{ph['start'] + len(ph['text']) - 1}): `{ph['text']!r}`", "",
                  "| read | next | " + " | ".join(st["states"]) + " |",
                  "|---|---|" + "---|" * len(st["states"])]
        for row in ph["rows"]:
            lines.append(f"| {_char(row['read'])} | {_char(row['next'])} | "
                         + " | ".join(_char(c) for c in row["top1"]) + " |")
        lines += ["", "Run: " + describe(r["provenance"]), ""]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torchtrack.lens", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--out", default="runs/lens")
    parser.add_argument("--data", default=None, help="path of TinyShakespeare's input.txt")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--size", choices=sorted(SIZES), default="full",
                        help="the study's configuration (the criteria are for full)")
    parser.add_argument("--force", action="store_true", help="rerun saved seeds")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    command = _shown_command(argv, "python -m torchtrack.lens")
    torch.set_num_threads(args.threads)
    try:
        text = tinyshakespeare(args.data or os.environ.get(ENV_PATH) or None)
    except (DownloadError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    vocab, train_ids, val_ids = split_ids(text)
    config = SIZES[args.size][1]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        path = out / f"seed{seed}.json"
        if path.is_file() and not args.force:
            print(f"seed {seed}: kept {path}")
            continue
        prov = record(command=command, seed=seed, size=args.size,
                      data={"name": "TinyShakespeare", "characters": TINYSHAKESPEARE_CHARS,
                            "sha256": TINYSHAKESPEARE_SHA256})
        start = time.perf_counter()
        model, hist = studies.train_variant(train_ids, val_ids, vocab.size, "pre", seed, config)
        model.eval()
        result = {"seed": seed, "size": args.size, "final_val": hist["val"][-1],
                  "stats": position_stats(model, val_ids, seed, config),
                  "phrase": phrase_table(model, vocab, val_ids, config.block_size)}
        prov["wall_seconds"] = round(time.perf_counter() - start, 1)
        result["provenance"] = prov
        path.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n",
                        encoding="utf-8")
        print(f"seed {seed}: final validation loss {result['final_val']:.4f}, "
              f"{prov['wall_seconds']:.0f} s")
    (out / "lens.md").write_text(render(out), encoding="utf-8")
    print(f"saved: {out / 'lens.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
