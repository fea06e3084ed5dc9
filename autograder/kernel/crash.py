"""What a student sees when their code raises during a test: a crash is a wrong answer.

`task` (in `checks`) hands every error that is not a check's verdict to `explain`, which
keeps the error as it is (its type and message are what nbgrader and the grader read) and
gives it a rendering of its own, the one a notebook shows (IPython asks an exception for
`_render_traceback_`):

    ValueError in your answer: linear: a row of 16 weights for 32 inputs
    Cell In[7], line 7, the test:
    ----> 7     check_block_values(pre_norm_block, "pre")
    Cell In[5], line 3, in pre_norm_block:
          2     \"\"\"Task 5.1\"\"\"
    ----> 3     a = model.attention(x + x, layer, cache)
    microgpt/engine.py, line 359, in linear, where the error was raised:
    ----> 359             raise ValueError(f"linear: a row of {len(row)} weights for ...")
    Hint: ... (here: two lists joined with `+`, 32 numbers where 16 belong)

Only the notebook's own lines are shown (the test cell's and the student's cells', named
as Jupyter names them), and of the library the one line that raised; the checks' frames
(this package) never. A hint follows where the error fits a known slip (`slip_hint`): lists
joined with `+`, lists of the wrong length, a plain float or a list where a `Value` belongs.

In torch (08, 09): tensors whose shapes do not fit (`shape_detail`), a math function of one
number given a whole tensor, and an attribute misspelt on a module or an object
(`attribute_like`, torch.sigmod for torch.sigmoid).

An earlier assignment's answer that a student's install has not been given yet
(`NotReleased`, see `authoring/withheld.py`) is said as it is, not as a mistake: its
message alone, without the student's lines or the library's.

A NameError raised in the student's own code is a mistake in it (a misspelt name, or a
name from a cell not run), said with their line (`misnamed`); a missing answer whose cell
does not compile says so, with the line (`broken_definition`).
"""

import builtins
import difflib
import inspect
import linecache
import os
import re
from typing import TYPE_CHECKING, Any, Sequence  # noqa: UP035 (typing only)

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["explain", "render", "frames_of", "slip_hint", "name_hint", "broken_definition",
           "defined_like", "name_like", "broken_lines", "interrupted", "interrupted_lines",
           "BUDGET_VARIABLE",
           "HANDED_IN", "CONTEXT", "MAX_FRAMES"]

GRADER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # autograder/
HANDED_IN = "<handed-in code>"  # the checks' frame that calls handed-in code (`gptchecks`)
CONTEXT = 2  # lines shown above the line of a student's frame
MAX_FRAMES = 8  # notebook frames shown (the first two and the last ones); a deep recursion
MAX_LINE = 100  # characters of a source line shown


# ---------------------------------------------------------------- where a frame's code is


def _shell() -> Any:
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    return get_ipython()


def cell_name(filename: str) -> str:
    """How Jupyter names the cell that `filename` was compiled from ("Cell In[5]"), or ""
    for code that is not a notebook's: a library's, or the checks'."""
    shell = _shell()
    try:
        named = shell.compile.format_code_name(filename) if shell is not None else None
    except Exception:  # noqa: BLE001 (an older IPython: no names)
        named = None
    if named:
        return f"{named[0]} {named[1]}"
    if filename.startswith("<ipython-input-"):  # IPython before 8
        return f"Cell {filename.strip('<>')}"
    if filename.startswith("<graded test cell"):  # the grading kernel's (`gradekernel`):
        return "Graded test cell"  # its number counts the grader's runs, not the notebook's
    if filename.startswith("<") and not filename.startswith(("<frozen", HANDED_IN)):
        return f"Cell {filename.strip('<>')}"  # a test cell's code run with exec()
    return ""


def _is_grader(filename: str) -> bool:
    if filename == HANDED_IN:
        return True
    try:
        return os.path.commonpath([os.path.abspath(filename), GRADER_DIR]) == GRADER_DIR
    except ValueError:
        return False


