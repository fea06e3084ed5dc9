"""A student's install holds no answer, and its README is followed as it stands:
`residual-pack student-release` into a folder, then the README's commands, parsed from its
```bash blocks and run there as written (an edit to the README that this file does not
follow fails `test_every_command_of_the_readme_is_followed`). `python3 -m venv .venv`
and `.venv/bin/pip install wheels/...` make a fresh virtual environment with every
dependency from the package index (pip's cache is shared with this machine's), and there

- the model answers (`autograder.answers.reference`), every registered wrong answer
  (`autograder.answers.mutants.*`) and the grader do not import, and microgpt's answers
  (`deepnet.logits`, `GPT.block`, `GPT.stream_states`) are not in its source: called, they
  say which assignment's released answers they wait for;
- `.venv/bin/jupyter lab` serves, and a cell runs in its kernel over encrypted sockets;
  the README's `nbgrader validate` fails the untouched notebook (its kernel encrypted
  too); `residual-pack progress` runs;
- Validate, run from the release folder with its config, passes a solved copy of a
  released notebook (its cells run in a real Jupyter kernel of that environment); 05's
  visible tests pass on stored numbers, without microgpt's blocks; 06, which trains GPTs
  of Assignment 5's blocks, waits for them, and passes once the wheel of 05's released
  answers is installed with the README's command; so do 03 and 04 with 02's; torchtrack
  holds no answer either, and Validate passes 08 and 09 after the README's `pip install
  torch==...` (run when this test's own environment has torch, a sign that this machine
  can install it);
- the student's JupyterLab there has nbgrader's Validate and assignment list, and not its
  instructor tools (Formgrader, Create Assignment, the course list).
"""

import json
import os
import queue
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.error
import urllib.request
import venv
from pathlib import Path

import nbformat
import pytest

from autograder.authoring.madeup import filled_in
from autograder.authoring.release import build, problems

ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENTS = ("01_residual_stack", "02_degradation", "03_highway", "04_identity_shortcut",
               "05_gpt_residual_adds", "06_residual_stream", "08_torch_mlp",
               "09_torch_transformer")
# these run on the student's own answers alone
WITHOUT_EARLIER = ("01_residual_stack", "02_degradation", "05_gpt_residual_adds",
                   "08_torch_mlp", "09_torch_transformer")
TORCH = ("08_torch_mlp", "09_torch_transformer")
SOLVED = ["02_degradation", "05_gpt_residual_adds"]
# the student's `python3`: the Python running this test, or another one named by
# $RESIDUAL_PACK_STUDENT_PYTHON (the README asks for 3.11 or later: `docs/testing.md` says
# how the other versions were tried)
OWN_PYTHON = getattr(sys, "_base_executable", sys.executable)
STUDENT_PYTHON = os.environ.get("RESIDUAL_PACK_STUDENT_PYTHON") or OWN_PYTHON
MUTANTS = sorted(p.stem for p in (ROOT / "autograder" / "answers" / "mutants").glob("*.py")
                 if p.stem != "__init__")

pytestmark = pytest.mark.slow
AS_BUILT = {}  # what `student` found in the release folder before following its README

# every command the README may give, and what this file does with it
COMMANDS = {
    "venv": r"python3 -m venv \.venv",
    "install": r"\.venv/bin/pip install wheels/residual_pack_student-\S+\.whl",
    "lab": r"\.venv/bin/jupyter lab",
    "validate": r"\.venv/bin/nbgrader validate assignments/\S+\.ipynb",
    "progress": r"\.venv/bin/residual-pack progress -a \S+",
    "answers": r"\.venv/bin/pip install residual_pack_solved_\S+\.whl",
    "torch": r"\.venv/bin/pip install torch==\S+",
    # PyTorch's own index for its CPU-only build: another host than the package index this
    # machine reaches, so it is checked for its form only
    "torch-cpu": r"\.venv/bin/pip install torch==\S+ --index-url https://\S+/cpu",
}


def readme_commands(text):
    """[(kind, command)] of the ```bash blocks of a README, in order; kind None for a
    command this file does not know."""
    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.split(" #")[0].strip()
            if line and not line.startswith("#"):
                kind = next((k for k, pattern in COMMANDS.items()
                             if re.fullmatch(pattern, line)), None)
                found.append((kind, line))
    return found


def _command(commands, kind):
    [line] = [c for k, c in commands if k == kind]
    return line


