"""Every change the pack makes to a third-party library's behaviour, in one place.

Each patch says which version it was written against, what it saves (measured by
`benchmarks/patches.py`, each against no patch in the same run: the last run is in
`results/benchmarks/patches-*.txt`), and how to tell that it can go:
`tests/unit/test_compat.py` fails when the upstream code it works around has changed, so
that a patch is looked at again instead of silently doing nothing (or harm).

- `read_alembic_head_in_process()`: nbgrader 0.9.6 stamps a new gradebook with its
  alembic head, which it finds by running the `alembic heads` command, a new Python that
  imports nbgrader again (6 s on a 2-core machine, per gradebook). The same head is read
  here with alembic's Python API (alembic 1.20); nbgrader's own way runs if that fails.
- `check_schemas_once()`: nbgrader 0.9.6 validates every cell's metadata with
  `jsonschema.validate`, which checks the schema itself before every instance (about
  0.2 s per graded notebook). Here the schema is checked once per process; each instance
  is validated as before.
- `PRIVATE_NAMES`: every private name of another library that the pack overrides,
  replaces, calls or reads (nbclient's and jupyter_client's kernel and timeout hooks in
  `grading/execute.py` and `runner.py`, ipykernel's queue abort in `kernel/runaway.py`,
  pytest-xdist's scope split in `tests/conftest.py`, IPython's `_render_traceback_`,
  SQLAlchemy's `URL._replace`, nbgrader's `Validator._preprocess` in
  `student/validate.py`): each with its library (checked on the version in
  `WRITTEN_AGAINST`), where the pack uses it, what it relies on, a hash of upstream's
  source of it as of that version, and the upstream places whose source must still use it
  that way. `NBCLIENT_HOOKS` (the overridden hooks of nbclient and jupyter_client, by
  class) is read from it. And one public call of nbclient's that the grader relies on
  being the way a cell reaches the kernel: `NotebookClient.async_execute_cell` sends
  `self.kc.execute(cell.source, ...)`, which `grading.testsource.sending` points at a
  test cell's reference or witness version.

No longer a patch: jsonschema 4.25 and later import `rfc3987_syntax` for the "iri" formats
(no Jupyter schema has one), which builds some 40 Earley parsers in every process that
reads a notebook. Until 2026-12-06 the grader's own processes kept it out of
`sys.modules`; pyproject.toml now holds jsonschema below 4.25, which reaches nbgrader's
and JupyterLab's own commands too (`tests/unit/test_compat.py`'s start-up test fails when
the cost comes back).
"""

import dataclasses
import functools
import hashlib
import importlib
import inspect
import json
from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["read_alembic_head_in_process", "check_schemas_once",
           "NBCLIENT_HOOKS", "PRIVATE_NAMES", "PrivateName", "WRITTEN_AGAINST",
           "resolve", "source_hash"]

WRITTEN_AGAINST = {"nbgrader": "0.9.6", "jsonschema": "4.24.1", "alembic": "1.20.1",
                   "nbclient": "0.11.0", "jupyter_client": "8.10.0", "ipykernel": "7.4.0",
                   "pytest-xdist": "3.8.0", "ipython": "9.19.1", "sqlalchemy": "2.1.9"}


@dataclasses.dataclass(frozen=True)
class PrivateName:
    """One private name of another library the pack depends on.

    `owner` is the dotted path of the upstream class (or module) it belongs to, `how` one
    of "overrides" (a subclass of ours defines it), "replaces" (ours stands in for it under
    another name), "calls", "reads", or "sets" (our objects carry a name upstream reads).
    `source` is the first 16 hex digits of the SHA-256 of `inspect.getsource(owner.name)`
    on `WRITTEN_AGAINST[library]` ("" when upstream's own source is not the point: a sync
    alias, a protocol, a namedtuple method). `used_in` lists (upstream dotted path, text):
    places of upstream whose source must still contain the text, i.e. still use the name
    the way the pack relies on."""

    library: str
    owner: str
    name: str
    how: str
    where: str
    relies_on: str
    source: str = ""
    used_in: tuple[tuple[str, str], ...] = ()


