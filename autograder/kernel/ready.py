"""For the course's given cells (experiments, probes, plots): one line when a cell cannot
run yet, instead of a traceback through a stub or a NameError left by a cell that stopped.

An untouched notebook runs to the end under Run All (every cell that fails on the stub is
tagged `raises-exception`, so that every graded test reports). Without these lines the
given cells after the first stub failed each in its own way: an experiment trained its
plain nets for twenty seconds before it reached the stub, then raised NotImplementedError
through it; the plot below it raised NameError (`results` was never made) after it had
drawn an empty figure; a table read a dict the experiment had half filled (KeyError).
With them, each such cell stops at its first line and says what it waits for:

    needs_answer("Task 4.1", residual_layer)      # before the experiment trains anything
    needs_run("the depth study above", "results")  # before the plot draws anything
    needs_run("the training cells above", "models['pre-norm']")

Both raise `NotAnswered`, which a notebook shows as its one line. An answered task and a
finished cell make them do nothing, so a solved notebook runs as before.

Once a task is answered, its code can still raise when an experiment runs it (lists joined
with `+`, a float where a `Value` belongs), deep inside the library's training loop. For the
rest of a cell that called `needs_answer`, such an error shows as a test shows it
(`crash`): the error, this cell's line, the student's own lines, the library's line that
raised and the hint of a known slip, not the frames of the library in between. An error
that does not pass through the student's code shows as IPython shows it.
"""

import ast
import sys
from typing import TYPE_CHECKING, Any, Iterator  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel import crash
from autograder.kernel.witness import CheckFailed, NotAnswered

if TYPE_CHECKING:
    from types import CodeType, TracebackType

__all__ = ["needs_answer", "needs_run", "holds_stub", "STUB_TEXT"]

# the text of nbgrader's code stub in this course (`ClearSolutions.code_stub` in the
# course's nbgrader_config.py; a test keeps the two equal)
STUB_TEXT = "write your solution here"


def _code_objects(obj: object) -> "Iterator[CodeType]":
    """The code of a function, or of each method of a class (what a task asks for)."""
    if isinstance(obj, type):
        for member in vars(obj).values():
            member = getattr(member, "__func__", member)  # staticmethod, classmethod
            if hasattr(member, "__code__"):
                yield member.__code__
        return
    obj = getattr(obj, "__func__", obj)  # a bound method
    if hasattr(obj, "__code__"):
        yield obj.__code__


def holds_stub(obj: object) -> bool:
    """Whether the function or class `obj` still holds nbgrader's stub: it raises
    NotImplementedError with the stub's text (a student who kept the stub's raise below
    their own lines has not finished either)."""
    return any("NotImplementedError" in code.co_names and STUB_TEXT in code.co_consts
               for code in _code_objects(obj))


def needs_answer(task_id: str, *answers: object) -> None:
    """Stop the cell (one line) while one of `answers`, the functions or classes that
    `task_id` asks for and the cell runs, still holds the stub."""
    waiting = [getattr(a, "__name__", repr(a)) for a in answers if holds_stub(a)]
    if waiting:
        one = len(waiting) == 1
        raise NotAnswered(
            f"This cell runs {' and '.join(waiting)}, which still "
            f"{'raises' if one else 'raise'} NotImplementedError: do {task_id} first, run "
            f"{'its cell' if len(answers) == 1 else 'their cells'}, then this one."
        ) from None
    _explain_crashes()


# the shell whose error display this module handles, and whether the running cell asked
_HANDLER: dict[str, Any] = {"shell": None, "armed": False}


def _explain_crashes() -> None:
    """Until the running cell ends, show an error raised in the student's code as a test
    shows it. Outside IPython (a script), nothing."""
    shell = crash._shell()
    if shell is None or not hasattr(shell, "set_custom_exc"):
        return
    if _HANDLER["shell"] is not shell:
        shell.set_custom_exc((Exception,), _show_error)
        shell.events.register("post_run_cell", _disarm)
        _HANDLER["shell"] = shell
    _HANDLER["armed"] = True


def _disarm(*args: object) -> None:
    _HANDLER["armed"] = False


def _show_error(shell: Any, etype: type[BaseException], value: BaseException,
                tb: "TracebackType | None", tb_offset: int | None = None) -> None:
    """IPython's handler of a cell's error: `crash`'s rendering when the cell asked for it
    and the student's code was running, else IPython's own."""
    if _HANDLER["armed"] and not isinstance(value, (CheckFailed, SyntaxError)) \
            and not hasattr(value, "_render_traceback_"):
        inner = tb
        while inner is not None and not crash.cell_name(inner.tb_frame.f_code.co_filename):
            inner = inner.tb_next  # IPython's own frames above the cell's
        if inner is not None and crash.answer_frames(crash.frames_of(inner)):
            crash.explain(value, inner, first=", this cell")
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset, running_compiled_code=True)


def _lookup(expression: str, namespace: dict[str, Any]) -> Any:
    """The value `expression` names in `namespace`: a name, or a name with one key, such as
    "models['pre-norm']". Raises KeyError or NameError when it is not there."""
    tree = ast.parse(expression, mode="eval").body
    if isinstance(tree, ast.Name):
        if tree.id not in namespace:
            raise NameError(tree.id)
        return namespace[tree.id]
    if isinstance(tree, ast.Subscript) and isinstance(tree.value, ast.Name):
        container = _lookup(tree.value.id, namespace)
        return container[ast.literal_eval(tree.slice)]
    raise ValueError(f"needs_run reads a name or a name with one key, not {expression!r}")


def needs_run(made_by: str, *expressions: str) -> None:
    """Stop the cell (one line) while one of `expressions` (a name, or a name with one key:
    "results", "models['pre-norm']"), which `made_by` makes, is not in the notebook yet."""
    namespace = sys._getframe(1).f_globals
    missing = []
    for expression in expressions:
        try:
            _lookup(expression, namespace)
        except (NameError, KeyError, IndexError, TypeError):
            missing.append(expression)
    if missing:
        verb = "comes" if len(missing) == 1 else "come"
        raise NotAnswered(
            f"Nothing to show yet: {' and '.join(missing)} {verb} from {made_by}, which has "
            f"not finished (it stops while a task it uses is not done). Run it again once "
            f"it runs through, then this cell."
        ) from None
