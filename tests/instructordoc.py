"""docs/instructors.md's commands, and the script that follows them
(tests/integration/test_instructor_literal_wheel.py): every command the doc's list of steps
prints is either in SCRIPT, in the doc's order, or in NOT_RUN with the reason (the test's
fixtures run some of those as printed, where the run needs them), so doc and test cannot
drift apart (tests/unit/test_instructor_doc_commands.py checks it in the fast tier)."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "instructors.md"
ASSIGNMENT = "01_residual_stack"  # the doc's example
EXCHANGE = "/srv/nbgrader/exchange"  # the doc's (nbgrader's default is another)
OPTION = f"--Exchange.root={EXCHANGE}"

# step 4's PostgreSQL gradebook from nothing on Debian, run only in the PostgreSQL run
# (tests/systempostgres.py: this host's cluster, the role and database names made unique
# per run, PASSWORD a new one)
POSTGRES_CONFIG = ("echo 'c.CourseDirectory.db_url = "
                   "\"postgresql+psycopg2://grader@localhost:5432/gradebook\"' "
                   ">> nbgrader_config.py")
POSTGRES_INSTALL = "apt-get install -y postgresql"
POSTGRES_START = "pg_ctlcluster 15 main start"
POSTGRES_ROLE = "runuser -u postgres -- createuser --pwprompt grader"
POSTGRES_DATABASE = "runuser -u postgres -- createdb -O grader gradebook"
POSTGRES_PASSWORD = ("echo 'localhost:5432:gradebook:grader:PASSWORD' >> ~/.pgpass "
                     "&& chmod 600 ~/.pgpass")
POSTGRES_COMMANDS = [POSTGRES_INSTALL, POSTGRES_START, POSTGRES_ROLE, POSTGRES_DATABASE,
                     POSTGRES_PASSWORD, POSTGRES_CONFIG]
# what this test runs, in the doc's order: (who, the command as the doc prints it)
STUDENT, INSTRUCTOR = "student", "instructor"
# run by the instructor (root) once per student, STUDENT filled in
FOR_EACH_STUDENT = "instructor, for each student"
# step 7: a server that stays up; the test opens formgrader in it, then stops it
FORMGRADER = "jupyter lab --no-browser --allow-root"
# step 8: the batch command on what collect gathered; with PostgreSQL, into a second
# database named by $RESIDUAL_PACK_DB_URL, as the doc offers
BATCH = "residual-pack grade ASSIGNMENT SUBMISSIONS --out DIR"
SUBMISSIONS, DIR = "submitted", "batch"
SCRIPT = [
    *[(INSTRUCTOR, command) for command in POSTGRES_COMMANDS],
    (INSTRUCTOR, "nbgrader generate_assignment ASSIGNMENT --force"),
    (FOR_EACH_STUDENT, "useradd --create-home STUDENT"),
    (INSTRUCTOR, "/opt/residuals/bin/residual-pack check-exchange"),
    (FOR_EACH_STUDENT,
     "runuser -u STUDENT -- /opt/residuals/bin/python -c 'import autograder, nbgrader'"),
    (INSTRUCTOR, "mkdir -p /srv/nbgrader/exchange && chmod 777 /srv/nbgrader/exchange"),
    (INSTRUCTOR, f"nbgrader release_assignment ASSIGNMENT {OPTION}"),
    (STUDENT, f"nbgrader fetch_assignment ASSIGNMENT --course residuals {OPTION}"),
    (STUDENT, f"nbgrader submit ASSIGNMENT --course residuals {OPTION}"),
    (INSTRUCTOR, f"nbgrader collect ASSIGNMENT {OPTION}"),
    (INSTRUCTOR, "nbgrader autograde ASSIGNMENT"),
    (INSTRUCTOR, FORMGRADER),
    (INSTRUCTOR, BATCH),
    (INSTRUCTOR, "cd DIR && nbgrader db student list"),
    (INSTRUCTOR, "nbgrader generate_feedback ASSIGNMENT"),
    (INSTRUCTOR, f"nbgrader release_feedback ASSIGNMENT {OPTION}"),
    (STUDENT, f"nbgrader fetch_feedback ASSIGNMENT --course residuals {OPTION}"),
    (INSTRUCTOR, "nbgrader export"),
    (INSTRUCTOR, "nbgrader export --exporter=autograder.grading.lms_export.CanvasExport "
                 "--to canvas.csv \\\n        --CanvasExport.section=\"Lecture A\""),
    (INSTRUCTOR, "nbgrader export --exporter=autograder.grading.lms_export.MoodleExport "
                 "--to moodle.csv"),
]
# what the doc prints and SCRIPT does not hold, and why; the literal test's fixtures run
# some of them as printed (the install line, the PostgreSQL extra, the torch line, the
# due date), where its run needs them
NOT_RUN = {
    "residual-pack fingerprints [ASSIGNMENT]": "authoring (steps 1-3): a fresh clone has "
        "them done; tests/integration/test_cli.py and check-drift cover them",
    "residual-pack generate": "authoring",
    ".venv/bin/python -m pip install torch==2.13.0": "authoring: the line generate's refusal "
        "prints (tests/unit/test_generate.py)",
    "residual-pack check-drift": "authoring",
    "residual-pack selfcheck [ASSIGNMENT]": "authoring",
    "/usr/bin/python3 -m venv /opt/residuals && /opt/residuals/bin/pip install "
    "PATH-OF-THIS-CHECKOUT":
        "the literal test's `environment` fixture runs it as printed, once for its three "
        "runs (under a name of the run's own in /opt)",
    "/opt/residuals/bin/pip install 'PATH-OF-THIS-CHECKOUT[postgres]'":
        "the literal test's PostgreSQL run runs it as printed before step 4's PostgreSQL "
        "lines; tests/unit/test_instructor_doc_commands.py checks that it names the extra "
        "that has the driver",
    "/opt/residuals/bin/pip install torch==2.13.0": "the literal test's torch run runs it "
        "as printed, then the README's generate and self-check",
    "apt-get update": "reads Debian's package lists from the network; the PostgreSQL run "
        "requires the package (scripts/install-postgres, which CI runs), and runs the "
        "doc's apt-get install",
    "nbgrader export": "step 8's, in DIR: `nbgrader db student list` stands for it there "
        "(step 10's is run in the course)",
    "nbgrader collect": "prose: names the command step 5 runs",
    "nbgrader autograde": "prose: names the command step 6 runs",
    "nbgrader db assignment add ASSIGNMENT --duedate=...": "step 8's late hand-ins: the "
        "literal test runs it with the due date set to now, before the late student's "
        "hand-in (and tests/integration/test_late_submissions.py)",
    "nbgrader export --exporter=...": "prose: names the exports step 10 runs",
    "nbgrader db student add ID --lms-user-id=...": "prose: step 10's Canvas user ids, "
        "where the logins differ (tests/unit/test_lms_export.py exports an lms_user_id)",
}


COMMANDS = ("nbgrader|residual-pack|python3?|pip|mkdir|echo|jupyter|useradd|runuser|apt-get|"
            "pg_ctlcluster|createuser|createdb")


def doc_commands(text=None):
    """The commands of the doc's list of steps, in order: every line of its code blocks,
    and inline code that starts with a command of COMMANDS (after `cd DIR &&`)."""
    text = DOC.read_text() if text is None else text
    text = text[text.index("In the order an instructor works"):
                text.index("`tests/integration/test_exchange.py` runs steps")]
    found = []

    def block(match):
        command = ""
        for line in match.group(1).strip("\n").splitlines():
            command = line.strip() if not command else f"{command}\n{line.rstrip()}"
            if not line.rstrip().endswith("\\"):
                if command:  # in the block's order
                    found.append((match.start(), len(found), command))
                command = ""
        return " " * len(match.group(0))

    text = re.sub(r"```[a-z]*\n(.*?)```", block, text, flags=re.S)
    for match in re.finditer(r"`([^`]+)`", text):
        span = " ".join(match.group(1).split())
        if re.match(rf"(cd \S+ && )?(\S*/)?({COMMANDS})\s", span):
            found.append((match.start(), 0, span))
    return [command for _, _, command in sorted(found)]


def unaccounted(commands=None):
    """(the doc's commands neither in SCRIPT in order nor in NOT_RUN, SCRIPT's commands
    the doc does not print in that order)."""
    script = [command for _, command in SCRIPT]
    left = []
    at = 0
    for command in doc_commands() if commands is None else commands:
        if at < len(script) and command == script[at]:
            at += 1
        elif command not in NOT_RUN:
            left.append(command)
    return left, script[at:]


README = REPO / "README.md"
# the doc's environment, which the README's short list takes to be on PATH
ENVIRONMENT_BIN = "/opt/residuals/bin/"
# README commands that are a doc command with its later options left out, and why
SHORTENED = {
    "nbgrader export --exporter=autograder.grading.lms_export.CanvasExport":
        "step 10 adds --to canvas.csv and the section",
}

# README commands that set up the shell rather than being a step of the doc, and why
SETUP = {
    "source .venv/bin/activate": "puts the environment scripts/demo made on the PATH, so "
        "that the commands after it run bare (the doc says so before its steps)",
}


def readme_commands(text=None):
    """The commands of the README's short list for instructors (its first code block
    under "## For instructors"), without their comments, the assignment named ASSIGNMENT
    as the doc names it."""
    text = README.read_text() if text is None else text
    section = text[text.index("## For instructors"):]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.S).group(1)
    found = []
    for line in block.splitlines():
        command = line.split("  #", 1)[0].strip()
        if command and not command.startswith("#"):
            found.append(re.sub(rf"\b{ASSIGNMENT}\b", "ASSIGNMENT", command))
    return found


def _as_readme_writes_it(command):
    command = command.replace("[ASSIGNMENT]", "ASSIGNMENT")
    command = re.sub(r"\s+#.*$", "", command).replace("\\\n", " ")
    return " ".join(command.replace(ENVIRONMENT_BIN, "").split())


def readme_not_in_doc(readme=None, doc=None):
    """README commands that the doc's steps do not print (as printed, or, for SHORTENED,
    as the start of one), and those out of the doc's order; SETUP's are not steps."""
    doc = [_as_readme_writes_it(c) for c in (doc_commands() if doc is None else doc)]
    wrong, at = [], 0
    for command in readme_commands() if readme is None else readme:
        if command in SETUP:
            continue
        found = [i for i, c in enumerate(doc) if c == command
                 or command in SHORTENED and c.startswith(command + " ")]
        later = [i for i in found if i >= at]
        if not later:
            wrong.append(command)
            continue
        at = later[0]
    return wrong
