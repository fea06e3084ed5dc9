"""A graded test cell in its two versions: the witness's and the reference's.

A test cell mixes two kinds of code: what calls the student's code (inputs, the calls
themselves) and what says what is right (expected values, tolerances, the texts that go
with them, reference answers). At grading time a student's notebook is tested with the
first kind only: the expected values come from the reference run, and nothing of the
second kind can be handed to the student's code. `prepare(source)` parses the cell and
returns:

- `witness`: the cell run (in the grader, `remote`) against a student's kernel. Every
  check call (see `JUDGE_ARGUMENTS`)
  loses the arguments that say what is right: a positional one becomes `None`, a keyword
  one goes. Imports that only those arguments used go too (so `autograder.answers.reference`, the
  model answers, is never imported there). Comments go (unparsed from the syntax tree).
- `reference`: the same cell, arguments kept, for the instructor's solution on the
  grader's side; its checks record the expected observations.
- `hidden`: the lines of both that come from the hidden tests, so that a failure there is
  reported without its inputs or expected values.

Both versions have the same statements on the same lines, so a record's line (where in
the cell a check was called) pairs a student's observation with the expected one. A
top-level `print(...)` (a test cell's "every check passed" line) becomes `pass` in both:
at grading time the grader says whether the checks passed.
"""

import ast
import contextlib
import copy
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from autograder.grading.plan import kernel_side

__all__ = ["JUDGE_ARGUMENTS", "GradedCellError", "GradedCell", "prepare", "sending"]

BEGIN_HIDDEN = "BEGIN HIDDEN TESTS"
END_HIDDEN = "END HIDDEN TESTS"

# check function -> (positions, keywords) of the arguments that say what is right
JUDGE_ARGUMENTS = {
    # (value_ok stays: it says what the task asks for, a plain number, and the
    # observation's words depend on it as in a student's kernel)
    "check_value": ({1}, {"expected", "expected_text", "rtol", "atol"}),
    "check_values": ({1}, {"expected", "expected_text", "rtol", "atol", "numbers_only"}),
    "check_numbers": ({1}, {"expected", "expected_text", "rtol", "atol", "labels",
                           "numbers_only"}),
    # (h stays: the witness makes the central difference of the student's own function
    # with it, as their kernel does, `records.OWN_EXPECTED`)
    "check_gradient": (set(), {"rtol", "atol"}),
    "check_gradients": (set(), {"reference", "reference_text", "h", "rtol", "atol",
                                 "expected"}),
    "check_range": ({1, 2}, {"low", "high", "expected_text"}),
    "check_same": ({1}, {"expected", "expected_text"}),
    "check_module": (set(), {"reference", "rtol", "atol", "expected"}),
    # the tiny-GPT checks (`gptchecks`): a hidden test's reference computes what is right
    **{name: (set(), {"reference"}) for name in (
        "check_block_values", "check_block_gradients", "check_block_training",
        "check_stream_states", "check_logit_lens", "check_lens_on_the_model_states")},
}


class GradedCellError(ValueError):
    """A test cell that cannot be split into a witness and a reference version."""


@dataclass(frozen=True)
class GradedCell:
    witness: str
    reference: str
    hidden: frozenset  # line numbers (1-based) of both versions


def hidden_line_numbers(source: str) -> set[int]:
    """The numbers (1-based) of the lines of `source` between the hidden-test markers."""
    lines, inside = set(), False
    for number, line in enumerate(source.splitlines(), 1):
        if BEGIN_HIDDEN in line:
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            lines.add(number)
    return lines


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


class _DropPrints(ast.NodeTransformer):
    """Top-level `print(...)` statements become `pass`."""

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = [
            ast.copy_location(ast.Pass(), s)
            if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
            and _called_name(s.value) == "print" else s
            for s in node.body
        ]
        return node


