"""autograder/authoring/generate.py and generation_record.py without running a notebook
(issue 40, item 2): an assignment whose extra is missing is refused by name with its
install line and nothing of it is written; an unchanged course is skipped; the record
sees a changed source or library; a rerun's volatile output is normalised away.

A missing torch is simulated in a subprocess whose `sitecustomize` puts a finder in front
of every other that says torch does not exist (as Python says of an uninstalled module),
also in any kernel the subprocess starts; the test checks `import torch` fails there."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from generatecourse import (
    commit,
    env_without_torch,
    git,
    make_course,
    notebook,
    residual_pack,
)

from autograder.authoring import generation_record as rec
from autograder.authoring.generate import merge_streams, normalize_solution, pending
from autograder.installs import pip_install

COURSE = Path(__file__).resolve().parents[2]


@pytest.fixture
def without_torch(tmp_path):
    return env_without_torch(tmp_path)


TORCH_NOTEBOOK = notebook("import torch\nprint(torch.ones(2))")
PLAIN_NOTEBOOK = notebook("import math\nprint(math.pi)")
INSTALL = pip_install("torch==2.13.0")  # the Python running the tests, quoted


def test_an_assignment_asked_for_without_its_extra_is_refused_and_nothing_written(
        tmp_path, without_torch):
    course = make_course(tmp_path, {"08_torchy": TORCH_NOTEBOOK})
    run = residual_pack(course, "generate", "08_torchy", env=without_torch)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "08_torchy: not generated (nothing of it written): its notebooks import torch" \
        in run.stdout
    assert f"\n    {INSTALL}\n" in run.stdout
    assert "generate FAILED for 08_torchy" in run.stdout
    assert git(course, "status", "--porcelain") == ""


def test_all_generates_the_others_and_fails_for_the_refused_one(tmp_path, without_torch):
    """`generate` with no names: the plain assignment is up to date (skipped, no run),
    the torch one refused; exit 1, and git status clean."""
    course = make_course(tmp_path, {"01_plain": PLAIN_NOTEBOOK, "08_torchy": TORCH_NOTEBOOK})
    rec.write_record(course, {"01_plain": rec.digests(course, "01_plain")})
    commit(course)
    run = residual_pack(course, "generate", env=without_torch)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "01_plain: skipped: unchanged since its last generation" in run.stdout
    assert "08_torchy: not generated" in run.stdout and INSTALL in run.stdout
    assert git(course, "status", "--porcelain") == ""


def test_an_unchanged_course_without_torch_is_done_and_says_what_it_lacks(
        tmp_path, without_torch):
    """The README's first instructor step on a fresh clone without the torch extra: 08
    and 09 are unchanged, so nothing of them would run and nothing is refused; generate
    says they were skipped and that torch is missing, and exits 0. Forced, the torch one
    must run, so it is refused as before (exit 1). Before this, the unchanged course
    printed "generate FAILED for 08_..." and exited 1 (issue 40, the literal run)."""
    course = make_course(tmp_path, {"01_plain": PLAIN_NOTEBOOK, "08_torchy": TORCH_NOTEBOOK})
    rec.write_record(course, {name: rec.digests(course, name)
                              for name in ("01_plain", "08_torchy")})
    commit(course)
    run = residual_pack(course, "generate", env=without_torch)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "01_plain: skipped: unchanged since its last generation" in run.stdout
    assert ("08_torchy: skipped: unchanged since its last generation (solutions/generated."
            "json); this Python lacks torch, which a new generation of it would need"
            ) in run.stdout
    assert "FAILED" not in run.stdout and "nothing to do" in run.stdout
    assert git(course, "status", "--porcelain") == ""
    forced = residual_pack(course, "generate", "08_torchy", "--force", env=without_torch)
    assert forced.returncode == 1, forced.stdout + forced.stderr
    assert "08_torchy: not generated (nothing of it written)" in forced.stdout
    assert INSTALL in forced.stdout
    assert git(course, "status", "--porcelain") == ""


def test_the_real_torch_notebooks_need_torch_and_the_others_do_not(without_torch):
    """Found by reading the notebooks and the pack's code (08 imports torch itself, and
    torchtrack does), with the library files each assignment's key covers."""
    script = ("import json; from autograder.authoring.generation_record import needs; "
              f"print(json.dumps({{a: [needs({str(COURSE)!r}, a).missing, "
              f"sorted(needs({str(COURSE)!r}, a).files)] for a in "
              "['01_residual_stack', '05_gpt_residual_adds', '08_torch_mlp', "
              "'09_torch_transformer']}))")
    run = subprocess.run([sys.executable, "-c", script], env=without_torch,
                         capture_output=True, text=True, check=True)
    found = json.loads(run.stdout)
    assert found["08_torch_mlp"][0] == found["09_torch_transformer"][0] == ["torch"]
    assert found["01_residual_stack"][0] == found["05_gpt_residual_adds"][0] == []
    assert "torchtrack/mlp.py" in found["08_torch_mlp"][1]
    assert "autograder/kernel/torchchecks.json" in found["09_torch_transformer"][1]
    assert "microgpt/deepnet.py" in found["01_residual_stack"][1]
    assert not any(f.startswith("torchtrack/") for f in found["01_residual_stack"][1])
    assert "autograder/answers/gpt.py" in found["05_gpt_residual_adds"][1]
    assert "autograder/cli.py" not in found["05_gpt_residual_adds"][1]
    # the fingerprint table is not: `residual-pack fingerprints` runs no solution again
    assert "autograder/kernel/diagnosis.py" in found["05_gpt_residual_adds"][1]
    assert "autograder/kernel/fingerprints.py" not in found["05_gpt_residual_adds"][1]


