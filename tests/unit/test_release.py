"""The student release's own checks (`autograder/authoring/release.py`); the release built
and installed for real is `tests/integration/test_student_release.py`."""

import zipfile
from pathlib import Path

import nbformat
import pytest
from traitlets.config.loader import PyFileConfigLoader

from autograder.authoring.release import README, STUDENT_CONFIG, problems

ROOT = Path(__file__).resolve().parents[2]


def _config(folder, name):
    return PyFileConfigLoader(name, path=str(folder)).load_config()


def test_the_student_config_has_the_courses_execute_settings(tmp_path):
    (tmp_path / "student_config.py").write_text(STUDENT_CONFIG, encoding="utf-8")
    student = _config(tmp_path, "student_config.py")
    course = _config(ROOT, "nbgrader_config.py")
    assert dict(student.Execute) == {k: course.Execute[k] for k in student.Execute}
    # nothing of the grader's steps; and Validate's kernel encrypted, which the course's
    # config leaves out (tests/unit/test_kernel_encryption.py)
    assert set(student) == {"Execute", "KernelManager"}
    assert "KernelManager" not in course


def _release(tmp_path, wheel_files, cell_text):
    (tmp_path / "wheels").mkdir()
    with zipfile.ZipFile(tmp_path / "wheels" / "x-0.1.0-py3-none-any.whl", "w") as z:
        for name in wheel_files:
            z.writestr(name, "")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell_text)])
    (tmp_path / "assignments" / "01_a").mkdir(parents=True)
    nbformat.write(nb, str(tmp_path / "assignments" / "01_a" / "01_a.ipynb"))
    return tmp_path


def test_a_clean_release_has_no_problem(tmp_path):
    release = _release(tmp_path, ["microgpt/engine.py", "autograder/kernel/checks.py",
                                  "autograder/__init__.py"], "from microgpt import Value")
    assert problems(release) == []


def test_an_answer_in_the_wheel_or_a_notebook_is_found(tmp_path):
    release = _release(tmp_path, ["microgpt/engine.py", "autograder/answers/reference.py",
                                  "autograder/grading/judge.py", "torchtrack/value_mirror.py"],
                       "import autograder.answers.reference as reference\n"
                       "### BEGIN HIDDEN TESTS\n### END HIDDEN TESTS")
    found = "\n".join(problems(release))
    assert "autograder/answers/reference.py" in found
    assert "autograder/grading/judge.py" in found
    assert "torchtrack/value_mirror.py is the instructor's only" in found
    assert "'autograder.answers'" in found and "'BEGIN HIDDEN TESTS'" in found


def _torch_pin():
    pins = [line.strip() for line in (ROOT / "scripts" / "constraints.txt").read_text(
        encoding="utf-8").splitlines() if line.strip().startswith("torch==")]
    assert len(pins) == 1, pins
    return pins[0]


def test_the_missing_torch_message_works_without_a_clone():
    """What `import torchtrack` says without torch, and what progress says of the torch
    track, is a command a student's install can run: the pinned version, no editable
    install of a clone (`pip install -e '.[torch]'` needs the instructor's repository)."""
    import subprocess
    import sys

    from autograder.student.progress import TORCH_HINT

    done = subprocess.run(
        [sys.executable, "-c", "import sys; sys.modules['torch'] = None; import torchtrack"],
        capture_output=True, text=True, cwd=ROOT)
    message = done.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError: the torch track needs PyTorch"), done.stderr
    for text in (message, TORCH_HINT, README):
        assert f"pip install {_torch_pin()}" in text, text
        assert "-e " not in text and "residual-pack[torch]" not in text, text


