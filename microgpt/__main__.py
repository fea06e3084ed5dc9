"""``python -m microgpt``: train the tiny GPT on a names list, then print samples.

With no options this is microgpt's run: one layer, pre-norm residuals, 1,000 steps of
Adam on one name per step, then 20 samples at temperature 0.5 — on the census names,
which need no network. ``--help`` lists the options.
"""

import argparse
import sys

from .data import DownloadError, load_docs
from .model import GPT, LAYOUTS
from .tokenizer import CharTokenizer
from .train import sample, train


def _positive_int(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def _non_negative_int(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be at least 0, not {n}")
    return n


def _positive_float(text: str) -> float:
    x = float(text)
    if not x > 0:
        raise argparse.ArgumentTypeError(f"must be positive, not {text}")
    return x


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m microgpt",
        description="Train the tiny GPT (pure-Python autograd) on a names list and print samples.",
    )
    p.add_argument("--data", default="census", metavar="census|canonical|PATH",
                   help="census: US census first names shipped with the `names` package "
                        "(offline, the default); canonical: microgpt's names.txt "
                        "(downloaded once, checksum-verified, cached); or the path of a "
                        "text file with one document per line")
    p.add_argument("--steps", type=_positive_int, default=1000,
                   help="training steps, one document each (default: %(default)s)")
    p.add_argument("--seed", type=int, default=42,
                   help="seed for the initial weights, the data order and the samples "
                        "(default: %(default)s)")
    p.add_argument("--layout", choices=LAYOUTS, default="pre",
                   help="residual layout of each block (default: %(default)s)")
    p.add_argument("--n-layer", type=_positive_int, default=1,
                   help="number of transformer blocks (default: %(default)s)")
    p.add_argument("--final-norm", action="store_true",
                   help="apply an RMSNorm before the output head")
    p.add_argument("--samples", type=_non_negative_int, default=20,
                   help="how many samples to print (default: %(default)s)")
    p.add_argument("--temperature", type=_positive_float, default=0.5,
                   help="sampling temperature (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


def _window_mean(values: list[float]) -> float:
    return sum(values) / len(values)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        docs = load_docs(args.data)
    except (DownloadError, FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not docs:
        print(f"error: no documents in {args.data!r}", file=sys.stderr)
        return 2

    tok = CharTokenizer(docs)
    model = GPT(vocab_size=tok.vocab_size, n_layer=args.n_layer, layout=args.layout,
                final_norm=args.final_norm, seed=args.seed)
    print(f"num docs: {len(docs)}")
    print(f"vocab size: {tok.vocab_size}")
    print(f"num params: {len(model.parameters())}")
    print(f"model: {args.n_layer} layer(s), layout {args.layout!r}, "
          f"final norm {'on' if args.final_norm else 'off'}; {args.steps} steps, seed {args.seed}",
          flush=True)

    history = train(model, docs, tok, steps=args.steps, seed=args.seed,
                    progress=not args.no_progress)

    k = min(100, len(history))
    n = len(history)
    print(f"mean loss, steps 1-{k}: {_window_mean(history[:k]):.4f}")
    if n > k:
        print(f"mean loss, steps {n - k + 1}-{n}: {_window_mean(history[-k:]):.4f}")

    if args.samples:
        print(f"--- samples (temperature {args.temperature}) ---")
        names = sample(model, tok, n=args.samples, temperature=args.temperature, seed=args.seed)
        for i, name in enumerate(names, 1):
            print(f"sample {i:2d}: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