def _run(args, env, cwd, timeout=600):
    """`args` run in `cwd`: never this checkout, whose `autograder/` (answers and all) a
    `python -c` would import first."""
    assert ROOT not in [Path(cwd), *Path(cwd).parents]
    return subprocess.run([str(a) for a in args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def _follow(command, env, release, timeout=1200):
    """A README command, run as written in the release folder."""
    return _run(shlex.split(command), env, release, timeout=timeout)


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """(release folder, the fresh environment's python, its environment variables, the
    README's commands), the environment made by the README's first two commands."""
    tmp = tmp_path_factory.mktemp("student")
    release = tmp / "release"
    build(ROOT, release, list(ASSIGNMENTS), say=lambda *_: None, solved=SOLVED)
    # the folder as it is handed out, before the README's commands add `.venv` to it
    AS_BUILT.update(problems=problems(release), names=sorted(p.name for p in release.iterdir()))
    commands = readme_commands((release / "README.md").read_text(encoding="utf-8"))
    home = tmp / "home"
    tools = tmp / "bin"  # the student's `python3` (STUDENT_PYTHON)
    tools.mkdir()
    (tools / "python3").symlink_to(STUDENT_PYTHON)
    env = {
        "PATH": f"{tools}{os.pathsep}/usr/bin:/bin",
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(home / "jupyter-data"),
        "JUPYTER_RUNTIME_DIR": str(home / "jupyter-runtime"),
        "IPYTHONDIR": str(home / "ipython"),
        "MPLCONFIGDIR": str(home / "matplotlib"),
        "JUPYTER_PLATFORM_DIRS": "0",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        # what pip fetched before (this machine's cache): a student's first install
        # downloads it all (the README's time is of an install without a cache)
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR",
                                        str(Path.home() / ".cache" / "pip")),
        "BROWSER": "true",  # `jupyter lab` opens no browser here
    }
    for name, value in env.items():
        if name not in ("PATH", "PIP_CACHE_DIR") and value.startswith(str(home)):
            Path(value).mkdir(parents=True, exist_ok=True)
    for name in ("LANG", "PIP_FIND_LINKS", "PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
        if name in os.environ:
            env[name] = os.environ[name]
    if os.geteuid() == 0:  # CI's user: Jupyter's server refuses root unless told
        (home / "jupyter-config" / "jupyter_server_config.json").write_text(
            json.dumps({"ServerApp": {"allow_root": True}}), encoding="utf-8")
    assert [k for k, _ in commands[:2]] == ["venv", "install"], commands
    for _, command in commands[:2]:
        done = _follow(command, env, release)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    python = release / ".venv" / "bin" / "python"
    return release, python, env, commands


def test_every_command_of_the_readme_is_followed(student):
    """Each command of the README is one this file runs (or, for PyTorch's CPU index,
    checks), and the README gives each step a student needs."""
    release, _, _, commands = student
    unknown = [c for k, c in commands if k is None]
    assert not unknown, f"the README has commands this test does not follow: {unknown}"
    assert sorted({k for k, _ in commands}) == sorted(COMMANDS), commands
    text = (release / "README.md").read_text(encoding="utf-8")
    assert "TIMINGS_TO_FILL" not in text
    for step in ("Kernel > Interrupt Kernel", "Kernel > Restart Kernel", "Validate",
                 "toolbar", "Hand in", "Submit", "74 s", "510 MB"):
        assert step in text, step
    assert "Assignments menu" not in text


def test_jupyter_lab_serves_as_the_readme_starts_it(student):
    """`.venv/bin/jupyter lab` from the release folder: the server answers, with the
    address it prints, and its Lab page loads."""
    release, _, env, commands = student
    server = subprocess.Popen(shlex.split(_command(commands, "lab")), cwd=release, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in server.stdout], daemon=True).start()
    try:
        deadline, url, seen = time.monotonic() + 180, None, []
        while url is None and time.monotonic() < deadline and server.poll() is None:
            try:
                line = lines.get(timeout=1)
            except queue.Empty:
                continue
            seen.append(line)
            found = re.search(r"(http://(?:localhost|127\.0\.0\.1):\d+)/lab\?token=(\w+)", line)
            if found:
                url = found
        assert url, "".join(seen)[-3000:]
        base, token = url[1], url[2]
        for _ in range(60):  # the address is printed before the server takes connections
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}",
                                            timeout=30) as r:
                    assert r.status == 200 and "started" in json.loads(r.read())
                break
            except urllib.error.URLError:
                assert server.poll() is None, "".join(seen)[-3000:]
                time.sleep(1)
        else:
            raise AssertionError(f"{base} took no connection in 60 s")
        with urllib.request.urlopen(f"{base}/lab?token={token}", timeout=60) as r:
            page = r.read().decode("utf-8")
        assert r.status == 200 and "jupyter-config-data" in page
        # a kernel of the Lab runs a cell through the server's websocket, over sockets the
        # student's server extension has encrypted: no warning of ipykernel's in the log
        assert _run_a_cell_in_the_lab(base, token) == "42"
        time.sleep(1)  # what the kernel printed at its start reaches the queue
        while not lines.empty():
            seen.append(lines.get())
        log = "".join(seen)
        assert "the kernels' sockets are encrypted (CurveZMQ)" in log, log[-3000:]
        assert "without encryption" not in log, log[-3000:]
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _run_a_cell_in_the_lab(base: str, token: str) -> str:
    """What `print(6 * 7)` printed, run in a new kernel of the Lab at `base` through its
    websocket, as the Lab's page does."""
    import asyncio
    import uuid

    from tornado.websocket import websocket_connect

    start = urllib.request.Request(f"{base}/api/kernels?token={token}", method="POST",
                                   data=json.dumps({"name": "python3"}).encode())
    with urllib.request.urlopen(start, timeout=60) as r:
        kernel = json.loads(r.read())["id"]

    async def run() -> str:
        url = f"{base.replace('http', 'ws', 1)}/api/kernels/{kernel}/channels?token={token}"
        ws = await websocket_connect(url)
        msg_id = uuid.uuid4().hex
        await ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": "student", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": "print(6 * 7)", "silent": False}}))
        while True:
            message = json.loads(await asyncio.wait_for(ws.read_message(), 120))
            if message["parent_header"].get("msg_id") == msg_id and \
                    message["msg_type"] == "stream":
                ws.close()
                return message["content"]["text"].strip()

    return asyncio.run(run())