_NBCLIENT = "nbclient.client.NotebookClient"
_KM = "jupyter_client.manager.KernelManager"
_KC = "jupyter_client.client.KernelClient"

PRIVATE_NAMES = (
    # nbclient 0.11: the grader's Execute step (SandboxedExecute, an nbgrader Execute)
    PrivateName(
        "nbclient", _NBCLIENT, "_async_cleanup_kernel", "overrides",
        "autograder.grading.execute.SandboxedExecute (and benchmarks/grade_phases.py)",
        "called once per notebook when its cells are done (or failed): the kernel is killed "
        "first, then nbclient's own clean-up closes the client and manager",
        "fdb0dbbcbcd8662d", ((f"{_NBCLIENT}.async_execute", "self._async_cleanup_kernel()"),)),
    PrivateName(
        "nbclient", _NBCLIENT, "_cleanup_kernel", "overrides",
        "autograder.grading.execute.SandboxedExecute",
        "nbclient's sync name is run_sync of the async one, so both are set",
        "", (("nbclient.client", "_cleanup_kernel = run_sync(_async_cleanup_kernel)"),)),
    PrivateName(
        "nbclient", _NBCLIENT, "_async_handle_timeout", "overrides",
        "autograder.grading.execute.SandboxedExecute",
        "called with (timeout, cell) when a cell passes its timeout; nbclient's own interrupts "
        "the kernel (interrupt_on_timeout) and returns; ours then asks whether the kernel "
        "answers and kills it when it does not",
        "27d6db41082b053f",
        ((f"{_NBCLIENT}._async_poll_for_reply", "await self._async_handle_timeout("),)),
    PrivateName(
        "nbclient", _NBCLIENT, "_get_timeout", "overrides",
        "autograder.grading.execute.SandboxedExecute",
        "asked for each cell's timeout (cell -> seconds) before the cell is sent: ours gives "
        "min(the cell limit, what is left of the notebook's)",
        "5bfb5a2910e7910e", ((f"{_NBCLIENT}.async_execute_cell", "self._get_timeout(cell)"),)),
    PrivateName(
        "nbclient", _NBCLIENT, "_update_display_id", "overrides",
        "autograder.grading.execute.SandboxedExecute",
        "every display update (display_id, msg) is written into earlier outputs through it, "
        "so counting it there counts all of them against the output limit",
        "5a1528f0abd1ecd0", ((f"{_NBCLIENT}.process_message", "self._update_display_id("),)),
    PrivateName(
        "nbclient", _NBCLIENT, "_display_id_map", "reads",
        "autograder.grading.execute.SandboxedExecute._update_display_id",
        "{display id: {cell index: [output indices]}}, the outputs an update is written into",
        "", ((f"{_NBCLIENT}._update_display_id",
              "for cell_idx, output_indices in self._display_id_map[display_id].items()"),)),
    # jupyter_client 8.10: the kernel in its sandbox (SandboxKernelManager/Client), runner
    PrivateName(
        "jupyter_client", _KM, "_async_launch_kernel", "overrides",
        "autograder.grading.execute.SandboxKernelManager",
        "start_kernel awaits it with (kernel_cmd, **kw) to start the process; ours starts it "
        "in bubblewrap and fills in the provisioner's process, pid and cwd itself",
        "5ba0dfe7cf7e85aa", ((f"{_KM}._async_start_kernel",
                              "await self._async_launch_kernel(kernel_cmd, **kw)"),)),
    PrivateName(
        "jupyter_client", "jupyter_client.manager.AsyncKernelManager", "_launch_kernel",
        "overrides", "autograder.grading.execute.SandboxKernelManager",
        "only its async twin is called when a kernel starts; the alias is kept in step",
        "", (("jupyter_client.manager", "_launch_kernel = KernelManager._async_launch_kernel"),)),
    PrivateName(
        "jupyter_client", _KM, "_async_interrupt_kernel", "overrides",
        "autograder.grading.execute.SandboxKernelManager",
        "the interrupt reads kernel_spec.interrupt_mode; ours sets it to 'message' first (a "
        "signal cannot reach a kernel in bwrap's pid namespace) and rebinds the public "
        "interrupt_kernel to it, as AsyncKernelManager does",
        "46b24a3a57e1d0e8", (("jupyter_client.manager",
                              "interrupt_kernel: t.Callable[..., t.Awaitable] = "
                              "KernelManager._async_interrupt_kernel"),)),
    PrivateName(
        "jupyter_client", _KM, "_reconcile_connection_info", "calls",
        "autograder.grading.execute.SandboxKernelManager._async_launch_kernel",
        "(connection info) -> None: takes in the provisioner's ports and key after a launch, "
        "as jupyter_client's own launch does",
        "5392d13edc8b96ab", ((f"{_KM}._async_launch_kernel",
                              "self._reconcile_connection_info(connection_info)"),)),
    PrivateName(
        "jupyter_client", _KM, "_async_cleanup_resources", "overrides",
        "autograder.runner.ipc_kernel_manager (IPCKernelManager)",
        "called with restart=False when a kernel is shut down for good: its socket folder "
        "goes after jupyter_client's own clean-up",
        "452cfe631cd012d2", ((f"{_KM}._async_shutdown_kernel",
                              "self._async_cleanup_resources(restart=restart)"),)),
    PrivateName(
        "jupyter_client", _KC, "_async_wait_for_ready", "replaces",
        "autograder.grading.execute.SandboxKernelClient._ready (as wait_for_ready)",
        "nbclient awaits kc.wait_for_ready(timeout=...); ours is jupyter_client's waiting "
        "(kernel_info reply, IOPub connected, IOPub quiet) with a shorter quiet spell",
        "0d732ad86fea3115", (("nbclient.client",
                              "self.kc.wait_for_ready(timeout=self.startup_timeout)"),)),
    PrivateName(
        "jupyter_client", _KC, "_handle_kernel_info_reply", "calls",
        "autograder.grading.execute.SandboxKernelClient._ready",
        "(msg) -> None: records the kernel's protocol version, as the original wait does",
        "0ccf6064c6489923", ((f"{_KC}._async_wait_for_ready", "self._handle_kernel_info_reply("),)),
    PrivateName(
        "jupyter_client", _KC, "_async_is_alive", "calls",
        "autograder.grading.execute.SandboxKernelClient._ready",
        "() -> bool, awaited: whether the kernel is still there while waiting for it",
        "50dc3f63d16bbd9d", ((f"{_KC}._async_wait_for_ready", "await self._async_is_alive()"),)),
    # ipykernel 7.4: a student's own kernel (Lab), stopping queued cells after an interrupt
    PrivateName(
        "ipykernel", "ipykernel.kernelbase.Kernel", "_abort_queues", "calls",
        "autograder.kernel.runaway._abort_queued",
        "aborts the queued execute requests; ipykernel 7 takes the parent's subshell_id "
        "(6 takes nothing); a failure leaves the queue running, nothing worse",
        "a133ec2d4199abd2", (("ipykernel.kernelbase.Kernel.execute_request",
                              "self._abort_queues("),)),
    # nbgrader 0.9.6: the student's Validate button (a time budget for the whole notebook)
    PrivateName(
        "nbgrader", "nbgrader.validator.Validator", "_preprocess", "overrides",
        "autograder.student.validate (BudgetedValidator in _budgeted_classes)",
        "(nb) -> nb: runs the preprocessors in order with NBGRADER_VALIDATING and "
        "NBGRADER_EXECUTION set; ours does the same, handing Execute the deadline and "
        "keeping the executed notebook and where it stopped",
        "ca1c6e172237f38c", (("nbgrader.validator.Validator.validate",
                              "nb = self._preprocess(nb)"),)),
    # pytest-xdist 3.8: the suite's schedule
    PrivateName(
        "pytest-xdist", "xdist.scheduler.LoadFileScheduling", "_split_scope", "overrides",
        "tests/conftest.py (SpreadScheduling in pytest_xdist_make_scheduler)",
        "(nodeid) -> the scope a test is sent with: ours groups by the test's unit",
        "130c825735265ebc", (("xdist.scheduler.loadscope.LoadScopeScheduling.schedule",
                              "self._split_scope("),)),
    # IPython 9.19: a crash shown the way the pack renders it
    PrivateName(
        "ipython", "IPython.core.interactiveshell.InteractiveShell", "_render_traceback_",
        "sets", "autograder.kernel.crash, autograder.kernel.runaway (on exceptions)",
        "an exception with _render_traceback_() is shown as the lines it returns",
        "", (("IPython.core.interactiveshell.InteractiveShell.showtraceback",
              "stb = value._render_traceback_()"),)),
    # SQLAlchemy 2.1: a gradebook URL without its password
    PrivateName(
        "sqlalchemy", "sqlalchemy.engine.url.URL", "_replace", "calls",
        "autograder.grading.course (without_password, the course config's _gradebook)",
        "URL is a named tuple: _replace(password=None) is the same URL without it",
        "", ()),
)

