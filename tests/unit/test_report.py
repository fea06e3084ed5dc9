"""autograder/grading/report.py: the sentences a person reads about a run, from records
made by hand (no kernel, no nbgrader)."""

import csv
import json
import signal
from types import SimpleNamespace

from autograder.grading.notebook_record import CellRun, NotebookRun
from autograder.grading.report import (
    describe_end,
    lost_points,
    plain,
    score_table,
    tampering_seen,
    write_report,
)
from autograder.grading.student import CellScore, StudentResult
from autograder.grading.submissions import student_id
from autograder.sandbox.limits import Limits

LIMITS = Limits()


def _run(*cells, ended=""):
    return NotebookRun(cells=list(cells), ended=ended, level="namespaces").to_dict()


def _result(run, cells=()):
    return StudentResult("ann", graded=True, cells=list(cells), runs={"nb": run})


def test_how_a_kernel_ended():
    assert describe_end({}, LIMITS) == "the kernel died"
    assert "memory limit (2 GiB)" in describe_end({"signal": signal.SIGKILL}, LIMITS)
    # where a memory cgroup counted the kernel and saw no OOM kill, memory is ruled out
    counted = describe_end({"signal": signal.SIGKILL, "memory_counted": True}, LIMITS)
    assert "not by the memory limit" in counted and "most likely" not in counted
    assert "SIGXFSZ: it wrote a file bigger than" in describe_end(
        {"signal": signal.SIGXFSZ}, LIMITS)
    assert describe_end({"message": "out of memory: x"}, LIMITS) == \
        "the kernel was stopped: out of memory: x"
    assert "SIGSEGV" in describe_end({"signal": signal.SIGSEGV}, LIMITS)
    assert "signal 99" in describe_end({"signal": 99}, LIMITS)
    assert "code 3" in describe_end({"code": 3}, LIMITS)


def test_each_limit_is_named_with_its_size():
    run = _run(
        CellRun(1, "t1", "test", "timeout", "CellTimeoutError").__dict__,
        CellRun(2, "", "own", "error", "MemoryError").__dict__,
        CellRun(3, "a", "answer", "error", "SystemExit").__dict__,
        CellRun(4, "", "own", "error", "BlockingIOError",
                "Resource temporarily unavailable").__dict__,
        CellRun(5, "", "own", "error", "OSError", "No space left on device").__dict__,
        CellRun(6, "", "own", "ok", output_dropped=5 << 20).__dict__,
    )
    said = " | ".join(lost_points(_result(run), LIMITS, {}))
    assert "t1 ran longer than the 120 s a cell may take" in said
    assert "cell 3 (your own) ran out of memory (the limit is 2 GiB)" in said
    assert "a called sys.exit()" in said
    assert "more processes than the 256 allowed" in said
    assert "256 MiB in all, 64 MiB per file" in said
    assert "printed about 5 MiB more than the 8 MiB" in said


def test_a_kernel_that_ended_names_the_tests_that_did_not_run():
    run = _run(CellRun(1, "t1", "test", "died").__dict__,
               CellRun(2, "t2", "test", "not run").__dict__,
               CellRun(3, "a", "answer", "not run").__dict__,
               ended="the kernel ended on SIGSEGV, in cell 1")
    said = lost_points(_result(run), LIMITS, {})
    assert said[0] == ("the kernel ended on SIGSEGV, in cell 1; tests that did not run: "
                       "t1, t2")


def test_stderr_is_named_only_where_the_test_lost_points():
    run = _run(CellRun(1, "t1", "test", "ok", stderr=True).__dict__,
               CellRun(2, "t2", "test", "ok", stderr=True).__dict__)
    cells = [CellScore("nb", "t1", 0.0, 1.0, True), CellScore("nb", "t2", 1.0, 1.0, True)]
    said = lost_points(_result(run, cells), LIMITS, {})
    assert [s for s in said if "stderr" in s] == [
        "t1 wrote to stderr (a warning?), which nbgrader counts as a failed test"]


def test_tampering_is_a_reason_to_withhold_but_sys_path_is_not():
    run = _run(
        CellRun(1, "t1", "test", "ok", changed=["autograder.kernel.checks.check_value"]).__dict__,
        CellRun(2, "t2", "test", "ok", restored=["sys.path", "microgpt.Value.__add__"]).__dict__,
        CellRun(3, "t3", "test", "ok", restored=["sys.path"]).__dict__,
        CellRun(4, "", "own", "ok", changed=["builtins.print"]).__dict__,
    )
    reasons = tampering_seen(_result(run))
    assert reasons == [
        "while t1 ran, the code it called changed autograder.kernel.checks.check_value",
        "before t2 ran, the grader undid changes earlier cells made to microgpt.Value.__add__",
    ]


def test_plain_keeps_a_report_line_one_line():
    assert plain("ann\nbob: 10/10") == "ann\\x0abob: 10/10"
    assert plain("a\u202eb") == "a\\u202eb"
    assert plain("x\ud800") == "x\\ud800"
    assert plain("y" * 10, limit=4) == "yyyy..."