class _StripJudgeArguments(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        name = _called_name(node)
        if name not in JUDGE_ARGUMENTS:
            return node
        positions, keywords = JUDGE_ARGUMENTS[name]
        if any(isinstance(a, ast.Starred) for a in node.args) or any(
                k.arg is None for k in node.keywords):
            raise GradedCellError(
                f"line {node.lineno}: {name}(...) with *args or **kwargs: the grader cannot "
                f"tell which arguments say what is right")
        node.args = [ast.copy_location(ast.Constant(None), a) if i in positions else a
                     for i, a in enumerate(node.args)]
        node.keywords = [k for k in node.keywords if k.arg not in keywords]
        return node


def _used_names(tree: ast.AST) -> set[str]:
    used = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            used.add(node.id)
    return used


def _prune_imports(tree: ast.AST) -> None:
    """Imports of names nothing uses any more become `pass` (in place)."""
    used = _used_names(tree)

    class Prune(ast.NodeTransformer):
        def _keep(self, node: Any, bound: Callable[[ast.alias], str]) -> ast.AST:
            node.names = [a for a in node.names if bound(a) in used]
            return node if node.names else ast.copy_location(ast.Pass(), node)

        def visit_Import(self, node: ast.Import) -> ast.AST:
            return self._keep(node, lambda a: a.asname or a.name.split(".")[0])

        def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
            return self._keep(node, lambda a: a.asname or a.name)

    Prune().visit(tree)


def _grader_only(name: str) -> bool:
    """Whether the dotted `name` (a module, or a name in one) is of `autograder` but not
    of the package a student's kernel gets (`plan.KERNEL_PACKAGE`, the allowlist)."""
    if not (name == "autograder" or name.startswith("autograder.")):
        return False
    return not kernel_side(name)


def _grader_only_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of what the witness version imports that only the grader has: a
    witness cell that still uses one could hand it to the student's code (a function of
    the grader's goes to the kernel as one to call back), and is a mistake."""
    found = []
    for node in ast.walk(tree):
        modules = []
        if isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for module in modules:
            if _grader_only(module):
                found.append((node.lineno, module))  # type: ignore[attr-defined]
    return found


def _statements(tree: ast.AST) -> list[ast.stmt]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.stmt)]


def prepare(source: str) -> GradedCell:
    """The witness and reference versions of the test cell `source` (see the module doc).
    Every student's test cell is the release's (nbgrader puts it back), so each source
    is prepared once per process."""
    return _prepare(source)


@functools.lru_cache(maxsize=256)
def _prepare(source: str) -> GradedCell:
    try:
        original = ast.parse(source)
    except SyntaxError as exc:
        raise GradedCellError(f"the test cell does not parse: {exc}") from None
    hidden_source = hidden_line_numbers(source)
    reference = _DropPrints().visit(copy.deepcopy(original))
    witness = _StripJudgeArguments().visit(_DropPrints().visit(copy.deepcopy(original)))
    _prune_imports(witness)
    leaks = _grader_only_uses(witness)
    if leaks:
        line, module = leaks[0]
        raise GradedCellError(
            f"line {line}: {module}, which only the grader has, is used outside the "
            f"arguments that say what is right: the student's code could be handed it at "
            f"grading; pass it only in those arguments")
    witness_text = ast.unparse(ast.fix_missing_locations(witness)) + "\n"
    reference_text = ast.unparse(ast.fix_missing_locations(reference)) + "\n"
    ours = _statements(ast.parse(witness_text))
    theirs = _statements(ast.parse(reference_text))
    first = _statements(original)
    if not (len(ours) == len(theirs) == len(first)) or any(
            a.lineno != b.lineno for a, b in zip(ours, theirs)):
        raise GradedCellError("the witness and reference versions of the cell do not line up")
    hidden = frozenset(
        new.lineno for new, old in zip(ours, first)
        if old.lineno in hidden_source
    )
    return GradedCell(witness_text, reference_text, hidden)


@contextlib.contextmanager
def sending(kc: Any, code: str) -> Iterator[None]:
    """While inside, the kernel client `kc` sends `code` whatever nbclient asks it to
    execute: nbclient executes `cell.source` (`kc.execute(cell.source, ...)`), and a
    graded test cell's kernel must get its reference or witness version instead, with
    nbclient's own handling of the reply and outputs unchanged (see `compat`)."""
    original = kc.execute

    def execute(_code: str, *args: Any, **kwargs: Any) -> Any:
        return original(code, *args, **kwargs)

    kc.execute = execute
    try:
        yield
    finally:
        with contextlib.suppress(AttributeError):
            del kc.execute
