"""The package layout: imports run one way, each folder imports only the folders its layer
allows (`LAYERS`), a student's kernel gets one package.

    python tests/unit/test_layout.py    prints the import graph of autograder/
"""

import ast
from pathlib import Path

import pytest

from autograder.grading import plan
from autograder.grading.testsource import GradedCellError, prepare

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autograder", "microgpt", "torchtrack")


def _modules():
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _type_checking_block(node):
    """An `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`): its imports never run."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _nodes(tree, module_level_only, type_only):
    """The statements to read imports from: the module's own, or every node in it; with
    `type_only` false, not those under `if TYPE_CHECKING:` (imports for type hints)."""
    if module_level_only:
        return list(tree.body)
    found, todo = [], [tree]
    while todo:
        node = todo.pop()
        found.append(node)
        if not type_only and _type_checking_block(node):
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))
    return found


def import_graph(module_level_only=True, type_only=True):
    """{module: modules of ours it imports} (at module level, or anywhere in it; with
    `type_only` false, leaving out the imports that only type hints use)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in _nodes(tree, module_level_only, type_only):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package[:len(package) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                names = [base] + [f"{base}.{a.name}" for a in node.names]
            else:
                continue
            for dotted in names:
                parts = dotted.split(".")
                for k in range(len(parts), 0, -1):
                    candidate = ".".join(parts[:k])
                    if candidate in modules:
                        if candidate != name and not name.startswith(candidate + "."):
                            deps.add(candidate)
                        break
        graph[name] = deps
    return graph


def cycles(graph):
    """The groups of modules that import each other (strongly connected, more than one)."""
    order, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        order[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in order:
            visit(v)
    return found


def test_imports_run_one_way():
    assert cycles(import_graph()) == []
    # an import under `if TYPE_CHECKING:` never runs: a type hint may name a module above
    assert cycles(import_graph(module_level_only=False, type_only=False)) == []


# Who may import whom, by folder: the trust boundary drawn as folders. Each layer lists
# the layers of ours it may import (anywhere in a module, not only at its top); a module
# belongs to the longest layer name that is a prefix of its own.
LAYERS = {
    # the engine and the model students build on: nothing of the grader's
    "microgpt": set(),
    # the full-size torch studies: the engine's studies only (the torch checks are the
    # kernel's, `autograder.kernel.torchchecks`)
    "torchtrack": {"microgpt"},
    # an empty package, the parent of the kernel's
    "autograder": set(),
    # what a student's kernel loads: the engine, nothing else of ours
    "autograder.kernel": {"microgpt"},
    # the model answers and the registered wrong answers: what they are built from
    "autograder.answers": {"microgpt", "torchtrack", "autograder.kernel"},
    # isolation: the standard library only (it runs as root)
    "autograder.sandbox": set(),
    # patches on third-party libraries
    "autograder.compat": set(),
    # nbgrader's cell kinds in a notebook (answer, test, written answer)
    "autograder.cells": set(),
    # one way to run a notebook in a local kernel (reference run, fingerprints, progress)
    "autograder.runner": set(),
    # the install line printed for something missing (an extra, PyTorch)
    "autograder.installs": set(),
    # the instructor's grading process: never the answers (they run in a kernel, if at all)
    "autograder.grading": {"microgpt", "autograder.kernel", "autograder.sandbox",
                           "autograder.compat", "autograder.cells", "autograder.runner",
                           "autograder.installs"},
    # what a student runs besides the notebooks
    "autograder.student": {"microgpt", "autograder.kernel", "autograder.compat",
                           "autograder.cells", "autograder.runner", "autograder.installs"},
    # the instructor's tools for the course
    "autograder.authoring": {"microgpt", "torchtrack", "autograder.kernel",
                             "autograder.answers", "autograder.grading",
                             "autograder.sandbox", "autograder.compat",
                             "autograder.student", "autograder.cells",
                             "autograder.runner", "autograder.installs"},
    # the command line: everything
    "autograder.cli": {"microgpt", "torchtrack", "autograder.kernel", "autograder.answers",
                       "autograder.grading", "autograder.sandbox", "autograder.compat",
                       "autograder.student", "autograder.authoring", "autograder.cells",
                       "autograder.runner", "autograder.installs"},
}


def layer_of(module):
    found = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    return max(found, key=len) if found else None


def test_every_module_is_in_a_layer():
    assert [m for m in _modules() if layer_of(m) is None] == []


def test_each_layer_imports_only_what_it_may():
    graph = import_graph(module_level_only=False)
    broken = []
    for name, deps in sorted(graph.items()):
        mine = layer_of(name)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs != mine and theirs not in LAYERS[mine]:
                broken.append(f"{name} ({mine}) imports {dep} ({theirs})")
    assert broken == []


def test_a_student_kernel_gets_one_package():
    """The allowlist is the package: every module of `autograder.kernel` may load in a
    kernel, nothing else of `autograder` but its empty parent."""
    kernel = [m for m in _modules() if m.startswith("autograder")]
    assert {m for m in kernel if plan.kernel_side(m)} == (
        {"autograder"} | {m for m in kernel if m.startswith(plan.KERNEL_PACKAGE)})
    body = ast.parse((ROOT / "autograder" / "__init__.py").read_text()).body
    assert len(body) == 1 and isinstance(body[0], ast.Expr)  # its docstring, no import


@pytest.mark.parametrize("module", ["autograder.answers.reference", "autograder.cells"])
def test_a_witness_cell_may_not_need_what_only_the_grader_has(module):
    with pytest.raises(GradedCellError, match=module):
        prepare(f"import {module}\nx = {module}\n")
    prepare("from autograder.kernel import checks\n"
            "from autograder.kernel.checks import check_value\n"
            "check_value(checks.expected, 1)\n")


if __name__ == "__main__":
    graph = import_graph()
    for name in sorted(graph):
        if name.startswith("autograder"):
            print(f"{name} -> {', '.join(sorted(graph[name])) or '-'}")
    print("cycles:", cycles(graph) or "none")
