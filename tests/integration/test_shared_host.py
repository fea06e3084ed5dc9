"""Trap 8 of issue 28 and item 4 of issue 40: on a shared host the students run nbgrader and
the course's kernel as their own unix users, which fails when the environment sits in the
instructor's home (mode 700) or was made from a Python that lives in one (a pyenv under
/root). `residual-pack check-exchange` judges by trying: it runs the environment's Python as
a student (`--user`, else `nobody`) and imports the pack, nbgrader and ipykernel. It says
so before any student meets it, names the path refused and what to do, and never advises
opening a folder that is not the environment's own; where the environment is reachable it
passes (though system folders such as /etc/ssl/private are closed to others), and a real
student account agrees with it every time.

The environments: this test's own, shown to the student at another path in a private mount
namespace (the host is not changed), once under a home folder of mode 700, once where it
is; and two made for the test under /opt (removed after it), one from the system's Python
(/usr/bin/python3, as docs/instructors.md says), one from a Python in a home folder of mode
700. Both share this environment's packages through a `.pth` line, so they need the same
Python version as /usr/bin/python3. Needs root (useradd, runuser, unshare).
"""

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from exchangeparts import Workflow, make_user, require_exchange

pytestmark = pytest.mark.slow

VENV = Path(sys.prefix)
IMPORTS = "import autograder, microgpt, nbgrader, ipykernel; print('imported')"


