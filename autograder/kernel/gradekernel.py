"""The kernel that runs a student's notebook at grading time (inside the sandbox).

Every cell the grader sends runs as in any IPython kernel, except a graded test cell: the
grader sends it as `MARKER` and a JSON header (the cell's grade id, and the path of a Unix
socket in the kernel's folder), without its source. The test itself runs in the grader
(`autograder.grading.remote`); this kernel only answers the grader's calls on that socket
(`agent.serve`) until the grader says the test is over, and the cell's reply says no more
than that it is over. What the student's code prints meanwhile is the cell's output.

Printed output is capped (`OUTPUT_VARIABLE`): a burst of it would otherwise leave in one
message larger than the grader accepts.

Run as `python -m autograder.kernel.gradekernel -f CONNECTION_FILE` (the sandbox starts it so).
"""

import json
import os
import sys
from typing import Any

from autograder.kernel import policy
from autograder.kernel.agent import serve  # before any student code: a student's module

# of the same name, or one taken out of sys.modules, cannot stand in for it

MARKER = policy.MARKER  # + a JSON header + newline: a graded test cell


def _kernel_class() -> type[Any]:
    from ipykernel.ipkernel import IPythonKernel

    class GradingKernel(IPythonKernel):
        """IPython's kernel; a graded test cell answers the grader (see the module doc)."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            _cap_streams(int(os.environ.get(policy.OUTPUT_VARIABLE, 0) or 0))

        async def do_execute(self, code: str, silent: bool, store_history: bool = True,
                             user_expressions: dict[str, Any] | None = None,
                             allow_stdin: bool = False, *, cell_meta: Any = None,
                             cell_id: str | None = None) -> dict[str, Any]:
            if code.startswith(MARKER):
                return self._answer_grader(code, store_history)
            return await super().do_execute(
                code, silent, store_history=store_history, user_expressions=user_expressions,
                allow_stdin=allow_stdin, cell_meta=cell_meta, cell_id=cell_id,
            )

        def _answer_grader(self, code: str, store_history: bool) -> dict[str, Any]:
            shell: Any = self.shell
            count = shell.execution_count
            if store_history:
                shell.execution_count += 1
            head = code.partition("\n")[0][len(MARKER):]
            try:
                header = json.loads(head)
                serve(header if isinstance(header, dict) else {}, shell.user_ns)
            except BaseException as exc:  # noqa: BLE001 (the grader says what failed)
                _flush()
                content = {"ename": type(exc).__name__, "evalue": str(exc)[:2000],
                           "traceback": [f"{type(exc).__name__}: {str(exc)[:2000]}"]}
                return {"status": "error", "execution_count": count, **content}
            _flush()
            return {"status": "ok", "execution_count": count, "user_expressions": {},
                    "payload": []}

    return GradingKernel


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            pass

def _cap_streams(limit: int) -> None:
    """Printed text beyond `limit` characters in all is dropped here, in the kernel, with
    one note (`policy.OUTPUT_NOTE`): a burst of output would otherwise leave in one message
    larger than the grader accepts, and the grader would have to stop the notebook."""
    if limit <= 0:
        return
    state: dict[str, Any] = {"written": 0, "noted": False}
    for stream in (sys.stdout, sys.stderr):
        original = stream.write

        def write(text: Any, original: Any = original) -> Any:
            size = len(text) if isinstance(text, str) else 0
            if state["written"] + size > limit:
                if not state["noted"]:
                    state["noted"] = True
                    original("\n" + policy.OUTPUT_NOTE + "\n")
                return size
            state["written"] += size
            return original(text)

        stream.write = write  # type: ignore[method-assign]


def watch_lifeline() -> None:
    """End this kernel when the grader that started it is gone: the sandbox hands it the
    reading end of a pipe whose only writing end the grader holds (`policy.
    LIFELINE_VARIABLE`), so the pipe's end of file is the grader's end, however it ended.
    bubblewrap's --die-with-parent does not cover a grader killed while bubblewrap sets
    the sandbox up (its pid 1 asks for the signal only after the setup), and such a
    kernel would wait for its grader for ever."""
    import threading

    text = os.environ.pop(policy.LIFELINE_VARIABLE, "")
    if not text.isdigit():
        return
    fd = int(text)

    def watch() -> None:
        try:
            while os.read(fd, 1):
                pass
        except OSError:  # closed by the notebook's code: it only loses this guard
            return
        os._exit(0)

    threading.Thread(target=watch, name="lifeline", daemon=True).start()


def main() -> None:
    from ipykernel.kernelapp import IPKernelApp

    watch_lifeline()
    # ipykernel sets up its debugger (debugpy) while the kernel starts, unless debugpy
    # cannot be imported: a fifth of the kernel's start-up, for a kernel that nobody
    # debugs. It is kept out meanwhile only: afterwards `import debugpy` works as usual.
    blocked = "debugpy" not in sys.modules
    if blocked:
        sys.modules["debugpy"] = None  # type: ignore[assignment]
    try:
        app = IPKernelApp.instance(kernel_class=_kernel_class())
        app.initialize()
    finally:
        if blocked and sys.modules.get("debugpy", False) is None:
            del sys.modules["debugpy"]
    app.start()


if __name__ == "__main__":
    main()
