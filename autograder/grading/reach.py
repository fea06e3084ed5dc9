"""Can the students' unix accounts run the course's Python? (nbgrader's exchange on a
shared host: each student fetches, validates and submits as themselves, with the course's
kernel environment.)

Judged by trying: this environment's Python is run as a student's unix user (`--user
NAME`, or else a throwaway unprivileged identity, `nobody`), and it imports the pack,
nbgrader and ipykernel; nothing else is started. When that fails, the path the student was
refused is named (from the error, or found on the way to the Python and the modules), and
what to do. The advice never opens a folder that is not the environment's own: a Python in
a home folder (a pyenv under /root, a `.venv` in the instructor's home) is rebuilt from the
system's Python under /opt instead, as docs/instructors.md says. Mode bits alone cannot
judge it: a folder of mode 700 under /usr (polkit's rules) or 710 (SSL's private keys) is
nothing a student's import touches.
"""

import json
import os
import pwd
import re
import shlex
import shutil
import stat
import subprocess
import sys
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

MODULES = ("autograder", "microgpt", "nbgrader", "ipykernel")
NOBODY_UID = 65534
FLOOR = (3, 11)  # the Python the pack requires (pyproject.toml; nbgrader 0.9.6's)
PACKAGE = "microgpt-residuals"
# prefixes of the system's own Python: its folders are the system's, never to be opened
SYSTEM_PREFIXES = (Path("/"), Path("/usr"), Path("/usr/local"))
MARK = "residual-pack-probe: "

# what runs as the student: import each module; for a failure, the path refused (the
# error's file, else the first folder on the way to where the instructor's Python found
# the module, or to a folder of the instructor's sys.path, that this account may not
# enter, else the file or folder it may not read)
PROBE = r"""
import importlib, json, os, sys
def refused(where):
    path = os.path.abspath(where)
    parts = path.split(os.sep)
    for i in range(2, len(parts)):
        folder = os.sep.join(parts[:i]) or os.sep
        if not os.access(folder, os.X_OK):
            return folder
    if os.path.lexists(path) and not os.access(path, os.R_OK):
        return path
    return None
given = json.loads(sys.argv[1])
found = {}
for name, where in given["modules"].items():
    try:
        importlib.import_module(name)
        found[name] = None
    except BaseException as exc:
        path = getattr(exc, "filename", None) if isinstance(exc, OSError) else None
        for place in [where, *given["path"]]:
            path = path or (refused(place) if place else None)
        found[name] = {"error": f"{type(exc).__name__}: {exc}", "refused": path}
print(MARK + json.dumps({"executable": sys.executable, "modules": found}))
""".replace("MARK", repr(MARK))


@dataclass
class Identity:
    """Whom the check runs as: a student's account, or `nobody`."""

    name: str
    uid: int
    gid: int
    groups: list[int] = field(default_factory=list)
    home: str = "/nonexistent"

    def __str__(self) -> str:
        return f"{self.name} (uid {self.uid})"


class ReachError(Exception):
    """The check cannot be made (an unknown user, no way to switch to it)."""


