"""Can the students' unix accounts run the course's Python? (nbgrader's exchange on a
shared host: each student fetches, validates and submits as themselves, with the course's
kernel environment.)

Another user can run a program only when every folder above it has the x bit for others
and its files can be read by others. A virtual environment made in the instructor's home
(mode 700 on many systems), or on a Python that lives there (a pyenv under /root), fails
that for every student, with "Permission denied" on their side and nothing on ours.
"""

import os
import stat
import sys
import sysconfig
from pathlib import Path

ADVICE = (
    "Put the course's kernel environment where every student's account can read and run "
    "it, with a Python that is itself outside a private home folder: e.g. "
    "`python3 -m venv /opt/residuals && /opt/residuals/bin/pip install /path/to/the/pack` "
    "with the system's python3, or the image of your JupyterHub; or give each folder "
    "named above the x bit for others (`chmod o+x FOLDER`) and its files the r bit "
    "(`chmod -R o+rX FOLDER`). Then check again: `residual-pack check-exchange`, and as a "
    "student: `sudo -u STUDENT PYTHON -c 'import autograder, nbgrader'`.")

MOST = 10  # problems listed per kind; the rest are counted


def environment_paths():
    """[(what, path)] that a student's kernel and nbgrader's commands need: this Python,
    the environment, the Python it was made from, and the pack's and nbgrader's code."""
    import nbgrader

    import autograder
    import microgpt

    paths = [
        ("the kernel's Python", Path(sys.executable)),
        ("the environment (sys.prefix)", Path(sys.prefix)),
        ("the Python it was made from (sys.base_prefix)", Path(sys.base_prefix)),
        ("the environment's packages", Path(sysconfig.get_paths()["purelib"])),
    ]
    for module in (autograder, microgpt, nbgrader):
        paths.append((f"the package {module.__name__}", Path(module.__file__).parent))
    return paths


def _mode(path):
    try:
        return os.stat(path).st_mode
    except OSError:
        return None


def closed_folders(path):
    """The folders above `path` (and above what it links to) without the x bit for others."""
    found = []
    for candidate in dict.fromkeys([Path(os.path.abspath(path)), Path(path).resolve()]):
        for folder in reversed(candidate.parents):
            mode = _mode(folder)
            if mode is not None and not mode & stat.S_IXOTH and folder not in found:
                found.append(folder)
    return found


def unreadable_files(folder):
    """Files under `folder` others cannot read, folders they cannot list or enter
    (symbolic links are not followed: their targets are checked where they are used)."""
    found = []
    for root, dirs, files in os.walk(folder):
        for name in dirs:
            mode = _mode(os.path.join(root, name))
            if mode is not None and (mode & 0o005) != 0o005:
                found.append(Path(root, name))
        for name in files:
            path = os.path.join(root, name)
            if os.path.islink(path):
                continue
            mode = _mode(path)
            if mode is not None and not mode & stat.S_IROTH:
                found.append(Path(path))
        dirs[:] = [d for d in dirs if (_mode(os.path.join(root, d)) or 0) & 0o005 == 0o005]
    return found


def _describe(path):
    st = os.stat(path)
    try:
        import pwd

        owner = pwd.getpwuid(st.st_uid).pw_name
    except (ImportError, KeyError):
        owner = str(st.st_uid)
    return f"{path} (mode {stat.S_IMODE(st.st_mode):o}, owner {owner})"


def problems(paths=None):
    """What keeps other users out of `paths` ([(what, path)], default: this environment's),
    each a line in words; [] when every student account can reach them."""
    paths = environment_paths() if paths is None else paths
    closed = {}  # folder -> what it hides
    for what, path in paths:
        for folder in closed_folders(path):
            closed.setdefault(folder, []).append(f"{what} {path}")
    lines = [f"{_describe(folder)} has no x bit for others, and holds "
             + "; ".join(dict.fromkeys(hidden)) for folder, hidden in closed.items()]
    for what, path in paths:
        target = Path(path).resolve()
        mode = _mode(target)
        if target.is_file() and mode is not None and (mode & 0o005) != 0o005 \
                and not closed_folders(path):
            lines.append(f"{_describe(target)} ({what}): others cannot read and run it")
    unreadable = []
    for _what, path in paths:
        if Path(path).is_dir() and not closed_folders(path):
            unreadable.extend(unreadable_files(path))
    unreadable = list(dict.fromkeys(unreadable))
    for path in unreadable[:MOST]:
        lines.append(f"{_describe(path)}: others cannot read it")
    if len(unreadable) > MOST:
        lines.append(f"... and {len(unreadable) - MOST} more files or folders others "
                     "cannot read")
    return lines


def report(found):
    """The message for `found` (problems()), with what to do."""
    if not found:
        return (f"the students' accounts can reach this course's Python ({sys.executable}) "
                "and the pack: every folder above them has the x bit for others, and their "
                "files can be read by others")
    return "\n".join([
        f"the students' accounts cannot run this course's Python ({sys.executable}): under "
        "nbgrader's exchange each student fetches, validates and submits as themselves, and "
        "would get 'Permission denied'.", *[f"  {line}" for line in found], ADVICE])
