"""The notebook guard: what a committed solution notebook must not show.

`residual-pack check-drift` (and so the test suite) runs it over `solutions/`. A
solution notebook fails the guard when any of its outputs

1. is an error (an output of type "error");
2. comes from a cell that timed out: "CellTimeoutError" anywhere in an output;
3. shows an absolute path of the machine that ran it: a `site-packages` folder, a
   virtual environment (`.venv/`, `venv/`), or a path under `/root`, `/home`, `/tmp`,
   `/work`, `/usr`, `/opt`, `/var`, `/Users`, or any other absolute path of two folders
   or more (web addresses are not paths). Only text is searched, not images;
4. says the notebook fell back to other data than the one it names (the convention
   below);

and when

5. a figure a markdown cell quotes as ours is nowhere to be found (the convention below).

**Data convention** (every notebook that loads a data set follows it). A notebook prints
one line saying which data it uses, starting with `data:`, e.g.

    data: TinyShakespeare (1,115,394 characters)
    data: census names (5,163 names)

When the code cannot use the data the notebook names and takes other data instead (a
download failed, a file is missing), it must say so in a printed line that *starts* with
`data fallback:`, e.g.

    data fallback: census names instead of TinyShakespeare (the download failed)

Any output line starting with `data fallback:` fails the guard: a committed solution must
have run on the data it talks about. (Never fall back silently.)

**Quote convention.** A markdown cell that quotes figures as ours lists them in its cell
metadata, exactly as they are written in the text:

    "metadata": {"residual_pack": {"quotes": ["0.392", "1.308"]}}

Each must appear in the text outputs of the same notebook's committed solution, or in a
file under `results/` (the committed results of the experiment commands). A figure that
another assignment's solution prints goes under that assignment's name:

    "metadata": {"residual_pack": {"quotes_from": {"02_degradation": ["1.308"]}}}

The README quotes figures the same way, in an HTML comment after the text that quotes
them (`<!-- quotes 04_identity_shortcut: "1.23" "4.26" -->`). Every student version
(`exercises/`, and the release grading builds) is generated without these lists. A match
is a whole number: "1.23" is not found in "1.234". Figures from the chapter or a paper
are theirs: cite them in the text, do not list them.
"""

import json
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import nbformat

__all__ = [
    "FALLBACK_PREFIX",
    "output_text",
    "notebook_text",
    "output_problems",
    "quote_problems",
    "readme_quotes",
    "figure_found",
    "results_text",
    "check_notebook",
    "check_solutions",
    "check_readme",
]

FALLBACK_PREFIX = "data fallback:"
METADATA_KEY = "residual_pack"  # course.QUOTES_METADATA
RESULTS = "results"
README = "README.md"

# an absolute path: a folder the machine has, or any path of two folders or more that is
# not part of a web address (no "://" or word character right before the first slash)
MACHINE_PATH = re.compile(
    r"site-packages|dist-packages|(?<![\w.~:/])\.?venv/"
    r"|(?<![\w.~:/])/(?:root|home|tmp|work|usr|opt|var|private|Users|mnt|srv)(?:/|\b)"
    r"|(?<![\w.~:/])/(?:[\w.+-]+/){2,}"
    r"|\b[A-Za-z]:\\(?:[\w. -]+\\)+"
)
TEXT_MIMES = ("text/plain", "text/markdown", "text/html", "text/latex", "application/json")
README_QUOTES = re.compile(r"<!--\s*quotes\s+([\w-]+)\s*:(.*?)-->", re.S)


def output_text(output: Any) -> str:
    """The text of one output (stream, error, or the text parts of a rich output); images
    and widget states are left out."""
    kind = output.get("output_type")
    if kind == "stream":
        text = output.get("text", "")
        return "".join(text) if isinstance(text, list) else text
    if kind == "error":
        return "\n".join([f"{output.get('ename', '')}: {output.get('evalue', '')}",
                          *output.get("traceback", [])])
    parts = []
    for mime, value in output.get("data", {}).items():
        if mime in TEXT_MIMES:
            if not isinstance(value, str):
                value = "".join(value) if isinstance(value, list) else json.dumps(value)
            parts.append(value)
    return "\n".join(parts)


def notebook_text(nb: Any) -> str:
    """All output text of a notebook, cell after cell. A cell's consecutive stream outputs
    are joined as they came (a kernel may send one printed line, even one number, in two
    stream messages); other outputs are kept apart by a line break."""
    parts: list[str] = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        previous = None
        for output in cell.get("outputs", []):
            kind = (output.get("output_type"), output.get("name"))
            text = output_text(output)
            if parts and kind[0] == "stream" and kind == previous:
                parts[-1] += text
            else:
                parts.append(text)
            previous = kind
    return "\n".join(parts)


def _cell_name(cell: Any, index: int) -> str:
    return f"cell {cell.get('id') or '#' + str(index)}"


