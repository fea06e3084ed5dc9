"""`kernel/policy.py`: the model answers a graded kernel switches off."""


import pytest

from autograder.kernel import policy
from autograder.kernel.checks import (
    CheckFailed,
)

# ---------------------------------------------------------------- guards and words


def test_a_switched_off_answer_still_serves_the_library(monkeypatch):
    from microgpt import GPT

    original = GPT.__dict__["block"]
    try:
        assert "microgpt.model.GPT.block" in policy.switch_off("05_gpt_residual_adds")
        model = GPT(seed=0)
        model.loss([0, 1, 2, 0])  # the library's own call of block: allowed
        namespace = {"model": model}
        with pytest.raises(policy.AnswerSwitchedOff, match="Tasks 5.1 to 5.3"):
            exec(compile("model.block(model.embed(1, 0), 0, model.new_cache()[0])",
                         "/tmp/ipykernel_1/123.py", "exec"), namespace)
    finally:
        GPT.block = original


def test_a_switched_off_answer_handed_to_the_gpt_checks_stays_switched_off():
    from autograder.kernel import gptchecks
    from microgpt import GPT

    original = GPT.__dict__["block"]
    try:
        policy.switch_off("05_gpt_residual_adds")
        # handed to BlockGPT or run_block, microgpt's block is still called from code the
        # guard takes for a notebook's: it launders nothing
        laundered = gptchecks.BlockGPT(GPT.block, seed=0)
        with pytest.raises(policy.AnswerSwitchedOff):
            laundered.block(laundered.embed(1, 0), 0, laundered.new_cache()[0])
        with pytest.raises(policy.AnswerSwitchedOff):
            gptchecks.run_block(GPT.block, GPT(seed=0), [GPT(seed=0).embed(1, 0)], 0)
        # the checks' own reference still runs (a scratch cell's check in a graded kernel)
        gptchecks.check_block_values(
            lambda model, x, layer, cache: _pre_norm_block(model, x, layer, cache), "pre")
        # and the model handed to a block has no block of its own
        with pytest.raises(CheckFailed, match="model.block"):
            gptchecks.check_block_values(
                lambda model, x, layer, cache: model.block(x, layer, cache), "pre")
    finally:
        GPT.block = original


def _pre_norm_block(model, x, layer, cache):
    from microgpt import rmsnorm

    a = model.attention(rmsnorm(x), layer, cache)
    x = [xi + ai for xi, ai in zip(x, a)]
    m = model.mlp(rmsnorm(x), layer)
    return [xi + mi for xi, mi in zip(x, m)]
