"""Validate in a student's JupyterLab: off the server's event loop, within a time budget,
and runaway code said in the student's terms.

nbgrader 0.9's Validate button posts to `/assignments/validate`, whose handler
(`nbgrader.server_extensions.validate_assignment.handlers`) runs the whole notebook
synchronously on the server's event loop: while it runs, the server answers nothing (no
save, no interrupt, no file opened; `/api/status` took 95 s), a loop waits out one cell
timeout (120 s) per cell that calls it, and a flood of output ends in nbclient's raw
`CellTimeoutError: Timeout waiting for IOPub output` traceback.

This module is a Jupyter server extension that the student's Jupyter config enables in
place of nbgrader's (`jupyter-config/jupyter_server_config.d/residual-pack-student.json`).
Its handler answers the same requests with the same JSON (the nbgrader lab extension's
dialog shows it), but:

- the validation runs in a subprocess (`python -m autograder.student.validate`), awaited
  without blocking; a thread would not do: nbgrader's Validator changes the process's
  working folder and environment while it runs, and a thread cannot be stopped when the
  budget is spent. The subprocess is killed (its process group) past the total budget
  and a margin; its kernel exits with it (ipykernel watches its parent);
- in the subprocess each cell gets `cell_timeout` seconds (by default the course's
  `Execute.timeout`, 120 s) and the whole run `total_timeout` (600 s: four times the
  slowest notebook's full Run All, at the graded sizes Validate runs much less). The first
  cell that runs out of time is stopped once; the cells after it are not run (they would
  run the same loop again), and the dialog says which cell did not finish, in how many
  seconds, the line the kernel was running (`crash.interrupted_lines`), and which test
  cells were not run;
- a cell whose output was cut (`kernel.runaway`: more than 1 MB printed) says so in its
  entry when it fails; output that floods the kernel's channel anyway, or a kernel that
  dies, is said as such, not as nbclient's traceback;
- each failed cell reads in the dialog as the cell's first line (what the student sees at
  the top of the test cell) and its message, both wrapped at `DIALOG_WIDTH` characters
  (`for_the_dialog`): nbgrader's lab extension shows an entry's `source` and `error` in
  two `pre`s that do not wrap, so a whole test cell filled the dialog and the message
  scrolled sideways out of it.

Both budgets are settings of the `StudentValidate` section of the server's config
(`--StudentValidate.cell_timeout=20` on the command line, as the browser test does).

The extension also has the Lab's kernels talk to the server over encrypted sockets
(`encrypt_kernels`), as the release's `nbgrader_config.py` has Validate's.
"""

import asyncio
import json
import os
import re
import shlex
import signal
import sys
import textwrap
import time
import traceback
from html import escape
from pathlib import Path
from typing import Any

from traitlets import Integer
from traitlets.config import Configurable

from autograder.kernel.crash import BUDGET_VARIABLE
from autograder.kernel.runaway import CUT_MARK, output_limit, size_text

__all__ = ["StudentValidate", "validate_notebook", "run_validation", "describe_cell",
           "encrypt_kernels", "for_the_dialog", "_jupyter_server_extension_points",
           "_load_jupyter_server_extension"]

TIMEOUT_NAME = "CellTimeoutError"  # nbgrader's Execute.error_on_timeout
NOT_RUN_NAME = "NotRun"
MARGIN_S = 60  # past the total budget, before the server kills the subprocess
TASK_IN_CELL = re.compile(r'\b(?:task|needs_answer)\(\s*"([^"]+)"')
# characters per line in Validate's dialog: its pres do not wrap, and the dialog is at most
# 1000 px wide (about 120 characters of JupyterLab's code font); 72 leave room to spare
DIALOG_WIDTH = 72
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# the folder of the CSS that a student's JupyterLab loads as its custom.css
CUSTOM_CSS = Path(__file__).resolve().parent / "jupyter-config" / "custom"


class StudentValidate(Configurable):
    """The budgets of a student's Validate (the server's config, section StudentValidate)."""

    cell_timeout = Integer(
        0, help="Seconds one cell may run before Validate stops it; 0: the course's "
                "nbgrader Execute.timeout (nbgrader_config.py)").tag(config=True)
    total_timeout = Integer(
        600, help="Seconds the whole Validate may take, the kernel's start included"
    ).tag(config=True)


# ---------------------------------------------------------------- the words


