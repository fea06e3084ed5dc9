"""Your own answers to an earlier assignment, for the library to build on until the model
answers are released.

Three notebooks build on an earlier assignment: 03 and 04 train deep nets with the forward
pass of Task 2.2 (`deepnet.logits`), and 06 trains tiny GPTs made of the blocks of Tasks
5.1 to 5.3 (`GPT.block`). A student's install of the pack holds no model answer: the
library's function looks for the released answer, which the instructor hands out after the
earlier assignment's due date. Until it is installed, a notebook's first cells hand the
library the student's own answer instead:

    use_my_answers("02_degradation", logits=mlp_logits)
    use_my_answers("05_gpt_residual_adds", pre=pre_norm_block, post=post_norm_block,
                   none=no_residual_block)

Once the released answer is installed it is used and the student's is not (it is the one
every student's later notebook is graded with). Where the library holds its answers (an
instructor's install, the grader), this changes nothing. Grading never uses a student's
own earlier answer: the grader's library has its own.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

__all__ = ["use_my_answers", "own_answer", "WHAT"]

# assignment -> (what the library needs, {keyword: (the student's function, its task)})
WHAT: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {
    "02_degradation": ("deepnet.logits, the deep net's forward pass (Task 2.2)",
                       {"logits": ("mlp_logits", "Task 2.2")}),
    "05_gpt_residual_adds": ("GPT.block, the transformer block (Tasks 5.1 to 5.3)",
                             {"pre": ("pre_norm_block", "Task 5.1"),
                              "post": ("post_norm_block", "Task 5.2"),
                              "none": ("no_residual_block", "Task 5.3")}),
}

_OWN: dict[str, dict[str, Callable[..., Any]]] = {}
_STUB_TEXT = "write your solution here"  # the course's nbgrader code stub


def _library_holds_answers() -> bool:
    """An instructor's or the grader's install: the library has its answers in place (a
    student's wheel has `microgpt.solved` instead)."""
    try:
        return importlib.util.find_spec("microgpt.solved") is None
    except (ValueError, ModuleNotFoundError):  # a module in sys.modules without a spec
        return False


def _released(assignment: str) -> bool:
    try:
        return importlib.util.find_spec(f"microgpt.solved.a{assignment}") is not None
    except (ValueError, ModuleNotFoundError):
        return False


def _is_stub(function: Any) -> bool:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and "NotImplementedError" in code.co_names \
        and _STUB_TEXT in code.co_consts


def use_my_answers(assignment: str, **functions: Callable[..., Any] | None) -> None:
    """Hand the library your own answers to `assignment` (keywords as in `WHAT`), to use
    until its model answer is released. Prints what the library will use."""
    if assignment not in WHAT:
        raise ValueError(f"no later notebook builds on {assignment!r}: one of {sorted(WHAT)}")
    needed, kinds = WHAT[assignment]
    unknown = sorted(set(functions) - set(kinds))
    if unknown:
        raise TypeError(f"use_my_answers({assignment!r}) takes {', '.join(kinds)}, "
                        f"not {', '.join(unknown)}")
    if _library_holds_answers():
        message = (f"This install's library has its own {needed}: it is used, and your "
                   f"answer is not needed here.")
    elif _released(assignment):
        message = (f"The released answer of {assignment} is installed: the library uses it "
                   f"for {needed}, not yours.")
    else:
        given, missing = {}, []
        for kind, (name, task) in kinds.items():
            function = functions.get(kind)
            if function is None:
                missing.append(f"{name} ({task}): not pasted above yet")
            elif not callable(function):
                raise TypeError(f"{kind}= takes your function {name}, not a "
                                f"{type(function).__name__}")
            elif _is_stub(function):
                missing.append(f"{name} ({task}): still raises NotImplementedError")
            else:
                given[kind] = function
        _OWN[assignment] = given
        if given and not missing:
            message = (f"Until {assignment}'s answer is released, the library uses yours "
                       f"for {needed}.")
        elif given:
            message = (f"Until {assignment}'s answer is released, the library uses yours "
                       f"where it can; the cells that need the rest wait: "
                       f"{'; '.join(missing)}.")
        else:
            message = (f"The cells that use {needed} wait for your answer or the released "
                       f"one: {'; '.join(missing)}.")
    print(message)


def own_answer(assignment: str, name: str) -> Callable[..., Any] | None:
    """The function the library runs in place of its released answer `name` (as
    `microgpt.solved` names it: "logits", "GPT_block"), made from the student's own
    answers to `assignment`, or None when they gave none."""
    given = _OWN.get(assignment)
    if not given:
        return None
    if name == "logits":
        return given.get("logits")
    if name == "GPT_block":
        def block(model: Any, x: Any, layer: int, cache: Any) -> Any:
            layout = model.config.layout
            function = given.get(layout)
            if function is None:
                kind_name, task = WHAT[assignment][1][layout]
                raise LookupError(
                    f"this GPT uses the {layout!r} layout, whose block is your {kind_name} "
                    f"({task}): hand it to use_my_answers({assignment!r}, {layout}=...) in "
                    f"this notebook's first cells, or wait for the released answer")
            return function(model, x, layer, cache)
        return block
    return None