def student_identity(user: str | None = None) -> Identity:
    """The unix user `user` with its groups, or, without one, `nobody` (uid 65534)."""
    if user is None:
        try:
            entry = pwd.getpwnam("nobody")
        except KeyError:
            return Identity("nobody", NOBODY_UID, NOBODY_UID)
        return Identity(entry.pw_name, entry.pw_uid, entry.pw_gid, [], entry.pw_dir)
    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        raise ReachError(f"there is no unix user {user!r}: make a student's account, as "
                         f"root, with `useradd --create-home {shlex.quote(user)}`") from None
    groups = sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid)))
    return Identity(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def venv_home(prefix: str | os.PathLike | None = None) -> Path | None:
    """The folder of the Python a virtual environment was made from (pyvenv.cfg's `home`),
    or None when `prefix` (default: this one) is not a virtual environment."""
    cfg = Path(sys.prefix if prefix is None else prefix) / "pyvenv.cfg"
    try:
        text = cfg.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = re.search(r"^\s*home\s*=\s*(.+?)\s*$", text, flags=re.M)
    return Path(found.group(1)) if found else None


def home_folders() -> list[Path]:
    """The home folders of this host's people: root's and every user from uid 1000 up
    (service accounts' homes, /nonexistent, /var/..., are not people's), and /home."""
    found = {Path("/home")}
    for entry in pwd.getpwall():
        if (entry.pw_uid == 0 or 1000 <= entry.pw_uid < NOBODY_UID) \
                and entry.pw_dir not in ("", "/"):
            found.add(Path(entry.pw_dir))
    return sorted(found)


def in_home_folder(path: str | os.PathLike) -> Path | None:
    """The home folder `path` (or what it links to) lies in, or None."""
    for candidate in dict.fromkeys([Path(os.path.abspath(path)), Path(path).resolve()]):
        for home in home_folders():
            if candidate == home or home in candidate.parents:
                return home
    return None


def _may(who: Identity, st: os.stat_result, bit: int) -> bool:
    """May `who` do `bit` (1 run/enter, 4 read) on a file of this stat, by its mode bits?"""
    if who.uid == 0:
        return True
    if st.st_uid == who.uid:
        return bool(st.st_mode & (bit << 6))
    if st.st_gid == who.gid or st.st_gid in who.groups:
        return bool(st.st_mode & (bit << 3))
    return bool(st.st_mode & bit)


def _hops(path: Path) -> list[Path]:
    """`path` and each path its symbolic links lead to, in order."""
    hops = [Path(os.path.abspath(path))]
    while hops[-1].is_symlink() and len(hops) < 40:
        target = Path(os.readlink(hops[-1]))
        hops.append(Path(os.path.abspath(hops[-1].parent / target)))
    return hops


def refused_on_the_way(path: str | os.PathLike, who: Identity, bit: int = 4) -> Path | None:
    """The first folder on the way to `path` (and to what its links lead to) that `who`
    may not enter, else `path` itself when `who` may not read it (bit 4) or run it (1),
    else None. By mode bits (not ACLs): the check's own verdict comes from trying."""
    for hop in _hops(Path(path)):
        for folder in [*reversed(hop.parents)]:
            try:
                st = os.stat(folder)
            except OSError:
                continue
            if not _may(who, st, 1):
                return folder
    try:
        st = os.stat(path)
    except OSError:
        return None
    return None if _may(who, st, bit) else Path(path)


def module_paths() -> dict[str, str | None]:
    """{module: the file this Python finds it at} for MODULES (None when not found)."""
    import importlib.util

    found = {}
    for name in MODULES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        found[name] = spec.origin if spec is not None and spec.origin else None
    return found


@dataclass
class Trial:
    """What happened when `who` ran `python` and imported MODULES."""

    python: Path
    who: Identity
    how: str  # the command that switched to `who`, in words
    returncode: int
    output: str
    failures: dict[str, dict] = field(default_factory=dict)  # module -> error, refused
    started: bool = True  # did the Python start and run the probe?
    refused: list[Path] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.started and self.returncode == 0 and not self.failures


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (p for p in (f"/usr/sbin/{name}", f"/usr/bin/{name}", f"/sbin/{name}")
         if os.access(p, os.X_OK)), None)


def switch_command(who: Identity) -> tuple[list[str], str]:
    """The command prefix that runs a program as `who` (root only): util-linux's runuser
    for a user of the host, else its setpriv. Raises ReachError where there is neither.

    setpriv looks the program up while it still has root's capabilities (a Python under
    /root, mode 700, would start), so what it runs first is `env`, without them, and `env`
    looks the Python up as the student would."""
    runuser = _tool("runuser")
    try:
        named = pwd.getpwuid(who.uid).pw_name == who.name
    except KeyError:
        named = False
    if runuser and named:
        return [runuser, "-u", who.name, "--"], f"runuser -u {who.name}"
    setpriv = _tool("setpriv")
    if setpriv:
        groups = ([f"--groups={','.join(str(g) for g in who.groups)}"] if who.groups
                  else ["--clear-groups"])
        return ([setpriv, f"--reuid={who.uid}", f"--regid={who.gid}", *groups, "--",
                 _tool("env") or "/usr/bin/env"], f"setpriv --reuid={who.uid}")
    raise ReachError("neither runuser nor setpriv (util-linux) is here to act as a student")


