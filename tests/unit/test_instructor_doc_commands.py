"""docs/instructors.md and tests/integration/test_instructor_doc.py cannot drift apart: every
command the doc's steps print is run by that test in the doc's order, or said why not."""

from instructordoc import SCRIPT, doc_commands, unaccounted


def test_every_command_of_the_doc_is_run_or_said_why_not():
    left, extra = unaccounted()
    assert left == [], "the doc prints commands the literal test neither runs nor skips"
    assert extra == [], "the literal test runs commands the doc does not print, in its order"


def test_a_changed_or_moved_command_is_caught():
    commands = doc_commands()
    changed = [c.replace("--force", "") for c in commands]
    assert unaccounted(changed) != ([], [])
    moved = list(commands)
    release, collect = (next(c for _, c in SCRIPT if c.startswith(f"nbgrader {name}"))
                        for name in ("release_assignment", "collect"))
    i, j = moved.index(release), moved.index(collect)  # release after collect
    moved[i], moved[j] = moved[j], moved[i]
    assert unaccounted(moved) != ([], [])
