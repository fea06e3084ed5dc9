"""The kernel that runs a student's notebook at grading time (inside the sandbox).

Every cell but the graded test cells runs as in any IPython kernel. The grading process
sends each graded test cell with `MARKER` and a JSON header (grade id, mode, nonce) in
front, and with only its *witness* version (`testsource.prepare`: the expected values
and tolerances taken out). This kernel runs those cells its own way:

- It is a witness, not a judge. The checks the cell calls only record what the student's
  code gave (`witness.settle` in the witness mode); the records go back in the cell's
  execute_reply under `REPORT_KEY`, stamped with the grader's nonce, and the grading
  process compares them with the reference run's (`judge.verdict`). Nothing this kernel
  decides, sets or prints can make a cell pass: a cell whose records are missing,
  reordered, from other lines, for another cell or with another nonce fails.
- Model answers that a library keeps for the assignment being graded (`policy.SWITCHED_OFF`:
  `microgpt.deepnet.logits` for Task 2.2, `GPT.block` for Tasks 5.1 to 5.3, ...) raise
  when student code calls them, so that an answer cannot delegate to them.
- As a second line (it keeps honest mistakes from spilling from one test into the next),
  the state the tests use is recorded (`snapshot`) when this module is imported, before
  any student code: our packages, a few standard modules, `builtins`, `sys.path`, the
  import hooks, `sys.stdout`. It is put back before each test cell, the cell runs outside IPython's
  hooks with private copies of the check helpers, and a change made while it ran is
  reported to the grader (who withholds the score for review) and fails the cell.
- The records are sealed as they are made: each one's text goes into a digest
  (`witness.begin(seal=...)`) that this runner holds and that nothing can rewind, and
  the records the cell ends with must give the same digest. A record changed, removed or
  replaced after its check made it (by a finalizer, say) makes the cell fail as tampered
  with, whatever code did it; a record added fails it as well (`judge`: more records
  than checks).
- Printed output is capped (`OUTPUT_VARIABLE`), and the report is capped at `MAX_REPORT`.

Run as `python -m autograder.kernel.gradekernel -f CONNECTION_FILE` (the sandbox starts it so).
"""

import hashlib
import json
import os
import sys

from autograder.kernel import crash, policy
from autograder.kernel.snapshot import ASSIGNMENT, MISSING, Snapshot, private_import
from autograder.kernel.witness import record_text

MARKER = policy.MARKER  # + a JSON header + newline, then the cell's source
REPORT_KEY = policy.REPORT_KEY  # our entry in the execute_reply of a graded test cell
MAX_REPORT = 4 << 20  # bytes of observations a test cell may send back

# before the snapshot records the state; not in the reference run (the instructor's kernel,
# whose test cells call the reference answers to compute what is expected)
SWITCHED_OFF = [] if os.environ.get(policy.REFERENCE_VARIABLE) else policy.switch_off(ASSIGNMENT)
SNAPSHOT = Snapshot()  # at import: before the kernel exists, so before any student code
# the report's serialisation, taken before any student code (json is guarded besides)
_DUMPS, _LOADS = json.dumps, json.loads
# what a student's notebook shows for an error (`crash`), taken before any student code:
# the feedback page shows a crash as the Lab does, the student's lines and a hint
_FRAMES, _RENDER, _SLIP = crash.frames_of, crash.render, crash.slip_hint
# how a record is sealed, taken before any student code (the witness's own function)
_RECORD_TEXT = record_text


