"""What `residual-pack generate` needs to know before it runs anything: what an
assignment's notebooks import that this Python lacks, and whether the assignment changed
since its last generation.

**What is missing.** The code cells of an assignment's source notebooks are read (not
run), and so is the code of this pack they import (`autograder`, `microgpt`,
`torchtrack`), module after module. A third-party module that is imported where it cannot
be avoided (at the top of a cell or of a module, not inside a function or a `try`) and
that this Python cannot find is missing: `08_torch_mlp` imports `torch`, and `torchtrack`
does too. Such an assignment is not generated at all; the refusal names the module and the
line that installs it (`torch`: the version the course is tested with, `PINS`).

**The record**, `solutions/generated.json` (committed), holds for every assignment four
digests of its last generation:

- `source`: the files of `source/NAME/`;
- `library`: the pack's code its notebooks import, found as above: for every module
  reached, each `.py` and `.json` file of that module's folder (a package's data tables,
  such as `autograder/kernel/torchchecks.json`, and the modules it imports by name at run
  time) and the `__init__.py` of each package above it; but not the fingerprint table
  (`NOT_SHOWN`);
- `generator`: the code that generates (`GENERATOR_MODULES`) and the course's
  `nbgrader_config.py`;
- `written`: the files of `exercises/NAME/` and `solutions/NAME/` that it wrote.

An assignment whose four digests match is up to date and is not run again. The record is a
file of its own rather than a field in each solution notebook because it holds a digest of
those notebooks (a solution edited by hand since is then seen as changed, which a field
inside the notebook could not say of itself), and because writing it touches no notebook.
Not in the record: third-party packages (numpy, nbgrader, the `names` package's census
lists) and downloaded data (TinyShakespeare is checked against its checksum); after
upgrading those, `residual-pack generate --force`.
"""

import ast
import functools
import hashlib
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from autograder.grading.course import (
    CONFIG_FILE,
    EXERCISES,
    SOLUTIONS,
    SOURCE,
    notebook_paths,
    read_notebook,
)

__all__ = ["RECORD", "PINS", "Needs", "needs", "digests", "written_digest",
           "read_record", "write_record", "changed_parts"]

RECORD = f"{SOLUTIONS}/generated.json"
FORMAT = 1
OURS = ("autograder", "microgpt", "torchtrack")  # the pack's own top-level packages
# the code that makes exercises/ and solutions/ (with the course's nbgrader_config.py)
GENERATOR_MODULES = (
    "autograder.authoring.generate",
    "autograder.authoring.generation_record",
    "autograder.grading.course",
    "autograder.grading.nbgrader_steps",
    "autograder.grading.pipeline",  # the step lists nbgrader_config.py reads
)
LIBRARY_SUFFIXES = (".py", ".json")
# Library files that no written notebook can show: the fingerprint table only adds a
# known mistake's hint to the message of a failing check, and a solution whose run shows
# an error is never written. Left out of `library`, so that `residual-pack fingerprints`
# (which rewrites it after a release changed) does not make every solution run again.
NOT_SHOWN = ("autograder/kernel/fingerprints.py",)
SKIPPED_PARTS = ("__pycache__", ".ipynb_checkpoints")
# what to install for a missing module: the version the course is tested with
# (scripts/constraints.txt; without a GPU, PyTorch's CPU build is enough)
PINS = {"torch": "torch==2.13.0"}
PARTS = {
    "source": "its source notebook changed",
    "library": "the library code it imports changed",
    "generator": "generate's own code or nbgrader_config.py changed",
    "written": "its exercises/ or solutions/ differ from what the last generation wrote",
}


# ---------------------------------------------------------------- reading imports


def _cell_code(source: str) -> str:
    """A code cell as Python (IPython's magics and shell escapes turned into calls)."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        return TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001 (then the cell as it is)
        return source


def _imports(tree: ast.AST, package: str = "") -> list[tuple[str, bool]]:
    """[(module, unavoidable)] for every import in `tree`; unavoidable when it runs on
    import (not inside a function or a `try`). `package` resolves relative imports."""
    found: list[tuple[str, bool]] = []

    def walk(node: ast.AST, unavoidable: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                found.extend((alias.name, unavoidable) for alias in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".") if package else []
                    parts = parts[:len(parts) - (child.level - 1)] if child.level > 1 else parts
                    base = ".".join(p for p in [*parts, base] if p)
                if base:
                    found.append((base, unavoidable))
                    # `from package import submodule` imports the submodule
                    found.extend((f"{base}.{alias.name}", unavoidable)
                                 for alias in child.names if alias.name != "*")
            inside = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                        ast.Try, getattr(ast, "TryStar", ast.Try)))
            walk(child, unavoidable and not inside)

    walk(tree, True)
    return found


def _package_root(top: str) -> Path | None:
    """The folder of one of our top-level packages, found as Python would import it
    (without importing it)."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def _module_file(module: str, roots: dict) -> Path | None:
    """The file of one of our modules (`a.b.c`: a/b/c.py or a/b/c/__init__.py), or None
    (not a module: `from a.b import some_function`)."""
    top, *rest = module.split(".")
    if top not in roots:
        roots[top] = _package_root(top)
    root = roots[top]
    if root is None:
        return None
    base = root.joinpath(*rest)
    for path in (base / "__init__.py", base.with_suffix(".py") if rest else None):
        if path is not None and path.is_file():
            return path
    return None


def _missing(top: str) -> bool:
    """Can this Python not import the top-level module `top`?"""
    try:
        return importlib.util.find_spec(top) is None
    except (ImportError, ValueError):
        return True


