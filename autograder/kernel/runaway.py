"""A student's kernel when their code runs away: a print that floods the notebook, a loop
that does not end.

- **Printed output is capped per cell.** Past `output_limit()` characters (1 MB; stdout
  and stderr together), a cell's printed text is dropped here, in the kernel, and one line
  says so (`cut_note`). Without the cap, a print in a loop sent tens of MB to the browser:
  the server dropped it ("IOPub data rate exceeded"), the kernel's memory grew by
  gigabytes, and Validate failed with nbclient's "Timeout waiting for IOPub output". The
  note goes to the stream that was cut, so the cap never turns a passing cell into a
  failing one (nbgrader counts anything on stderr as a failure).
- **An interrupt stops the cells queued behind it.** The test cells are tagged
  `raises-exception` (a failing test must not stop Run All), and JupyterLab sends such a
  cell with `stop_on_error` off, so the kernel went on to the next queued cell after the
  student pressed Stop, which ran the same loop again: three Stops for one loop. After a
  cell ends in KeyboardInterrupt, the requests already queued are aborted, as they are
  after an error in any untagged cell. Not under nbclient (Validate, `residual-pack
  progress`: `NBGRADER_EXECUTION` is set), which sends one cell at a time.
- **An interrupt shows the student's line**, in any cell (`crash.interrupted`): where
  their code was running, not the frames of the checks, the engine or IPython.

`install` is called when the package is imported (`autograder.kernel.__init__`): the
notebooks' first code cell imports it, so the Lab, Validate's kernel and `residual-pack
progress` all get it, without a kernel config file in the student's environment. It does
nothing outside a student's IPython kernel (a script, the grader's process, the grading
kernel, which caps output its own way).
"""

import inspect
import os
import sys
from typing import Any, Callable  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel import crash

__all__ = ["install", "output_limit", "cut_note", "CUT_MARK", "LIMIT_VARIABLE",
           "OUTPUT_LIMIT", "size_text"]

OUTPUT_LIMIT = 1_000_000  # characters a cell may print, stdout and stderr together
LIMIT_VARIABLE = "RESIDUAL_PACK_CELL_OUTPUT_LIMIT"  # another limit, in characters
CUT_MARK = "the rest of its output was cut"  # in every note: Validate looks for it
# after the cut, what a cell's own top-level lines may still print (a test cell's success
# line, say): a print in a function is cut, one in the cell itself gets this much more
TOP_LEVEL_ALLOWANCE = 2000


def output_limit() -> int:
    """The characters a cell may print: $RESIDUAL_PACK_CELL_OUTPUT_LIMIT, else 1 MB."""
    try:
        limit = int(os.environ.get(LIMIT_VARIABLE, "") or OUTPUT_LIMIT)
    except ValueError:
        limit = OUTPUT_LIMIT
    return max(limit, 1)


def size_text(chars: int) -> str:
    """1000000 -> "1 MB", 250000 -> "250 kB", 300 -> "300 characters"."""
    if chars >= 1_000_000:
        return f"{chars / 1_000_000:g} MB"
    if chars >= 1000:
        return f"{chars / 1000:g} kB"
    return f"{chars} characters"


def cut_note(limit: int) -> str:
    """The line that ends a cell's output once it printed more than `limit` characters."""
    return (f"[your code printed more than {size_text(limit)} in this cell: {CUT_MARK}. "
            f"A print inside a loop? Print a few values, or only the last ones.]")


class _OutputCap:
    """The count of characters the running cell printed, and the writes that pass it.

    IPython 9 wraps each stream's `write` for the length of a cell (`_tee`, which keeps
    every printed string in its history) and puts the plain one back afterwards, so the
    cap wraps whatever `write` is there when each cell starts: outside IPython's, whose
    copy is capped too. (IPython 8 has no such wrapper: the cap's stays, and is not
    wrapped twice.)"""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.written = 0
        self.noted = False
        self.after = 0  # characters the cell's own lines printed after the cut

    def start_cell(self, *args: object) -> None:
        self.written = 0
        self.noted = False
        self.after = 0
        for stream in (sys.stdout, sys.stderr):
            if stream is not None and hasattr(stream, "write"):
                self.wrap(stream)

    def wrap(self, stream: Any) -> None:
        original = stream.write
        if getattr(original, "_residual_pack_cap", False):
            return

        def write(text: Any) -> Any:
            if not isinstance(text, str):
                return original(text)
            room = self.limit - self.written
            if len(text) <= room:
                self.written += len(text)
                return original(text)
            if not self.noted:
                self.noted = True
                self.written = self.limit
                if room > 0:
                    original(text[:room])
                original("\n" + cut_note(self.limit) + "\n")
                return len(text)
            if self.after + len(text) <= TOP_LEVEL_ALLOWANCE and _from_the_cell():
                self.after += len(text)
                return original(text)
            return len(text)

        write._residual_pack_cap = True  # type: ignore[attr-defined]
        stream.write = write  # this stream object only (the kernel's, not sys.__stdout__)