def describe_cell(cell: Any) -> str:
    """A cell as the student knows it: "Task 1.1's test cell", "the cell that runs Task
    1.1" (an experiment), else the cell's first line."""
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    meta = cell.get("metadata", {}).get("nbgrader", {})
    found = TASK_IN_CELL.search(source)
    if found and meta.get("grade"):
        return f"{found.group(1)}'s test cell"
    if found:
        return f"the cell that runs {found.group(1)}"
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    return f"the cell that starts `{first[:60]}`"


def _first_line(cell: Any) -> str:
    source = cell.get("source", "")
    source = "".join(source) if isinstance(source, list) else source
    return next((line.strip() for line in source.splitlines() if line.strip()), "")[:90]


def _interrupt_lines(cell: Any) -> list[str]:
    """The kernel's own account of where the stopped cell was (`crash.interrupted_lines`),
    without its headline: the test's line and the student's line that was running."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error" and output.get("ename") == "KeyboardInterrupt":
            lines = [line for text in output.get("traceback", []) for line in
                     str(text).splitlines()]
            if lines and lines[0].startswith("Interrupted:"):
                return lines[1:]
    return []


def _test_cells_text(cells: list[Any]) -> str:
    """"the test cells of Task 1.1 (2) and Task 1.2 (1)"."""
    counts: dict[str, int] = {}
    for cell in cells:
        found = TASK_IN_CELL.search(cell.source)
        name = found.group(1) if found else _first_line(cell)
        counts[name] = counts.get(name, 0) + 1
    parts = [f"{name} ({n})" for name, n in counts.items()]
    joined = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return f"the test cells of {joined}"


def _was_cut(cell: Any) -> bool:
    return any(output.get("output_type") == "stream" and CUT_MARK in output.get("text", "")
               for output in cell.get("outputs", []))


def _wrapped(text: str, width: int = DIALOG_WIDTH) -> str:
    """`text` with each line longer than `width` broken at spaces; a line's continuation
    keeps its indent plus two spaces (a code line in a traceback stays readable)."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())]
        out.extend(textwrap.wrap(line, width, subsequent_indent=indent + "  ",
                                 break_on_hyphens=False, drop_whitespace=True) or [""])
    return "\n".join(out)


def _cell_title(source: str) -> str:
    """The line that names a cell in the dialog: its first line, a docstring's quotes off
    ("Task 1.1, output: residual_stack(...) is ..."; a written answer's "**Your answer to
    Task 1.3**")."""
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    for quote in ('"""', "'''"):
        if first.startswith(quote):
            first = first[len(quote):]
            first = first[:-len(quote)] if first.endswith(quote) else first + " ..."
    return first.strip() or "(an empty cell)"


def for_the_dialog(result: dict) -> dict:
    """nbgrader's validate result as nbgrader's lab extension should show it: each failed
    cell named by its first line, not its whole source, and its message as plain text
    (colour codes off) wrapped at `DIALOG_WIDTH`. The extension shows `source` as text and
    `error` as HTML, each in a `pre`; `raw_error` stays nbgrader's. A changed cell keeps its
    whole source (the student must find the cell that was edited)."""
    for entry in result.get("failed", []):
        entry["source"] = _wrapped(_cell_title(entry.get("source", "")))
        plain = ANSI.sub("", entry.get("raw_error", ""))
        entry["error"] = escape(_wrapped(plain), quote=False)
    return result


# ---------------------------------------------------------------- in the subprocess


