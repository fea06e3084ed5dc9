"""Diagnosis by fingerprint: a failing visible check names the known mistake it looks like.

Every assignment registers wrong answers (`autograder/answers/mutants/`), each with a hint that
names the mistake without giving the answer. The instructor's `residual-pack fingerprints`
(`grader/fingerprints.py`) runs each of them against the *visible* tests only, the ones a
student's notebook holds, and keeps, for the first failing check of each failing test
cell, a fingerprint of what that check observed: a hash of the kind of check, the words
that name it (`what`) and the observation with its numbers rounded to a few digits.
`autograder/kernel/fingerprints.py` (generated, committed) maps those hashes to the hints.

Two mistakes can fail one check alike and differ in the checks they pass: a layer without
its shortcut and one whose shortcut adds floats observe the same gradients, but only the
second gets the values right. For such hints the table keeps the visible checks that every
mistake with the hint fails (`fails`); a hint whose mistake would have failed a check that
this notebook has passed (`passed`: the names of the checks whose latest run passed, kept
by the kernel's checks and by the judge) is not named.

Rounding to a few digits makes a fingerprint stable from one machine to another, and also
makes some observations alike that are not (a gradient of 0 and one of 1e-20): when
mistakes with different hints share a fingerprint only that way, the table names each
under a finer key (`fine_key`: the check's message with its numbers kept however small),
so that a message never names a mistake for another one.

When a check fails (in a student's kernel, or in the grading process where `judge`
compares a graded kernel's observations), `compare` asks `diagnose` for the same hash of
what the failing check observed; a known one adds "This looks like a known mistake: ...".

What reaches a student is hashes and hint texts: no expected value, no wrong answer's
code, and nothing of the hidden tests, whose observations are never fingerprinted (a
hidden failure's message says only which check failed, see `judge`).
"""

import hashlib
import json
import math
import os
import re
from typing import Any, Iterable  # noqa: UP035 (a kernel module imports typing only)

from autograder.kernel import fingerprints as _table

__all__ = ["fingerprint", "canonical", "diagnose", "diagnose_raised", "known_hints",
           "fine_key", "hints_for", "check_name",
           "DIGITS", "LEAD", "RECORD_VARIABLE", "VERSION"]

VERSION = 1  # of the fingerprint: a change here makes every committed one stale
DIGITS = 4  # significant digits an observed number keeps in a fingerprint
LEAD = "This looks like a known mistake: "
MAX_SHOWN = 3  # hints shown when several known mistakes observe the same
# set (to a file path) only by `residual-pack fingerprints`, in the kernels it starts:
# each failing check then appends its fingerprint and message to that file
RECORD_VARIABLE = "RESIDUAL_PACK_FINGERPRINT_LOG"

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
# the repr of a returned Value (its grad and data in another form) is left out; a check's
# own hint (such as "no path leads back to the input") is kept: it tells two mistakes apart
_LEFT_OUT = ("repr",)


def _round(x: Any) -> Any:
    """`x` to DIGITS significant digits, as text (nan, inf kept; -0 is 0)."""
    if isinstance(x, bool):
        return "true" if x else "false"
    if not isinstance(x, (int, float)):
        return x
    x = float(x)
    if not math.isfinite(x):
        return repr(x)
    if abs(x) < 1e-12:
        return "0"
    return f"{x:.{DIGITS}g}"


def _text(s: str) -> str:
    """Text as observed, without what changes from run to run (addresses, last digits)."""
    s = _ADDRESS.sub("0x?", s)
    return _NUMBER.sub(lambda m: _round(float(m.group())), s)


def canonical(item: Any, exact: bool = True) -> Any:
    """An observation with its numbers rounded (with `exact` false, left out: a training
    run's numbers differ in their last digits from one machine to another), its texts made
    stable and a Value's repr left out: what a fingerprint hashes."""
    if isinstance(item, dict):
        return {str(k): canonical(v, exact)
                for k, v in sorted(item.items(), key=lambda kv: str(kv[0]))
                if k not in _LEFT_OUT}
    if isinstance(item, (list, tuple)):
        return [canonical(v, exact) for v in item]
    if isinstance(item, str):
        if item in ("nan", "inf", "-inf"):  # how `compare.encode` sends those numbers
            return item
        return _text(item)
    if item is None:
        return None
    return _round(item) if exact else "#"