def _from_the_cell() -> bool:
    """Whether the print being written was called by a cell's own top-level code (not by
    a function): the caller of `print` is two frames up from the cap's `write`."""
    try:
        code = sys._getframe(2).f_code
    except ValueError:
        return False
    return code.co_name == "<module>" and bool(crash.cell_name(code.co_filename))


def _from_nbclient() -> bool:
    """Whether the cells come from nbclient (Validate, `residual-pack progress`), which
    sends the next cell only after the last one's reply, rather than from a front end."""
    return bool(os.environ.get("NBGRADER_EXECUTION"))


def _abort_queued(kernel: Any) -> bool:
    """Abort the execute requests already queued (ipykernel's own way after an error in a
    cell sent with stop_on_error); False when this ipykernel has no such step."""
    # ipykernel's private method: registered in autograder/compat.py (PRIVATE_NAMES)
    abort = getattr(kernel, "_abort_queues", None)
    if abort is None:
        return False
    try:
        if "subshell_id" in inspect.signature(abort).parameters:  # ipykernel 7
            parent = kernel.get_parent("shell") or {}
            abort(parent.get("header", {}).get("subshell_id"))
        else:  # ipykernel 6
            abort()
    except Exception:  # noqa: BLE001 (an ipykernel that changed: the queue runs on)
        return False
    return True


def _after_cell(shell: Any) -> Callable[[Any], None]:
    def after(result: Any) -> None:
        if isinstance(getattr(result, "error_in_exec", None), KeyboardInterrupt) \
                and not _from_nbclient():
            _abort_queued(getattr(shell, "kernel", None))
    return after


def _interrupt_shown(shell: Any) -> Callable[..., Any]:
    """IPython's `showtraceback` of this shell, with a KeyboardInterrupt raised in a cell
    shown by `crash.interrupted` (the cell's line and the student's, no frame of the
    library's or the checks'); a test cell's (`checks.task`) already has its rendering."""
    original = shell.showtraceback

    def showtraceback(exc_tuple: Any = None, *args: Any, **kwargs: Any) -> Any:
        try:
            etype, value, tb = exc_tuple if exc_tuple is not None else sys.exc_info()
            if isinstance(value, KeyboardInterrupt) \
                    and not hasattr(value, "_render_traceback_"):
                inner = tb
                while inner is not None and \
                        not crash.cell_name(inner.tb_frame.f_code.co_filename):
                    inner = inner.tb_next  # IPython's own frames above the cell's
                if inner is not None:
                    crash.interrupted(value, inner, first=", this cell")
        except Exception:  # noqa: BLE001 (IPython's own rendering, as without us)
            pass
        return original(exc_tuple, *args, **kwargs)

    return showtraceback


def install() -> bool:
    """Cap each cell's printed output and stop the queued cells after an interrupt, in a
    student's IPython kernel (once); False, doing nothing, anywhere else."""
    if "ipykernel" not in sys.modules or "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    kernel = getattr(shell, "kernel", None)
    if shell is None or kernel is None or not hasattr(shell, "events"):
        return False
    if type(kernel).__name__ == "GradingKernel":  # the grader's: it caps output itself
        return False
    if getattr(shell, "_residual_pack_runaway", False):
        return True
    cap = _OutputCap(output_limit())
    cap.start_cell()
    shell.events.register("pre_run_cell", cap.start_cell)
    shell.events.register("post_run_cell", _after_cell(shell))
    shell.showtraceback = _interrupt_shown(shell)
    shell._residual_pack_runaway = True
    return True