def _grader():
    return SimpleNamespace(assignment="hw", notebooks=["nb"], order=[("nb", "t1"), ("nb", "w")],
                           autograded={("nb", "t1"): True, ("nb", "w"): False})


def test_the_table_and_the_report_files(tmp_path):
    results = [
        StudentResult("ann", graded=True, seconds=1.25,
                      cells=[CellScore("nb", "t1", 2.0, 2.0, True),
                             CellScore("nb", "w", 0.0, 1.0, False)]),
        StudentResult("bob\nx", reason="is empty"),
    ]
    table = score_table(_grader(), results)
    assert table.splitlines()[0].split() == ["student", "t1", "autograded", "seconds"]
    assert table.splitlines()[2].split() == ["ann", "2/2", "2/2", "1.2"]
    assert "bob\\x0ax: not graded: is empty" in table
    write_report(_grader(), results, tmp_path, "hw: 2 submission(s)")
    assert (tmp_path / "report.txt").read_text().startswith("hw: 2 submission(s)\n\n")
    rows = list(csv.reader(open(tmp_path / "report.csv", encoding="utf-8")))
    assert rows[0][:4] == ["student", "graded", "t1", "w"]
    assert rows[1][:6] == ["ann", "yes", "2", "0", "2", "2"]
    data = json.loads((tmp_path / "report.json").read_text())
    assert [s["autograded_score"] for s in data["students"]] == [2.0, 0.0]
    assert "log" not in data["students"][0]


def _failing(verdict="", status="error", ename="CheckFailed", evalue=""):
    return CellRun(0, "t1", "test", status, ename=ename, evalue=evalue, verdict=verdict)


def test_class_statistics_count_who_passed_and_the_common_reasons(tmp_path):
    from autograder.grading.report import class_statistics, statistics_text

    def student(name, score, cell=None):
        run = _run(cell) if cell else _run(CellRun(0, "t1", "test", "ok"))
        return StudentResult(name, graded=True, runs={"nb": run},
                             cells=[CellScore("nb", "t1", score, 2.0, True),
                                    CellScore("nb", "w", 0.0, 1.0, False)])

    wrong = "CheckFailed: check 2 (the gradient): expected {}, got {}"
    results = [
        student("ann", 2.0),
        student("bob", 0.0, _failing(wrong.format(6.727, 1e-20))),
        student("cy", 0.0, _failing(wrong.format(6.727, 0.5))),  # the same mistake
        student("dee", 0.0, _failing("", status="timeout", ename="")),
        StudentResult("eve", reason="is empty"),
    ]
    stats = class_statistics(_grader(), results)
    assert len(stats) == 1  # the autograded cell only, not the hand-graded one
    st = stats[0]
    assert (st["grade_id"], st["graded"], st["passed"]) == ("t1", 4, 1)
    assert st["reasons"][0] == ["CheckFailed: check # (the gradient): expected #, got #", 2]
    assert st["reasons"][1] == ["ran past the time limit", 1]
    assert st["other"] == 0
    text = statistics_text(_grader(), results, stats)
    assert "t1: passed by 1/4 (25%)" in text and "other reasons" not in text
    # past the top reasons, the rest is counted (an instructor's trial: 4 of 5 were shown)
    fewer = class_statistics(_grader(), results, top=1)[0]
    assert fewer["reasons"] == [st["reasons"][0]] and fewer["other"] == 1
    assert "    1 x other reasons" in statistics_text(_grader(), results, [fewer])
    assert "    2 x CheckFailed: check # (the gradient)" in text
    assert "4 graded, 1 not graded" in text and "full marks 1, zero 3" in text
    write_report(_grader(), results, tmp_path, "hw")
    assert "class statistics" in (tmp_path / "report.txt").read_text()
    png = tmp_path / "score_distribution.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["statistics"][0]["passed"] == 1


def test_a_student_cannot_write_a_statistics_line():
    from autograder.grading.report import class_statistics, statistics_text

    run = _run(_failing("CheckFailed: bad\nt1: passed by 99/99 (100%)"))
    results = [StudentResult("ann", graded=True, runs={"nb": run},
                             cells=[CellScore("nb", "t1", 0.0, 2.0, True)])]
    text = statistics_text(_grader(), results, class_statistics(_grader(), results))
    assert "\n    1 x CheckFailed: bad\\x0at1: passed by #/# (#%)" in text


def test_a_late_penalty_has_its_column_beside_the_score():
    """The table shows the score before the penalty (as the cells have it) and the
    penalty beside it; without a late student there is no such column."""
    results = [
        StudentResult("ann", graded=True, seconds=1.0,
                      cells=[CellScore("nb", "t1", 2.0, 2.0, True)]),
        StudentResult("dee", graded=True, seconds=1.0, late_penalty=2.0,
                      cells=[CellScore("nb", "t1", 2.0, 2.0, True)]),
        StudentResult("eve", reason="is empty"),
    ]
    lines = score_table(_grader(), results).splitlines()
    assert lines[0].split() == ["student", "t1", "autograded", "late", "penalty", "seconds"]
    assert lines[2].split() == ["ann", "2/2", "2/2", "1.0"]
    assert lines[3].split() == ["dee", "2/2", "2/2", "-2", "1.0"]
    assert lines[4].split() == ["eve", "-", "not", "graded", "-", "-"]
    assert "late" not in score_table(_grader(), results[:1]).splitlines()[0]


