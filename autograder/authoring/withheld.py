"""The model answers in the library, held back from a student's wheel until each due date.

`microgpt` and `torchtrack` hold working answers to some tasks (`answerless.SWITCHED_OFF`:
`deepnet.logits` answers Task 2.2, `GPT.block` Tasks 5.1 to 5.3, ...), because later
notebooks build on them (03 and 04 train nets with `logits`, 06 trains GPTs made of
`GPT.block`) and the graded runs and studies of the torch track use them. The student
wheel (`release.build`) gets the library with each of those function bodies replaced by a
call to `<package>.solved.released(...)`, which looks for the answer in
`<package>/solved/a<assignment>.py`. That module is not in the student wheel:
it comes in a wheel of its own per assignment (`residual-pack student-release --solved
ASSIGNMENT`), which the instructor hands out after that assignment's due date. Until then
a call says so, naming the task (`NotReleased`), and the notebooks of the assignment
itself run on the student's own answers.

The released module holds the answers' functions as the library has them (a method
becomes a function named `Class_method`), in a module whose globals are those of the
library module they come from, so their bodies run unchanged.
"""

import ast
import textwrap
from collections.abc import Mapping

from autograder.grading.answerless import SWITCHED_OFF, answer_label, find_function

__all__ = ["SOLVED", "withhold", "solved_module", "solved_path", "solved_assignments",
           "SOLVED_INIT", "is_stub"]

SOLVED = "solved"  # <package>.solved: where released answers go


def _entries(module: str) -> list[tuple[str, str | None, str, str]]:
    """[(assignment, owner, name, task)] of the answers in `module`."""
    return [(assignment, owner, name, task)
            for assignment, entries in SWITCHED_OFF.items()
            for mod, owner, name, task, _ in entries if mod == module]


def solved_assignments(package: str) -> list[str]:
    """The assignments with answers in `package` (microgpt, torchtrack)."""
    return sorted({a for a, entries in SWITCHED_OFF.items()
                   for e in entries if e[0].split(".")[0] == package})


def solved_path(package: str, assignment: str) -> str:
    """The released module's path inside a wheel: `<package>/solved/a<assignment>.py`."""
    return f"{package}/{SOLVED}/a{assignment}.py"


def _function_name(owner: str | None, name: str) -> str:
    return f"{owner}_{name}" if owner else name