def _short_path(filename: str, module: str | None) -> str:
    """A library file's path as its module names it (microgpt/engine.py)."""
    base = os.path.basename(filename)
    parts = str(module or "").split(".")
    if parts and parts[-1] == os.path.splitext(base)[0]:
        return "/".join(parts[:-1] + [base])
    if base == "__init__.py" and parts and parts[0]:  # a package's own file: torch/__init__.py
        return "/".join(parts + [base])
    return base


class Frame:
    """One frame of a traceback: where its code is ("cell", "library", "grader")."""

    def __init__(self, tb: "TracebackType") -> None:
        code = tb.tb_frame.f_code
        self.filename, self.lineno, self.name = code.co_filename, tb.tb_lineno, code.co_name
        self.first = code.co_firstlineno
        self.namespace = tb.tb_frame.f_globals
        # the names local to the function when it raised (its arguments and variables), the
        # first place a misspelt name's right spelling is found
        self.local_names = set(tb.tb_frame.f_locals) if code.co_name != "<module>" else set()
        self.module = self.namespace.get("__name__", "")
        self.cell = cell_name(self.filename)
        self.where = "cell" if self.cell else \
            "grader" if _is_grader(self.filename) else "library"


def frames_of(tb: "TracebackType | None") -> list[Frame]:
    """The frames of a traceback, outermost first."""
    found = []
    while tb is not None:
        found.append(Frame(tb))
        tb = tb.tb_next
    return found


# ---------------------------------------------------------------- the rendering


def _line(filename: str, lineno: int) -> str:
    text = linecache.getline(filename, lineno).rstrip()
    return text if len(text) <= MAX_LINE else text[:MAX_LINE - 3] + "..."


def _lines_of(frame: Frame, context: int) -> list[str]:
    width = len(str(frame.lineno))
    shown = []
    for n in range(max(frame.first, frame.lineno - context), frame.lineno + 1):
        text = _line(frame.filename, n)
        if n != frame.lineno and not text.strip():
            continue
        mark = "---->" if n == frame.lineno else "     "
        shown.append(f"{mark} {n:>{width}} {text}" if text else f"{mark} {n:>{width}}")
    return shown


def _heading(frame: Frame, role: str) -> str:
    inside = "" if frame.name == "<module>" else f", in {frame.name}"
    place = frame.cell or _short_path(frame.filename, frame.module)
    return f"{place}, line {frame.lineno}{inside}{role}:"


def _shown_frames(frames: Sequence[Frame], first: str = ", the test",
                  recursion: bool = False) -> tuple[list[Frame], list[str]]:
    """The frames a student sees: the notebook's; of the library, the last frame when it
    raised there. A recursion that never stopped (`recursion`): the frames down to the line
    that calls itself, not where Python happened to give up. Returns (frames, each one's
    role)."""
    test = _test_file(frames)
    # the test's first line, then the student's code (the test's lambdas are the test's)
    cells = [f for i, f in enumerate(frames)
             if f.where == "cell" and (f.filename != test or i == 0)
             and not _repeats_its_caller(frames, i)]
    cells, looped = _once_per_recursion(cells)
    last = frames[-1] if frames else None
    if recursion and looped is not None:
        cells, last = cells[: looped + 1], None
    if len(cells) > MAX_FRAMES:
        cells = cells[:2] + cells[-(MAX_FRAMES - 2):]
    chosen = list(cells)
    # a library's __getattr__ only says that the name looked up is not there: the lookup,
    # the student's line, is what to show (torch.sigmod, a module's misspelt submodule)
    if last is not None and last.where == "library" and last.name != "__getattr__":
        chosen.append(last)
    roles = []
    for f in chosen:
        roles.append(first if f is frames[0] and test else
                     ", where the error was raised" if f.where == "library" else "")
    return chosen, roles


_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


