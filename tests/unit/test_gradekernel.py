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
