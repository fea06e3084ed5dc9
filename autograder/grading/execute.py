"""nbgrader's Execute step with the kernel in the sandbox: `SandboxedExecute`.

A module-level nbgrader preprocessor (configurable like nbgrader's own `Execute`, whose
options it inherits), which the course's `nbgrader_config.py` puts in place of `Execute`
in autograde (`pipeline.AUTOGRADE_STEPS`), for nbgrader's own commands and for
`residual-pack grade`'s work course alike. Its sandbox is the one its config names
(`sandbox_root`: `residual-pack grade` sets it to its run's), else this process's own,
made on first use (`session.own_sandbox`). It runs in the grading worker. For each
notebook it asks the sandbox for a kernel plan (`plan.Sandbox.plan`), starts the kernel
in it (`SandboxKernelManager`, `bubblewrap.start`), runs each graded test cell's witness
version here, against the kernel (`remote`), and
judges what its checks observed against the reference run (`judge`), and turns every
failure of the student's code (a time limit, a dead or stuck kernel, a flood of output)
into an error in the cell it happened in. Every way a kernel's message can reach the
graded notebook (outputs, display updates, execution counts) is counted against one
output budget per notebook, and each cell's final outputs are cut to nbgrader's per-cell
limits, both decided in one place (`execute_state.OutputBudget`); widget messages and
run timings are never kept (see the methods under "the output limit"). What it knows of
the notebook it runs is one `execute_state.NotebookState`, made for each notebook. What
it saw goes into the graded notebook's metadata
once the kernel is gone (`notebook_record.write_run`: each cell's `CellRun`, and the
`NotebookRun`), where whatever reads the autograded notebook finds it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import time
from queue import Empty
from typing import TYPE_CHECKING, Any, cast

import zmq
import zmq.asyncio
from jupyter_client.asynchronous import AsyncKernelClient
from jupyter_client.manager import AsyncKernelManager
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Unicode

from autograder import cells
from autograder.grading.execute_state import NotebookState, message_size
from autograder.grading.judge import verdict as judge_cell
from autograder.grading.notebook_record import CellRun, NotebookRun, stamp, write_run
from autograder.grading.remote import TestOutcome, graded_cell
from autograder.grading.report import describe_end
from autograder.grading.testsource import GradedCell, GradedCellError, prepare
from autograder.sandbox import bubblewrap

if TYPE_CHECKING:
    from jupyter_client.client import KernelClient

    from autograder.grading.plan import KernelPlan, Sandbox
    from autograder.sandbox.limits import Limits

__all__ = ["LEFT_OUT", "SandboxKernelClient", "SandboxKernelManager", "SandboxedExecute"]

# what a cell of the course that grading leaves out shows in the graded notebook
LEFT_OUT = ("[not run while grading: no graded test reads this cell; "
            "run it yourself to see its output]\n")


def _launch_parts(plan: KernelPlan) -> tuple[bubblewrap.SandboxSpec, Limits, bubblewrap.Level]:
    """What `bubblewrap.start` is given for the kernel of `plan`: its spec (without argv),
    its limits, its level."""
    return cast("tuple[bubblewrap.SandboxSpec, Limits, bubblewrap.Level]", plan.bwrap)


class SandboxKernelClient(AsyncKernelClient):
    """jupyter_client's client, ready sooner: once the kernel has answered kernel_info
    and IOPub is seen to be connected, it waits for IOPub to be quiet for `quiet`
    seconds (jupyter_client waits 0.2 s, a fifth of a warm kernel's start-up). A late
    status message does no harm: nbclient reads a cell's messages by their parent."""

    quiet = 0.02

    # stands in for jupyter_client's private _async_wait_for_ready (and calls its
    # _handle_kernel_info_reply, _async_is_alive): registered in compat.PRIVATE_NAMES
    async def _ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        while True:
            self.kernel_info()
            try:
                reply = await self.shell_channel.get_msg(timeout=1)
            except Empty:
                reply = {}
            if reply.get("msg_type") == "kernel_info_reply":
                try:  # the reply's own status messages show that IOPub is connected
                    await self.iopub_channel.get_msg(timeout=0.2)
                except Empty:
                    pass
                else:
                    self._handle_kernel_info_reply(reply)
                    break
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout} seconds")
        while True:
            try:
                await self.iopub_channel.get_msg(timeout=self.quiet)
            except Empty:
                return

    wait_for_ready = _ready


