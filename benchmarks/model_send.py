"""What sending a whole model costs each end of the wire, in one process (no kernel, no
socket traffic): a graded check hands the student's code a fresh model (its every weight a
leaf the kernel has not seen), so the grader names and queues each weight, the message
goes to JSON, and the kernel makes each weight again and reads the model's lists.

    .venv/bin/python benchmarks/model_send.py [--repeat 15] [--layers 2] [--width 16]

Prints the best of the repeats for each part, in milliseconds, and the nodes sent. To
compare two versions of `autograder/kernel/wire.py`, run this file from a checkout of each
(`git worktree add`), alternating, on one machine.
"""

import argparse
import json
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def once(a: socket.socket, b: socket.socket, layers: int, width: int) -> tuple:
    from autograder.grading.remote import Session
    from autograder.kernel.agent import KernelPeer
    from microgpt import GPT

    grader, kernel = Session(a), KernelPeer(b, {})
    model = GPT(seed=0, n_embd=width, n_head=4, vocab_size=27, block_size=16, n_layer=layers)
    t0 = time.process_time()
    message = grader.peer.message(a=[grader.peer.encode(model)])
    t1 = time.process_time()
    text = json.dumps(message, separators=(",", ":"))
    t2 = time.process_time()
    kernel.decode(kernel.take(json.loads(text))["a"][0])
    t3 = time.process_time()
    return t1 - t0, t2 - t1, t3 - t2, len(message["n"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=16)
    args = p.parse_args()
    a, b = socket.socketpair()
    runs = [once(a, b, args.layers, args.width) for _ in range(args.repeat)]
    enc, dumps, take, nodes = (min(r[i] for r in runs) for i in range(4))
    print(f"a GPT of {nodes:,} weights ({args.layers} layers, width {args.width}), best of "
          f"{args.repeat}: grader's encoding {enc * 1e3:.1f} ms, json.dumps "
          f"{dumps * 1e3:.1f} ms, kernel's take and decode {take * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
