"""Helpers for the unit tests of the witness design: a block of checks run in one mode."""

from autograder.grading import records as recording_modes


def in_mode(mode, run):
    """The records the checks `run()` calls make in `mode` (their lines are those of the
    file that defines `run`, as a graded test cell's are the cell's)."""
    with recording_modes.recording(mode, run.__code__.co_filename) as records:
        run()
    return records
