"""nbgrader's configuration: the course directory is this repository.

source/<assignment>/  instructor notebooks (the single source of truth)
exercises/<assignment>/  nbgrader's release folder: the student versions, committed
solutions/<assignment>/  nbgrader's solution folder, committed
submitted/, autograded/, feedback/, gradebook.db  grading outputs, never committed
"""

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
# the kernel's working folder is not put on sys.path, so a file a student hands in
# (an `autograder.py`, say) cannot stand in for the installed package in the test cells
c.Execute.extra_arguments = ["--IPKernelApp.ignore_cwd=True"]