@dataclass
class Needs:
    """What an assignment's notebooks import: the pack's files they read ({key: path},
    keys like `microgpt/deepnet.py`) and the third-party modules missing here."""

    files: dict = field(default_factory=dict)
    missing: list = field(default_factory=list)


def needs(course: str | os.PathLike[str], assignment: str) -> Needs:
    """The pack's files that `assignment`'s source notebooks import (with what those
    import, and their folders' data), and the third-party modules they cannot do without
    that this Python lacks."""
    todo = []
    path: Path | None
    for path in notebook_paths(Path(course) / SOURCE / assignment):
        for cell in read_notebook(path).cells:
            if cell.cell_type != "code":
                continue
            try:
                tree = ast.parse(_cell_code(cell.source))
            except SyntaxError:
                continue
            todo += [(m, u, False) for m, u in _imports(tree)]
    roots: dict = {}
    seen: dict = {}  # module -> unavoidable (as strongly as it was reached)
    with_folder = set()
    third_party = set()
    out = Needs()
    while todo:
        module, unavoidable, as_parent = todo.pop()
        top = module.split(".")[0]
        if top not in OURS:
            if unavoidable and top not in sys.stdlib_module_names:
                third_party.add(top)
            continue
        path = _module_file(module, roots)
        if path is None:
            continue
        root = roots[top]
        if not as_parent and module not in with_folder:  # its data and its siblings
            with_folder.add(module)
            for sibling in sorted(path.parent.iterdir()):
                if sibling.is_file() and sibling.suffix in LIBRARY_SUFFIXES:
                    out.files[_key(sibling, root, top)] = sibling
        out.files[_key(path, root, top)] = path
        if module in seen and (seen[module] or not unavoidable):
            continue  # its imports were followed already, at least as strongly
        seen[module] = unavoidable
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        stat = path.stat()
        found = _file_imports(str(path), stat.st_mtime_ns, stat.st_size, package)
        todo += [(m, unavoidable and u, False) for m, u in found]
        # importing a.b.c runs a/__init__.py and a/b/__init__.py first
        parts = module.split(".")
        todo += [(".".join(parts[:i]), unavoidable, True) for i in range(1, len(parts))]
    out.missing = sorted(t for t in third_party if _missing(t))
    out.files = {key: path for key, path in out.files.items() if key not in NOT_SHOWN}
    return out


@functools.lru_cache(maxsize=1024)
def _file_imports(path: str, mtime_ns: int, size: int, package: str) -> tuple:
    """A module file's imports (see `_imports`), kept while the file is unchanged: the
    assignments of a course import mostly the same modules."""
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return ()
    return tuple(_imports(tree, package))


def _key(path: Path, root: Path, top: str) -> str:
    return f"{top}/{path.relative_to(root).as_posix()}"


# ---------------------------------------------------------------- digests


def _digest(files: dict) -> str:
    """One digest of {key: path}: keys and contents (line endings made LF, so that a
    checkout that converts them still matches)."""
    h = hashlib.sha256()
    for key in sorted(files):
        h.update(key.encode() + b"\0" + files[key].read_bytes().replace(b"\r\n", b"\n") + b"\0")
    return h.hexdigest()[:16]


def _tree(folder: Path, prefix: str) -> dict:
    if not folder.is_dir():
        return {}
    return {f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in sorted(folder.rglob("*"))
            if p.is_file() and not set(SKIPPED_PARTS) & set(p.parts)}


def generator_files(course: str | os.PathLike[str]) -> dict:
    roots: dict = {}
    files = {f"course/{CONFIG_FILE}": Path(course) / CONFIG_FILE}
    for module in GENERATOR_MODULES:
        path = _module_file(module, roots)
        if path is not None:
            files[_key(path, roots[module.split(".")[0]], module.split(".")[0])] = path
    return files


def written_digest(course: str | os.PathLike[str], assignment: str) -> str:
    course = Path(course)
    return _digest({**_tree(course / EXERCISES / assignment, EXERCISES),
                    **_tree(course / SOLUTIONS / assignment, SOLUTIONS)})


def digests(course: str | os.PathLike[str], assignment: str, library: Needs | None = None) -> dict:
    """The record's digests of `assignment` as the course is now."""
    course = Path(course)
    library = library if library is not None else needs(course, assignment)
    return {
        "source": _digest(_tree(course / SOURCE / assignment, SOURCE)),
        "library": _digest(library.files),
        "generator": _digest(generator_files(course)),
        "written": written_digest(course, assignment),
    }


# ---------------------------------------------------------------- the record


def read_record(course: str | os.PathLike[str]) -> dict:
    """{assignment: digests} from the course's record ({} when it has none or it is of
    another format)."""
    path = Path(course) / RECORD
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        return {}
    return dict(data.get("assignments", {}))


def write_record(course: str | os.PathLike[str], record: dict) -> Path:
    """Write {assignment: digests}, one line per assignment (two branches that regenerate
    different assignments then merge without a conflict)."""
    path = Path(course) / RECORD
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"    {json.dumps(name)}: {json.dumps(record[name], sort_keys=True)}"
             for name in sorted(record)]
    path.write_text(
        "{\n"
        '  "about": "what residual-pack generate last made each assignment from '
        '(autograder/authoring/generation_record.py)",\n'
        f'  "format": {FORMAT},\n'
        '  "assignments": {\n' + ",\n".join(lines) + "\n  }\n}\n",
        encoding="utf-8",
    )
    return path


def changed_parts(recorded: dict | None, now: dict) -> list[str]:
    """Why an assignment must be generated again: the parts whose digest differs from the
    record (all of them, said once, when it has no entry)."""
    if not recorded:
        return [f"it has no entry in {RECORD}"]
    return [PARTS[part] for part in PARTS if recorded.get(part) != now.get(part)]