def test_a_flag_that_withheld_the_score_is_said_once():
    flag = "flagged for review: t1 imports the grader's own modules (autograder.probes)"
    result = StudentResult("ann", graded=True, cells=[CellScore("nb", "t1", 0.0, 2.0, True)],
                           withheld=[flag], withheld_score=2.0,
                           flags=[flag, "flagged for review: a cell touches files (open)"])
    table = score_table(_grader(), [result])
    assert table.count("imports the grader's own modules") == 1
    assert "touches files (open)" in table


def test_report_text_is_one_line_of_printable_text():
    assert plain("a\nb\rc\x1b[31m") == "a\\x0ab\\x0dc\\x1b[31m"
    assert plain("x\ud800y") == "x\\ud800y"
    assert plain("right\u202eleft") == "right\\u202eleft"
    assert plain("é ok") == "é ok"


def test_every_handed_in_name_gets_an_id():
    assert student_id("ann.lee") == ("ann.lee", "")
    made, note = student_id("caf\udce9")
    assert made.startswith("student-") and "not plain text" in note
    assert student_id("a\nb")[0].startswith("student-")
    assert student_id("../x")[0].startswith("student-")


def test_the_report_lists_each_failed_check_per_student_hidden_ones_in_full():
    """report.txt names, per student, every failed check (issue #28, trap 5); a hidden
    check is shown in full there, while the student's page says only which one failed."""
    visible = CellRun(0, "t1", "test", "error", ename="CheckFailed",
                      verdict="f(1): expected 2, got 3")
    hidden = CellRun(1, "t2", "test", "error", ename="CheckFailed", hidden=True,
                     verdict="a check that runs only at grading failed (check 2 of 2 in "
                             "this cell); its inputs and expected value are not shown",
                     detail="hidden check 2 of 2 (line 9): f(-4): expected -4, got 4")
    passed = CellRun(2, "t3", "test", "ok")
    result = _result(_run(visible, hidden, passed))
    table = score_table(_grader(), [result])
    assert "ann: t1 failed: f(1): expected 2, got 3" in table
    assert "ann: t2 failed: hidden check 2 of 2 (line 9): f(-4): expected -4, got 4" in table
    assert "t3 failed" not in table


def test_a_reason_keeps_its_task_names_and_its_words_whole():
    """Issue #28, trap 5: the class statistics cut reasons at 160 characters (the named
    mistake was lost) and stripped the numbers of task names ("Tasks # to #")."""
    from autograder.grading.report import _reason_kind

    long = ("CheckFailed: Tasks 5.1 to 5.3: block output at position 2 differs: expected 0.25, "
            "got 0.5. This looks like a known mistake: the MLP reads the stream before the "
            "attention's add, so both sublayers see the same input (the parallel block)")
    kind = _reason_kind({"verdict": long})
    assert kind.startswith("CheckFailed: Tasks 5.1 to 5.3: block output at position #")
    assert kind.endswith("(the parallel block)") and "#, got #" in kind


def test_a_bubblewrap_kernels_end_reaches_the_words_of_its_kind(tmp_path):
    """`KernelPlan.ended` turns the sandbox's outcome into what `describe_end` words: a
    cgroup limit and the grader's own kill by the sandbox's message, a signal by its name
    (with memory ruled out where a memory cgroup counted the kernel), an exit by its code."""
    from autograder.grading.plan import KernelPlan
    from autograder.sandbox.bubblewrap import Outcome

    class Ended:
        def __init__(self, outcome):
            self._outcome = outcome

        def poll(self):
            return self._outcome.returncode

        def outcome(self):
            return self._outcome

    def words(outcome):
        plan = KernelPlan(tmp_path, tmp_path / "c", process=Ended(outcome))
        return describe_end(plan.ended(), LIMITS)

    assert words(Outcome("out of memory", "out of memory: more than 2048 MiB", -9,
                         {"oom_kills": 1})) == \
        "the kernel was stopped: out of memory: more than 2048 MiB"
    assert words(Outcome("killed", "the kernel was stopped by the grader", -9, {})) == \
        "the kernel was stopped: the kernel was stopped by the grader"
    counted = words(Outcome("signal", "ended by SIGKILL", 137, {"oom_kills": 0}))
    assert "SIGKILL" in counted and "not by the memory limit" in counted
    assert "most likely it went over the memory limit" in words(
        Outcome("signal", "ended by SIGKILL", -9, {}))
    assert "SIGXCPU: it used up its CPU time" in words(Outcome("signal", "x", 128 + 24, {}))
    assert "code 3" in words(Outcome("exited", "x", 3, {}))