NBCLIENT_HOOKS = {
    "nbclient.NotebookClient": ("_async_cleanup_kernel", "_async_handle_timeout",
                                "_get_timeout", "_update_display_id"),
    "jupyter_client.manager.AsyncKernelManager": ("_async_cleanup_resources",
                                                  "_async_launch_kernel",
                                                  "_async_interrupt_kernel"),
}


def resolve(path: str) -> Any:
    """The object at a dotted path: the longest importable module, then attributes."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            found = getattr(found, part)
        return found
    raise ImportError(path)


def source_hash(obj: Any) -> str:
    """The first 16 hex digits of the SHA-256 of `obj`'s source (see `PrivateName`)."""
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]

def read_alembic_head_in_process() -> None:
    """Make nbgrader read its gradebook schema version without a new process (see the
    module doc). A second call does nothing."""
    import nbgrader.api as gradebook_api

    original = gradebook_api.get_alembic_version
    if getattr(original, "in_process", False):
        return

    @functools.cache
    def head() -> str:
        try:
            from alembic.config import Config
            from alembic.script import ScriptDirectory

            cfg = Config()
            cfg.set_main_option(
                "script_location", str(Path(gradebook_api.__file__).parent / "alembic")
            )
            heads = ScriptDirectory.from_config(cfg).get_heads()
            if len(heads) == 1:
                return heads[0]
        except Exception:  # noqa: BLE001 (fall back to nbgrader's own way)
            pass
        return original()

    head.in_process = True  # type: ignore[attr-defined]
    gradebook_api.get_alembic_version = head