def _kernel_class():
    from ipykernel.ipkernel import IPythonKernel

    class GradingKernel(IPythonKernel):
        """IPython's kernel, with graded test cells run as the module docstring says."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            session, iopub = self.session, self.iopub_socket
            send = session.send
            get_parent = self.get_parent
            runner = _TestRunner(SNAPSHOT, self.shell, lambda kind, content: send(
                iopub, kind, content, get_parent("shell")))
            self._graded_runner = runner
            _cap_streams(int(os.environ.get(policy.OUTPUT_VARIABLE, 0) or 0))

        async def do_execute(self, code, silent, store_history=True, user_expressions=None,
                             allow_stdin=False, *, cell_meta=None, cell_id=None):
            if not SNAPSHOT.recorded:  # the first cell: nothing of the student's ran yet
                SNAPSHOT.record()
            if code.startswith(MARKER):
                head, _, source = code.partition("\n")
                try:
                    header = _LOADS(head[len(MARKER):])
                except ValueError:
                    header = {}
                if not isinstance(header, dict):
                    header = {}
                return self._graded_runner.run(header, source, store_history)
            return await super().do_execute(
                code, silent, store_history=store_history, user_expressions=user_expressions,
                allow_stdin=allow_stdin, cell_meta=cell_meta, cell_id=cell_id,
            )

    return GradingKernel


class _TestRunner:
    def __init__(self, snap, shell, publish):
        self.snap = snap
        self.shell = shell
        self.publish = publish

    def run(self, header, source, store_history):
        snap, shell = self.snap, self.shell
        grade_id = str(header.get("grade_id", ""))[:200]
        mode = header.get("mode") if header.get("mode") in ("witness", "reference") \
            else "witness"
        before = snap.differences(fix=True)
        count = shell.execution_count
        if store_history:
            shell.execution_count += 1
        filename = f"<graded test cell {count}>"
        witness = snap.modules.get("autograder.kernel.witness")
        # the text of the cell a traceback (or code that reads linecache) finds: the
        # hidden tests' lines blanked, their line numbers kept; it goes with the cell
        snap.linecache[filename] = (len(source), None, _without_hidden(source, header),
                                    filename)
        copies, originals = snap.hardened_modules()
        ns = dict(shell.user_ns)
        private = dict(snap.builtins)
        private["__import__"] = private_import(copies, snap.import_)
        ns["__builtins__"] = private
        error = None
        sealed = hashlib.sha256()
        records = witness.begin(mode, filename, seal=sealed.update) \
            if witness is not None else []
        try:
            code = snap.compile(source, filename, "exec", dont_inherit=True)
            snap.exec(code, ns)
        except BaseException as exc:  # noqa: BLE001 (every failure fails the test)
            error = exc
        finally:
            if witness is not None:
                witness.end()
        try:
            during = snap.differences(fix=True)
        except BaseException:  # noqa: BLE001
            during = ["the recorded state (could not be compared)"]
        if witness is not None and not _same_records(records, sealed):
            during.append("the records of its checks, after the checks made them")
        for key, value in ns.items():
            if key == "__builtins__":
                continue
            value = originals.get(id(value), value)
            if shell.user_ns.get(key, MISSING) is not value:
                shell.user_ns[key] = value
        report = {"grade_id": grade_id, "nonce": str(header.get("nonce", ""))[:100],
                  "records": _plain_records(records), "restored": before[:50],
                  "changed": during[:50], "switched_off": SWITCHED_OFF}
        if error is None and during:
            error = TamperingDetected(
                "while this test ran, the code it called changed "
                + ", ".join(during[:8]) + (" ..." if len(during) > 8 else "")
                + "; the test counts as failed"
            )
        self._flush()
        if error is None:
            # the test's source leaves the kernel with its cell (tracebacks are made)
            snap.linecache.pop(filename, None)
            return {"status": "ok", "execution_count": count, "user_expressions": {},
                    "payload": [], REPORT_KEY: report}
        content = self._error_content(error)
        snap.linecache.pop(filename, None)
        try:
            self.publish("error", content)
        except Exception:  # noqa: BLE001 (the reply still says error)
            pass
        return {"status": "error", "execution_count": count, **content, REPORT_KEY: report}

    def _flush(self):
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass

    def _error_content(self, error):
        try:
            name = type(error).__name__
        except BaseException:  # noqa: BLE001
            name = "Error"
        try:
            message = str(error)
        except BaseException:  # noqa: BLE001
            message = "<the error's message could not be shown>"
        tb = None
        try:
            tb = error.__traceback__
            tb = tb.tb_next if tb is not None else None  # drop this runner's own frame
        except BaseException:  # noqa: BLE001
            pass
        try:
            # as the Lab shows it: the error, the test's line, the student's own lines,
            # the library line that raised, and the hint of a known slip; never the
            # frames of the checks (display only: the verdict is the grader's)
            frames = _FRAMES(tb)
            stb = [str(line) for line in _RENDER(error, frames, hints=[_SLIP(error, frames)])]
        except BaseException:  # noqa: BLE001
            try:
                lines = self.snap.format_exception(type(error), error, tb)
                stb = "".join(lines).rstrip("\n").split("\n")
            except BaseException:  # noqa: BLE001
                stb = [f"{name}: {message}"]
        return {"ename": str(name), "evalue": str(message), "traceback": stb}


def _cap_streams(limit):
    """Printed text beyond `limit` characters in all is dropped here, in the kernel, with
    one note (`policy.OUTPUT_NOTE`): a burst of output would otherwise leave in one message
    larger than the grader accepts, and the grader would have to stop the notebook."""
    if limit <= 0:
        return
    state = {"written": 0, "noted": False}
    for stream in (sys.stdout, sys.stderr):
        original = stream.write

        def write(text, original=original):
            size = len(text) if isinstance(text, str) else 0
            if state["written"] + size > limit:
                if not state["noted"]:
                    state["noted"] = True
                    original("\n" + policy.OUTPUT_NOTE + "\n")
                return size
            state["written"] += size
            return original(text)

        stream.write = write


def _same_records(records, sealed):
    """Do `records` give the digest `sealed` was given as they were made?"""
    check = hashlib.sha256()
    try:
        for record in list(records):
            check.update(_RECORD_TEXT(record))
    except BaseException:  # noqa: BLE001 (a record that cannot be read was not ours)
        return False
    return check.hexdigest() == sealed.hexdigest()


def _without_hidden(source, header):
    """The lines of `source`, those the header names as hidden (`hidden`: line numbers)
    left empty."""
    lines = source.splitlines(True)
    hidden = header.get("hidden")
    if isinstance(hidden, list):
        for n in hidden[:100_000]:
            if isinstance(n, int) and 1 <= n <= len(lines):
                lines[n - 1] = "\n"
    return lines


def _plain_records(records):
    """The records as JSON data, at most MAX_REPORT bytes of them (a forged record that
    is not JSON, or too many, must not stop the reply)."""
    try:
        text = _DUMPS(list(records), default=str)
    except Exception:  # noqa: BLE001
        return []
    if len(text) > MAX_REPORT:
        return []
    return _LOADS(text)


class TamperingDetected(Exception):
    """The code under test changed the state a graded test relies on."""


def main():
    from ipykernel.kernelapp import IPKernelApp

    # ipykernel sets up its debugger (debugpy) while the kernel starts, unless debugpy
    # cannot be imported: a fifth of the kernel's start-up, for a kernel that nobody
    # debugs. It is kept out meanwhile only: afterwards `import debugpy` works as usual.
    blocked = "debugpy" not in sys.modules
    if blocked:
        sys.modules["debugpy"] = None
    try:
        app = IPKernelApp.instance(kernel_class=_kernel_class())
        app.initialize()
    finally:
        if blocked and sys.modules.get("debugpy", False) is None:
            del sys.modules["debugpy"]
    app.start()


if __name__ == "__main__":
    main()
