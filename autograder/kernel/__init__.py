"""What a student's kernel loads: the only package of `autograder` a graded kernel gets.

`checks` (what test cells call, and students too), `gptchecks` and `torchchecks` (the GPT
and torch-track checks), `probes` (what a test hands to student code), `compare` (the
verdict and its words, shared with the grader's judge), `witness` (a check's observation
compared at once, or handed to the grader's recorder at grading time), `diagnosis` with
its generated table `fingerprints` (a failing check named after the known mistake it
looks like), `policy` (what the grader and a graded kernel agree on), `gradekernel` (the
graded kernel), `agent` (its end of a graded test: it answers the grader's calls), `wire`
(what crosses between them, and how either end makes a Value again) and `stored` (generated:
the numbers the visible tests of assignments 2-4 compare with, made from the model answers,
which this package never holds).

Nothing here imports the rest of `autograder` (`tests/unit/test_layout.py` checks it).
"""

from autograder.kernel import runaway as _runaway

# in a student's kernel: each cell's printed output capped, the cells queued behind an
# interrupt stopped (`runaway`); nothing anywhere else
_runaway.install()
