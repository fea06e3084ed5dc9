"""The student release's `residual-pack` command: `progress` only (the instructor's
`residual-pack`, `autograder.cli`, has the grader's commands too).

    residual-pack progress [FOLDER] [-a ASSIGNMENT]   every task: passed, failing, not started
    python -m autograder.student progress ...          the same
"""

import argparse
import sys
from pathlib import Path

from autograder.student.progress import (
    add_arguments,
    format_table,
    no_folder,
    not_found,
    progress,
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="residual-pack",
                                description="A student's tools for the residual pack.")
    sub = p.add_subparsers(dest="command", required=True)
    pr = sub.add_parser(
        "progress", help="run your notebooks' visible tests: passed, failing, not started",
        description="Run each assignment notebook under FOLDER (default: assignments/ "
                    "here) as saved, in a fresh kernel at the graded sizes, and print per "
                    "task: passed, failing (with the message), not started or not run.")
    add_arguments(pr)  # FOLDER: assignments/ here
    args = p.parse_args(argv)
    folder = Path(args.folder or "assignments")
    if not folder.is_dir():
        print(f"residual-pack: {no_folder(folder, default=args.folder is None)}",
              file=sys.stderr)
        return 2
    if (why := not_found(folder, args.assignments)) is not None:
        print(f"residual-pack: {why}", file=sys.stderr)
        return 2
    rows = progress(folder, args.assignments or None, timeout=args.timeout,
                    jobs=args.jobs, fresh=args.fresh)
    if not rows:
        print(f"residual-pack: no assignment notebooks with graded tests under {folder}",
              file=sys.stderr)
        return 2
    print(format_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