class _SchemaCheckedOnce:
    """`jsonschema` as nbgrader's cell metadata validation uses it, with `validate`
    checking each schema once; the instance is validated the same way (the schema's
    validator, the best-matching error raised)."""

    schema_checked_once = True

    def __init__(self, module: ModuleType) -> None:
        self._module = module
        self._validators: dict[str, Any] = {}  # the schema as JSON text -> its validator

    def __getattr__(self, name: str) -> Any:
        return getattr(self._module, name)

    def validate(self, instance: Any, schema: dict[str, Any], cls: Any = None, *args: Any,
                 **kwargs: Any) -> Any:
        if cls is not None or args or kwargs:
            return self._module.validate(instance, schema, cls, *args, **kwargs)
        key = json.dumps(schema, sort_keys=True)
        validator = self._validators.get(key)
        if validator is None:
            cls = self._module.validators.validator_for(schema)
            cls.check_schema(schema)
            validator = self._validators.setdefault(key, cls(schema))
        error = self._module.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error


def check_schemas_once() -> None:
    """Make nbgrader's cell metadata validation check its schema once per process, not
    once per cell; a second call does nothing."""
    try:
        import nbgrader.nbgraderformat.common as common
    except ImportError:
        return
    if not getattr(common.jsonschema, "schema_checked_once", False):
        common.jsonschema = _SchemaCheckedOnce(common.jsonschema)