def try_as(who: Identity, python: str | os.PathLike | None = None,
           timeout: float = 300) -> Trial:
    """Run `python` (default: this one) as `who`, importing MODULES, and say what happened.
    As root the identity is switched to; as anyone else the check runs as yourself."""
    python = Path(sys.executable if python is None else python)
    wanted = json.dumps({"modules": module_paths(),
                         "path": [p for p in sys.path if p and os.path.isdir(p)]})
    command = [str(python), "-I", "-B", "-c", PROBE, wanted]
    if os.geteuid() == 0:
        prefix, how = switch_command(who)
        command = [*prefix, *command]
    else:
        how = "as yourself"
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": who.home,
           "USER": who.name, "LOGNAME": who.name}
    try:
        done = subprocess.run(command, cwd="/", env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return Trial(python, who, how, -1, f"no answer in {timeout:g} s", started=False)
    except OSError as exc:
        return Trial(python, who, how, -1, str(exc), started=False)
    output = (done.stdout + done.stderr).strip()
    trial = Trial(python, who, how, done.returncode, output)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARK)), None)
    if line is None:
        trial.started = False
        trial.refused = _refused_before_start(python, who, output)
        return trial
    found = json.loads(line[len(MARK):])
    trial.failures = {name: what for name, what in found["modules"].items() if what}
    for what in trial.failures.values():
        if what.get("refused"):
            trial.refused.append(Path(what["refused"]))
    trial.refused = list(dict.fromkeys(trial.refused))
    return trial


def _refused_before_start(python: Path, who: Identity, output: str) -> list[Path]:
    """What kept `who` from starting `python`: a path the error names, and the folder on
    the way to it (or to the Python, or to the Python the environment was made from)
    that `who` may not enter."""
    named = re.findall(r"(/[^\s:'\"‘’]+)['\"’]?: Permission denied", output)
    named += re.findall(r"Permission denied: '([^']+)'", output)
    candidates = [(Path(p), 1 if p == str(python) else 4) for p in named]
    candidates.append((python, 1))
    home = venv_home(python.parent.parent)
    if home is not None:
        candidates.append((home, 1))
    found = []
    for path, bit in candidates:
        refused = refused_on_the_way(path, who, bit)
        if refused is not None:
            found.append(refused)
    return list(dict.fromkeys(found))


