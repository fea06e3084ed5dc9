"""The library as a graded kernel of one assignment sees it: the model answers to that
assignment's tasks taken out of the source.

`microgpt` and `torchtrack` hold working answers to some tasks (`SWITCHED_OFF`:
`GPT.block` answers Tasks 5.1 to 5.3, `deepnet.logits` Task 2.2, ...), because later
notebooks train with them. The sandbox's copy of the library is written with each such
function's body replaced by a raise of `AnswerSwitchedOff` (the docstring kept), so no
copy of the answer is in the kernel's files or memory, however the module is loaded.

A graded test that needs the library's version of an earlier task (Task 2.3's loss made
with the library's forward pass, Task 6.3's states of the model) runs in the grader
(`autograder.grading.remote`), where the library is whole; the kernel gets what the test
hands the student's code, as data. So no answer is kept in a grading kernel at all.
"""

import ast
from pathlib import Path

__all__ = ["SWITCHED_OFF", "answer_label", "strip_answers", "write_answerless",
           "find_function"]

# assignment -> [(module, class or None, name, task, what to do instead)]
SWITCHED_OFF: dict[str, list[tuple[str, str | None, str, str, str]]] = {
    "02_degradation": [
        ("microgpt.deepnet", None, "logits", "Task 2.2",
         "compute h_0 = W_in x, the layers and the head yourself"),
    ],
    "05_gpt_residual_adds": [
        ("microgpt.model", "GPT", "block", "Tasks 5.1 to 5.3",
         "build the block from model.attention, model.mlp and rmsnorm"),
    ],
    "06_residual_stream": [
        ("microgpt.model", "GPT", "stream_states", "Task 6.1",
         "collect the states with model.embed and model.block"),
    ],
    "08_torch_mlp": [
        ("torchtrack.mlp", "ResidualLayer", "forward", "Task 8.1",
         "write the shortcut yourself: the layer's input plus what self.branch makes of it"),
        ("torchtrack.mlp", "HighwayLayer", "forward", "Task 8.2",
         "write the gate and the mix yourself"),
    ],
    "09_torch_transformer": [
        ("torchtrack.transformer", "Block", "forward", "Task 9.1",
         "call block.attn, block.ffn, block.norm1 and block.norm2 yourself"),
        ("torchtrack.transformer", None, "logit_lens", "Task 9.2",
         "decode each state of stream_states with model.decode"),
    ],
}


def answer_label(module: str, owner: str | None, name: str) -> str:
    """How a switched-off answer is named: module.Class.name, or module.name."""
    return f"{module}.{owner + '.' if owner else ''}{name}"


def find_function(tree: ast.Module, owner: str | None,
                  name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function `name` at the top of the module `tree` (or in its class `owner`), or
    None."""
    body = tree.body
    if owner:
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == owner]
        if not classes:
            return None
        body = classes[0].body
    found = [n for n in body
             if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name]
    return found[0] if found else None


def strip_answers(source: str, module: str, assignment: str) -> str:
    """`source` (the text of `module`) with the answers of `assignment` taken out.
    Raises LookupError when an answer the table names is not in the source (the table
    and the library have drifted apart: grading must not go on believing it is out)."""
    entries = [(owner, name, task, instead)
               for mod, owner, name, task, instead in SWITCHED_OFF.get(assignment, [])
               if mod == module]
    if not entries:
        return source
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line index, last line index exclusive, new lines)
    for owner, name, task, instead in entries:
        node = find_function(tree, owner, name)
        named = answer_label(module, owner, name)
        if node is None:
            raise LookupError(f"{named} is not in {module}'s source")
        body = node.body
        if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body = body[1:]  # the docstring stays
        if not body:
            raise LookupError(f"{named} has no body to take out")
        first = body[0].lineno - 1
        indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
        message = (f"{named} is the model answer to {task}, and grading runs without it; "
                   f"{instead}")
        stub = [f"{indent}from autograder.kernel.policy import AnswerSwitchedOff\n",
                f"{indent}raise AnswerSwitchedOff({message!r})\n"]
        edits.append((first, node.end_lineno, stub))
    for first, last, new in sorted(edits, reverse=True):
        lines[first:last] = new
    stripped = "".join(lines)
    ast.parse(stripped)  # still Python
    return stripped


def write_answerless(library: str | Path, assignment: str) -> None:
    """Rewrite, in place, the modules of the library folder `library` (which holds
    `microgpt/`, `torchtrack/`, ... as copies) that hold answers of `assignment`; a
    package that is not in the folder is skipped (torch not installed: no torchtrack)."""
    for module in sorted({e[0] for e in SWITCHED_OFF.get(assignment, [])}):
        path = Path(library, *module.split(".")).with_suffix(".py")
        if path.parent.is_dir():
            path.write_text(strip_answers(path.read_text(), module, assignment))