def fingerprint(kind: str, what: object, observed: Any, exact: bool = True) -> str:
    """The fingerprint (16 hex digits) of what a check of `kind`, named `what`, observed.
    `exact` false: a training run's observation, whose numbers are left out."""
    body = json.dumps([VERSION, str(kind), _text(str(what)), canonical(observed, exact)],
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def _index(tables: dict[str, Any]) -> dict[str, list[str]]:
    """{fingerprint: [hint, ...]} over every assignment's table."""
    known: dict[str, list[str]] = {}
    for table in tables.values():
        hints = table.get("hints", [])
        for key, ids in table.get("known", {}).items():
            mine = known.setdefault(key, [])
            mine += [hints[i] for i in ids if 0 <= i < len(hints) and hints[i] not in mine]
    return known


def check_name(what: object) -> str:
    """A check's name (its `what`) as the table keeps it: without the last digits."""
    return _text(str(what))


def _fails_index(tables: dict[str, Any]) -> dict[str, frozenset[str]]:
    """{hint: the names of the visible checks that every mistake with it fails}, for the
    hints that share a fingerprint with another (`fails` in a table)."""
    fails: dict[str, frozenset[str]] = {}
    for table in tables.values():
        hints = table.get("hints", [])
        for i, names in table.get("fails", {}).items():
            if 0 <= i < len(hints):
                mine = frozenset(names)
                fails[hints[i]] = fails[hints[i]] & mine if hints[i] in fails else mine
    return fails


_KNOWN = _index(_table.TABLES)
_FAILS = _fails_index(_table.TABLES)


def known_hints(key: str, passed: Iterable[str] = ()) -> list[str]:
    """The hints of the known mistakes whose fingerprint is `key` ([] if none), but those
    whose mistake fails a check named in `passed`."""
    passed = set(passed)
    return [h for h in _KNOWN.get(key, ()) if not (_FAILS.get(h, frozenset()) & passed)]


def _fine_round(x: float) -> str:
    """`x` to DIGITS significant digits however small (0 stays 0, 1e-20 stays 1e-20)."""
    return "0" if x == 0 else f"{x:.{DIGITS}g}" if math.isfinite(x) else repr(x)


def fine_key(key: str, message: str) -> str:
    """A finer fingerprint: `key` with the failing check's message (before any diagnosis),
    whose numbers keep DIGITS significant digits however small they are. Two known
    mistakes whose observations only look alike once rounded (a gradient of 0 and one of
    1e-20) share `key` but not this one: the table then keeps them apart under their fine
    keys (`residual-pack fingerprints`), so that neither is named for the other."""
    text = _ADDRESS.sub("0x?", str(message))
    text = _NUMBER.sub(lambda m: _fine_round(float(m.group())), text)
    body = json.dumps([VERSION, "fine", key, text], separators=(",", ":"))
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:16]


def hints_for(key: str, message: str, passed: Iterable[str] = ()) -> list[str]:
    """The hints of the known mistakes that observed what `key` and `message` say (and
    pass the checks named in `passed`)."""
    return known_hints(key, passed) or known_hints(fine_key(key, message), passed)


def diagnose(kind: str, observed: Any, params: dict[str, Any] | None, message: str,
             passed: Iterable[str] = ()) -> str:
    """`message` (a failing check's), with the known mistake it looks like, if any;
    `passed`: the names (`check_name`) of the checks this notebook passed."""
    try:
        what = (params or {}).get("what", "")
        exact = (params or {}).get("reproducible", True) is not False
        key = fingerprint(kind, what, observed, exact=exact)
    except Exception:  # noqa: BLE001 (an odd observation is simply not diagnosed)
        return message
    if not exact:
        # a training run's numbers differ from one machine to another: such a check is
        # never diagnosed (every wrong answer it catches would look alike without them)
        _record(key, kind, what, f"{FAILED}: {message}", exact=False)
        return message
    fine = fine_key(key, message)
    text = _words(hints_for(key, message, passed))
    if text:
        message = _joined(message, text)
    _record(key, kind, what, f"{FAILED}: {message}", fine=fine)
    return message


FAILED = "CheckFailed"  # the name of the exception a failing check raises (`witness`)
RAISED = "raised"  # the kind of fingerprint an error raised in a task's test has


def _joined(message: str, text: str) -> str:
    """`message`, then `text` as a sentence of its own."""
    message = message.rstrip()
    return f"{message} {text}" if message.endswith((".", "?", "!")) else f"{message}. {text}"


def _words(hints: list[str]) -> str:
    return LEAD + " Or: ".join(hints[:MAX_SHOWN]) if hints else ""


def diagnose_raised(task_id: str, exc: BaseException, in_message: bool = False) -> str:
    """Name the known mistake that raises `exc` in the test of `task_id`, if it is one (an
    answer that raises instead of returning, or a test that stops without a check's
    verdict): in a CheckFailed's message, or in a note under the student's own traceback
    (Python 3.11 and later). `in_message`: add them to the message (a CheckFailed, whose
    rendering shows its message only). Returns the words added ("" if none)."""
    try:
        error = f"{type(exc).__name__}: {exc}"
        key = fingerprint(RAISED, task_id, {RAISED: error})
    except Exception:  # noqa: BLE001 (an exception whose str() fails is not diagnosed)
        return ""
    fine = fine_key(key, error)
    text = _words(hints_for(key, error))
    if text and in_message and len(exc.args) == 1:
        exc.args = (_joined(str(exc.args[0]), text),)
        error = f"{type(exc).__name__}: {exc}"
    elif text and hasattr(exc, "add_note"):
        exc.add_note(text)
    _record(key, RAISED, task_id, error, fine=fine)
    return text


def _record(key: str, kind: str, what: object, error: str, exact: bool = True,
            fine: str | None = None) -> None:
    """Log a failing check's fingerprint and the error it shows (`error`: "name: message"
    as a notebook's output holds it), when `residual-pack fingerprints` asks for it;
    `exact` false marks a training run's check, which is never diagnosed; `fine`: its
    `fine_key`."""
    path = os.environ.get(RECORD_VARIABLE)
    if not path:
        return
    try:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"key": key, "kind": kind, "what": what, "error": error,
                                **({} if fine is None else {"fine": fine}),
                                **({} if exact else {"exact": False})})
                    + "\n")
    except OSError:
        pass
