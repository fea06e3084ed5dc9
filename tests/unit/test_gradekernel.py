"""`kernel/gradekernel.py`: what a graded kernel sends back and how much it prints."""

import json

from autograder.kernel import gradekernel, policy


def test_records_go_back_as_plain_json_and_never_stop_the_reply():
    records = [{"line": 3, "kind": "number", "observed": {"number": 1.5}}]
    assert gradekernel._plain_records(records) == records
    # an object JSON cannot hold becomes its text; a report over the cap is dropped whole
    odd = gradekernel._plain_records([{"observed": object()}])
    assert isinstance(odd[0]["observed"], str)
    huge = [{"x": "y" * 1000}] * (gradekernel.MAX_REPORT // 1000 + 10)
    assert gradekernel._plain_records(huge) == []


def test_printed_text_is_cut_at_the_limit_with_one_note(monkeypatch):
    class Stream:
        def __init__(self):
            self.parts = []

        def write(self, text):
            self.parts.append(text)
            return len(text)

    out, err = Stream(), Stream()
    monkeypatch.setattr("sys.stdout", out)
    monkeypatch.setattr("sys.stderr", err)
    gradekernel._cap_streams(10)
    out.write("12345")
    err.write("678")
    out.write("this goes over")
    out.write("and so does this")
    text = "".join(out.parts)
    assert text.startswith("12345") and "".join(err.parts) == "678"
    assert text.count(policy.OUTPUT_NOTE) == 1 and "over" not in text


def test_a_graded_test_cell_is_sent_with_its_header():
    code = policy.test_cell_code("x = 1\n", "task1", "witness", "n0")
    head, _, body = code.partition("\n")
    assert head.startswith(policy.MARKER) and body == "x = 1\n"
    assert json.loads(head[len(policy.MARKER):]) == {"grade_id": "task1", "mode": "witness",
                                                      "nonce": "n0"}


def _runner():
    from types import SimpleNamespace

    from autograder.kernel.snapshot import Snapshot

    snap = Snapshot()
    snap.record()
    shell = SimpleNamespace(user_ns={}, execution_count=1)
    return gradekernel._TestRunner(snap, shell, lambda kind, content: None)


def test_a_test_cells_source_leaves_the_kernel_with_its_cell():
    """Neither a passing nor a failing test leaves its source (hidden lines included) in
    `linecache` for a later cell of the student's to read."""
    import linecache

    runner = _runner()
    header = {"grade_id": "t", "mode": "witness", "nonce": "n"}
    assert runner.run(header, "hidden = 'a hidden check'\n", True)["status"] == "ok"
    failed = runner.run(header, "x = 1\nraise ValueError('hidden input 7')\n", True)
    assert failed["status"] == "error"
    assert "raise ValueError" in "\n".join(failed["traceback"])  # made before it went
    assert not [k for k in linecache.cache if "graded test cell" in str(k)]


def test_the_hidden_lines_are_not_in_the_text_the_kernel_holds_of_its_test_cell():
    """While a test cell runs, the code it calls can read the cell's text (linecache, as a
    traceback does): the hidden tests' lines are blank there, and the others as sent."""
    import json as json_module

    runner = _runner()
    source = ("import linecache, sys\n"
              "hidden = 'hidden input 7'\n"
              "seen = ''.join(linecache.getlines(sys._getframe().f_code.co_filename))\n")
    code = policy.test_cell_code(source, "t", "witness", "n", hidden={2})
    head, _, body = code.partition("\n")
    header = json_module.loads(head[len(policy.MARKER):])
    assert header["hidden"] == [2]
    assert runner.run(header, body, True)["status"] == "ok"
    seen = runner.shell.user_ns["seen"]
    assert "hidden input 7" not in seen and "import linecache" in seen
    assert seen.splitlines()[1] == "" and len(seen.splitlines()) == 3
    # without the header's list, the text is the cell's (the control)
    runner.run({"grade_id": "t", "mode": "witness", "nonce": "n"}, body, True)
    assert "hidden input 7" in runner.shell.user_ns["seen"]


HONEST_CHECK = ("from autograder.kernel import witness\n"
                "witness.settle('number', {'number': 2.0}, None, {})\n")


def test_a_record_changed_after_its_check_made_it_fails_the_cell():
    """The records are sealed as they are made: changing, removing or replacing one
    afterwards (what a finalizer that runs inside the test could do) fails the cell as
    tampered with, whoever did it. An honest cell's records go back as made."""
    header = {"grade_id": "t", "mode": "witness", "nonce": "n"}
    runner = _runner()
    honest = runner.run(header, HONEST_CHECK, True)
    assert honest["status"] == "ok", honest
    assert [r["observed"] for r in honest[policy.REPORT_KEY]["records"]] == [{"number": 2.0}]
    for forgery in (
        "witness._state['records'][0]['observed'] = {'number': 6.7275}\n",
        "witness._state['records'].clear()\n",
        "witness._state['records'][0] = dict(witness._state['records'][0], line=99)\n",
        "witness._state['seal'] = None\nwitness.settle('number', {'number': 3.0}, None, {})\n",
    ):
        reply = _runner().run(header, HONEST_CHECK + forgery, True)
        assert reply["status"] == "error" and reply["ename"] == "TamperingDetected", forgery
        assert "the records of its checks" in reply["evalue"], forgery
        assert "the records of its checks, after the checks made them" in \
            reply[policy.REPORT_KEY]["changed"], forgery


def test_the_report_is_made_with_json_as_it_was_before_any_student_code():
    """A cell that replaced json's serialisation before a test cannot write the report:
    json is put back (and the change reported) before the test runs."""
    original, encoder = json.dumps, json.JSONEncoder.encode
    runner = _runner()
    try:
        json.dumps = lambda *a, **k: '[{"forged": true}]'
        json.JSONEncoder.encode = lambda self, o: '[{"forged": true}]'
        reply = runner.run({"grade_id": "t", "mode": "witness", "nonce": "n"}, "x = 1\n", True)
    finally:
        json.dumps, json.JSONEncoder.encode = original, encoder
    restored = " ".join(reply[policy.REPORT_KEY]["restored"])
    assert "json.dumps" in restored and "JSONEncoder" in restored
    assert reply[policy.REPORT_KEY]["records"] == []
    assert gradekernel._plain_records([{"a": 1}]) == [{"a": 1}]


def test_a_crash_in_a_graded_test_reads_as_in_the_lab():
    """The feedback page shows a crash as the student's Lab does (`crash.render`): what
    raised and where, with the hint of a known slip, not a traceback through the kernel's
    and the checks' own frames."""
    runner = _runner()
    header = {"grade_id": "t", "mode": "witness", "nonce": "n"}
    failed = runner.run(header, "x = 3.0\ny = 2\nx.backward()\n", True)
    assert failed["status"] == "error" and failed["ename"] == "AttributeError"
    shown = failed["traceback"]
    assert shown[0] == ("AttributeError in the test, from what your code gave it: 'float' "
                        "object has no attribute 'backward'"), shown
    assert "Graded test cell, line 3, the test:" in shown, shown
    assert any(line.startswith("Hint: a plain float where a Value belongs") for line in shown)
    text = "\n".join(shown)
    assert "Traceback (most recent call last)" not in text and "gradekernel" not in text