def _budgeted_classes() -> type[Any]:
    """nbgrader's Validator and Execute, with a deadline and a first stop (imported here:
    the server loads this module without nbgrader's machinery)."""
    from nbclient.exceptions import CellTimeoutError, DeadKernelError
    from nbformat import NotebookNode
    from nbgrader import utils
    from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute
    from nbgrader.validator import Validator

    class BudgetedExecute(Execute):
        """nbgrader's Execute: each cell within min(its timeout, what is left of the
        total); after the first cell that did not finish, the others are not run."""

        deadline = None  # time.monotonic() by which everything must be done
        stop = None  # {"index", "why", "seconds"} of the cell that stopped the run

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.timeout_func = self._cell_timeout
            self.stop = None

        def _left(self) -> int | None:
            return max(1, int(self.deadline - time.monotonic())) if self.deadline else None

        def _cell_timeout(self, cell: Any) -> int:
            left = self._left()
            return self.timeout if left is None else min(self.timeout, left)

        def preprocess_cell(self, cell: Any, resources: dict[str, Any],
                            cell_index: int) -> tuple[Any, dict[str, Any]]:
            if cell.cell_type != "code":
                return cell, resources
            if self.stop is not None:
                cell.outputs = []
                if utils.is_grade(cell):
                    cell.outputs.append(NotebookNode(
                        output_type="error", ename=NOT_RUN_NAME, evalue="",
                        traceback=["Not run: Validate stopped at a cell above that did "
                                   "not finish."]))
                return cell, resources
            timeout = self._cell_timeout(cell)
            total_ran_out = self.deadline is not None and timeout < self.timeout
            # how long the output may lag behind the cell's reply, as grading waits: an
            # interrupted loop's traceback can take longer than nbclient's 4 s on a busy
            # machine, and a lag past it reads as a flood of output
            self.iopub_timeout = max(4, timeout)
            started = time.monotonic()
            try:
                cell, resources = super().preprocess_cell(cell, resources, cell_index)
            except CellTimeoutError:  # the cell ended, its output did not (a flood)
                self.stop = {"index": cell_index, "why": "flood",
                             "seconds": time.monotonic() - started}
                cell.outputs.append(NotebookNode(
                    output_type="error", ename="OutputFlood", evalue="",
                    traceback=["The kernel was still sending this cell's output when "
                               "Validate stopped waiting for it."]))
                return cell, resources
            except DeadKernelError:
                self.stop = {"index": cell_index, "why": "died",
                             "seconds": time.monotonic() - started}
                cell.outputs.append(NotebookNode(
                    output_type="error", ename="DeadKernel", evalue="",
                    traceback=["The kernel died while this cell ran (out of memory?)."]))
                return cell, resources
            if any(o.get("output_type") == "error" and o.get("ename") == TIMEOUT_NAME
                   for o in cell.outputs):
                self.stop = {"index": cell_index, "seconds": timeout,
                             "why": "total" if total_ran_out else "cell"}
            return cell, resources

    class BudgetedValidator(Validator):
        """nbgrader's Validator with `BudgetedExecute`, keeping the executed notebook."""

        preprocessors = [CheckCellMetadata, ClearOutput, BudgetedExecute]
        deadline = None
        executed = None
        stop = None

        # nbgrader's private method: registered in autograder/compat.py
        def _preprocess(self, nb: Any) -> Any:
            resources: dict[str, Any] = {}
            with utils.setenv(NBGRADER_VALIDATING="1", NBGRADER_EXECUTION="validate"):
                for preprocessor in self.preprocessors:
                    pp = preprocessor(parent=self)
                    if isinstance(pp, BudgetedExecute):
                        pp.deadline = self.deadline
                    nb, resources = pp.preprocess(nb, resources)
                    if isinstance(pp, BudgetedExecute):
                        self.stop = pp.stop
            self.executed = nb
            return nb

    return BudgetedValidator


def _load_config() -> Any:
    """nbgrader's config as its own validate handler loads it: the server's working
    folder (the course's nbgrader_config.py), then Jupyter's config folders."""
    from jupyter_core.paths import jupyter_config_path
    from nbgrader.apps import NbGrader

    paths = jupyter_config_path()
    paths.insert(0, os.getcwd())
    app = NbGrader()
    app.config_file_paths.append(paths)
    app.load_config_file()
    return app.config


