"""A class of bad submissions, made from the released notebook of the first assignment.

`build_class(folder, context)` writes one submission per `Case` into `folder` and returns
the cases. Each case says what it does, the most it may score (what an honest submission
with the same answers would score), the exact score when that is known, and words the
class report must give as the reason. Three honest students sit among them, to show that
nobody else is affected.

The notebooks are generated here from `exercises/` and `source/` rather than committed, so
they follow the assignment when it changes. The attacks that need to know where things are
(the course, the gradebook, the other students' files) get the real paths of the run from
`context`: they are as well informed as an attacker can be.
"""

import copy
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.authoring.madeup import filled_in
from autograder.cells import nbgrader_meta
from autograder.grading.course import EXERCISES, SOURCE, notebook_paths, read_notebook

from .attacks import (
    AUDIT_HOOK,
    BIG_MESSAGE,
    CODE_SWAP,
    CTYPES_POKE,
    DEFAULTS_SWAP,
    DISK_FILLER,
    DISPLAY_UPDATE_FLOOD,
    FAKE_SUCCESS,
    FINALIZER_FORGE,
    FORGED_GRAD,
    FORK_BOMB,
    FRAME_WALK,
    GC_HELPERS,
    HAND_MADE_VALUE,
    HANDED_FUNCTION,
    IPYTHON_HOOKS,
    KERNEL_MACHINERY,
    LEAVE_THE_WALLS,
    MEMORY_BOMB,
    METADATA_OUTPUT,
    PARENT_REQUEST,
    PATCH_BUILTINS,
    PATCH_CHECKS,
    PATCH_MID_TEST,
    PRINT_HIDDEN,
    READ_SECRETS,
    RUNTIME_SHADOW,
    SCRIPT_MARKDOWN,
    SCRIPT_OUTPUTS,
    SOCKET_FILLER,
    TAMPER_DURING_TEST,
    TASK_PATCH,
    TRACE_FUNCTION,
    WIDGET_STATE_FLOOD,
    WITNESS_REWRITE,
    WRITE_OTHERS,
    WRONG_1_1,
)

ASSIGNMENT = "01_residual_stack"
NOTEBOOK = "01_residual_stack"
FULL = 6.0  # autograded points: 2 + 2 (task 1.1) + 2 (task 1.2)
TASK_1_2 = 2.0


@dataclass
class Case:
    student: str
    what: str  # what the submission does, in a few words
    files: dict  # path relative to the student's folder (or "" for <student>.ipynb) -> bytes
    max_score: float  # the most it may score: what an honest one with the same answers gets
    score: float = None  # the exact score, when known
    graded: bool = True  # False: the report must say why it was not graded
    reason: tuple = ()  # words the report must show for this student (each one)
    honest: bool = False  # a control: no problems, notes or flags expected
    withheld: bool = False  # the report must say the score is held back (or that it saw tampering)
    symlink_to: str = ""  # the notebook is a symbolic link to this student's (or this path)
    folder: bytes = b""  # the student's folder name as bytes, when it is not the id
    report_as: str = ""  # the id the report gives the student, when it is not `student`


@dataclass
class Context:
    course: Path  # the course repository
    out: Path  # the work course of the grading run (gradebook, submitted/, autograded/)
    submissions: Path  # the folder of submissions (every student's files)
    victim: str = "honest-full"  # the student whose files the attacks go after
    extra: dict = field(default_factory=dict)


def _cell(nb, grade_id):
    for i, cell in enumerate(nb.cells):
        if nbgrader_meta(cell).get("grade_id") == grade_id:
            return i, cell
    raise KeyError(grade_id)


def answer(nb, grade_id, source):
    nb = copy.deepcopy(nb)
    _cell(nb, grade_id)[1].source = source
    return nb


def insert_after(nb, grade_id, source):
    """A cell of the student's own, after the cell `grade_id`."""
    nb = copy.deepcopy(nb)
    i, _ = _cell(nb, grade_id)
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell(source))
    return nb