def _once_per_recursion(cells: Sequence[Frame]) -> tuple[list[Frame], int | None]:
    """A function that calls itself on the same line, again and again (a recursion that
    never stops), shown once: its later calls add nothing to read. Returns (the frames, the
    index in them of the first such line, or None)."""
    kept: list[Frame] = []
    looped: int | None = None
    for f in cells:
        if kept and (f.filename, f.lineno, f.name) == (kept[-1].filename, kept[-1].lineno,
                                                        kept[-1].name):
            if looped is None:
                looped = len(kept) - 1
            continue
        kept.append(f)
    return kept, looped


def _repeats_its_caller(frames: Sequence[Frame], i: int) -> bool:
    """A comprehension's frame on the very line of the frame that ran it (Python before
    3.12 gives a list comprehension a frame of its own; 3.12 inlines it): shown once."""
    f = frames[i]
    if i == 0 or f.name not in _COMPREHENSIONS:
        return False
    caller = frames[i - 1]
    return (caller.filename, caller.lineno) == (f.filename, f.lineno)


def _test_file(frames: Sequence[Frame]) -> str | None:
    return frames[0].filename if frames and frames[0].where == "cell" else None


def answer_frames(frames: Sequence[Frame]) -> list[Frame]:
    """The frames of the student's own code: cells other than the test's."""
    test = _test_file(frames)
    return [f for f in frames if f.where == "cell" and f.filename != test]


def who_raised(frames: Sequence[Frame]) -> str:
    """"answer" when the student's code was running (`answer_frames`); "test" when the
    test's own code raised, on what the answer gave it."""
    return "answer" if answer_frames(frames) else "test"


def render(exc: BaseException, frames: Sequence[Frame], headline: str | None = None,
           hints: Sequence[str] = (), first: str = ", the test") -> list[str]:
    """The lines a notebook shows for `exc`, raised through `frames`; `first` is said of
    the outermost cell (the test's, or the experiment's that ran the student's code)."""
    kind = type(exc).__name__
    if headline is None:
        where = "in your answer" if who_raised(frames) == "answer" else \
            "in the test, from what your code gave it"
        headline = f"{kind} {where}: {exc}"
    lines = [headline]
    test = _test_file(frames)
    shown, roles = _shown_frames(frames, first, recursion=isinstance(exc, RecursionError))
    for frame, role in zip(shown, roles):
        lines.append(_heading(frame, role))
        context = CONTEXT if frame.where == "cell" and frame.filename != test else 0
        lines += _lines_of(frame, context)
    lines += [f"Hint: {h}" for h in hints if h]
    lines += [str(note) for note in getattr(exc, "__notes__", None) or ()]
    return lines


def explain(exc: BaseException, tb: "TracebackType | None", headline: str | None = None,
            hints: Sequence[str] | None = None, first: str = ", the test") -> list[Frame]:
    """Give `exc` (raised through `tb`) the rendering a notebook shows (`render`), with the
    hint of the known slip it fits. Returns the frames."""
    frames = frames_of(tb)
    if getattr(exc, "not_yet_released", False):  # `<package>.solved.NotReleased` of a
        # student's install: an earlier assignment's answer, not a mistake of theirs. Its
        # own rendering, the message alone, says what waits and what to do; the student's
        # lines and the library's `raise` under it read as a fault in their code
        def _render_traceback_() -> list[str]:
            return [f"{type(exc).__name__}: {exc}"]
    else:
        if hints is None:
            hints = [slip_hint(exc, frames)]

        def _render_traceback_() -> list[str]:
            return render(exc, frames, headline, hints, first)

    try:
        exc._render_traceback_ = _render_traceback_  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception that takes no attribute
        pass
    return frames


# ---------------------------------------------------------------- an interrupt


BUDGET_VARIABLE = "RESIDUAL_PACK_CELL_BUDGET"  # Validate's seconds per cell, in its kernel


