"""A graded kernel's policy: which of our modules it loads, which packages it guards,
and which model answers it switches off, per assignment.

`KERNEL_PACKAGE` is the allowlist: `autograder.kernel` is the only package of `autograder`
that is copied into a student's sandbox and loaded in a graded kernel. The rest (the
grader, the model answers, the report) never reach a student's kernel.

The pack is open: `microgpt` and `torchtrack` hold working versions of what several tasks
ask students to write (`GPT.block` is Task 5.1's answer, `GPT.stream_states` Task 6.1's,
`torchtrack.transformer.Block.forward` and `logit_lens` Task 9.1's and 9.2's). While an
assignment is graded, its kernel replaces each of them with a guard, before any student
code runs: called from the library itself (a model's own `step`, a study's training loop)
it works as before; called from a notebook cell, or from code a cell defined, it raises
`AnswerSwitchedOff`, so an answer that hands the task to the library earns nothing. The
guard looks through the interpreter's own frames (a thread pool, torch's module call) to
the code that made the call, refuses a method called on a student's subclass whoever calls
it, and replaces the answer wherever its module keeps it as a default (a dataclass field, a
default argument).

The guard alone leaves the answer's code in the kernel (in the guard's closure, and in the
module's file, which a student could run anew). So the sandbox does not give these kernels
the installed library: it gives them a copy whose answers are taken out of the source
(`autograder.grading.answerless`, made by the grader from this table), and the guard is
the second wall, with the shorter message.

The test cells do their part too: they hand a student's code model objects whose classes
do not carry the reference methods, and never pass one task's model answer as an input to
another task's code. See the README's threat model for what this leaves open.

`GUARDED` lists the packages whose state a graded kernel records before the first cell
and puts back before each test (see `gradekernel`); torchtrack only where it is used, as
importing torch costs every kernel a second or two.
"""

import importlib
import json
import os
import sys

__all__ = ["MARKER", "REPORT_KEY", "ASSIGNMENT_VARIABLE", "OUTPUT_VARIABLE", "OUTPUT_NOTE",
           "REFERENCE_VARIABLE",
           "test_cell_code", "KERNEL_PACKAGE", "kernel_side", "SWITCHED_OFF", "GUARDED",
           "AnswerSwitchedOff", "refuse_unless_library",
           "switch_off", "guarded_packages"]

# how the grader sends a graded test cell: MARKER, a JSON header (grade id, mode, nonce),
# a newline, then the cell's source; the kernel answers in its execute_reply, under REPORT_KEY
MARKER = "#%residual-pack graded test "
REPORT_KEY = "residual_pack"
ASSIGNMENT_VARIABLE = "RESIDUAL_PACK_ASSIGNMENT"  # in a graded kernel's environment
OUTPUT_VARIABLE = "RESIDUAL_PACK_OUTPUT_LIMIT"  # characters of print a kernel passes on
REFERENCE_VARIABLE = "RESIDUAL_PACK_REFERENCE_RUN"  # set in the reference run's kernel
OUTPUT_NOTE = "[grading: the rest of this notebook's printed output was left out]"


def test_cell_code(source, grade_id, mode, nonce, hidden=()):
    """What the grader sends the kernel for a graded test cell. `hidden`: the numbers of
    the source's lines that come from the hidden tests, which the kernel keeps out of the
    text it holds of the cell (`gradekernel`)."""
    head = {"grade_id": grade_id, "mode": mode, "nonce": nonce}
    if hidden:
        head["hidden"] = sorted(int(n) for n in hidden)
    return f"{MARKER}{json.dumps(head)}\n{source}"


# the allowlist is a package: a graded kernel loads `autograder` (an empty package) and
# what is in `autograder.kernel`, nothing else of ours
KERNEL_PACKAGE = "autograder.kernel"


def kernel_side(name):
    """Whether the module `name` (dotted) may load in a student's kernel."""
    return name in ("autograder", KERNEL_PACKAGE) or name.startswith(KERNEL_PACKAGE + ".")


# assignment -> [(module, class or None, name, task, what to do instead)]
SWITCHED_OFF = {
    "02_degradation": [
        ("microgpt.deepnet", None, "logits", "Task 2.2",
         "compute h_0 = W_in x, the layers and the head yourself"),
    ],
    "05_gpt_residual_adds": [
        ("microgpt.model", "GPT", "block", "Tasks 5.1 to 5.3",
         "build the block from model.attention, model.mlp and rmsnorm"),
    ],
    "06_residual_stream": [
        ("microgpt.model", "GPT", "stream_states", "Task 6.1",
         "collect the states with model.embed and model.block"),
    ],
    "08_torch_mlp": [
        ("torchtrack.mlp", "ResidualLayer", "forward", "Task 8.1",
         "write the shortcut yourself: the layer's input plus what self.branch makes of it"),
        ("torchtrack.mlp", "HighwayLayer", "forward", "Task 8.2",
         "write the gate and the mix yourself"),
    ],
    "09_torch_transformer": [
        ("torchtrack.transformer", "Block", "forward", "Task 9.1",
         "call block.attn, block.ffn, block.norm1 and block.norm2 yourself"),
        ("torchtrack.transformer", None, "logit_lens", "Task 9.2",
         "decode each state of stream_states with model.decode"),
    ],
}