def test_a_task_not_released_names_a_section_of_the_students_readme(tmp_path, monkeypatch):
    """NotReleased (what the student's library raises for an earlier answer not yet
    installed) sends the student to the README's section that gives the install command,
    by its title: a bare "pip install" there was another environment's pip."""
    import importlib
    import re

    from autograder.authoring.withheld import SOLVED_INIT

    # a library's `solved` package as a student's install has it: no answer, no own one
    (tmp_path / "library_for_this_test" / "solved").mkdir(parents=True)
    (tmp_path / "library_for_this_test" / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "library_for_this_test" / "solved" / "__init__.py").write_text(
        SOLVED_INIT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    solved = importlib.import_module("library_for_this_test.solved")
    with pytest.raises(solved.NotReleased) as raised:
        solved.released("02_degradation", "deepnet.logits", "Task 2.2", "logits")
    said = str(raised.value)
    [title] = re.findall(r"its section '([^']+)'", said)
    assert re.search(rf"^## \d+\. {re.escape(title)}\b", README, re.M), (title, said)
    assert "pip install" not in said, said


def test_the_student_wheel_has_the_torch_extra(tmp_path):
    """The student's wheel has the torch extra, pinned no looser than the instructor's;
    progress's "needs PyTorch" hint names the README's section on PyTorch."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    from autograder.authoring.release import _stage

    _stage(ROOT, tmp_path)
    student = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extras = student["project"].get("optional-dependencies", {})
    assert extras.get("torch") == ours["project"]["optional-dependencies"]["torch"]
    import re

    from autograder.student.progress import TORCH_HINT

    [number] = re.findall(r"README's section (\d+)", TORCH_HINT)
    assert re.search(rf"^## {number}\. PyTorch\b.*\n(?:.*\n)*?.*--index-url "
                     r"https://download\.pytorch\.org/whl/cpu", README, re.M), TORCH_HINT


def test_the_student_wheel_holds_jsonschema_where_the_instructors_install_does(tmp_path):
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    from autograder.authoring.release import _stage

    _stage(ROOT, tmp_path)
    student = tomllib.loads((tmp_path / "pyproject.toml").read_text(encoding="utf-8"))
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    pin = [d for d in ours["project"]["dependencies"] if d.startswith("jsonschema")]
    assert pin and pin[0] in student["project"]["dependencies"]


def _student_wheel(tmp_path, files):
    (tmp_path / "wheels").mkdir(parents=True)
    with zipfile.ZipFile(tmp_path / "wheels" / "residual_pack_student-0.1.0-py3-none-any.whl",
                         "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return tmp_path


def test_an_answer_left_in_microgpt_or_a_released_module_in_the_student_wheel_is_found(
        tmp_path):
    from autograder.authoring import withheld

    sources = {m: (ROOT / f"{m.replace('.', '/')}.py").read_text(encoding="utf-8")
               for m in ("microgpt.model", "microgpt.deepnet", "torchtrack.mlp",
                         "torchtrack.transformer")}
    stubbed = {f"{m.replace('.', '/')}.py": withheld.withhold(t, m) for m, t in sources.items()}
    assert problems(_student_wheel(tmp_path / "a", stubbed)) == []
    as_is = {f"{m.replace('.', '/')}.py": t for m, t in sources.items()}
    found = "\n".join(problems(_student_wheel(tmp_path / "b", as_is)))
    for answer in ("GPT.block", "GPT.stream_states", "logits", "ResidualLayer.forward",
                   "HighwayLayer.forward", "Block.forward", "logit_lens"):
        assert f"holds the answer {answer}" in found
    released = {**stubbed, "microgpt/solved/a05_gpt_residual_adds.py": ""}
    assert problems(_student_wheel(tmp_path / "c", released)) == [
        "residual_pack_student-0.1.0-py3-none-any.whl: microgpt/solved/"
        "a05_gpt_residual_adds.py is a released answer"]


def test_a_failed_build_names_its_cause_not_pips_summary():
    """pip's output when the isolated build cannot get its setuptools, and when an old
    setuptools builds in place: the line kept is the cause."""
    from autograder.authoring.release import _pip_error

    offline = """\
  error: subprocess-exited-with-error
  × installing build dependencies did not run successfully.
  ╰─> [3 lines of output]
      ERROR: Could not find a version that satisfies the requirement setuptools>=77 \
(from versions: none)
      ERROR: No matching distribution found for setuptools>=77
      [end of output]
ERROR: Failed to build 'file:///tmp/p' when installing build dependencies
"""
    assert _pip_error(offline) == ("Could not find a version that satisfies the requirement "
                                   "setuptools>=77 (from versions: none)")
    old = "usage: setup.py [global_opts] cmd1 [cmd1_opts]\nerror: invalid command 'bdist_wheel'\n"
    assert _pip_error(old) == "invalid command 'bdist_wheel'"
    assert _pip_error("") == "pip said nothing"


def test_a_file_named_as_the_release_or_site_folder_is_refused_in_a_line(tmp_path):
    """An instructor's trial: `student-release FILE` and `lite FILE` ended in a
    NotADirectoryError traceback; each says what is wrong, and the file stays."""
    from autograder.authoring import lite, release
    from autograder.grading.course import CourseError

    afile = tmp_path / "afile"
    afile.write_text("notes", encoding="utf-8")
    for build, what in ((release.build, "release"), (lite.build, "site")):
        with pytest.raises(CourseError, match=f"is a file: the {what} goes into a new folder"):
            build(ROOT, afile)
        assert afile.read_text(encoding="utf-8") == "notes"