def test_no_solution_shows_a_known_mistakes_hint():
    # what leaving the fingerprint table out of the record rests on (rec.NOT_SHOWN): its
    # hints reach only a failing check's message, and no written solution shows one
    from autograder.kernel.diagnosis import LEAD

    for path in sorted((COURSE / "solutions").glob("*/*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                text = json.dumps(output)
                assert LEAD not in text and output.get("output_type") != "error", path.name


def test_the_torch_pin_is_the_tested_version():
    pinned = [line for line in (COURSE / "scripts" / "constraints.txt").read_text().split()
              if line.startswith("torch==")]
    assert pinned == [rec.PINS["torch"]]


def test_the_record_sees_a_changed_source_or_written_file(tmp_path):
    course = make_course(tmp_path, {"01_plain": PLAIN_NOTEBOOK})
    now = rec.digests(course, "01_plain")
    assert rec.changed_parts(now, rec.digests(course, "01_plain")) == []
    assert rec.changed_parts(None, now) == [f"it has no entry in {rec.RECORD}"]
    nbformat.write(notebook("print(2)"), str(course / "source" / "01_plain" / "01_plain.ipynb"))
    assert rec.changed_parts(now, rec.digests(course, "01_plain")) == [rec.PARTS["source"]]
    nbformat.write(notebook("print(2)"), str(course / "solutions" / "01_plain" / "01_plain.ipynb"))
    assert rec.changed_parts(now, rec.digests(course, "01_plain"))[-1] == rec.PARTS["written"]
    rec.write_record(course, {"01_plain": rec.digests(course, "01_plain")})
    assert pending(course) == {}
    nbformat.write(notebook("print(3)"), str(course / "source" / "01_plain" / "01_plain.ipynb"))
    assert pending(course) == {"01_plain": [rec.PARTS["source"]]}
    # written and read back, one line per assignment
    rec.write_record(course, {"01_plain": now, "00_other": now})
    assert rec.read_record(course) == {"01_plain": now, "00_other": now}
    assert sum('"01_plain"' in line for line in (course / rec.RECORD).read_text().splitlines()) == 1


def test_the_record_sees_a_change_in_the_library_a_notebook_imports(tmp_path, monkeypatch):
    """A package of the pack (a made-up one here): a change in a module the notebook
    imports, in a module that one imports, or in a data file beside them, changes the
    key; a module nobody imports does not."""
    lib = tmp_path / "lib" / "fakelib"
    (lib / "sub").mkdir(parents=True)
    (lib / "__init__.py").write_text("")
    (lib / "a.py").write_text("from .sub import b\n")
    (lib / "sub" / "__init__.py").write_text("")
    (lib / "sub" / "b.py").write_text("X = 1\n")
    (lib / "sub" / "table.json").write_text("{}")
    (tmp_path / "lib" / "unused").mkdir()
    (tmp_path / "lib" / "unused" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.setattr(rec, "OURS", (*rec.OURS, "fakelib", "unused"))
    course = make_course(tmp_path, {"01_plain": notebook("from fakelib.a import b\nb.X")})
    before = rec.digests(course, "01_plain")
    assert set(rec.needs(course, "01_plain").files) >= {
        "fakelib/__init__.py", "fakelib/a.py", "fakelib/sub/b.py", "fakelib/sub/table.json"}
    for path, text in [(lib / "sub" / "b.py", "X = 2\n"), (lib / "sub" / "table.json", "[]")]:
        path.write_text(text)
        after = rec.digests(course, "01_plain")
        assert rec.changed_parts(before, after) == [rec.PARTS["library"]], path
        before = after
    (tmp_path / "lib" / "unused" / "__init__.py").write_text("Y = 3\n")
    assert rec.changed_parts(before, rec.digests(course, "01_plain")) == []


def test_a_module_imported_only_inside_a_function_or_try_is_not_required(tmp_path):
    course = make_course(tmp_path, {"01_plain": notebook(
        "def f():\n    import not_a_module_anywhere\n",
        "try:\n    import not_a_module_either\nexcept ImportError:\n    pass\n",
        "%matplotlib inline\nimport surely_missing_module_xyz")})
    assert rec.needs(course, "01_plain").missing == ["surely_missing_module_xyz"]


def run_like(model_ids, pieces):
    """A solution notebook as a run leaves it: progress-bar widgets with these model ids,
    and printed text that came in these stream messages."""
    nb = notebook("from tqdm.auto import tqdm\nfor _ in tqdm(range(3)): print('step')")
    cell = nb.cells[0]
    cell.outputs = [nbformat.v4.new_output(
        "display_data", data={"application/vnd.jupyter.widget-view+json": {
            "model_id": model_id, "version_major": 2, "version_minor": 0},
            "text/plain": "  0%|          | 0/3 [00:00<?, ?it/s]"}) for model_id in model_ids]
    cell.outputs += [nbformat.v4.new_output("stream", name="stdout", text=p) for p in pieces]
    cell.outputs.append(nbformat.v4.new_output("stream", name="stderr", text="warned\n"))
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {m: {"model_name": "FloatProgressModel", "state": {"value": 3}}
                  for m in model_ids}, "version_major": 2, "version_minor": 0}}
    nb.metadata["language_info"] = {"name": "python", "version": "3.11.7"}
    cell.metadata["execution"] = {"iopub.status.busy": "2026-12-05T03:00:00"}
    return nb


def test_two_runs_that_printed_the_same_are_written_byte_for_byte_the_same(tmp_path):
    first, second = tmp_path / "first.ipynb", tmp_path / "second.ipynb"
    nbformat.write(run_like(["4f1c"], ["step\nst", "ep\nstep\n"]), str(first))
    nbformat.write(run_like(["9a0b"], ["step\n", "step\n", "step\n"]), str(second))
    assert first.read_bytes() != second.read_bytes()
    normalize_solution(first)
    normalize_solution(second)
    assert first.read_bytes() == second.read_bytes()
    nb = nbformat.read(str(first), as_version=4)
    assert "widgets" not in nb.metadata
    assert [(o.output_type, o.get("name"), o.get("text")) for o in nb.cells[0].outputs] == [
        ("stream", "stdout", "step\nstep\nstep\n"), ("stream", "stderr", "warned\n")]


def test_streams_of_different_names_or_apart_are_not_merged():
    out = [nbformat.v4.new_output("stream", name="stdout", text="a"),
           nbformat.v4.new_output("stream", name="stderr", text="b"),
           nbformat.v4.new_output("stream", name="stdout", text="c"),
           nbformat.v4.new_output("display_data", data={"text/plain": "d"}),
           nbformat.v4.new_output("stream", name="stdout", text="e"),
           nbformat.v4.new_output("stream", name="stdout", text="f")]
    merged = merge_streams(copy.deepcopy(out))
    assert [o.get("text") for o in merged] == ["a", "b", "c", None, "ef"]


def test_the_committed_record_matches_this_checkout():
    """Every assignment of the pack's own course is up to date by its record: a change to
    a source notebook, the library code it imports or generate's own code, committed
    without `residual-pack generate`, fails here in a second instead of making an
    instructor's first `generate` run for minutes (and fail outright for 08 and 09 where
    torch is not installed; CI's run of 126e778 met exactly that)."""
    record = rec.read_record(COURSE)
    assignments = sorted(p.name for p in (COURSE / "source").iterdir() if p.is_dir())
    assert sorted(record) == assignments
    stale = {name: rec.changed_parts(record[name], rec.digests(COURSE, name))
             for name in assignments}
    stale = {name: parts for name, parts in stale.items() if parts}
    assert not stale, ("run `residual-pack generate` and commit exercises/, solutions/ and "
                       f"{rec.RECORD}: {stale}")
