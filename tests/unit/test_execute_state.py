"""autograder/grading/execute_state.py and SandboxedExecute's handling of a cell, driven
against a scripted kernel client (no kernel, no sandbox): the messages nbclient reads are
the ones a real ipykernel sends, in the same order; whole notebooks against real kernels
are graded in tests/integration and tests/hostile."""

import asyncio
import itertools
from queue import Empty

import nbformat
import pytest

from autograder.grading.execute import SandboxedExecute
from autograder.grading.execute_state import (
    MAX_LINES,
    NotebookState,
    OutputBudget,
    message_size,
)
from autograder.grading.notebook_record import NotebookRun
from autograder.kernel.policy import OUTPUT_NOTE
from autograder.sandbox.limits import Limits


class Channel:
    """A kernel client's channel: `get_msg` waits up to `timeout` seconds, then Empty."""

    def __init__(self):
        self.queue = asyncio.Queue()

    async def get_msg(self, timeout=None):
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise Empty from None


def message(kind, parent, **content):
    return {"header": {"msg_type": kind, "msg_id": f"{kind}-{parent}"}, "msg_type": kind,
            "parent_header": {"msg_id": parent}, "metadata": {}, "content": content}


def stream(parent, text, name="stdout"):
    return message("stream", parent, name=name, text=text)


class FakeKernel:
    """The kernel client and manager nbclient talks to, scripted cell by cell: each script
    gets the kernel and the cell's message id and puts what the kernel would send."""

    def __init__(self, *scripts):
        self.shell, self.iopub = Channel(), Channel()
        self.shell_channel, self.iopub_channel = self.shell, self.iopub
        self.scripts = list(scripts)
        self.ids = (f"m{i}" for i in itertools.count())
        self.alive = True
        self.on_interrupt = None  # what the kernel does when interrupted
        self.answers = True  # replies to kernel_info
        self.interrupts = 0

    def execute(self, code, store_history=True, stop_on_error=True):
        msg_id = next(self.ids)
        self.scripts.pop(0)(self, msg_id)
        return msg_id

    def finish(self, msg_id, count, status="ok", **error):
        self.iopub.queue.put_nowait(message("status", msg_id, execution_state="idle"))
        self.shell.queue.put_nowait(message("execute_reply", msg_id, status=status,
                                            execution_count=count, **error))

    def is_alive(self):
        return self.alive

    def kernel_info(self):
        msg_id = next(self.ids)
        if self.answers:
            self.shell.queue.put_nowait(message("kernel_info_reply", msg_id, status="ok"))
        return msg_id

    def interrupt_kernel(self):
        self.interrupts += 1
        if self.on_interrupt is not None:
            self.on_interrupt(self)


class Plan:
    """A kernel plan whose kernel ended as `ended` says (`KernelPlan.ended`)."""

    def __init__(self, ended=None):
        self._ended = ended or {}

    def ended(self):
        return self._ended


