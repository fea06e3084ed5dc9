"""The package layout: imports run one way, the kernel side never reaches the grader, the
sandbox launcher needs only the standard library.

    python tests/test_layout.py    prints the import graph of autograder/
"""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import policy
from autograder.grader.testsource import GradedCellError, prepare

ROOT = Path(__file__).resolve().parents[1]
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


def import_graph(module_level_only=True):
    """{module: modules of ours it imports} (at module level, or anywhere in it)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in tree.body if module_level_only else ast.walk(tree):
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
    assert cycles(import_graph(module_level_only=False)) == []


def test_the_kernel_side_never_imports_the_grader():
    graph = import_graph(module_level_only=False)
    for name in policy.KERNEL_SIDE:
        grader_side = {m for m in graph[name] if m.startswith("autograder.")
                       and m not in policy.KERNEL_SIDE}
        assert not grader_side, f"{name} imports {grader_side}"


def test_the_kernel_side_is_what_is_left_at_the_top_of_the_package():
    """A module added at the top of autograder/ is copied into no kernel unless listed;
    every listed one exists."""
    top = {f"autograder.{p.stem}" for p in (ROOT / "autograder").glob("*.py")} | {"autograder"}
    top.discard("autograder.__init__")
    assert policy.KERNEL_SIDE <= top


def test_the_launcher_needs_only_the_standard_library():
    code = ("import sys, autograder.grader.sandbox.launcher\n"
            "print('\\n'.join(m for m in sys.modules if m.split('.')[0] not in "
            "sys.stdlib_module_names))")
    run = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True)
    ours = {m for m in run.stdout.split() if not m.startswith(("_", "__"))}
    assert ours == {"autograder", "autograder.grader", "autograder.grader.sandbox",
                    "autograder.grader.sandbox.launcher", "autograder.grader.sandbox.syscalls"}


@pytest.mark.parametrize("module", ["autograder.reference", "autograder.grader.cells"])
def test_a_witness_cell_may_not_need_what_only_the_grader_has(module):
    with pytest.raises(GradedCellError, match=module):
        prepare(f"import {module}\nx = {module}\n")
    prepare("from autograder import checks\nfrom autograder.checks import check_value\n"
            "check_value(checks.expected, 1)\n")


if __name__ == "__main__":
    graph = import_graph()
    for name in sorted(graph):
        if name.startswith("autograder"):
            print(f"{name} -> {', '.join(sorted(graph[name])) or '-'}")
    print("cycles:", cycles(graph) or "none")