def test_the_release_holds_nothing_of_the_instructors(student):
    release, *_ = student
    assert AS_BUILT["problems"] == []
    assert AS_BUILT["names"] == ["README.md", "assignments", "nbgrader_config.py", "wheels"]
    assert sorted(p.name for p in (release / "assignments").iterdir()) == list(ASSIGNMENTS)


def test_the_engine_and_the_kernel_side_import_from_the_student_install(student):
    release, python, env, _ = student
    done = _run([python, "-c",
                 "import importlib.util, autograder.kernel.checks, autograder.kernel.stored, "
                 "microgpt; print(autograder.kernel.checks.__file__); "
                 "print(microgpt.__file__); "
                 # torchtrack imports only with torch, which a student adds for 08 and 09
                 "print(importlib.util.find_spec('torchtrack').origin)"], env, release)
    assert done.returncode == 0, done.stderr
    for line in done.stdout.split():
        assert line.startswith(str(python.parent.parent)), line


def test_microgpt_in_the_student_install_holds_no_answer(student):
    release, python, env, _ = student
    done = _run([python, "-c", (
        "import inspect\n"
        "from microgpt import GPT, deepnet\n"
        "from microgpt.solved import NotReleased\n"
        "for fn in (GPT.block, GPT.stream_states, deepnet.logits):\n"
        "    print(inspect.getsource(fn))\n"
        "import importlib.util, pathlib\n"  # torchtrack's files, read without torch
        "folder = pathlib.Path(importlib.util.find_spec('torchtrack').origin).parent\n"
        "print('=== torchtrack')\n"
        "print((folder / 'mlp.py').read_text(), (folder / 'transformer.py').read_text())\n"
        "try:\n"
        "    GPT(seed=0).loss([0, 1, 2])\n"
        "except NotReleased as error:\n"
        "    print('REFUSED', error)\n")], env, release)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    engine, torch_track = out.split("=== torchtrack")
    assert "zip(x, a)" not in engine and "rmsnorm(" not in engine
    assert "states.append" not in engine and "layernorm(h)" not in engine
    assert engine.count("released(") == 3, engine
    assert torch_track.count("released(") == 4, torch_track
    assert "h + self.branch(h)" not in torch_track
    assert "x + self.attn(self.norm1(x))" not in torch_track
    assert "torch.sigmoid(self.gate(h))" not in torch_track
    assert "losses.append(F.cross_entropy" not in torch_track
    assert "REFUSED GPT.block (Tasks 5.1 to 5.3) is released after 05_gpt_residual_adds" in out
    assert "residual_pack_solved_05_gpt_residual_adds" in out