def output_problems(nb: Any) -> list[str]:
    """Rules 1-4 on every output of `nb`: a list of messages, [] when clean."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        name = _cell_name(cell, i)
        for output in cell.get("outputs", []):
            text = output_text(output)
            if output.get("output_type") == "error":
                problems.append(f"{name}: error output ({output.get('ename', '?')}: "
                                f"{str(output.get('evalue', ''))[:80]})")
            if "CellTimeoutError" in json.dumps(output):
                problems.append(f"{name}: the cell timed out (CellTimeoutError)")
            found = MACHINE_PATH.search(text)
            if found:
                problems.append(f"{name}: output shows a path of the machine that ran it "
                                f"({found.group(0)!r})")
            for line in text.splitlines():
                if line.strip().lower().startswith(FALLBACK_PREFIX):
                    problems.append(f"{name}: fell back to other data ({line.strip()[:100]!r})")
    return problems


def figure_found(figure: str, text: str) -> bool:
    """`figure` occurs in `text` as a whole: no digit (or digit and point) runs on."""
    head = r"(?<![\d.])" if figure[:1].isdigit() else ""
    tail = r"(?!\.?\d)" if figure[-1:].isdigit() else ""
    return re.search(head + re.escape(figure) + tail, text) is not None


def results_text(course: str | os.PathLike[str]) -> str:
    """The text of every file under `results/` (empty when there is none)."""
    folder = Path(course) / RESULTS
    if not folder.is_dir():
        return ""
    return "\n".join(p.read_text(encoding="utf-8", errors="replace")
                     for p in sorted(folder.rglob("*")) if p.is_file())


def cell_quotes(cell: Any) -> tuple[list[str], dict[str, list[str]]]:
    """(own figures, {assignment: figures}) that a markdown cell's metadata lists."""
    meta = cell.get("metadata", {}).get(METADATA_KEY, {})
    return list(meta.get("quotes", [])), dict(meta.get("quotes_from", {}))


def quote_problems(nb: Any, own_text: str,
                   other_text: Callable[[str], str | None] | None = None,
                   results: str = "") -> list[str]:
    """Rule 5: each figure a markdown cell of `nb` quotes is in `own_text` (the outputs of
    this notebook's solution) or `results`; figures quoted from another assignment are in
    `other_text(assignment)` (the text of its solution outputs, None if there is none)."""
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        own, others = cell_quotes(cell)
        for figure in own:
            if not figure_found(figure, cell.source):
                problems.append(f"{_cell_name(cell, i)}: lists {figure!r} as quoted, "
                                f"but its text does not say it")
            elif not (figure_found(figure, own_text) or figure_found(figure, results)):
                problems.append(f"{_cell_name(cell, i)}: quotes {figure!r}, which no output "
                                f"of this solution and no file under {RESULTS}/ shows")
        for assignment, figures in others.items():
            text = other_text(assignment) if other_text else None
            for figure in figures:
                if not figure_found(figure, cell.source):
                    problems.append(f"{_cell_name(cell, i)}: lists {figure!r} as quoted "
                                    f"from {assignment}, but its text does not say it")
                elif text is None:
                    problems.append(f"{_cell_name(cell, i)}: quotes {figure!r} from "
                                    f"{assignment}, which has no committed solution")
                elif not figure_found(figure, text):
                    problems.append(f"{_cell_name(cell, i)}: quotes {figure!r} from "
                                    f"{assignment}, whose solution outputs do not show it")
    return problems


def _solution_texts(course: str | os.PathLike[str]) -> Callable[[str], str | None]:
    cache: dict[str, str | None] = {}

    def text_of(assignment: str) -> str | None:
        if assignment not in cache:
            folder = Path(course) / "solutions" / assignment
            paths = sorted(folder.glob("*.ipynb")) if folder.is_dir() else []
            cache[assignment] = ("\n".join(notebook_text(nbformat.read(str(p), as_version=4))
                                           for p in paths) if paths else None)
        return cache[assignment]

    return text_of


def check_notebook(nb: Any, course: str | os.PathLike[str] | None = None,
                   results: str | None = None) -> list[str]:
    """Every rule on one solution notebook; `course` finds the other assignments'
    solutions and the results (or pass `results`, the text of the result files)."""
    if results is None:
        results = results_text(course) if course is not None else ""
    other = _solution_texts(course) if course is not None else None
    return output_problems(nb) + quote_problems(nb, notebook_text(nb), other, results)


def check_solutions(course: str | os.PathLike[str], names: Sequence[str]) -> list[str]:
    """The guard over the committed solutions of the assignments `names`: messages naming
    the notebook and the cell, [] when every rule holds."""
    course = Path(course)
    results = results_text(course)
    problems = []
    for name in names:
        folder = course / "solutions" / name
        for path in sorted(folder.glob("*.ipynb")) if folder.is_dir() else []:
            nb = nbformat.read(str(path), as_version=4)
            problems += [f"solutions/{name}/{path.name}: {p}"
                         for p in check_notebook(nb, course, results)]
    return problems


def readme_quotes(text: str) -> list[tuple[str, str]]:
    """[(assignment, figure)] from the README's `<!-- quotes NAME: "a" "b" -->` comments."""
    out = []
    for m in README_QUOTES.finditer(text):
        out += [(m.group(1), fig) for fig in re.findall(r'"([^"]+)"', m.group(2))]
    return out


def check_readme(course: str | os.PathLike[str], names: Sequence[str] | None = None,
                 ) -> list[str]:
    """Each figure the README or a page of docs/ lists as quoted from an assignment (of
    `names`, all when None) is in that page's text and in the assignment's solution
    outputs or results/."""
    pages = [Path(course) / README, *sorted((Path(course) / "docs").glob("*.md"))]
    solution_text = _solution_texts(course)
    results = results_text(course)
    problems = []
    for path in pages:
        if not path.is_file():
            continue
        where = str(path.relative_to(course))
        text = path.read_text(encoding="utf-8")
        prose = README_QUOTES.sub("", text)
        for assignment, figure in readme_quotes(text):
            if names is not None and assignment not in names:
                continue
            if not figure_found(figure, prose):
                problems.append(f"{where}: lists {figure!r} as quoted from {assignment}, "
                                f"but the text does not say it")
                continue
            found = solution_text(assignment)
            if not ((found and figure_found(figure, found)) or figure_found(figure, results)):
                problems.append(f"{where}: quotes {figure!r} from {assignment}, which "
                                f"neither its solution outputs nor {RESULTS}/ show")
    return problems