def interrupted_lines(frames: Sequence[Frame], what: str = "this cell",
                      first: str = ", the test") -> list[str]:
    """What a cell stopped by an interrupt shows: who stopped it, the test's line and the
    student's line that was running (none of the checks' or the library's frames)."""
    budget = os.environ.get(BUDGET_VARIABLE)
    if budget:
        lines = [f"Interrupted: {what} did not finish in {budget} s, so Validate stopped it."]
    else:
        lines = [f"Interrupted: {what} was stopped while it ran."]
    test = _test_file(frames)
    cells = [f for i, f in enumerate(frames)
             if f.where == "cell" and (f.filename != test or i == 0)
             and not _repeats_its_caller(frames, i)]
    ours = [f for f in cells if f.filename != test]
    if len(cells) > MAX_FRAMES:
        cells = cells[:2] + cells[-(MAX_FRAMES - 2):]
    for frame in cells:
        running = frame is cells[-1] and frame.filename != test
        lines.append(_heading(frame, ", where your code was running" if running else
                              first if frame.filename == test else ""))
        lines += _lines_of(frame, CONTEXT if frame.filename != test else 0)
    if ours:
        lines.append("Your code was still running there: a loop whose condition never "
                     "becomes false, or one that runs far more times than it should? Fix "
                     "it, run its cell again, then this one.")
    else:
        lines.append("It was stopped before any code of yours ran, or after: run it again "
                     "and let it finish.")
    return lines


def interrupted(exc: BaseException, tb: "TracebackType | None", what: str = "this cell",
                first: str = ", the test") -> list[Frame]:
    """Give a KeyboardInterrupt (raised through `tb`) the rendering of
    `interrupted_lines`; returns the frames."""
    frames = frames_of(tb)
    lines = interrupted_lines(frames, what, first)
    try:
        exc._render_traceback_ = lambda: list(lines)  # type: ignore[attr-defined]
    except (AttributeError, TypeError):
        pass
    return frames


# ---------------------------------------------------------------- known slips


JOINED = ("the model's layer got {n} numbers where its rows of weights have {rows}: {times} "
          "as many. `+` on two Python lists joins them end to end ([a, b] + [c, d] is "
          "[a, b, c, d]); it does not add them number by number. Is a list of Values added "
          "to another list with `+`?")
_TIMES = {2: "twice", 3: "three times"}
LENGTHS = ("two lists of different lengths met ({a} and {b} items): print len() of the "
           "lists your code builds, before they reach the model.")
FLOAT_VALUE = ("a plain {kind} where a Value belongs: {attr} is a Value's, not a {kind}'s. "
               "A number taken out with .data, or worked out on floats, is no longer part of "
               "the graph: keep working on the Values.")
LIST_VALUE = ("a whole list where one Value belongs: {attr} is a Value's, not a list's. "
              "Apply it to each Value of the list.")
NONE_VALUE = ("None where a result belongs: does a function end without `return`?")
LIST_ARITHMETIC = ("arithmetic on a whole list (with a number, a Value or another list): Python "
                   "does not apply it item by item. Work on each Value of the list (zip the "
                   "lists to pair their items).")
INDEX = ("an index past the end of a list: check the lengths of the lists your code builds "
         "and the range of the loop that indexes them.")
SHAPES = ("the shapes of two tensors do not fit: {detail}. Print the .shape of the tensors "
          "your code builds: a tensor used transposed (.T, .transpose) has its dimensions "
          "swapped.")
WHOLE_TENSOR = ("a function of one number (math.exp, math.sqrt, float()) got a whole tensor: "
                "use torch's own (torch.exp, torch.sigmoid, torch.sqrt), which work on every "
                "element and keep the graph.")
ATTRIBUTE_LIKE = "Did you mean '{close}'? There is no '{name}' in {what}."
RECURSION = ("the function calls itself again and again and never stops (Python gives up "
             "after about a thousand calls): the smallest case, depth=0 among them, must "
             "return without calling itself.")
TEST_USED = ("the error was raised by the test's own code, on what your code returned: "
             "check the type and the length of what it returns.")

