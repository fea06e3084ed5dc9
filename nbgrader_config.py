"""nbgrader's configuration: the course directory is this repository.

source/<assignment>/  instructor notebooks (the single source of truth)
exercises/<assignment>/  nbgrader's release folder: the student versions, committed
solutions/<assignment>/  nbgrader's solution folder, committed
submitted/, autograded/, feedback/, gradebook.db, .grading/  grading outputs, never committed

nbgrader's own commands (`nbgrader autograde`, the API, formgrader's autograde button,
`nbgrader generate_feedback`) grade the way `residual-pack grade` does: the steps below
are nbgrader's own lists of preprocessors with ours put in, written once in
autograder/grading/pipeline.py (which `residual-pack grade` reads too; nbgrader_steps.py says
what each of ours does). pipeline.py names them as text and imports nothing, so reading the
lists here loads no grading code.
"""

import importlib.util
import os

c = get_config()  # noqa: F821 (nbgrader provides it)

c.CourseDirectory.course_id = "residuals"
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.solution_directory = "solutions"

c.ClearSolutions.code_stub = {
    "python": '# YOUR CODE HERE\nraise NotImplementedError("write your solution here")'
}
c.ClearSolutions.text_stub = "_Write your answer here._"

# per cell; students' Validate uses the same file, so both sides share the limit
c.Execute.timeout = 120
c.Execute.startup_timeout = 120
# a student who deletes a graded cell loses nothing else: nbgrader puts it back
c.OverwriteCells.add_missing_cells = True
# late hand-ins: a notebook handed in after the assignment's due date (the gradebook's,
# plus the student's extension there) scores zero. nbgrader's "zero", the only penalty it
# ships; its default, "none", takes nothing. The penalty is the score when autograded, so
# points given by hand later in formgrader still count. Grant a student more time with an
# extension in the gradebook; "none" here turns penalties off (docs/instructors.md, step 8)
c.LateSubmissionPlugin.penalty_method = "zero"
# the kernel's working folder is not put on sys.path, so a file a student hands in
# (an `autograder.py`, say) cannot stand in for the installed package in the test cells
c.Execute.extra_arguments = ["--IPKernelApp.ignore_cwd=True"]

# ---- our steps in nbgrader's lists (autograder/grading/nbgrader_steps.py) ----

from autograder.grading import pipeline  # noqa: E402 (the lists; it imports nothing)

# the student version: nbgrader's steps, then the notebook guard's lists of quoted figures
# (autograder/authoring/notebook_guard.py) taken out, as they would show the model answer's
c.GenerateAssignment.preprocessors = list(pipeline.GENERATE_STEPS)
# autograde, first pass (the handed-in notebook): repaired against the release first
# (IntakeRepairs: deleted/moved/retyped cells, metadata), then nbgrader's sanitizing
c.Autograde.sanitize_preprocessors = list(pipeline.SANITIZE_STEPS)
# autograde, second pass: the kernel in the sandbox (SandboxedExecute in place of
# nbgrader's Execute: full isolation as root where Linux namespaces work; elsewhere
# resource limits only, which the log says once per run), the test cells judged by the
# grader against the solution's reference run, and code that reached into the grader held
# back for a manual grade (WithholdForReview). Each of our steps writes what it saw into
# the notebook's metadata ("residual_pack_grading"), read back from the autograded
# notebook by the report, and by the class report export:
#   nbgrader export --exporter=autograder.grading.report_export.ClassReport --to report/
c.Autograde.autograde_preprocessors = list(pipeline.AUTOGRADE_STEPS)
# feedback pages without the hidden tests (their source and their tracebacks)
c.GenerateFeedback.preprocessors = list(pipeline.FEEDBACK_STEPS)
# ... and readable offline: the equations are MathML (MathToMathML above), and the page's
# template (nbgrader's, without MathJax, whose script comes from a CDN) fetches nothing.
# Set for the exporter of GenerateFeedback only (its parent): formgrader renders its own
# pages (the manual grading view) with HTMLExporter and nbgrader's "formgrade" template,
# which a plain c.HTMLExporter setting would replace (a 500: no bootstrap.min.css)
c.GenerateFeedback.HTMLExporter.template_name = "feedback_offline"
# (nbconvert's HTMLExporter, its templates compiled once per process, not once per page)
c.GenerateFeedback.exporter_class = "autograder.grading.feedback.FeedbackPage"
# (the folders of the installed packages, found without importing them)
c.GenerateFeedback.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(importlib.util.find_spec(package).origin), *folder)
    for package, folder in [("autograder", ("grading", "templates")),
                            ("nbgrader", ("server_extensions", "formgrader", "templates"))]
]

# ---- every page made from a submission runs none of the student's script ----
# (autograder/grading/feedback.py): the feedback pages and formgrader's view of a
# submission, which opens in the instructor's Jupyter origin. JavaScript and widget
# outputs are dropped, nbconvert's templates write no script, and the student's HTML and
# markdown go through nh3's allow-list (our clean_html and markdown2html filters).
# Formgrader's exporter is the plain HTMLExporter: it takes these c.HTMLExporter lines
# (and its template name, "formgrade", from formgrader itself).
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.skip_svg_encoding = False
c.HTMLExporter.filters = {
    "clean_html": "autograder.grading.feedback.clean_html",
    "markdown2html": "autograder.grading.feedback.markdown2html",
}
# formgrader's view reads offline too: its equations as MathML (as on the feedback pages),
# and our "formgrade" folder, searched before nbgrader's, holds a MathJax macro that
# loads nothing (formgrader's own setting of these folders is replaced by this line)
c.HTMLExporter.preprocessors = [
    "autograder.grading.feedback.DropScriptOutputs",
    "autograder.grading.feedback.MathToMathML",
]
c.HTMLExporter.extra_template_basedirs = c.GenerateFeedback.HTMLExporter.extra_template_basedirs
