"""One way to run a notebook in a fresh local kernel, outside the sandbox: the reference
run (the instructor's solution), the fingerprint table's runs of registered wrong answers,
and a student's progress. Graded student notebooks do not come through here: they run in
nbgrader's Execute step, in the sandbox (`grading/execute.py`).

The kernel talks over local sockets in a private folder, removed with the kernel; what the
kernel needs in its environment is passed to it (`env`), never set in this process's.
"""

import os
import shutil
import tempfile
from typing import Any

__all__ = ["ipc_kernel_manager", "run_notebook"]


def ipc_kernel_manager(kernel_cmd: list[str] | None = None,
                       prefix: str = "residual-pack-kernel-") -> type[Any]:
    """A jupyter_client kernel manager class whose kernels use IPC sockets in a folder of
    their own; `kernel_cmd` (a list, without the `-f CONNECTION_FILE` it gets) replaces
    the kernelspec's command."""
    from jupyter_client.manager import AsyncKernelManager

    class IPCKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.folder = tempfile.mkdtemp(prefix=prefix)
            self.transport, self.ip = "ipc", os.path.join(self.folder, "k")
            self.connection_file = os.path.join(self.folder, "kernel.json")

        # jupyter_client's private hook: registered in autograder/compat.py
        async def _async_cleanup_resources(self, restart: bool = False) -> None:
            await super()._async_cleanup_resources(restart)
            if not restart:
                shutil.rmtree(self.folder, ignore_errors=True)

        if kernel_cmd is not None:
            def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
                return [*kernel_cmd, "-f", self.connection_file, *(extra_arguments or [])]

    return IPCKernelManager


def run_notebook(nb: Any, workdir: str | os.PathLike[str], env: dict[str, str] | None = None,
                 timeout: int = 300, kernel_cmd: list[str] | None = None,
                 client_class: type[Any] | None = None,
                 prefix: str = "residual-pack-kernel-") -> tuple[Any, str]:
    """Run `nb` (in place) top to bottom in a fresh kernel started in `workdir`, errors
    and all, with `env` added to this process's environment for the kernel only. Returns
    (the client, why the run stopped early: "" when it did not)."""
    from nbclient import NotebookClient

    client = (client_class or NotebookClient)(
        nb, timeout=timeout, allow_errors=True, kernel_name="python3",
        kernel_manager_class=ipc_kernel_manager(kernel_cmd, prefix),
        resources={"metadata": {"path": str(workdir)}})
    try:
        client.execute(env={**os.environ, **(env or {})})
    except Exception as exc:  # noqa: BLE001 (a dead kernel: the cells not reached say so)
        return client, f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    return client, ""