def _runaway_report(result: dict[str, Any], nb: Any, stop: dict[str, Any] | None,
                    budgets: dict[str, Any]) -> dict[str, Any]:
    """nbgrader's result, with the cell that stopped the run first, said in the student's
    terms, and a cut output named in the failing cell it happened in."""
    cells = nb.cells
    failed = result.get("failed", [])
    by_source = {entry["source"]: entry for entry in failed}
    for cell in cells:
        entry = by_source.get(cell.source.strip())
        if entry is not None and _was_cut(cell):
            note = (f"Your code printed more than {size_text(budgets['output'])} in this "
                    f"cell: the output was cut.")
            entry["error"] = note + "\n" + entry["error"]
            entry["raw_error"] = note + "\n" + entry["raw_error"]
    if stop is None:
        return result
    cell = cells[stop["index"]]
    what = describe_cell(cell)
    headline = {
        "cell": f"{what[0].upper()}{what[1:]} did not finish in {budgets['cell']} s, so "
                f"Validate stopped it.",
        "total": f"Validate's time ran out ({budgets['total']} s in all) while "
                 f"{what} ran, so it stopped there.",
        "flood": f"{what[0].upper()}{what[1:]} sent more output than Validate could "
                 f"take in (your code printed too much), so Validate stopped there.",
        "died": f"The kernel died while {what} ran (did it run out of memory?), so "
                f"Validate stopped there.",
    }[stop["why"]]
    where = _interrupt_lines(cell)
    lines = [headline, *where]
    not_run = [c for c in cells[stop["index"] + 1:]
               if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")]
    if not_run:
        lines.append("Not run after it: " + _test_cells_text(not_run) + ".")
    lines.append("Then Validate again." if where else
                 "Fix it, run the cell in the notebook to see it finish, then Validate again.")
    text = "\n".join(lines)
    from html import escape

    kept = [e for e in failed if e["source"] not in {c.source.strip() for c in not_run}
            and e["source"] != cell.source.strip()]
    result["failed"] = [{"source": cell.source.strip(), "error": escape(text),
                         "raw_error": text}] + kept
    result.pop("passed", None)
    return result


def validate_notebook(path: str, cell_timeout: int = 0, total_timeout: int = 600) -> dict:
    """Validate the notebook at `path` (in this process) as nbgrader's handler does,
    within the budgets: {"success": bool, "value": nbgrader's result or a message}."""
    from nbgrader.nbgraderformat import SchemaTooNewError, SchemaTooOldError

    started = time.monotonic()
    try:
        config = _load_config()
        if cell_timeout:
            config.Execute.timeout = cell_timeout
        budget = config.Execute.get("timeout", 30) if "Execute" in config else 30
        budget = int(budget or 30)
        os.environ[BUDGET_VARIABLE] = str(budget)  # the kernel's words on an interrupt
        validator = _budgeted_classes()(config=config)
        validator.deadline = started + total_timeout
        result = validator.validate(path)
    except SchemaTooOldError:
        return {"success": False, "value": (
            f"The notebook '{path}' uses an old version of the nbgrader metadata format. "
            f"Please **back up this notebook** and then update the metadata using:\n\n"
            f"{shlex.quote(str(Path(sys.executable).with_name('nbgrader')))} update "
            f"{shlex.quote(str(path))}\n")}
    except SchemaTooNewError:
        return {"success": False, "value": (
            f"The notebook '{path}' uses a newer version of the nbgrader metadata format. "
            f"Please update your version of nbgrader to the latest version to be able to "
            f"use this notebook.")}
    except Exception as exc:  # noqa: BLE001 (said in the dialog; the whole trace in the log)
        traceback.print_exc()
        return {"success": False, "value": (
            f"Validate could not run the notebook: {type(exc).__name__}: {exc}\n"
            f"(the server's log has the details)")}
    if validator.executed is not None:
        budgets = {"cell": budget, "total": total_timeout, "output": output_limit()}
        result = _runaway_report(result, validator.executed, validator.stop, budgets)
    return {"success": True, "value": for_the_dialog(result)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m autograder.student.validate",
                                description="nbgrader's Validate within a time budget; "
                                            "prints its JSON answer on the last line.")
    p.add_argument("path")
    p.add_argument("--cell-timeout", type=int, default=0)
    p.add_argument("--total-timeout", type=int, default=600)
    args = p.parse_args(argv)
    # SIGTERM from the server: end as after Ctrl+C, so that nbclient shuts the kernel down
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    answer = validate_notebook(args.path, args.cell_timeout, args.total_timeout)
    sys.stdout.write("\n" + json.dumps(answer) + "\n")
    sys.stdout.flush()
    return 0


# ---------------------------------------------------------------- in the server


async def run_validation(path: str, cell_timeout: int, total_timeout: int,
                         log: Any = None) -> dict:
    """Run `main` in a subprocess of its own process group, without blocking the event
    loop; past the total budget and `MARGIN_S`, stop it (SIGTERM, then SIGKILL)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "autograder.student.validate", path,
        f"--cell-timeout={cell_timeout}", f"--total-timeout={total_timeout}",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        start_new_session=True, cwd=os.getcwd())
    try:
        out, err = await asyncio.wait_for(proc.communicate(), total_timeout + MARGIN_S)
    except TimeoutError:
        for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                await asyncio.wait_for(proc.wait(), wait)
                break
            except TimeoutError:
                continue
        return {"success": False, "value": (
            f"Validate did not finish in {total_timeout} s and was stopped. A cell that "
            f"does not end? Run the notebook's cells one by one to find it (Stop, the "
            f"square in the toolbar, stops a cell).")}
    if log is not None and err:
        log.info("Validate's log for %s:\n%s", path, err.decode(errors="replace")[-20000:])
    lines = out.decode(errors="replace").strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        tail = err.decode(errors="replace").strip().splitlines()[-3:]
        return {"success": False, "value": (
            f"Validate stopped without an answer (exit code {proc.returncode}): "
            + " / ".join(tail))}


def _handlers() -> list[tuple[str, Any]]:
    from jupyter_server.base.handlers import JupyterHandler
    from nbgrader.server_extensions.validate_assignment.handlers import NbGraderVersionHandler
    from tornado import web

    class ValidateHandler(JupyterHandler):
        """POST /assignments/validate, as nbgrader's, but awaited off the event loop."""

        @web.authenticated
        async def post(self) -> None:
            try:
                path = self.get_argument("path")
            except web.MissingArgumentError:
                path = (self.get_json_body() or {}).get("path", "")
            root = Path(self.settings["root_dir"]).resolve()
            target = (root / path).resolve()
            if not target.is_relative_to(root):
                raise web.HTTPError(403, "Access denied: path outside allowed directory")
            budget = self.settings["residual_pack_validate"]
            self.log.info("Validating %s (cell budget %s s, total %s s)", target,
                          budget.cell_timeout or "nbgrader's", budget.total_timeout)
            answer = await run_validation(str(target), budget.cell_timeout,
                                          budget.total_timeout, self.log)
            if not answer.get("success") and isinstance(answer.get("value"), str):
                answer["value"] = _wrapped(answer["value"])  # shown in a pre that does not wrap
            self.finish(json.dumps(answer))

    return [(r"/assignments/validate", ValidateHandler),
            (r"/nbgrader_version", NbGraderVersionHandler)]


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "autograder.student.validate"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the handlers (in place of nbgrader's validate_assignment extension, which
    the student's config switches off)."""
    from jupyter_server.utils import url_path_join

    webapp = serverapp.web_app
    base_url = webapp.settings["base_url"]
    webapp.settings["root_dir"] = serverapp.root_dir
    webapp.settings["residual_pack_validate"] = StudentValidate(parent=serverapp)
    # JupyterLab serves custom/custom.css (the student's config sets LabApp.custom_css)
    # from these folders, searched at each request: ours after the user's own, so that a
    # student's ~/.jupyter/custom/custom.css still wins
    custom = webapp.settings.get("static_custom_path")
    if isinstance(custom, list) and str(CUSTOM_CSS) not in custom:
        custom.insert(min(1, len(custom)), str(CUSTOM_CSS))
    webapp.add_handlers(".*$", [(url_path_join(base_url, pattern), handler)
                                for pattern, handler in _handlers()])
    serverapp.log.info("residual-pack: Validate runs off the event loop (%s)",
                       "autograder.student.validate")
    if encrypt_kernels(serverapp):
        serverapp.log.info("residual-pack: the kernels' sockets are encrypted (CurveZMQ)")


def encrypt_kernels(serverapp: Any) -> bool:
    """Have the Lab's kernels talk to the server over CurveZMQ-encrypted sockets
    (jupyter_server's `MappingKernelManager.transport_encryption`, "auto": for the kernels
    whose kernelspec says they can, ipykernel's among them), unless the server's config
    sets it, or pyzmq has no CURVE (PyPI's wheels have it: without, every kernel start
    would fail). Over plain TCP, ipykernel 7.4 prints at each kernel start that anyone who
    can listen on the machine reads the code and its outputs. Whether it did."""
    import zmq

    km = getattr(serverapp, "kernel_manager", None)
    if km is None or not zmq.has("curve") or not km.has_trait("transport_encryption"):
        return False
    config = serverapp.config
    if any("transport_encryption" in config.get(cls.__name__, {})
           for cls in type(km).__mro__):
        return False
    km.transport_encryption = "auto"
    return True


if __name__ == "__main__":
    sys.exit(main())