_LINEAR = re.compile(r"linear: a row of (\d+) weights for (\d+) inputs")
_DOT = re.compile(r"dot of sequences of different lengths: (\d+) and (\d+)")
_NO_ATTRIBUTE = re.compile(r"^'(\w+)' object has no attribute '(\w+)'")
_LIST_OPERAND = re.compile(
    r"unsupported operand type\(s\) for .+: '(list|tuple)' and|"
    r"unsupported operand type\(s\) for .+: '\w+' and '(list|tuple)'|"
    r"can only concatenate (list|tuple) \(not|can't multiply sequence by non-int")


_BROADCAST = re.compile(r"The size of tensor a \((\d+)\) must match the size of tensor b "
                        r"\((\d+)\) at non-singleton dimension (\d+)")
_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \((\d+x\d+) and (\d+x\d+)\)")
_NORM_SHAPE = re.compile(r"Given normalized_shape=\[([\d, ]+)\], expected input with shape "
                         r"\[\*, [\d, ]+\], but got input of size\s*\[([\d, ]+)\]")
_ONE_ELEMENT = re.compile(r"only one element tensors can be converted to Python scalars|"
                          r"must be real number, not Tensor")


def shape_detail(text: str) -> str:
    """What a torch shape mismatch's message says, in a few words ("" if it is not one)."""
    m = _BROADCAST.search(text)
    if m:
        a, b, dim = m.groups()
        return f"{a} against {b} in dimension {dim}, where they are added or multiplied"
    m = _MATMUL.search(text)
    if m:
        a, b = m.groups()
        return (f"a matrix product of {a} by {b}: the first one's columns must be as many as "
                f"the second one's rows")
    m = _NORM_SHAPE.search(text)
    if m:
        n, size = m.groups()
        return (f"a norm over the last {n} numbers got a tensor of shape "
                f"({', '.join(size.replace(' ', '').split(','))})")
    return ""


def attribute_like(exc: BaseException) -> str:
    """For an AttributeError with the object it was looked up on (Python 3.10+), the
    attribute of that object that its name may be a slip for ("" if none)."""
    name, obj = getattr(exc, "name", None), getattr(exc, "obj", None)
    if not name or obj is None:
        return ""
    try:
        names = [a for a in dir(obj) if isinstance(a, str) and not a.startswith("_")]
    except Exception:  # noqa: BLE001 (an object whose dir() raises)
        return ""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
    if not close:
        return ""
    what = f"the module {obj.__name__}" if inspect.ismodule(obj) else \
        f"a {type(obj).__name__}"
    return ATTRIBUTE_LIKE.format(close=close[0], what=what, name=name)


def _value_attributes() -> set[str]:
    try:
        from microgpt.engine import Value
    except ImportError:
        return set()
    return {a for a in dir(Value) if not a.startswith("__")}