class SandboxKernelManager(AsyncKernelManager):
    """Starts the kernel in its sandbox (`bubblewrap.start`, the plan's spec), over IPC
    sockets in the kernel's own folder, and refuses messages above the size limit."""

    client_context: zmq.asyncio.Context | None = None  # made by the first `client`

    def __init__(self, plan: KernelPlan, limits: Limits, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plan = plan
        self.limits = limits
        self.transport = "ipc"
        self.ip = str(plan.conn / "k")
        self.connection_file = str(plan.conn / "kernel.json")
        self.context.setsockopt(zmq.MAXMSGSIZE, limits.message)
        self.client_factory = SandboxKernelClient

    # (jupyter_client types KernelManager.client as the blocking client's, even in its
    # async manager, which makes async ones)
    def client(self, **kwargs: Any) -> AsyncKernelClient:  # type: ignore[override]
        # the client's sockets come from a context of their own whose sockets refuse
        # (and disconnect) a peer that sends a message above the limit
        if self.client_context is None:
            self.client_context = zmq.asyncio.Context()
            self.client_context.setsockopt(zmq.MAXMSGSIZE, self.limits.message)
            # the client connects before the kernel listens: retry every 10 ms, not 100
            self.client_context.setsockopt(zmq.RECONNECT_IVL, 10)
        kwargs.setdefault("context", self.client_context)
        return super().client(**kwargs)

    def close_client_context(self) -> None:
        context, self.client_context = self.client_context, None
        if context is not None:
            context.destroy(linger=0)

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        """The kernel's command as the kernel sees it, and its connection file: the same
        ports and key, the sockets at the writable folder's path as the kernel sees it."""
        spec, _, level = _launch_parts(self.plan)
        python, run = bubblewrap.kernel_paths(spec, level)
        info = json.loads(open(self.connection_file).read())  # noqa: SIM115
        info["ip"] = f"{run}/k"
        with open(self.plan.conn / "kernel-in.json", "w") as f:
            json.dump(info, f)
        return [python, "-m", "autograder.kernel.gradekernel", "-f",
                f"{run}/kernel-in.json", *(extra_arguments or [])]

    # overrides of jupyter_client's private methods: registered in compat.PRIVATE_NAMES
    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:
        spec, limits, level = _launch_parts(self.plan)
        # nothing of the kernel reaches the grader's terminal or log but its messages
        process = bubblewrap.start(
            dataclasses.replace(spec, argv=tuple(kernel_cmd)), limits, level,
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.plan.process = process
        provisioner: Any = self.provisioner  # jupyter_client's LocalProvisioner
        provisioner.process = process
        provisioner.pid = provisioner.pgid = process.pid  # its own session (start)
        provisioner.cwd = "/"
        self._reconcile_connection_info(provisioner.connection_info)
        return None

    _launch_kernel = run_sync(_async_launch_kernel)  # type: ignore[assignment]

    async def _async_interrupt_kernel(self) -> None:
        # a signal to the launch chain's group does not reach a kernel in bwrap's pid
        # namespace and session: ask the kernel itself (ipykernel signals its own process)
        if self.kernel_spec is not None:
            self.kernel_spec.interrupt_mode = "message"
        await super()._async_interrupt_kernel()

    interrupt_kernel = _async_interrupt_kernel


class SandboxedExecute(Execute):
    """nbgrader's Execute, with the kernel in a sandbox and every failure of the
    student's code (a time limit, a dead or stuck kernel, a flood of output)
    turned into an error in the cell it happened in, the notebook going on when it
    can. Graded test cells run in this process; the kernel only answers their calls.
    What it knows of the notebook being run is one `NotebookState` (`state`)."""

    # the kernel's widget messages are never kept: nbclient would write their state into
    # the notebook's metadata (nb.metadata.widgets), past the output limit (see
    # `handle_comm_msg`); nor are run timings, which the graded notebook has no use for
    store_widget_state = Bool(False).tag(config=True)
    record_timing = Bool(False).tag(config=True)

    sandbox_root = Unicode(
        "", help="The folder of the grading run's sandbox that this process opened "
                 "(`residual-pack grade` sets it for its work course); empty: this "
                 "process's own sandbox, made on first use from the course's limits").tag(
                     config=True)

    _notebook: NotebookState | None = None

    @property
    def state(self) -> NotebookState:
        """The notebook being run (set by `preprocess`, or by a test)."""
        if self._notebook is None:
            raise RuntimeError("SandboxedExecute has no notebook: preprocess one")
        return self._notebook

    @state.setter
    def state(self, state: NotebookState | None) -> None:
        self._notebook = state

    def grading_sandbox(self, assignment: str) -> Sandbox:
        """The sandbox to run `assignment`'s notebooks in (the one `sandbox_root` names, else
        `session.own_sandbox`), with the
        reference run's records of `assignment` (`reference_run.cached_reference`: made
        once, cached in the course's `.grading/`, run again when the source changed)."""
        from autograder.compat import check_schemas_once
        from autograder.grading.nbgrader_steps import coursedir_of
        from autograder.grading.plan import sandbox_at
        from autograder.grading.reference_run import cached_reference

        check_schemas_once()
        coursedir = coursedir_of(self)
        if self.sandbox_root:
            sandbox = sandbox_at(self.sandbox_root)
        else:
            from autograder.grading.session import own_sandbox

            sandbox = own_sandbox(coursedir.root, self.log)
        if assignment not in sandbox.references:
            sandbox.references[assignment] = cached_reference(
                coursedir.root, assignment, timeout=sandbox.limits.cell_timeout,
                say=lambda text: self.log.info("residual-pack: %s", text))
        return sandbox

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any] | None = None,
                   km: AsyncKernelManager | None = None) -> tuple[NotebookNode, dict[str, Any]]:
        info = (resources or {}).get("nbgrader", {})
        student, notebook = info.get("student", ""), info.get("notebook", "")
        assignment = info.get("assignment", "")
        sandbox = self.grading_sandbox(assignment)
        run = NotebookRun(level=sandbox.level, limits=dataclasses.asdict(sandbox.limits))
        stamp(run.phases, "execute step")
        plan = sandbox.plan(f"{student}/{notebook}", assignment)
        stamp(run.phases, "planned")
        # the course's cells that cannot change a score are left out (`cells.
        # left_out_when_grading`), which ones read from the source (the reference run's
        # "skip"), never from the handed-in copy; `Sandbox.whole` runs every cell
        self.state = state = NotebookState.begin(
            sandbox.limits, plan, run,
            sandbox.references.get(assignment, {}).get(notebook, {}),
            last=len(nb.cells) if sandbox.whole else cells.last_test(nb), whole=sandbox.whole)
        start = time.monotonic()
        try:
            nb, resources = super().preprocess(nb, resources, km)
            self.limit_cells(nb)
            return nb, resources
        finally:
            run.seconds = time.monotonic() - start
            self._kill_kernel()
            with contextlib.suppress(Exception):
                self.km.close_client_context()
            state.plan.remove()
            stamp(run.phases, "sandbox removed")
            run.phases.sort(key=lambda phase: phase[1])
            # the kernel is dead: nothing it sent can land under the key after this
            write_run(nb, run)
            self.state = None

    # the timing record's phases (nbclient's sync names wrap its own async functions, so
    # both are set here)
    async def async_start_new_kernel(self, **kwargs: Any) -> None:
        stamp(self.state.run.phases, "launch")
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)

    async def async_start_new_kernel_client(self) -> KernelClient:
        kc = await super().async_start_new_kernel_client()
        stamp(self.state.run.phases, "kernel ready")
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    # nbclient's private hooks overridden here (_async_cleanup_kernel, _get_timeout,
    # _async_handle_timeout, _update_display_id): registered in compat.PRIVATE_NAMES
    async def _async_cleanup_kernel(self) -> None:
        stamp(self.state.run.phases, "cells done")
        # the notebook is done: the kernel is killed rather than asked to shut down (a
        # graceful shutdown waits half a second or more for a kernel that nothing needs
        # any more; its sandbox goes anyway)
        self._kill_kernel()
        await super()._async_cleanup_kernel()
        stamp(self.state.run.phases, "kernel stopped")

    _cleanup_kernel = run_sync(_async_cleanup_kernel)

    def create_kernel_manager(self) -> SandboxKernelManager:
        self.km = SandboxKernelManager(plan=self.state.plan, limits=self.state.limits,
                                       config=self.config)
        return self.km

    def _kill_kernel(self) -> None:
        km = getattr(self, "km", None)
        provisioner = getattr(km, "provisioner", None)
        process = getattr(provisioner, "process", None)
        if process is not None and process.poll() is None:
            # the launch chain's process group (its own session): bwrap and, with it, the
            # kernel's pid namespace; at the level "limits", the kernel and what it started
            group = getattr(provisioner, "pgid", None)
            if group and group != os.getpgid(0):
                with contextlib.suppress(OSError):
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(OSError):
                process.kill()
            with contextlib.suppress(Exception):
                process.wait(10)

    def _get_timeout(self, cell: NotebookNode | None) -> int:
        return self.state.cell_timeout()

    async def async_execute_cell(self, cell: NotebookNode, cell_index: int,
                                 execution_count: int | None = None,
                                 store_history: bool = True) -> NotebookNode:
        state = self.state
        if cell.cell_type != "code" or not cell.source.strip():
            return cell
        if cells.left_out_when_grading(cell, cell_index, state.last, state.skip):
            state.run.left_out += 1
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=LEFT_OUT)]
            return cell
        kind = cells.kind(cell)
        grade_id = cells.grade_id(cell) or ""
        record = CellRun(cell_index, grade_id, kind, "ok")
        if not state.run.cells:
            stamp(state.run.phases, "first cell")
        state.run.cells.append(record)
        if state.out_of_time():
            self._kill_kernel()
        if state.stopped:
            return self._not_run(cell, record)
        state.new_cell()
        # after its reply, a cell's output may still be arriving (a flood that is being
        # left out): wait for it as long as the cell itself may take
        self.iopub_timeout = max(4, state.limits.cell_timeout)
        start = time.monotonic()
        test: GradedCell | None = None
        outcome: TestOutcome | None = None
        if kind == "test":
            try:
                test = prepare(cell.source)
            except GradedCellError:
                test = None
        try:
            if test is not None:
                outcome = await self._graded_cell(cell, cell_index, execution_count,
                                                  store_history, grade_id, test)
            elif kind == "test":
                outcome = TestOutcome([], ("SyntaxError", "this test cell could not be "
                                           "prepared for grading", []))
                await super().async_execute_cell(cell, cell_index, execution_count,
                                                 store_history)
            else:
                await super().async_execute_cell(cell, cell_index, execution_count,
                                                 store_history)
        except DeadKernelError:
            await asyncio.sleep(0.2)
            why = describe_end(state.plan.ended(), state.limits)
            state.stop(why, f"{why}, in cell {cell_index}")
            record.status = "died"
            record.ename, record.evalue = "KernelDied", why
            self._add_error(cell, "KernelDied", f"{why}; the cells after this one did not run")
        except (TimeoutError, CellTimeoutError, Empty) as exc:
            # the kernel did not go quiet after the cell (a flood of output, or a
            # kernel that ignored the interrupt): it cannot be trusted with more cells
            record.status = "stuck"
            why = (f"the kernel did not finish cell {cell_index} within its time limit "
                   f"and did not stop when interrupted")
            if state.timed_out is False:
                why = f"the kernel stopped answering during cell {cell_index} ({exc})"
            state.stop(why)
            record.ename, record.evalue = "CellTimeoutError", why
            self._kill_kernel()
            self._add_error(cell, "CellTimeoutError", why)
        record.seconds = time.monotonic() - start
        reply = (state.reply or {}).get("content", {})
        if record.status == "ok":
            if state.timed_out:
                record.status = "timeout"
                record.ename = "CellTimeoutError"
                record.evalue = f"stopped after {state.timed_out} s"
            elif reply.get("status") == "error":
                record.status = "error"
                record.ename = str(reply.get("ename", ""))[:200]
                record.evalue = str(reply.get("evalue", ""))[:2000]
            elif state.reply is None:
                record.status = "error"
                record.ename = "NoReply"
                self._add_error(cell, "NoReply", "the kernel sent no reply for this cell")
        if kind == "test":
            self._take_outcome(cell, record, outcome)
            self._judge(record, test, outcome, reply)
        record.output_dropped = state.budget.dropped_in(cell_index)
        record.stderr = any(o.get("output_type") == "stream" and o.get("name") == "stderr"
                            for o in cell.get("outputs", []))
        if kind == "test":
            self._settle_test_cell(cell, record)
        return cell

    execute_cell = run_sync(async_execute_cell)

    def limit_cells(self, nb: NotebookNode) -> None:
        """Every cell's final outputs, the grader's own lines in them, cut to the per-cell
        limits (`OutputBudget.trim`: nbgrader's LimitOutput rule, which this step applies
        in its place). Once the notebook is done, as LimitOutput did: a display update
        finds an earlier output by its index in the cell, which cutting would move."""
        for cell in nb.cells:
            self.state.budget.trim(cell)

    async def _graded_cell(self, cell: NotebookNode, cell_index: int,
                           execution_count: int | None, store_history: bool, grade_id: str,
                           test: GradedCell) -> TestOutcome:
        """Run a graded test cell in this process against the kernel (`remote`): the kernel
        gets no more than a socket's path, the test's code runs here, in the witness mode."""
        plan = self.state.plan
        spec, _, level = _launch_parts(plan)
        _, run = bubblewrap.kernel_paths(spec, level)
        return await graded_cell(
            lambda: super(SandboxedExecute, self).async_execute_cell(
                cell, cell_index, execution_count, store_history),
            self.kc, grade_id=grade_id, source=test.witness, mode="witness",
            hidden=test.hidden, host_folder=str(plan.conn), kernel_folder=run,
            wait=max(5, self._get_timeout(cell)))

    def _take_outcome(self, cell: NotebookNode, record: CellRun,
                      outcome: TestOutcome | None) -> None:
        """What the test did, in the record and the cell: its error (the student's lines as
        the kernel showed them; a Value refused as not made by the engine's operations is
        such an error, and costs the test, nothing more)."""
        if outcome is None:
            return
        if outcome.error is not None and record.status == "ok":
            kind, message, lines = outcome.error
            record.status = "error"
            record.ename, record.evalue = str(kind)[:200], str(message)[:2000]
            cell.setdefault("outputs", []).append(NotebookNode(
                output_type="error", ename=record.ename, evalue=record.evalue,
                traceback=list(lines) or [f"{record.ename}: {record.evalue}"]))

    def _judge(self, record: CellRun, test: GradedCell | None, outcome: TestOutcome | None,
               reply: dict[str, Any]) -> None:
        """The grader's verdict on a test cell: its observations against the
        reference run's (see `judge`); the kernel's own status can only fail it."""
        state = self.state
        expected = state.expected.get(record.grade_id)
        if expected is None or test is None:
            why = ("no expected observations for this test (the reference run did "
                   "not record it)" if test is not None else
                   "this test cell could not be prepared for grading")
            record.checks, record.verdict = 0, why
        else:
            hidden = set(expected.get("hidden", [])) | set(test.hidden)
            kernel_error = (record.ename, record.evalue) if record.status != "ok" else None
            records = outcome.records if outcome is not None else []
            status = "ok" if record.status == "ok" else "error"
            found = judge_cell(records, status, kernel_error, expected["records"], hidden,
                               state.passed)
            record.checks, record.hidden = found.checks, found.hidden
            record.detail = found.detail
            record.verdict = "" if found.passed else found.message
        if record.verdict and record.status == "ok":
            record.status, record.ename = "error", "CheckFailed"
            record.evalue = record.verdict

    def _not_run(self, cell: NotebookNode, record: CellRun) -> NotebookNode:
        stopped = self.state.stopped
        record.status = "not run"
        record.ename, record.evalue = "NotRun", stopped
        cell.outputs = []
        self._add_error(cell, "NotRun", f"not run: {stopped}")
        return cell

    def _add_error(self, cell: NotebookNode, name: str, message: str) -> None:
        if any(o.get("output_type") == "error" and o.get("ename") == name
               for o in cell.get("outputs", [])):
            return
        cell.setdefault("outputs", []).append(NotebookNode(
            output_type="error", ename=name, evalue=message,
            traceback=[f"{name}: {message}"],
        ))

    @staticmethod
    def _settle_test_cell(cell: NotebookNode, record: CellRun) -> None:
        """The score of a test cell comes from the grader's verdict only (nbgrader
        scores a cell with an error output 0). When it failed, the verdict goes first as
        the error (a failed check's message; the kernel's own error when the student's
        code raised); when it passed, a line says so. A result (nbgrader would read
        partial credit from it) is never kept."""
        outputs = [o for o in cell.get("outputs", [])
                   if o.get("output_type") != "execute_result"]
        errors = [o for o in outputs if o.get("output_type") == "error"]
        rest = [o for o in outputs if o.get("output_type") != "error"]
        if record.status != "ok":
            own = [o for o in errors if record.verdict in (
                f"{o.get('ename', '')}: {o.get('evalue', '')}", o.get("ename", ""))]
            if own:  # the kernel's own error is the reason: it goes first
                first, errors = own[0], [o for o in errors if o is not own[0]]
            else:
                message = record.verdict or record.evalue
                name = "CheckFailed" if record.verdict else (record.ename or "Error")
                first = NotebookNode(output_type="error", ename=name, evalue=message,
                                     traceback=[f"{name}: {message}"])
            outputs = [first] + rest + errors
        else:
            outputs = rest + [NotebookNode(
                output_type="stream", name="stdout",
                text=f"graded: all {record.checks} check(s) of this cell passed\n")]
        cell.outputs = outputs

    def on_cell_executed(self, **kwargs: Any) -> None:
        self.state.reply = kwargs.get("execute_reply")
        super().on_cell_executed(**kwargs)

    async def _async_handle_timeout(self, timeout: int,
                                    cell: NotebookNode | None = None) -> dict[str, Any] | None:
        self.state.timed_out = timeout
        reply = await super()._async_handle_timeout(timeout, cell)
        # did the interrupt stop it? a kernel_info reply comes once the cell is over
        if not await self._answers(self.state.limits.grace):
            self._kill_kernel()
            raise CellTimeoutError("the kernel did not stop when interrupted")
        return reply

    async def _answers(self, within: float) -> bool:
        try:
            msg_id = self.kc.kernel_info()
            if asyncio.iscoroutine(msg_id):
                msg_id = await msg_id
            deadline = time.monotonic() + within
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                msg = await self.kc.shell_channel.get_msg(timeout=left)
                if msg.get("parent_header", {}).get("msg_id") == msg_id:
                    return True
        except (TimeoutError, Empty):
            return False
        except Exception:  # noqa: BLE001 (no answer is no answer)
            return False

    # ---- the output limit: every way a kernel's message reaches the notebook is counted
    # against the notebook's `OutputBudget` (`execute_state`, where the limits are
    # decided): a new output (`output`), a display update written into earlier outputs
    # (`_update_display_id`), a cell's execution count; widget messages are dropped
    # (`handle_comm_msg`)

    def process_message(self, msg: dict[str, Any], cell: NotebookNode,
                        cell_index: int) -> NotebookNode | None:
        content = msg.get("content")
        if isinstance(content, dict) and "execution_count" in content:
            count = content["execution_count"]
            # nbclient copies any message's count into the cell: only a number is kept
            if not (count is None or (isinstance(count, int) and not isinstance(count, bool)
                                      and abs(count) < 1 << 53)):
                content["execution_count"] = None
        self.state.current = (cell, cell_index)  # where a display update's note goes
        return super().process_message(msg, cell, cell_index)

    def output(self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str | None,
               cell_index: int) -> NotebookNode | None:
        if not self.state.budget.admit_message(msg, cell_index, outs):
            return None
        return super().output(outs, msg, display_id, cell_index)

    def _update_display_id(self, display_id: str, msg: dict[str, Any]) -> None:
        """nbclient writes a display update's data into every earlier output with its
        display id (in any cell). Each of those writes is output: all of them are
        counted, or none is made."""
        targets = self._display_id_map.get(display_id, {})
        count = sum(len(indices) for indices in targets.values())
        if not count:
            return None
        cell, cell_index = self.state.current
        outs = cell.setdefault("outputs", []) if cell is not None else None
        if not self.state.budget.admit(count * message_size(msg), cell_index, outs):
            return None
        return super()._update_display_id(display_id, msg)

    def handle_comm_msg(self, outs: list[NotebookNode], msg: dict[str, Any],
                        cell_index: int) -> None:
        """Widget (comm) messages are not output: the grader is not a front end, keeps no
        widget state and makes no Output widget (whose captured output would go to the
        widget's state, not the cell). A kernel's widget output stays in its cell."""
        return None