def run_cells(sources, kernel, limits=None, plan=None):
    """The cells of `sources` run by a SandboxedExecute against `kernel`: the notebook and
    the step (its `state` still in place)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    step = SandboxedExecute()
    step.state = NotebookState.begin(limits or Limits(), plan or Plan(), NotebookRun(),
                                     reference={}, last=len(nb.cells))

    async def run():
        step.nb, step.kc, step.km = nb, kernel, kernel
        step.reset_execution_trackers()
        for index, cell in enumerate(nb.cells):
            await step.async_execute_cell(cell, index, store_history=True)

    asyncio.run(run())
    step.limit_cells(nb)  # what preprocess does once the notebook is done
    return nb, step


def printing(*texts, count=1):
    def script(kernel, msg_id):
        kernel.iopub.queue.put_nowait(message("status", msg_id, execution_state="busy"))
        kernel.iopub.queue.put_nowait(message("execute_input", msg_id, code="",
                                              execution_count=count))
        for text in texts:
            kernel.iopub.queue.put_nowait(stream(msg_id, text))
        kernel.finish(msg_id, count)
    return script


def test_a_normal_cell_keeps_its_output_and_count():
    nb, step = run_cells(["print('hello')"], FakeKernel(printing("hello\n")))
    cell = nb.cells[0]
    assert [(o["output_type"], o["text"]) for o in cell.outputs] == [("stream", "hello\n")]
    assert cell.execution_count == 1
    [record] = step.state.run.cells
    assert (record.status, record.kind, record.output_dropped) == ("ok", "own", 0)
    assert step.state.budget.kept == message_size(stream("m0", "hello\n"))
    assert step.state.stopped == "" and step.state.run.ended == ""


def test_an_output_flood_is_cut_at_the_notebooks_cap_with_one_note():
    chunk = "x" * 500 + "\n"
    limits = Limits(output=4 * message_size(stream("m0", chunk)))
    kernel = FakeKernel(printing(*[chunk] * 10), printing("after\n", count=2))
    nb, step = run_cells(["flood()", "print('after')"], kernel, limits)
    flood, after = nb.cells
    texts = [o["text"] for o in flood.outputs]
    assert texts[:4] == [chunk] * 4
    notes = [t for t in texts if "kept per notebook was left out" in t]
    assert len(texts) == 5 and len(notes) == 1  # four chunks, then one note: no more
    assert "beyond the " in notes[0]
    budget = step.state.budget
    assert budget.kept == limits.output
    assert budget.dropped[0] == 6 * message_size(stream("m0", chunk))
    assert step.state.run.cells[0].output_dropped == budget.dropped[0]
    # the budget is the notebook's: the next cell's output is left out too, the cell runs
    assert step.state.run.cells[1].status == "ok"
    assert [o["text"] for o in after.outputs if "after" in o["text"]] == []


def test_the_kernels_own_cut_is_counted_as_output_left_out():
    kernel = FakeKernel(printing("start\n", "\n" + OUTPUT_NOTE + "\n"))
    nb, step = run_cells(["print('x' * 10**9)"], kernel)
    assert step.state.run.cells[0].output_dropped == 1
    assert OUTPUT_NOTE in nb.cells[0].outputs[-1]["text"]  # within the cap: kept


def test_a_cell_prints_no_more_than_nbgraders_line_limit():
    """nbgrader's LimitOutput rule, applied by the Execute step itself (the one place)."""
    lines = "".join(f"{i}\n" for i in range(MAX_LINES + 500))
    nb, _ = run_cells(["for i in range(1500): print(i)"], FakeKernel(printing(lines)))
    [output] = nb.cells[0].outputs
    shown = output["text"].split("\n")
    assert len(shown) == MAX_LINES and shown[-1] == "... Output truncated ..."
    assert shown[:3] == ["0", "1", "2"]


def test_a_traceback_is_shortened_in_its_middle():
    def raising(kernel, msg_id):
        tb = [f"line {i}" for i in range(300)]
        kernel.iopub.queue.put_nowait(message("error", msg_id, ename="E", evalue="v",
                                              traceback=tb))
        kernel.finish(msg_id, 1, status="error", ename="E", evalue="v", traceback=tb)

    nb, step = run_cells(["deep()"], FakeKernel(raising))
    [error] = nb.cells[0].outputs
    assert len(error["traceback"]) == 100
    assert error["traceback"][50] == "... Traceback truncated ..."
    assert error["traceback"][-1] == "line 299"
    assert step.state.run.cells[0].status == "error"


def display(kind, parent, text, display_id="d"):
    return message(kind, parent, data={"text/plain": text}, metadata={},
                   transient={"display_id": display_id})


def test_display_updates_are_counted_against_the_cap():
    """Each update is written into every earlier output with its display id: each of
    those writes counts, and once the budget is spent no update is made."""
    update = display("update_display_data", "m1", "u" * 300)

    def shows(kernel, msg_id):
        kernel.iopub.queue.put_nowait(display("display_data", msg_id, "first"))
        kernel.iopub.queue.put_nowait(display("display_data", msg_id, "second"))
        kernel.finish(msg_id, 1)

    def updates(kernel, msg_id):
        for _ in range(5):
            kernel.iopub.queue.put_nowait(display("update_display_data", msg_id, "u" * 300))
        kernel.finish(msg_id, 2)

    # the second display is written into the first output with its id too: counted twice
    shown = (message_size(display("display_data", "m0", "first"))
             + 2 * message_size(display("display_data", "m0", "second")))
    limits = Limits(output=shown + 2 * 2 * message_size(update) + 10)
    nb, step = run_cells(["show()", "update()"], FakeKernel(shows, updates), limits)
    budget = step.state.budget
    # two updates fit, each written into two outputs; the third and later are refused
    assert budget.kept == shown + 2 * 2 * message_size(update)
    assert budget.dropped[1] == 3 * 2 * message_size(update)
    assert [o["data"]["text/plain"] for o in nb.cells[0].outputs] == ["u" * 300] * 2
    assert ["kept per notebook was left out" in o.get("text", "")
            for o in nb.cells[1].outputs] == [True]
    assert step.state.run.cells[1].output_dropped == budget.dropped[1]


