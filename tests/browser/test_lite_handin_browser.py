"""A notebook handed in from the JupyterLite site grades as the same answers handed in from
JupyterLab (issue 44), on 01 and 02.

1. The site (`lite_site.py`: built offline, in headless Chromium): the released notebook
   opened in the notebook view, the start page's `%pip` line added first, the solution's
   answers put in the answer cells, Run > Run All Cells, then what the start page tells a
   student: the `%pip` cell deleted, File > Save, File > Download. The downloaded `.ipynb`
   is the submission.
2. JupyterLab (`lab_helpers`: the course's own server): the same notebook, the same answers
   typed into the same cells, Run All, saved. The saved file is the submission.
3. `residual-pack grade` grades both, as two students of one class, per assignment: every
   graded cell gets the same points for both, and the autograded ones their full points.

01's last cell (`plot`) and 02's `imports` need matplotlib, which the offline site cannot
load (Pyodide's CDN): Run All stops there in the site, as it would for a student whose
browser could not reach the CDN. Grading runs every cell again in its own kernel, so what
the site's run left unrun does not change a score.
"""

import csv
import json
import subprocess

import lab_helpers as lh
import lite_site as ls
import pytest

# slow: 498 s here at a load of about 15 (two Chromium sessions, JupyterLab, two gradings)
pytestmark = [pytest.mark.browser, pytest.mark.slow]

ASSIGNMENTS = ["01_residual_stack", "02_degradation"]
RUN_ALL_S = 600
GRADE_S = 1200


def _answers(name):
    return lh.solution_texts(lh.read_nb(lh.REPO_ROOT / "source" / name / f"{name}.ipynb"))


def _from_site(tmp_path, submissions, shots, report):
    port = lh.free_port()
    site = ls.build_offline(tmp_path / "site", ASSIGNMENTS, port)
    from playwright.sync_api import sync_playwright

    with ls.served(site, port) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(lh.CHROMIUM), args=lh.CHROMIUM_FLAGS)
        try:
            for name in ASSIGNMENTS:
                context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                              accept_downloads=True)
                page = context.new_page()
                page.set_default_timeout(60_000)
                nbp = ls.SitePage(page, base, f"{name}/{name}.ipynb", shots)
                nbp.open()
                answers = _answers(name)
                for i, cell in enumerate(nbp.sources()):
                    if cell["grade_id"] in answers:
                        nbp.set_source(i, answers[cell["grade_id"]])
                nbp.insert_code_cell(0, ls.lite.INSTALL)
                seconds = nbp.run_all_timed(RUN_ALL_S)
                stopped = [c["grade_id"] or f"cell {i}" for i, (c, o) in enumerate(
                    zip(nbp.sources(), nbp.outputs()))
                    if any(x.get("output_type") == "error" for x in o)]
                nbp.delete_cell(0)
                nbp.save()
                got = nbp.download(submissions / "site" / name / f"{name}.ipynb")
                report.append(f"{name} from the site: Run All {seconds:.0f} s, stopped at "
                              f"{stopped or 'nothing'}; downloaded {got.stat().st_size:,} "
                              f"bytes")
                context.close()
        finally:
            browser.close()


def _from_lab(tmp_path, submissions, shots, report):
    env = lh.jupyter_env(tmp_path / "jupyter")
    course = tmp_path / "course"
    for name in ASSIGNMENTS:
        lh.prepare_course(course, name, env)
    # the studies at grading's sizes: Run All is how the student saves, not what is tested
    with lh.lab_page(course, lh.at_test_sizes(env), shots) as (server, page):
        for name in ASSIGNMENTS:
            path = course / "exercises" / name / f"{name}.ipynb"
            student = lh.read_nb(path)
            nbp = lh.NotebookPage(page, server, f"{name}/{name}.ipynb", len(student["cells"]),
                                  shots)
            nbp.open()
            answers = _answers(name)
            for index, grade_id, _ in lh.answer_cells(student):
                nbp.replace_cell_text(index, answers[grade_id])
            nbp.run_all()
            nbp.save()
            cells = [(i, answers[g]) for i, g, _ in lh.answer_cells(student)]
            saved, ok = lh.wait_for_file(path, lambda nb, cells=cells: all(
                lh.cell_text(nb["cells"][i]) == text for i, text in cells))
            assert ok, f"JupyterLab did not save the answers of {name}"
            dest = submissions / "lab" / name / f"{name}.ipynb"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(json.dumps(saved), encoding="utf-8")
            report.append(f"{name} from JupyterLab: answers typed, Run All, saved")
            page.locator(".lm-MenuBar-item", has_text="File").first.click()
            page.locator('.lm-Menu-item[data-command="application:close-all"]').click()


def _grade(name, submissions, out):
    """{student: {grade_id: points}} and {student: total} from `residual-pack grade`."""
    run = subprocess.run(
        [str(lh.VENV_BIN / "residual-pack"), "--course", str(lh.REPO_ROOT), "grade", name,
         str(submissions), "--out", str(out), "-j", "1", "--no-feedback"],
        capture_output=True, text=True, timeout=GRADE_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    with open(out / "grades.csv", encoding="utf-8") as f:
        totals = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(f)}
    report = json.loads((out / "report.json").read_text())
    return totals, report, run.stdout


def test_a_notebook_from_the_site_grades_as_the_same_answers_from_jupyterlab(tmp_path):
    ls.require()
    submissions = tmp_path / "submissions"
    shots = lh.shots_dir("lite-handin")
    report = []
    try:
        _from_site(tmp_path, submissions, shots, report)
        _from_lab(tmp_path, submissions, shots, report)
        for name in ASSIGNMENTS:
            one = tmp_path / "one" / name
            for student in ("site", "lab"):
                (one / student / name).mkdir(parents=True)
                (one / student / name / f"{name}.ipynb").write_bytes(
                    (submissions / student / name / f"{name}.ipynb").read_bytes())
            totals, graded, _ = _grade(name, one, tmp_path / "out" / name)
            report.append(f"{name}: raw scores {totals}")
            (shots / f"{name}-report.json").write_text(json.dumps(graded, indent=1))
            assert set(totals) == {"site", "lab"}, totals
            assert totals["site"] == totals["lab"], totals
            cells = {s["student"]: {c["cell"]: (c["score"], c["max_score"], c["autograded"])
                                    for c in s["cells"]} for s in graded["students"]}
            assert cells["site"] == cells["lab"], cells
            auto = [(c, got, most) for c, (got, most, a) in cells["site"].items() if a]
            assert auto and all(got == most for _, got, most in auto), auto
    finally:
        (shots / "summary.txt").write_text("\n".join(report) + "\n", encoding="utf-8")
        print("\n" + "\n".join(report))
