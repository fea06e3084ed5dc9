"""Known mistakes that look alike only once rounded (`kernel/diagnosis.py`,
`authoring/fingerprints.py`): a failing check names the mistake it saw, never another one
whose numbers merely round to the same fingerprint.

In 01, forgetting the add (the plain stack) passes back a gradient of 1e-20, a constant
output one of 0: both round to the same fingerprint, and the plain stack's message used to
add "Or: the output is a constant number..." The observations here are logged by the real
checks, as in `residual-pack fingerprints`, and the table is made by its `table_of`.
"""

import json
from pathlib import Path

import pytest

from autograder.answers.mutants import Mutant
from autograder.authoring import fingerprints as generator
from autograder.kernel import compare, diagnosis
from autograder.kernel.checks import CheckFailed, check_value

COURSE = Path(__file__).resolve().parents[2]
WHAT = "d residual_stack(x, depth=20)/dx at x = 1.0"
PLAIN = Mutant(name="plain", cell="c", source="", loses=(), hint="the plain stack.")
CONSTANT = Mutant(name="constant", cell="c", source="", loses=(), hint="a constant output.")
ALSO_CONSTANT = Mutant(name="constant too", cell="c", source="", loses=(),
                       hint="a constant again.")


def _outcome(mutant, grad, tmp_path, monkeypatch):
    """The outcome of `mutant` whose gradient test saw `grad`: the check's log, as a
    kernel of `residual-pack fingerprints` writes it."""
    log = tmp_path / f"{mutant.name}.jsonl"
    monkeypatch.setenv(diagnosis.RECORD_VARIABLE, str(log))
    with pytest.raises(CheckFailed) as caught:
        check_value(grad, 1.1**20, what=WHAT, expected_text="1.1**20")
    monkeypatch.delenv(diagnosis.RECORD_VARIABLE)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    run = generator.Run(cells={"gradient": ("failed", f"CheckFailed: {caught.value}")},
                        records=records)
    return generator._outcome(mutant, run)


@pytest.fixture
def table(tmp_path, monkeypatch):
    outcomes = [_outcome(PLAIN, 0.1**20, tmp_path, monkeypatch),
                _outcome(CONSTANT, 0.0, tmp_path, monkeypatch),
                _outcome(ALSO_CONSTANT, 0.0, tmp_path, monkeypatch)]
    made = generator.table_of(COURSE, "01_residual_stack", outcomes)
    monkeypatch.setattr(diagnosis, "_KNOWN", diagnosis._index({"01_residual_stack": made}))
    return made, outcomes


def _message(grad):
    return compare.compare("number", {"number": grad, "is_value": False},
                           {"number": 1.1**20}, {"what": WHAT, "expected_text": "1.1**20"})


def test_a_gradient_of_1e_20_names_the_plain_stack_only(table):
    _, (plain, constant, _) = table
    assert plain.keys == constant.keys  # 1e-20 and 0 round alike: why this test exists
    assert _message(0.1**20) == (
        f"{WHAT}: expected 6.7275 (1.1**20), got 1e-20. "
        "This looks like a known mistake: the plain stack.")


def test_a_gradient_of_0_names_the_constant_mistakes_not_the_plain_stack(table):
    # two mistakes that observed exactly the same are both named, as before
    assert _message(0.0) == (
        f"{WHAT}: expected 6.7275 (1.1**20), got 0. "
        "This looks like a known mistake: a constant again. Or: a constant output.")


def test_the_shared_fingerprint_is_not_in_the_table(table):
    made, (plain, _, _) = table
    assert plain.keys["gradient"] not in made["known"]
    assert sorted(made["known"].values()) == [[0, 1], [2]]  # hints sorted: a..., a..., the...