@pytest.fixture(scope="module")
def host():
    require_exchange()
    if not shutil.which("unshare"):
        pytest.skip("unshare is needed to show the environment at another path")
    base = Path(tempfile.mkdtemp(prefix="rp-shared-host-"))
    os.chmod(base, 0o755)
    w = Workflow(base)
    w.student = f"rpstudent{os.getpid() % 100000}"
    home = base / "home" / w.student
    home.parent.mkdir()
    os.chmod(home.parent, 0o755)
    make_user(w.student, home)
    w.home = home
    # the instructor's home, as `useradd -m` makes it on many systems: mode 700
    w.private = base / "home" / "instructor"
    (w.private / "course" / ".venv").mkdir(parents=True)
    os.chmod(w.private, 0o700)
    w.hidden_venv = w.private / "course" / ".venv"
    try:
        yield w
    finally:
        print("\n".join(["", "shared host transcript:", *w.transcript]))
        subprocess.run(["userdel", "-r", w.student], capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def _in_home(w, command):
    """`command` with this environment bound at the instructor's home (mode 700)."""
    return [shutil.which("unshare"), "--mount", "--propagation", "private", "--", "sh", "-c",
            f'mount --bind "{VENV}" "{w.hidden_venv}" && exec "$@"', "sh", *command]


def test_check_exchange_fails_for_an_environment_in_a_private_home(host):
    w = host
    python = str(w.hidden_venv / "bin" / "python")
    # a student cannot run it...
    student = _as_student_in_home(w, python)
    assert student.returncode != 0
    assert "Permission denied" in student.stderr + student.stdout
    # ... and the instructor's check says so before any student tries, naming the folder
    done = w.run("instructor", _in_home(w, [python, "-m", "autograder.cli",
                                            "check-exchange"]), w.base, check=False)
    w.note(done.stderr.strip())
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the students' accounts cannot run this course's Python" in done.stderr
    assert f"refused: {w.private} (mode 700, owner root)" in done.stderr
    assert "/usr/bin/python3 -m venv --clear /opt/residuals" in done.stderr
    assert "chmod" not in done.stderr  # the instructor's home is not the environment's


def _as_student_in_home(w, python):
    """The student runs the environment at the instructor's home: runuser inside the
    namespace that binds it there (and, when the base Python is hidden too, shows it)."""
    env = dict(w.env, HOME=str(w.home), USER=w.student, LOGNAME=w.student)
    inner = [shutil.which("runuser"), "-u", w.student, "--", "env", "-i",
             *[f"{k}={v}" for k, v in env.items()], python, "-c", IMPORTS]
    if w.hidden_python:
        inner = w.python_view(inner)
    done = subprocess.run(_in_home(w, inner), cwd=w.home, capture_output=True, text=True,
                          timeout=300)
    w.transcript.append(f"[{w.student}] $ {python} -c {IMPORTS!r}  (exit {done.returncode})"
                        .replace(str(w.base), "$BASE"))
    w.note((done.stderr or done.stdout).strip()[-300:])
    return done


def test_check_exchange_passes_where_every_student_can_reach_it(host):
    w = host
    python = str(VENV / "bin" / "python")
    # where the environment is (its base Python shown to others when it is hidden, as the
    # exchange test does), the student can import the pack and nbgrader...
    student = w.run(w.student, [python, "-c", IMPORTS], w.home, user=w.student, home=w.home)
    assert "imported" in student.stdout
    # ... and the check agrees
    command = [python, "-m", "autograder.cli", "check-exchange"]
    if w.hidden_python:
        command = w.python_view(command)
    done = w.run("instructor", command, w.base, check=False)
    w.note((done.stdout + done.stderr).strip())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the students' accounts can reach this course's Python" in done.stdout


# ---- environments made as instructors make them (issue 40, item 4) ----

@pytest.fixture(scope="module")
def made(host):
    """Two environments under /opt sharing this one's packages: `system`, made from
    /usr/bin/python3 as the docs say; `from_home`, made from a Python in an instructor's
    home folder of mode 700 (a copy of the system's Python with its standard library, as a
    pyenv under /root would be). Removed after the module."""
    w = host
    system_python = Path("/usr/bin/python3")
    if not system_python.exists():
        pytest.skip("no /usr/bin/python3 to make an environment from")
    version = subprocess.run([system_python, "-c", "import sys; print(sys.version_info[:2])"],
                             capture_output=True, text=True).stdout.strip()
    if version != str(tuple(sys.version_info[:2])):
        pytest.skip(f"/usr/bin/python3 is {version}, this test's Python "
                    f"{sys.version_info[:2]}: the environments could not share its packages")
    real = system_python.resolve()
    stdlib = Path(subprocess.run([real, "-c", "import sysconfig; print(sysconfig.get_path("
                                  "'stdlib'))"], capture_output=True, text=True).stdout.strip())
    w.made = []
    tag = f"{os.getpid() % 100000}"
    # the instructor's own Python, in a home folder that useradd made and that is 700
    w.teacher = f"rpteacher{tag}"
    w.teacher_home = w.base / "home" / w.teacher
    make_user(w.teacher, w.teacher_home)
    own = w.teacher_home / "python"
    (own / "bin").mkdir(parents=True)
    (own / "lib").mkdir()
    shutil.copy2(real, own / "bin" / real.name)
    (own / "lib" / stdlib.name).symlink_to(stdlib)
    os.chmod(w.teacher_home, 0o700)
    try:
        w.system = _environment(w, system_python, Path(f"/opt/rp-shared-host-{tag}"))
        w.from_home = _environment(w, own / "bin" / real.name,
                                   Path(f"/opt/rp-shared-host-home-{tag}"))
        yield w
    finally:
        for folder in w.made:
            shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["userdel", "-r", w.teacher], capture_output=True)


def _environment(w, python, prefix):
    """A venv at `prefix` made with `python -m venv`, which reads this environment's
    packages (its .pth files too, so this checkout's editable install)."""
    shutil.rmtree(prefix, ignore_errors=True)
    w.made.append(prefix)
    w.run("instructor", [str(python), "-m", "venv", "--without-pip", str(prefix)], w.base)
    purelib = subprocess.run([prefix / "bin" / "python", "-c", "import sysconfig; "
                              "print(sysconfig.get_path('purelib'))"], capture_output=True,
                             text=True, check=True).stdout.strip()
    shared = sysconfig.get_path("purelib")
    Path(purelib, "shared-with-the-test.pth").write_text(
        f"import site; site.addsitedir({shared!r})\n", encoding="utf-8")
    return prefix


