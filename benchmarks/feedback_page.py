"""What one feedback page costs: nbgrader's `generate_feedback` for one graded submission
(the solution of an assignment, autograded once without a sandbox), with the course's
exporter (`feedback.FeedbackPage`: its templates compiled once per process) and with
nbconvert's plain HTMLExporter (every page compiles them again, as before), alternated
in one process on the same submission. The pages must be the same.

    .venv/bin/python benchmarks/feedback_page.py [-n ROUNDS] [ASSIGNMENT ...]

Prints, per assignment, the median CPU seconds of a page of each kind and their ratio.
"""

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def measure(assignment: str, rounds: int) -> None:
    from nbconvert.exporters import HTMLExporter

    from autograder.authoring.madeup import filled_in
    from autograder.grading.course import (
        EXERCISES,
        SOURCE,
        WorkCourse,
        notebook_paths,
        private_jupyter_dirs,
        read_notebook,
    )
    from autograder.grading.feedback import FeedbackPage
    from autograder.grading.student import Grader

    [release] = notebook_paths(ROOT / EXERCISES / assignment)
    [source] = notebook_paths(ROOT / SOURCE / assignment)
    solved = filled_in(read_notebook(release), read_notebook(source))
    tmp = Path(tempfile.mkdtemp(prefix="feedback-page-"))
    with private_jupyter_dirs(tmp / "home"):
        work = WorkCourse(ROOT, tmp / "course", [assignment])
        grader = Grader(work, assignment)  # no sandbox: only the page is measured
        grader.submit("s", {release.stem: solved})
        grader.grade("s", feedback=False)
        api = work.api()
        pages = work.path("feedback", "s", assignment)
        cpu: dict[str, list[float]] = {"HTMLExporter": [], "FeedbackPage": []}
        made: dict[str, str] = {}
        for _ in range(rounds):
            for name, cls in (("HTMLExporter", HTMLExporter), ("FeedbackPage", FeedbackPage)):
                api.config.GenerateFeedback.exporter_class = cls
                started = time.process_time()
                done = api.generate_feedback(assignment, "s", force=True)
                cpu[name].append(time.process_time() - started)
                assert done["success"], done
                made[name] = "".join(p.read_text(encoding="utf-8")
                                     for p in sorted(pages.glob("*.html")))
        same = made["HTMLExporter"] == made["FeedbackPage"]
    plain, ours = (statistics.median(cpu[k]) for k in ("HTMLExporter", "FeedbackPage"))
    print(f"{assignment}: CPU per page, median of {rounds}: HTMLExporter {plain:.3f} s, "
          f"FeedbackPage {ours:.3f} s, ratio {plain / ours:.2f}x; the same page: {same}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--rounds", type=int, default=7)
    parser.add_argument("assignments", nargs="*",
                        default=["01_residual_stack", "05_gpt_residual_adds"])
    args = parser.parse_args()
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print(f"# python {sys.version.split()[0]}, {when}")
    for assignment in args.assignments:
        measure(assignment, args.rounds)


if __name__ == "__main__":
    main()