def _find(tree: ast.Module, owner: str | None,
          name: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    node = find_function(tree, owner, name)
    if node is None:
        raise LookupError(f"{owner + '.' if owner else ''}{name} is not in the source")
    return node


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """`node`'s statements after its docstring (a body of a docstring alone keeps it)."""
    body = node.body
    if (len(body) > 1 and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        return body[1:]
    return body


def _call_arguments(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    a = node.args
    parts = [x.arg for x in a.posonlyargs + a.args]
    if a.vararg:
        parts.append("*" + a.vararg.arg)
    parts += [f"{x.arg}={x.arg}" for x in a.kwonlyargs]
    if a.kwarg:
        parts.append("**" + a.kwarg.arg)
    return ", ".join(parts)


def withhold(source: str, module: str) -> str:
    """`source` (the text of `module`) with every answer's body replaced by a call to the
    released answer (its docstring and signature kept)."""
    entries = _entries(module)
    if not entries:
        return source
    package = module.split(".")[0]
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []
    for assignment, owner, name, task in entries:
        node = _find(tree, owner, name)
        first = _body(node)[0].lineno - 1
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        label = f"{owner or module.split('.')[-1]}.{name}"  # GPT.block, deepnet.logits
        call = f"released({assignment!r}, {label!r}, {task!r}, {_function_name(owner, name)!r})"
        edits.append((first, node.end_lineno, [
            f"{indent}from {package}.{SOLVED} import released\n",
            "\n",
            f"{indent}return {call}({_call_arguments(node)})\n"]))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last] = new
    out = "".join(lines)
    ast.parse(out)
    return out


def is_stub(source: str, module: str, owner: str | None, name: str) -> bool:
    """Whether the function in `source` is the call `withhold` writes (and nothing more)."""
    body = _body(_find(ast.parse(source), owner, name))
    return (len(body) == 2 and isinstance(body[0], ast.ImportFrom)
            and body[0].module == f"{module.split('.')[0]}.{SOLVED}"
            and isinstance(body[1], ast.Return) and isinstance(body[1].value, ast.Call)
            and isinstance(body[1].value.func, ast.Call)
            and getattr(body[1].value.func.func, "id", None) == "released")


def solved_module(sources: Mapping[str, str], package: str, assignment: str) -> str:
    """The text of `<package>/solved/a<assignment>.py`: the answers of `assignment` in
    `package`, from `sources` ({module: its text in the library as the instructor has it})."""
    modules = sorted({m for m, *_ in SWITCHED_OFF[assignment] if m.split(".")[0] == package})
    if len(modules) != 1:
        raise LookupError(f"{assignment}'s answers in {package} must come from one module, "
                          f"not {modules}")
    module = modules[0]
    tree = ast.parse(sources[module])
    lines = sources[module].splitlines(keepends=True)
    tasks = []
    functions = []
    for mod, owner, name, task, _ in SWITCHED_OFF[assignment]:
        if mod != module:
            continue
        node = _find(tree, owner, name)
        start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        text = textwrap.dedent("".join(lines[start:node.end_lineno]))
        text = text.replace(f"def {name}(", f"def {_function_name(owner, name)}(", 1)
        functions.append(text)
        tasks.append(f"{answer_label(module, owner, name)} ({task})")
    head = (f'"""The model answers of {assignment}, released after its due date: '
            f'{"; ".join(tasks)}.\n\n'
            f"The functions run with the globals of {module}, where the library has them.\n"
            '"""\n\n'
            "import importlib as _importlib\n\n"
            f"globals().update({{k: v for k, v in vars(_importlib.import_module({module!r}))"
            f".items()\n                 if not k.startswith('__')}})\n")
    return head + "".join("\n\n" + f for f in functions)


SOLVED_INIT = '''\
"""The model answers that the library builds on, released after each assignment's due date.

This install's library holds no answer to a task. Where it uses one (the forward pass of
a deep net from Assignment 2 in 03 and 04, the GPT blocks of Assignment 5 in 06, the
library's own layers and blocks in the torch track), it looks here, in `a<assignment>.py`:
a wheel of its own for each assignment, which your instructor hands out after that
assignment's due date. Until then the call says which.
"""

import importlib

__all__ = ["NotReleased", "released"]


class NotReleased(RuntimeError):
    """An earlier assignment's answer, used before it was released."""

    not_yet_released = True  # the checks show it as it is, not as a mistake in an answer

    def _render_traceback_(self):  # in a notebook: the message, without frames
        return [f"NotReleased: {self}"]


def _own(assignment, name):
    """The student's own answer handed over with `<package>.earlier.use_my_answers`, or
    None (a package without that module, or no answer given)."""
    try:
        earlier = importlib.import_module(__name__.rpartition(".")[0] + ".earlier")
    except ModuleNotFoundError:
        return None
    return earlier.own_answer(assignment, name)


def released(assignment, label, task, name):
    """The released function `name` of `assignment`; until it is installed, the student's
    own answer to it when they gave one (`use_my_answers`); else NotReleased saying what
    to do."""
    module = f"{__name__}.a{assignment}"
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as error:
        if error.name != module:
            raise
        own = _own(assignment, name)
        if own is not None:
            return own
        raise NotReleased(
            f"{label} ({task}) is released after {assignment}'s due date: your "
            f"instructor then hands out the wheel residual_pack_solved_{assignment}, to "
            f"install as your README says (its section 'The earlier answers'). Until then, "
            f"hand the library your own answer in this notebook's first cells "
            f"(use_my_answers), or wait: the cells that use it cannot run without one."
        ) from None
    return getattr(found, name)
'''