def _as_student(w, python):
    """The student runs `python` and imports the pack, nbgrader and ipykernel (plain
    runuser, no namespace: the host as it is)."""
    env = dict(w.env, HOME=str(w.home), USER=w.student, LOGNAME=w.student)
    done = subprocess.run([shutil.which("runuser"), "-u", w.student, "--", "env", "-i",
                           *[f"{k}={v}" for k, v in env.items()], str(python), "-c", IMPORTS],
                          cwd=w.home, capture_output=True, text=True, timeout=300)
    w.transcript.append(f"[{w.student}] $ {python} -c {IMPORTS!r}  (exit {done.returncode})")
    w.note((done.stderr or done.stdout).strip()[-300:])
    return done


def _check(w, prefix, *options):
    """`PREFIX/bin/python -m autograder.cli check-exchange OPTIONS`, as root."""
    done = w.run("instructor", [str(prefix / "bin" / "python"), "-m", "autograder.cli",
                                "check-exchange", *options], w.base, check=False)
    w.note((done.stdout + done.stderr).strip())
    return done


def test_an_environment_of_the_system_python_under_opt_passes(made):
    """(a) Made as the docs say, from /usr/bin/python3 under /opt: a student runs it, and
    the check agrees, as `nobody` and as that student, although folders of the system
    such as /etc/ssl/private (710) and polkit's rules (700) are closed to others: the old
    check walked /usr and failed it for them."""
    w = made
    private = Path("/etc/ssl/private")
    if private.is_dir():
        w.note(f"{private} is mode {private.stat().st_mode & 0o777:o}")
    assert "imported" in _as_student(w, w.system / "bin" / "python").stdout
    for options in ([], ["--user", w.student]):
        done = _check(w, w.system, *options)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "the students' accounts can reach this course's Python" in done.stdout
        assert "it ran and imported autograder, microgpt, nbgrader, ipykernel" in done.stdout
    assert f"as {w.student} (uid " in done.stdout


def test_an_environment_made_from_a_python_in_a_private_home_fails_naming_it(made):
    """(b) A venv under /opt made from a Python in an instructor's home of mode 700 (a
    pyenv under /root): a student cannot start it, and the check says so, naming that
    home folder and that the environment was made from a Python in it."""
    w = made
    student = _as_student(w, w.from_home / "bin" / "python")
    assert student.returncode != 0 and "Permission denied" in student.stderr
    for options in ([], ["--user", w.student]):
        done = _check(w, w.from_home, *options)
        assert done.returncode == 1, done.stdout + done.stderr
        assert "the students' accounts cannot run this course's Python" in done.stderr
        assert f"refused: {w.teacher_home} (mode 700, owner {w.teacher})" in done.stderr
        assert f"made from a Python in a home folder ({w.teacher_home}/python/bin" \
            in done.stderr
        assert "/usr/bin/python3 -m venv --clear /opt/residuals" in done.stderr


def _chmod_targets(message):
    """The folders a `chmod` in `message` would change (a placeholder counts too)."""
    return [Path(t) for t in re.findall(r"chmod\s+(?:-\w+\s+)*[ugoa]*[-+=][rwxX]+\s+([^\s`']+)",
                                        message)]


def test_the_advice_never_opens_a_folder_outside_the_environment(made):
    """(c) Whatever fails, a `chmod` the check advises names only the environment's own
    tree: never the instructor's home, /root, /etc/ssl/private. Where the environment
    itself is closed (its site-packages made 700), it says which chmod opens it."""
    w = made
    for prefix in (w.system, w.from_home):
        done = _check(w, prefix)
        message = done.stdout + done.stderr
        outside = [t for t in _chmod_targets(message)
                   if not (t == prefix or prefix in t.parents)]
        assert outside == [], message
        assert not re.search(r"chmod\s+\S+\s+[A-Z]+\b", message), message  # chmod FOLDER
    site = next((w.system / "lib").glob("python3*")) / "site-packages"
    os.chmod(site, 0o700)
    try:
        done = _check(w, w.system)
    finally:
        os.chmod(site, 0o755)
    assert done.returncode == 1
    assert f"refused: {site} (mode 700, owner root)" in done.stderr
    assert _chmod_targets(done.stderr) == [w.system], done.stderr