def _describe(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return str(path)
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = str(st.st_uid)
    return f"{path} (mode {stat.S_IMODE(st.st_mode):o}, owner {owner})"


def own_trees(prefix: str | os.PathLike | None = None) -> list[Path]:
    """The folders whose modes the check may advise changing: the environment's own tree
    (`prefix`, default this one), and the Python it was made from when that is not the
    system's (/usr, /usr/local)."""
    prefix = Path(os.path.abspath(sys.prefix if prefix is None else prefix))
    trees = [prefix, prefix.resolve()]
    home = venv_home(prefix)
    if home is not None:
        base = Path(os.path.abspath(home)).parent
    elif prefix.resolve() == Path(sys.prefix).resolve():
        base = Path(sys.base_prefix)
    else:
        base = None
    if base is not None:
        trees += [base, base.resolve()]
    return [t for t in dict.fromkeys(trees) if t not in SYSTEM_PREFIXES]


def _inside(path: Path, trees: list[Path]) -> Path | None:
    path = Path(os.path.abspath(path))
    for tree in trees:
        if path == tree or tree in path.parents:
            return tree
    return None


def system_python(folder: str = "/usr/bin") -> str:
    """The system's Python to make the course's environment from, as a command names it:
    `/usr/bin/python3` when it is new enough (`FLOOR`), else the newest `/usr/bin/python3.N`
    that is (Ubuntu 22.04's python3 is 3.10, where pip finds no nbgrader 0.9.6); else
    `/usr/bin/python3`, whose own refusal then names the Python."""
    def new_enough(python: str) -> bool:
        try:
            return subprocess.run(
                [python, "-c", f"import sys; sys.exit(sys.version_info < {FLOOR})"],
                capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            return False

    candidates = [f"{folder}/python3"] + [f"{folder}/python3.{minor}" for minor in
                                          range(20, FLOOR[1] - 1, -1)]
    return next((c for c in candidates if new_enough(c)), candidates[0])


def pack_source() -> str:
    """What pip installs this pack from again, as a command names it: the local wheel or
    folder it was installed from (pip's record of it, PEP 610's `direct_url.json`) while
    that still exists, else a stand-in for the instructor to fill in."""
    from importlib import metadata

    for dist in metadata.distributions(name=PACKAGE):  # (a build's egg-info has no record)
        try:
            url = urllib.parse.urlsplit(json.loads(dist.read_text("direct_url.json") or "")["url"])
        except (ValueError, KeyError, TypeError):
            continue
        path = urllib.request.url2pathname(url.path) if url.scheme == "file" else ""
        if path and os.path.exists(path):
            return shlex.quote(path)
    return "PATH-OF-THE-PACK"


def make_it() -> str:
    """The line that makes the course's environment under /opt, as this machine runs it
    (`--clear`: over an environment made there from another Python, `venv` alone would keep
    its link to that Python)."""
    return (f"{system_python()} -m venv --clear /opt/residuals && "
            f"/opt/residuals/bin/pip install {pack_source()}")


def advice(refused: list[Path], trees: list[Path], home: Path | None) -> list[str]:
    """What to do about each refused path, in lines. A `chmod` only ever names a folder of
    `trees` (the environment's own); anything else is left closed, and the environment is
    made where students can reach it, from the system's Python."""
    lines, elsewhere = [], []
    for path in refused:
        tree = _inside(path, trees)
        if tree is not None:
            lines.append(f"{path} is part of the course's environment: let others read and "
                         f"run it: `chmod -R o+rX {shlex.quote(str(tree))}`")
        else:
            elsewhere.append(path)
    if elsewhere or home is not None or not refused:
        named = ", ".join(str(p) for p in elsewhere)
        one = len(elsewhere) == 1
        why = (f"{named} {'is' if one else 'are'} not part of this environment: leave "
               f"{'it as it is' if one else 'them as they are'} (opening a system or "
               "personal folder to every account is not the fix). " if elsewhere else "")
        lines.append(f"{why}Make the course's environment where every account can reach "
                     "it, from the system's Python (not a pyenv or a Python in a home "
                     f"folder), under /opt: `{make_it()}`, then check again with "
                     "`/opt/residuals/bin/residual-pack check-exchange`.")
    return lines


def check(user: str | None = None, python: str | os.PathLike | None = None) -> tuple[int, str]:
    """check-exchange: (exit status, message). 0: a student's account ran the course's
    Python and imported the pack, nbgrader and ipykernel; 1: it could not, with the path
    refused and what to do; 2: no judgment could be made (say why)."""
    python = Path(sys.executable if python is None else python)
    prefix = python.parent.parent
    home = venv_home(prefix)
    base_in_home = in_home_folder(home) if home is not None else None
    home_note = (f"This environment was made from a Python in a home folder ({home}, "
                 f"pyvenv.cfg's `home`, under {base_in_home}): students run it only while "
                 "every folder down to that Python is open to them."
                 if base_in_home is not None else None)
    try:
        who = student_identity(user)
        if os.geteuid() != 0:
            owner = os.stat(prefix).st_uid
            if user is not None and user != pwd.getpwuid(os.geteuid()).pw_name:
                raise ReachError(f"acting as {user} needs root: run this check as root, "
                                 "or as the student")
            if owner == os.geteuid():
                raise ReachError(
                    "this account owns the environment, so its trying proves nothing for "
                    "the students: run this check as root (it then tries as `nobody`, or "
                    "`--user STUDENT`), or as a student")
            who = student_identity(pwd.getpwuid(os.geteuid()).pw_name)
        trial = try_as(who, python)
    except ReachError as exc:
        return 2, f"cannot check whether the students can run {python}: {exc}"
    if trial.ok:
        lines = [f"the students' accounts can reach this course's Python ({python}): as "
                 f"{who}, with `{trial.how}`, it ran and imported {', '.join(MODULES)}"]
        if home_note:
            lines.append(f"note: {home_note} A venv made with `{make_it().split(' &&')[0]}` "
                         "does not depend on that.")
        return 0, "\n".join(lines)
    lines = [f"the students' accounts cannot run this course's Python ({python}): under "
             "nbgrader's exchange each student fetches, validates and submits as "
             f"themselves. Tried as {who}, with `{trial.how}`:"]
    if not trial.started:
        tail = "\n".join(trial.output.splitlines()[-3:]) or f"exit {trial.returncode}"
        lines.append(f"  it did not start: {tail}")
    for name, what in trial.failures.items():
        lines.append(f"  import {name}: {what['error']}")
    for path in trial.refused:
        lines.append(f"  refused: {_describe(path)}: {who.name} may not "
                     f"{'enter' if os.path.isdir(path) else 'read or run'} it")
    if not trial.refused:
        lines.append("  (no path the account was refused could be named)")
    if home_note:
        lines.append(f"  {home_note}")
    lines.extend(advice(trial.refused, own_trees(prefix), base_in_home))
    lines.append(f"As a student, by hand: `runuser -u {shlex.quote(who.name)} -- "
                 f"{shlex.quote(str(python))} -c 'import autograder, nbgrader'`.")
    return 1, "\n".join(lines)
