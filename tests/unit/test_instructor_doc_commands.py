"""docs/instructors.md and tests/integration/test_instructor_literal_wheel.py cannot drift
apart: every command the doc's steps print is run by that test in the doc's order, or said
why not."""

from instructordoc import (
    POSTGRES_COMMANDS,
    README,
    REPO,
    SCRIPT,
    SETUP,
    doc_commands,
    readme_commands,
    readme_not_in_doc,
    unaccounted,
)


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


def test_the_readmes_short_list_is_printed_in_the_doc_in_its_order():
    """Each command of the README's list for instructors is one of docs/instructors.md's
    steps as the doc prints it (a SHORTENED one may leave the doc's later options out)."""
    listed = readme_commands()
    assert "nbgrader generate_assignment ASSIGNMENT --force" in listed
    assert len(listed) >= 8
    assert readme_not_in_doc() == []


def test_a_readme_command_that_differs_from_the_doc_is_caught():
    listed = readme_commands()
    without_force = [c.replace(" --force", "") for c in listed]  # trap 1 of issue 28
    assert readme_not_in_doc(without_force) == ["nbgrader generate_assignment ASSIGNMENT"]
    other_root = [c.replace("/srv/nbgrader/exchange", "/tmp/exchange") for c in listed]
    assert readme_not_in_doc(other_root) != []
    assert readme_not_in_doc([*listed, "residual-pack grade ASSIGNMENT DIR"]) != []
    assert readme_not_in_doc(list(reversed(listed))) != []  # out of the doc's order


def test_the_postgresql_step_installs_the_extra_with_the_driver_before_naming_it():
    """Issue 40, item 6: the doc named a PostgreSQL gradebook without the `postgres` extra,
    and every nbgrader command then stopped with "No module named 'psycopg2'". Step 4
    installs the extra into the course's environment, then makes the server, the role and
    the database, before the config names them (the literal PostgreSQL run does the rest;
    installing the checkout into the test's own environment would replace it)."""
    import tomllib

    commands = doc_commands()
    extra = "/opt/residuals/bin/pip install 'PATH-OF-THIS-CHECKOUT[postgres]'"
    assert extra in commands
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert any(d.startswith("psycopg2") for d in extras["postgres"])
    order = [extra, *POSTGRES_COMMANDS, "nbgrader generate_assignment ASSIGNMENT --force"]
    assert [c for c in commands if c in order] == order


def test_the_readmes_instructor_list_first_puts_the_commands_on_the_path():
    """Issue 40's trap 1: after the README's set-up (scripts/demo makes .venv) the list's
    first command failed with `residual-pack: command not found`. The list starts with the
    line that puts .venv's commands on the PATH, scripts/demo prints it at its end, and
    docs/instructors.md says it before its steps."""
    activate = "source .venv/bin/activate"
    assert activate in SETUP
    assert readme_commands()[0] == activate
    assert [c for c in readme_commands() if c in SETUP] == [activate]  # no other exception
    demo = (README.parent / "scripts" / "demo").read_text(encoding="utf-8")
    assert f'echo "    {activate}"' in demo
    doc = (README.parent / "docs" / "instructors.md").read_text(encoding="utf-8")
    assert f"`{activate}`" in doc[:doc.index("In the order an instructor works")]