def as_bytes(nb):
    try:
        return nbformat.writes(nb).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: JSON can still hold it, as an escape
        return json.dumps(nb, ensure_ascii=True, indent=1).encode("ascii")

def _own_cell_with_grade_id(nb, grade_id):
    """A cell of the student's own carrying nbgrader metadata with `grade_id`."""
    nb = insert_after(nb, "task1_2_input_gradient", "x_own = 1\n")
    i, _ = _cell(nb, "task1_2_input_gradient")
    nb.cells[i + 1].metadata["nbgrader"] = {
        "grade_id": grade_id, "grade": True, "solution": False, "locked": True, "points": 50,
        "schema_version": 3, "task": False}
    return nb


def script_submission(solution):
    """Every answer right, with script in every form a page could run it: a cell of
    outputs (`SCRIPT_OUTPUTS`) and a markdown cell of the student's own (`SCRIPT_MARKDOWN`).
    The pages made from it must run none of it (the hostile class; tests/browser)."""
    nb = insert_after(solution, "task1_1_residual_stack", SCRIPT_OUTPUTS)
    i, _ = _cell(nb, "task1_1_residual_stack")
    nb.cells.insert(i + 1, nbformat.v4.new_markdown_cell(SCRIPT_MARKDOWN))
    return nb


def build_class(folder, context):
    """Write the class into `folder`; returns the list of `Case`s. With HOSTILE_CASES set
    (student names, comma-separated), only those and the honest students: for trying a
    new case without grading the whole class."""
    course = Path(context.course)
    release = read_notebook(course / EXERCISES / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    source = read_notebook(course / SOURCE / ASSIGNMENT / f"{NOTEBOOK}.ipynb")
    solution = filled_in(release, source)
    stub = release
    nb = f"{NOTEBOOK}.ipynb"
    cases = []

    def add(student, what, notebook, max_score, score=None, reason=(), **kw):
        files = kw.pop("files", None)
        if files is None:
            files = {nb: notebook if isinstance(notebook, bytes) else as_bytes(notebook)}
        cases.append(Case(student, what, files, max_score, score, reason=tuple(reason), **kw))

    # three honest students among the rest
    add("honest-full", "the solution", solution, FULL, FULL, honest=True)
    add("honest-stub", "the untouched student version", stub, 0, 0, honest=True)
    add("honest-partial", "task 1.1 wrong, task 1.2 right",
        answer(solution, "task1_1_residual_stack", WRONG_1_1), TASK_1_2, TASK_1_2, honest=True)

    # time, memory, processes, exits, crashes, output, disk
    add("infinite-loop", "an endless loop in a cell of its own; every answer right",
        insert_after(solution, "task1_1_residual_stack", "while True:\n    pass\n"),
        FULL, FULL, reason=["ran longer than"])
    add("loop-ignoring-interrupt", "ignores the interrupt, then loops forever",
        insert_after(solution, "task1_1_residual_stack",
                     "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                     "while True:\n    pass\n"),
        FULL, 0, reason=["did not stop when interrupted"])
    add("memory-bomb", "asks for 640 GB in the task 1.1 answer cell",
        answer(solution, "task1_1_residual_stack", MEMORY_BOMB), TASK_1_2, TASK_1_2,
        reason=["ran out of memory"])
    add("runaway-processes", "forks until it cannot; every answer right",
        insert_after(solution, "task1_1_residual_stack", FORK_BOMB), FULL,
        reason=["more processes than"])
    add("sys-exit", "task 1.1 calls sys.exit() when the tests call it",
        answer(solution, "task1_1_residual_stack",
               "import sys\ndef residual_stack(x, depth=20):\n    sys.exit(0)\n"),
        TASK_1_2, TASK_1_2, reason=["sys.exit"])
    add("os-exit", "task 1.1 calls os._exit(0)",
        answer(solution, "task1_1_residual_stack",
               "import os\ndef residual_stack(x, depth=20):\n    os._exit(0)\n"),
        FULL, 0, reason=["exited with code 0"])
    add("kernel-crash", "a segmentation fault after task 1.1's tests",
        insert_after(solution, "task1_2_input_gradient",
                     "import faulthandler\nfaulthandler._sigsegv()\n"),
        FULL, FULL - TASK_1_2, reason=["SIGSEGV"])
    add("enormous-output", "prints 150 MB; every answer right",
        insert_after(solution, "task1_1_residual_stack",
                     "for _ in range(150):\n    print('x' * 1_000_000)\n"),
        FULL, FULL, reason=["left out"])
    add("disk-filler", "writes until the disk is full; every answer right",
        insert_after(solution, "task1_1_residual_stack", DISK_FILLER), FULL, FULL)
    add("leave-the-walls", "memory in a memfd, a user namespace of its own, a secret in the "
        "keyring; every answer right",
        insert_after(solution, "task1_1_residual_stack", LEAVE_THE_WALLS), FULL, FULL)

    add("metadata-output", "every answer right; one output whose metadata is 12 MiB",
        insert_after(solution, "task1_1_residual_stack", METADATA_OUTPUT), FULL, FULL,
        reason=["left out"])

    # output that reached the notebook around the output limit, script on the pages
    add("display-update-flood", "every answer right; 40 outputs under one display id, then "
        "one 1 MiB update of them all", insert_after(solution, "task1_1_residual_stack",
                                                     DISPLAY_UPDATE_FLOOD), FULL, FULL,
        reason=["left out"])
    add("widget-state-flood", "every answer right; 30 widget comms of 1 MiB state each",
        insert_after(solution, "task1_1_residual_stack", WIDGET_STATE_FLOOD), FULL, FULL)
    add("script-outputs", "every answer right; script in HTML, JavaScript, SVG and markdown "
        "outputs and in a markdown cell", script_submission(solution), FULL, FULL)

    # the notebook's structure
    deleted = copy.deepcopy(solution)
    deleted.cells = [c for c in deleted.cells if nbgrader_meta(c).get("grade_id") not in (
        "task1_1_test_gradient", "plain_stack", "task1_2_input_gradient")]
    add("deleted-cells", "deleted a test, the given code and the task 1.2 answer",
        deleted, FULL - TASK_1_2, FULL - TASK_1_2, reason=["put back"])
    doubled = copy.deepcopy(solution)
    i, cell = _cell(doubled, "task1_1_residual_stack")
    twin = copy.deepcopy(cell)
    twin["id"] = "pasted-copy"
    doubled.cells.insert(i + 1, twin)
    add("duplicated-cells", "pasted the task 1.1 answer cell twice", doubled, FULL, FULL,
        reason=["appears more than once"])
    moved = copy.deepcopy(solution)
    i, answer_cell = _cell(moved, "task1_1_residual_stack")
    moved.cells.pop(i)
    j, _ = _cell(moved, "task1_1_test_gradient")
    moved.cells.insert(j + 1, answer_cell)  # the answer after its tests
    add("reordered-cells", "moved the task 1.1 answer below its tests", moved, FULL, FULL,
        reason=["out of order"])
    retyped = copy.deepcopy(solution)
    _cell(retyped, "task1_1_test_output")[1].cell_type = "markdown"
    retyped.cells[_cell(retyped, "task1_1_test_output")[0]].pop("outputs", None)
    retyped.cells[_cell(retyped, "task1_1_test_output")[0]].pop("execution_count", None)
    k, ans = _cell(retyped, "task1_2_input_gradient")
    retyped.cells[k] = nbformat.v4.new_raw_cell(ans.source, metadata=ans.metadata)
    retyped.cells[k]["id"] = ans["id"]
    add("retyped-cells", "a test cell made markdown, the task 1.2 answer made raw", retyped,
        FULL, FULL, reason=["turned into a markdown cell", "turned into a raw cell"])
    edited = answer(answer(solution, "task1_1_test_output", 'print("all good")'),
                    "task1_1_test_gradient", "pass")
    edited = answer(edited, "task1_1_residual_stack", WRONG_1_1)
    add("edited-test-cell", "emptied both task 1.1 test cells; task 1.1 wrong", edited,
        TASK_1_2, TASK_1_2, reason=["had been edited"])
    damaged = copy.deepcopy(solution)
    _cell(damaged, "task1_2_test_input_gradient")[1].metadata["nbgrader"]["points"] = 100
    _cell(damaged, "task1_1_test_output")[1].metadata["nbgrader"]["grade"] = False
    _cell(damaged, "task1_1_residual_stack")[1].metadata["nbgrader"] = "garbage"
    add("damaged-metadata", "100 points on a test, a test made ungraded, garbage metadata",
        damaged, FULL, FULL, reason=["metadata"])
    add("malformed-json", "a notebook cut short", b'{"cells": [{"cell_type": "code", ',
        0, graded=False, reason=["not a readable notebook"])
    add("empty-file", "a file of 0 bytes", b"", 0, graded=False, reason=["empty"])
    add("not-a-notebook", "valid JSON, not a notebook", b"[1, 2, 3]", 0, graded=False,
        reason=["not a notebook"])
    add("wrong-name", "the solution under another file name", None, FULL, FULL,
        files={"homework (2).ipynb": as_bytes(solution)}, reason=["graded homework (2).ipynb"])
    add("other-assignment", "the notebook of another assignment", _foreign(course), 0,
        graded=False, reason=["not the notebook of 01_residual_stack"])
    bad = as_bytes(solution)
    marker = b"**My prediction**"
    bad = bad.replace(marker, b"**My pr\xe9diction \xff\xfe**", 1)
    add("not-utf8", "bytes that are not UTF-8 in a markdown cell; every answer right",
        bad, FULL, FULL, reason=["not valid UTF-8"])
    add("symlinked-notebook", "a symbolic link to another student's notebook", None, 0,
        graded=False, files={}, symlink_to="honest-full", reason=["symbolic link"])

    # shadowing our modules, reading and writing what it must not
    no_op = ("class _Ok:\n    def __enter__(self): return self\n"
             "    def __exit__(self, *a): return True\n"
             "def __getattr__(name):\n    return lambda *a, **k: _Ok()\n")
    add("shadow-files", "an autograder/, microgpt/ and sitecustomize.py beside the stub",
        None, 0, 0, files={
            nb: as_bytes(answer(stub, "task1_1_residual_stack", WRONG_1_1)),
            "autograder/__init__.py": b"",
            "autograder/kernel/checks.py": no_op.encode(),
            "microgpt/__init__.py": b"Value = None\n",
            "sitecustomize.py": b"import builtins; builtins.abs = lambda x: 1e300\n",
        }, reason=["left out"])
    add("runtime-shadow", "writes a no-op autograder package and puts it first on sys.path",
        answer(stub, "task1_1_residual_stack", RUNTIME_SHADOW), 0, 0)
    out = Path(context.out)
    targets = [
        str(course / SOURCE / ASSIGNMENT / nb),
        str(course / "solutions" / ASSIGNMENT / nb),
        str(out / SOURCE / ASSIGNMENT / nb),
        str(out / "gradebook.db"),
        str(out / "autograded" / context.victim / ASSIGNMENT / nb),
        str(Path(context.submissions) / context.victim / ASSIGNMENT / nb),
        str(course / "nbgrader_config.py"),
    ]
    add("read-hidden-tests", "looks for the hidden tests and solutions on disk and the net",
        insert_after(stub, "task1_1_residual_stack", READ_SECRETS.format(targets=targets)),
        0, 0, reason=["flagged for review"], withheld=True)  # its code holds the markers
    victims = [
        str(Path(context.submissions) / context.victim / ASSIGNMENT / nb),
        str(out / "submitted" / context.victim / ASSIGNMENT / nb),
        str(out / "handed-in" / context.victim / ASSIGNMENT / nb),
    ]
    add("write-gradebook", "sets every score in the gradebook to 1000, overwrites a classmate",
        insert_after(answer(stub, "task1_1_residual_stack", WRONG_1_1), "task1_1_residual_stack",
                     WRITE_OTHERS.format(gradebooks=[str(out / "gradebook.db")],
                                         victims=victims)),
        0, 0)

    add("symlinked-to-source", "a symbolic link to the instructor's source notebook",
        None, 0, graded=False, files={},
        symlink_to=str(course / SOURCE / ASSIGNMENT / nb), reason=["symbolic link"])

    # forging what the kernel reports, reading what it must not show
    add("finalizer-forge", "a finalizer rewrites the records a check has just made; task 1.1 "
        "wrong", answer(stub, "task1_1_residual_stack", FINALIZER_FORGE), 0, 0)
    add("forged-grad", "the right output from a graph cut off from x, and x.grad written by "
        "hand with central differences", answer(solution, "task1_1_residual_stack",
                                                 FORGED_GRAD), FULL - 2, FULL - 2)
    add("print-hidden", "prints the running test cell's source, hidden checks included, "
        "from linecache; task 1.1 wrong", answer(stub, "task1_1_residual_stack", PRINT_HIDDEN),
        0, 0)

    # the kinds that beat the witness design (issue #42): the tests run in the grader now
    add("witness-rewrite", "rewrites the witness's records in its kernel; task 1.1 wrong, "
        "task 1.2 right", answer(solution, "task1_1_residual_stack", WITNESS_REWRITE),
        TASK_1_2, TASK_1_2)
    add("parent-request", "prints the request its kernel is running while a test runs; "
        "task 1.1 wrong", answer(stub, "task1_1_residual_stack", PARENT_REQUEST), 0, 0)
    add("hand-made-value", "task 1.1's numbers and gradient in a Value made by hand, "
        "Value(data, children, local_grads); task 1.2 right",
        answer(solution, "task1_1_residual_stack", HAND_MADE_VALUE), TASK_1_2, TASK_1_2)

    # switching the checks off from inside the kernel
    add("patched-checks", "replaces check_value and autograder.kernel.checks in sys.modules",
        answer(stub, "task1_1_residual_stack", PATCH_CHECKS), 0, 0)
    add("patched-builtins", "patches abs and math.isclose so every comparison passes",
        answer(stub, "task1_1_residual_stack", PATCH_BUILTINS), 0, 0)
    add("patched-mid-test", "patches the checks from inside the function the test calls",
        answer(stub, "task1_1_residual_stack", PATCH_MID_TEST), 0, 0)
    add("tamper-during-test", "a right answer that patches math.isclose when the test calls it",
        answer(solution, "task1_1_residual_stack", TAMPER_DURING_TEST), FULL, FULL)
    add("ipython-hooks", "swallows errors and blanks test cells with IPython's hooks",
        answer(stub, "task1_1_residual_stack", IPYTHON_HOOKS), 0, 0)
    add("fake-success", "prints the tests' success lines and a fake partial-credit result",
        answer(stub, "task1_1_residual_stack", FAKE_SUCCESS), 0, 0,
        reason=["looks like a test result"])

    # attacks on the checks, the runner and the kernel, from inside the kernel: the tests
    # run in the grader, so each earns what its answers do, and nothing is held back
    for student, what, source in [
        ("code-swap", "replaces the checks' __code__ through an alias", CODE_SWAP),
        ("defaults-swap", "makes every tolerance of check_value enormous", DEFAULTS_SWAP),
        ("task-patch", "makes the shared task class swallow every failure", TASK_PATCH),
        ("kernel-machinery", "replaces the kernel's do_execute: every test 'ok'",
         KERNEL_MACHINERY),
        ("audit-hook", "an audit hook sends the test's observations elsewhere", AUDIT_HOOK),
        ("trace-function", "a trace function (and a profiler) empties the test's "
         "observations as it runs", TRACE_FUNCTION),
        ("frame-walk", "walks the frames of the test to switch its checks off", FRAME_WALK),
        ("gc-helpers", "finds every copy of the checks through gc and blanks them",
         GC_HELPERS),
        ("ctypes-poke", "reaches the checks module through ctypes", CTYPES_POKE),
    ]:
        add(student, what, answer(stub, "task1_1_residual_stack", source), 0, 0)
    add("handed-function", "task 1.1 right; task 1.2 wrong, and it switches the checks "
        "off through a function a hidden test hands it",
        answer(solution, "task1_2_input_gradient", HANDED_FUNCTION), FULL - TASK_1_2,
        FULL - TASK_1_2)
    # ... and on the grading process
    last = solution.cells[-1]
    big = insert_after(solution, nbgrader_meta(last).get("grade_id") or "task1_2_input_gradient",
                       BIG_MESSAGE)
    add("big-message", "every answer right, then one 70 MiB message", big, FULL, FULL,
        reason=["stopped answering"])
    add("socket-filler", "every answer right; writes 300 MiB into its sockets' folder",
        insert_after(solution, "task1_2_input_gradient", SOCKET_FILLER), FULL, FULL)
    add("newline-grade-id", "every answer right; a cell of its own whose grade id holds a "
        "newline and a made-up report line about a classmate",
        _own_cell_with_grade_id(solution, "x\nhonest-full: not graded: copied the answers"),
        FULL, FULL, reason=["does not have"])
    add("surrogate-grade-id", "every answer right; a grade id with a lone surrogate",
        _own_cell_with_grade_id(solution, "x\ud800y"), FULL, FULL,
        reason=["does not have"])
    add("not-utf8-name", "every answer right, in a folder whose name is not UTF-8",
        solution, FULL, FULL, folder=b"caf\xe9-\xff", reason=["is not plain text"],
        report_as=_report_id(b"caf\xe9-\xff"))
    add("not-utf8-file", "every answer right; beside the notebook a file whose name is not "
        "UTF-8", None, FULL, FULL, files={
            nb: as_bytes(solution),
            os.fsdecode(b"notes-caf\xe9-\xff.txt"): b"handed in with the notebook\n",
        })
    only = {name.strip() for name in os.environ.get("HOSTILE_CASES", "").split(",")
            if name.strip()}
    if only:
        cases = [c for c in cases if c.honest or c.student in only]
    return [_write(folder, case) for case in cases]


def _report_id(raw):
    from autograder.grading.submissions import student_id

    return student_id(os.fsdecode(raw))[0]


def _foreign(course):
    """Another assignment's notebook (its cells as a student would get them), or one made
    up with grade ids of a different assignment."""
    others = [p for p in sorted((course / SOURCE).iterdir())
              if p.is_dir() and p.name != ASSIGNMENT and notebook_paths(p)]
    if others:
        nb = read_notebook(notebook_paths(others[0])[0])
        for cell in nb.cells:
            meta = nbgrader_meta(cell)
            if meta.get("solution") and cell.cell_type == "code":
                cell.source = "# YOUR CODE HERE\n"
        return nb
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("x = 1")
    cell.metadata["nbgrader"] = {"grade_id": "task9_answer", "solution": True, "grade": False,
                                 "locked": False, "schema_version": 3, "task": False}
    nb.cells = [cell]
    return nb


def _write(folder, case):
    base = Path(folder) / (os.fsdecode(case.folder) if case.folder else case.student)
    if case.symlink_to:
        (base / ASSIGNMENT).mkdir(parents=True, exist_ok=True)
        target = Path(case.symlink_to) if os.path.isabs(case.symlink_to) else \
            Path(folder) / case.symlink_to / ASSIGNMENT / f"{NOTEBOOK}.ipynb"
        (base / ASSIGNMENT / f"{NOTEBOOK}.ipynb").symlink_to(target)
        return case
    for rel, data in case.files.items():
        path = base / ASSIGNMENT / rel  # nbgrader's own layout, with whatever came with it
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return case


def describe(cases):
    return json.dumps([(c.student, c.what) for c in cases], indent=1)


def case_names(course):
    """The students of the class (built in a throwaway folder), for test parameters."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = build_class(tmp / "s", Context(course=Path(course), out=tmp / "o",
                                               submissions=tmp / "s"))
    return [c.student for c in cases]