GUARDED = (KERNEL_PACKAGE, "microgpt")
TORCH_ASSIGNMENTS = ("08_torch_mlp", "09_torch_transformer")


def guarded_packages(assignment):
    """The packages whose state the graded kernel records and restores."""
    return GUARDED + (("torchtrack",) if assignment in TORCH_ASSIGNMENTS else ())


class AnswerSwitchedOff(Exception):
    """A task's model answer, called from a notebook while that task is graded."""

    def _render_traceback_(self):
        return [f"{type(self).__name__}: {self}"]


# the packages whose own calls a guard lets through (the checks' own expected values
# included), and their files that call what a test hands them, which are not trusted
LIBRARY = ("microgpt", "torchtrack", "autograder")
NOT_LIBRARY = ("autograder/kernel/torchchecks.py", "autograder/kernel/checks.py",
               "autograder/kernel/probes.py")


CLASSES = ("microgpt", "torchtrack")  # whose objects a switched-off method may serve


def _folders():
    """(library folders, transparent folders): our library's package folders, and the
    interpreter's (the standard library, site-packages: torch, functools, threads), whose
    frames a guard looks through to the code that called them."""
    library = set()
    for name in LIBRARY:
        module = sys.modules.get(name)
        for path in getattr(module, "__path__", []) or []:
            library.add(os.path.realpath(path) + os.sep)
    transparent = {os.path.realpath(p) + os.sep for p in (sys.prefix, sys.base_prefix)}
    return tuple(sorted(library)), tuple(sorted(transparent))


def _library_call(frame, library, transparent):
    """Is the nearest caller that is not the interpreter's own code our library's?

    Frames of the standard library and site-packages (a thread pool, torch's module call,
    functools) are looked through; the first other frame decides. None found (a thread
    started by student code) is not the library."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen"):
            frame = frame.f_back
            continue
        if not name.startswith("/"):
            return False  # a notebook cell, a test cell, code compiled at run time
        real = os.path.realpath(name)
        if real.startswith(library):
            return not real.endswith(NOT_LIBRARY)
        if not real.startswith(transparent):
            return False
        frame = frame.f_back
    return False


def _refuse(label, task, instead, owner_object, frame, folders):
    """Raise `AnswerSwitchedOff` unless the answer `label` was called by the library
    (`frame`: its caller's frame). A method called on an object of a class the library did
    not define (`owner_object`: a student's subclass that inherits the answer) is refused
    whoever calls it."""
    if owner_object is not None and not type(owner_object).__module__.startswith(CLASSES):
        allowed = False
    else:
        allowed = _library_call(frame, *folders)
    if not allowed:
        raise AnswerSwitchedOff(
            f"{label} is the model answer to {task}, so it is switched off while this "
            f"assignment is graded; {instead}")


def _guard(original, label, task, instead, owner, folders):
    def guard(*args, **kwargs):
        _refuse(label, task, instead, args[0] if owner is not None and args else None,
                sys._getframe(1), folders)
        return original(*args, **kwargs)

    guard.__name__ = original.__name__
    guard.__qualname__ = original.__qualname__
    guard.__doc__ = original.__doc__
    guard.__module__ = original.__module__
    return guard


def refuse_unless_library(label, task, instead, owner_object=None):
    """The guard written into the source of an answer the graded cells still need (see
    `autograder.grading.answerless`): called as the first line of the answer's body, it
    raises `AnswerSwitchedOff` unless the answer was called by the library, by the rule of
    `_guard`. Being in the source, it is in every copy of the module, however loaded."""
    _refuse(label, task, instead, owner_object, sys._getframe(2), _folders())


def answer_label(module, owner, name):
    """How a switched-off answer is named: module.Class.name, or module.name."""
    return f"{module}.{owner + '.' if owner else ''}{name}"


def _replace_references(module, original, guard):
    """Where the module keeps the original as a default (a function's default argument, a
    dataclass field's default), put the guard instead, so that no plain attribute read
    hands a student the unguarded answer."""
    functions = []
    for value in list(vars(module).values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            functions += [f for f in vars(value).values() if callable(f)]
            for field in getattr(value, "__dataclass_fields__", {}).values():
                if field.default is original:
                    field.default = guard
        elif callable(value):
            functions.append(value)
    for f in functions:
        f = getattr(f, "__func__", f)
        defaults = getattr(f, "__defaults__", None)
        if defaults and any(d is original for d in defaults):
            f.__defaults__ = tuple(guard if d is original else d for d in defaults)
        kw = getattr(f, "__kwdefaults__", None)
        if kw and any(d is original for d in kw.values()):
            f.__kwdefaults__ = {k: guard if d is original else d for k, d in kw.items()}


def switch_off(assignment):
    """Put the guards of `assignment` in place; returns the labels of what was switched off."""
    done = []
    entries = SWITCHED_OFF.get(assignment, [])
    if not entries:
        return done
    folders = None
    for module_name, owner_name, name, task, instead in entries:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # torch not installed: nothing of torchtrack to switch off
            continue
        if folders is None:
            folders = _folders()
        owner = getattr(module, owner_name) if owner_name else None
        home = owner if owner is not None else module
        original = vars(home)[name]
        named = answer_label(module_name, owner_name, name)
        guard = _guard(original, named, task, instead, owner, folders)
        setattr(home, name, guard)
        _replace_references(module, original, guard)
        done.append(named)
    return done