@pytest.mark.parametrize("module", [
    "autograder.answers", "autograder.answers.reference",
    *[f"autograder.answers.mutants.{m}" for m in MUTANTS],
    "autograder.grading", "autograder.authoring", "autograder.sandbox", "autograder.cli"])
def test_no_answer_nor_grader_imports(student, module):
    release, python, env, _ = student
    done = _run([python, "-c", f"import {module}"], env, release)
    assert done.returncode != 0
    assert "ModuleNotFoundError" in done.stderr, done.stderr


def _validate(python, env, release, notebook, *flags):
    return _run([python, "-m", "nbgrader", "validate", *flags, notebook], env, cwd=release)


def _solved_copy(release, assignment, folder):
    notebook = release / "assignments" / assignment / f"{assignment}.ipynb"
    source = nbformat.read(ROOT / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    solved = folder / f"{assignment}.ipynb"
    nbformat.write(filled_in(nbformat.read(notebook, as_version=4), source), str(solved))
    return solved


@pytest.fixture(scope="module")
def with_torch(student):
    """The student's environment after the README's `pip install torch==...` (this
    machine installs it when this test's own environment has it)."""
    pytest.importorskip("torch")
    if STUDENT_PYTHON != OWN_PYTHON:
        pytest.skip("this machine's package index holds PyTorch's CPU build for its own "
                    "Python only; for another, pip would fetch a CUDA build of gigabytes")
    release, python, env, commands = student
    done = _follow(_command(commands, "torch"), env, release)
    assert done.returncode == 0, done.stderr[-3000:]
    return student


def test_the_readmes_cpu_only_torch_is_the_same_version(student):
    """PyTorch's CPU-only index is another host than the package index this machine
    reaches: its command is checked, not run."""
    *_, commands = student
    plain, cpu = _command(commands, "torch"), _command(commands, "torch-cpu")
    assert cpu.startswith(plain + " --index-url https://download.pytorch.org/whl/cpu"), cpu


def test_the_seed_run_tables_notebooks_08_and_09_ask_about_are_in_the_student_install(
        with_torch):
    """Tasks of 08 and 09 compare with the table of the torch track's committed seed runs
    (`torchtrack.seeds.committed_table`). The student's install is no checkout: the wheel
    carries the runs' JSON files, and the table prints from them."""
    release, python, env, _ = with_torch
    for study, row in (("mlp", "| grad first/last, plain 30 |"),
                       ("transformer", "| pre-norm |")):
        done = subprocess.run(
            [python, "-c", f"from torchtrack.seeds import committed_table; "
                           f"print(committed_table({study!r}))"],
            cwd=release, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stdout.startswith(f"The committed seed runs of the {study} study"), (
            done.stdout[:2000])
        assert row in done.stdout, done.stdout[:3000]


@pytest.mark.parametrize("assignment", WITHOUT_EARLIER)
def test_validate_passes_a_solved_copy_in_the_student_install(request, student, assignment,
                                                             tmp_path):
    if assignment in TORCH:
        request.getfixturevalue("with_torch")
    release, python, env, _ = student
    done = _validate(python, env, release, _solved_copy(release, assignment, tmp_path))
    assert "Success! Your notebook passes all the tests." in done.stdout, (
        done.stdout[-3000:] + done.stderr[-3000:])


# the answer cells of an earlier assignment that a later notebook's cell for it takes
OWN_ANSWERS = {"02_degradation": ("task2_2_mlp_logits",),
               "05_gpt_residual_adds": ("task5_1_pre_norm_block", "task5_2_post_norm_block",
                                        "task5_3_no_residual_block")}


def _with_own_earlier_answer(nb, earlier):
    """`nb` with its cell for the earlier assignment's answer (the one that calls
    use_my_answers) holding the model answer of `earlier`, pasted as a student pastes
    their own."""
    source = nbformat.read(ROOT / "source" / earlier / f"{earlier}.ipynb", as_version=4)
    by_id = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in source.cells}
    defs = "\n\n\n".join(
        "\n".join(line for line in by_id[gid].source.splitlines()
                  if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)
        for gid in OWN_ANSWERS[earlier])
    cells = [c for c in nb.cells if c.cell_type == "code" and "use_my_answers(" in c.source]
    assert len(cells) == 1, "the notebook has one cell for the earlier answer"
    call = cells[0].source[cells[0].source.index("use_my_answers("):]
    cells[0].source = ("from microgpt import layernorm, linear, rmsnorm\n"
                       "from microgpt.earlier import use_my_answers\n\n\n"
                       f"{defs}\n\n\n{call}")
    return nb


@pytest.mark.parametrize("later, earlier, waiting", [
    (("06_residual_stream",), "05_gpt_residual_adds",
     "NotReleased: GPT.block (Tasks 5.1 to 5.3)"),
    (("03_highway", "04_identity_shortcut"), "02_degradation",
     "NotReleased: deepnet.logits (Task 2.2)"),
])
def test_a_later_notebook_waits_for_the_earlier_answers_then_passes(student, tmp_path, later,
                                                                   earlier, waiting):
    """Runs after the tests above (the file's order): it installs released answers."""
    release, python, env, commands = student
    solved = [_solved_copy(release, name, tmp_path) for name in later]
    done = _validate(python, env, release, solved[0])
    out = done.stdout + done.stderr
    assert "Success!" not in out
    assert waiting in out, out[-3000:]
    assert "in your answer" not in out
    # until the release, the student's own earlier answer, pasted into the notebook's
    # cell for it (issue #41 item 2), stands in: Validate passes on it
    own = tmp_path / "own"
    own.mkdir()
    for notebook in solved:
        mine = own / notebook.name
        nbformat.write(_with_own_earlier_answer(nbformat.read(notebook, as_version=4),
                                                earlier), str(mine))
        done = _validate(python, env, release, mine)
        assert "Success! Your notebook passes all the tests." in done.stdout, (
            mine.name, done.stdout[-3000:] + done.stderr[-3000:])
    wheels = sorted((release / "wheels").glob(f"residual_pack_solved_{earlier}-*.whl"))
    assert len(wheels) == 1
    # the README: save the file the instructor hands out in the release folder, install it
    # with its command (which names 02's wheel; 05's the same way)
    shutil.copy2(wheels[0], release / wheels[0].name)
    command = _command(commands, "answers").replace("02_degradation", earlier)
    assert command.endswith(" " + wheels[0].name), command
    done = _follow(command, env, release)
    assert done.returncode == 0, done.stderr
    for notebook in solved:
        done = _validate(python, env, release, notebook)
        assert "Success! Your notebook passes all the tests." in done.stdout, (
            notebook.name, done.stdout[-3000:] + done.stderr[-3000:])


def test_validate_fails_the_untouched_release_without_an_import_error(student):
    """The README's `nbgrader validate` command, on the notebook it names."""
    release, python, env, commands = student
    command = _command(commands, "validate")
    assert command.endswith(f"assignments/{ASSIGNMENTS[0]}/{ASSIGNMENTS[0]}.ipynb"), command
    done = _follow(command, env, release)
    assert "Success!" not in done.stdout
    assert "NotImplementedError" in done.stdout + done.stderr or \
        "not done yet" in done.stdout + done.stderr, done.stdout[-3000:]
    assert "ModuleNotFoundError" not in done.stdout + done.stderr
    # the release's nbgrader_config.py encrypts the kernel's sockets: no ipykernel warning
    assert "without encryption" not in done.stdout + done.stderr, done.stderr[-3000:]


def test_progress_runs_in_the_student_install(student):
    """The README's `residual-pack progress` command."""
    release, python, env, commands = student
    command = _command(commands, "progress")
    assert command.endswith(f" -a {ASSIGNMENTS[0]}"), command
    done = _follow(command, env, release)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "task1_1_test_output" in done.stdout and "3 not started" in done.stdout, done.stdout


def test_the_students_lab_has_no_instructor_tools(student):
    """The wheel's Jupyter config switches off what nbgrader's own config (its
    `nbgrader.json`, which `pip install nbgrader` puts in the same folder) switches on."""
    release, python, env, _ = student
    ours = python.parent.parent / "etc" / "jupyter"
    nbgrader_json = ours / "jupyter_server_config.d" / "nbgrader.json"
    assert nbgrader_json.is_file(), "nbgrader's server config is not where pip puts it"
    done = _run([python, "-c", (
        "import json\n"
        "from jupyter_core.paths import jupyter_config_path\n"
        "from jupyter_server.extension.config import ExtensionConfigManager\n"
        "from jupyterlab_server.config import get_static_page_config\n"
        "server = ExtensionConfigManager(read_config_path=jupyter_config_path())\n"
        "print(json.dumps({'server': server.get_jpserver_extensions(),\n"
        "                  'page': get_static_page_config()}))\n")], env, release)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    server, disabled = found["server"], found["page"].get("disabledExtensions", {})
    assert server["nbgrader.server_extensions.formgrader"] is False, server
    assert server["nbgrader.server_extensions.course_list"] is False, server
    # Validate stays, served by ours (off the event loop, within a budget) in nbgrader's place
    assert server["nbgrader.server_extensions.validate_assignment"] is False, server
    assert server["autograder.student.validate"] is True, server
    assert server["nbgrader.server_extensions.assignment_list"] is True, server
    for plugin in ("formgrader", "create-assignment", "course-list"):
        assert disabled.get(f"@jupyter/nbgrader:{plugin}") is True, disabled
    assert not [k for k in disabled if "validate" in k or "assignment-list" in k], disabled


# what a fresh environment brings of its own and the pack's install puts there: not shared
BUILD_TOOLS = ("setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence",
               "wheel", "pip", "__editable__", "microgpt_residuals")


def _old_setuptools_env(tmp):
    """(python, environment variables) of a fresh virtual environment as `scripts/demo`
    makes one: its own pip, setuptools pinned to 65.5.0 (Python 3.11's venv brings it),
    no `wheel` package, and the pack installed with `pip install -e`. The pack's other
    dependencies come from this test's environment, through a folder of links to its
    site-packages without its build tools (which would hide the old setuptools)."""
    env_dir = tmp / "old-setuptools"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    env = {"PATH": f"{env_dir / 'bin'}{os.pathsep}/usr/bin:/bin", "HOME": str(tmp / "home"),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for name in ("LANG", "PIP_FIND_LINKS", "PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
        if name in os.environ:
            env[name] = os.environ[name]
    for args in (["install", "-q", "setuptools==65.5.0"], ["uninstall", "-q", "-y", "wheel"]):
        done = _run([python, "-m", "pip", *args], env, tmp)
        assert done.returncode == 0, done.stderr
    shared = tmp / "shared-site-packages"
    shared.mkdir()
    for entry in Path(sysconfig.get_path("purelib")).iterdir():
        if not entry.name.startswith(BUILD_TOOLS):
            (shared / entry.name).symlink_to(entry)
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                        env, tmp).stdout.strip())
    (purelib / "shared-dependencies.pth").write_text(f"{shared}\n", encoding="utf-8")
    done = _run([python, "-m", "pip", "install", "-q", "--no-deps", "-e", ROOT], env, tmp)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run([python, "-c", "import importlib.util as u, setuptools; "
                 "print(setuptools.__version__, u.find_spec('wheel'))"], env, tmp)
    assert done.stdout.split() == ["65.5.0", "None"], done.stdout + done.stderr
    return python, env


def test_the_release_builds_where_setuptools_is_old(tmp_path):
    """`residual-pack student-release` in an environment whose setuptools has no
    `bdist_wheel` (65.5 without `wheel`): pip builds the wheels in an isolated environment
    with the setuptools they declare. When that cannot be had either (no package index),
    it says so in one line, with what to do, and leaves no half-made folder."""
    python, env = _old_setuptools_env(tmp_path)
    command = [python.parent / "residual-pack", "--course", ROOT, "student-release"]
    out = tmp_path / "release"
    done = _run([*command, out, "01_residual_stack", "--solved", "02_degradation"], env,
                tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert sorted(p.name.split("-")[0] for p in (out / "wheels").glob("*.whl")) == [
        "residual_pack_solved_02_degradation", "residual_pack_student"]
    assert problems(out) == []
    offline = {**env, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "no-wheels")}
    done = _run([*command, tmp_path / "offline", "01_residual_stack"], offline, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("residual-pack: building the student wheel failed ("), lines
    assert "setuptools>=77" in lines[0] and "run student-release again" in lines[0], lines
    assert not (tmp_path / "offline").exists()