def slip_hint(exc: BaseException, frames: Sequence[Frame] = ()) -> str:
    """The hint of the known slip that `exc` fits ("" if none)."""
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001
        return ""
    m = _LINEAR.search(text)
    if isinstance(exc, ValueError) and m:
        rows, n = int(m.group(1)), int(m.group(2))
        if n > rows > 0 and n % rows == 0:
            return JOINED.format(n=n, rows=rows, times=_TIMES.get(n // rows, f"{n // rows} times"))
        return LENGTHS.format(a=rows, b=n)
    m = _DOT.search(text)
    if isinstance(exc, ValueError) and m:
        return LENGTHS.format(a=m.group(1), b=m.group(2))
    m = _NO_ATTRIBUTE.match(text)
    if isinstance(exc, AttributeError) and m and m.group(2) in _value_attributes():
        kind, attr = m.groups()
        if kind in ("float", "int"):
            return FLOAT_VALUE.format(kind=kind, attr=attr)
        if kind in ("list", "tuple"):
            return LIST_VALUE.format(attr=attr)
    if isinstance(exc, (AttributeError, TypeError)) and "'NoneType'" in text:
        return NONE_VALUE
    if isinstance(exc, AttributeError):
        like = attribute_like(exc)
        if like:
            return like
    detail = shape_detail(text) if isinstance(exc, (RuntimeError, ValueError)) else ""
    if detail:
        return SHAPES.format(detail=detail)
    if isinstance(exc, (ValueError, TypeError)) and _ONE_ELEMENT.search(text):
        return WHOLE_TENSOR
    if isinstance(exc, TypeError) and _LIST_OPERAND.search(text):
        return LIST_ARITHMETIC
    if isinstance(exc, IndexError) and "out of range" in text:
        return INDEX
    if isinstance(exc, RecursionError):
        return RECURSION
    if frames and who_raised(frames) == "test":
        return TEST_USED
    return ""


# ---------------------------------------------------------------- names and syntax


def _names_near(frame: Any) -> set[str]:
    names = set(vars(builtins))
    if frame is not None:
        names |= {n for n in frame.namespace if not n.startswith("_")}
        names |= {n for n in getattr(frame, "local_names", ()) if not n.startswith(".")}
    return names


def name_hint(name: str, frame: Any) -> str:
    """For a NameError of `name` in the student's code: the name it may be a slip for."""
    close = difflib.get_close_matches(name, sorted(_names_near(frame) - {name}), n=1,
                                      cutoff=0.75) if name else []
    if close:
        return f"Did you mean '{close[0]}'?"
    return (f"Check its spelling; if '{name}' is defined in another cell, run that cell "
            f"first.")


def _history() -> list[str]:
    """The cells this kernel ran, by execution count ([] outside IPython)."""
    shell = _shell()
    try:
        return list(shell.history_manager.input_hist_raw) if shell is not None else []
    except Exception:  # noqa: BLE001
        return []


# names a graded test read that the student's kernel does not hold, with what the kernel
# said of each ({"broken": lines, "like": a name}): filled by the grader's test runner
# (`autograder.grading.remote`), where the test runs away from the notebook's history
ABSENT: dict = {}


def broken_lines(name: str) -> list[str] | None:
    """What a test says when the answer cell that defines `name` does not compile (it
    defined nothing), or None."""
    if name in ABSENT:
        return ABSENT[name].get("broken")
    broken = broken_definition(name)
    return syntax_lines(*broken) if broken is not None else None


def broken_definition(name: str) -> tuple[int, SyntaxError] | None:
    """(the cell's number, its SyntaxError) when the last cell run that defines `name`
    does not compile (so it defined nothing); None otherwise."""
    defines = re.compile(rf"^(?:def|class|async\s+def)\s+{re.escape(name)}\b|^{re.escape(name)}"
                         rf"\s*(?::[^=]*)?=[^=]", re.M)
    history = _history()
    for number in range(len(history) - 1, 0, -1):
        source = history[number]
        if not isinstance(source, str) or not defines.search(source):
            continue
        try:
            compile(_python(source), f"<cell {number}>", "exec", dont_inherit=True)
        except SyntaxError as error:
            return number, error
        return None
    return None


def _python(source: str) -> str:
    """A cell's source as IPython runs it (magics such as %time made Python)."""
    shell = _shell()
    try:
        return shell.transform_cell(source) if shell is not None else source
    except Exception:  # noqa: BLE001 (left as it is: compile says what is wrong)
        return source


def defined_like(name: str, frame: Any) -> str:
    """A name the notebook defines that `name` may be a slip for ("" if none)."""
    if name in ABSENT:
        return str(ABSENT[name].get("like") or "")
    return name_like(name, frame.namespace if frame is not None else {})


def name_like(name: str, namespace: Any) -> str:
    """A public name of `namespace` that `name` may be a slip for ("" if none)."""
    names = sorted(n for n in namespace if isinstance(n, str) and not n.startswith("_")
                   and n != name)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.8) if name else []
    return close[0] if close else ""


def syntax_lines(number: int, error: SyntaxError) -> list[str]:
    """What a test says about an answer cell that does not compile."""
    kind = type(error).__name__
    lines = [f"{kind} in your answer (Cell In[{number}], line {error.lineno}): {error.msg}"]
    if error.text:
        lines.append(f"----> {error.lineno} {error.text.rstrip()}")
    lines.append("The cell did not run, so it defined nothing: fix that line and run the "
                 "cell again, then this test.")
    return lines