def test_a_timeout_interrupts_the_cell_and_the_notebook_goes_on():
    def hangs(kernel, msg_id):
        def interrupted(kernel):  # ipykernel: the cell ends in KeyboardInterrupt
            kernel.iopub.queue.put_nowait(message("error", msg_id, ename="KeyboardInterrupt",
                                                  evalue="", traceback=["KeyboardInterrupt"]))
            kernel.finish(msg_id, 1, status="error", ename="KeyboardInterrupt", evalue="",
                          traceback=["KeyboardInterrupt"])
        kernel.on_interrupt = interrupted

    kernel = FakeKernel(hangs, printing("next\n", count=2))
    nb, step = run_cells(["while True: pass", "print('next')"], kernel,
                         Limits(cell_timeout=1, grace=2))
    first, second = step.state.run.cells
    assert kernel.interrupts == 1
    assert (first.status, first.ename, first.evalue) == (
        "timeout", "CellTimeoutError", "stopped after 1 s")
    assert "CellTimeoutError" in [o.get("ename") for o in nb.cells[0].outputs]
    assert second.status == "ok" and nb.cells[1].outputs[0]["text"] == "next\n"


def test_a_kernel_that_ignores_the_interrupt_is_stopped():
    def hangs(kernel, msg_id):
        kernel.answers = False

    kernel = FakeKernel(hangs, printing("never\n"))
    nb, step = run_cells(["while True: pass", "print('never')"], kernel,
                         Limits(cell_timeout=1, grace=1))
    first, second = step.state.run.cells
    why = ("the kernel did not finish cell 0 within its time limit and did not stop "
           "when interrupted")
    assert (first.status, first.evalue) == ("stuck", why)
    assert step.state.stopped == why == step.state.run.ended
    assert (second.status, second.evalue) == ("not run", why)
    assert nb.cells[1].outputs[0]["evalue"] == f"not run: {why}"


def test_a_dead_kernel_ends_the_notebook_with_the_reason():
    def dies(kernel, msg_id):
        kernel.iopub.queue.put_nowait(stream(msg_id, "before\n"))
        kernel.alive = False

    kernel = FakeKernel(dies, printing("never\n"))
    limits = Limits(cell_timeout=5)
    nb, step = run_cells(["os._exit(0)", "print('never')"], kernel, limits,
                         Plan({"signal": 11}))
    first, second = step.state.run.cells
    why = "the kernel ended on SIGSEGV: it crashed (segmentation fault)"
    assert (first.status, first.ename, first.evalue) == ("died", "KernelDied", why)
    assert step.state.run.ended == f"{why}, in cell 0"
    assert nb.cells[0].outputs[-1]["evalue"] == f"{why}; the cells after this one did not run"
    assert (second.status, second.evalue) == ("not run", why)


def test_the_notebooks_time_limit_stops_the_next_cell():
    kernel = FakeKernel(printing("one\n"))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(1)")])
    step = SandboxedExecute()
    step.state = NotebookState.begin(Limits(notebook_timeout=30), Plan(), NotebookRun(),
                                     reference={}, last=0)
    step.state.deadline -= 31
    step.nb, step.kc, step.km = nb, kernel, kernel
    asyncio.run(step.async_execute_cell(nb.cells[0], 0))
    [record] = step.state.run.cells
    assert (record.status, record.evalue) == (
        "not run", "the notebook used up its time limit (30 s)")
    assert kernel.scripts  # nothing was sent to the kernel


def test_the_budget_admits_up_to_its_limit_and_notes_once_per_cell():
    budget, outs = OutputBudget(100), []
    assert budget.admit(60, 0, outs) and budget.admit(40, 0, outs)
    assert not budget.admit(1, 0, outs) and not budget.admit(5, 0, outs)
    assert len(outs) == 1 and budget.dropped == {0: 6} and budget.kept == 100
    assert not budget.admit(1, 1, None)  # no outputs to note in (an update, no cell)
    assert budget.dropped_in(1) == 1 and budget.dropped_in(2) == 0


def test_no_state_outside_a_notebook():
    with pytest.raises(RuntimeError, match="no notebook"):
        SandboxedExecute().state  # noqa: B018
