"""The instructor's grading process: everything that runs there, never in a kernel.

`nbgrader_steps` (our steps in nbgrader's own autograde: intake, the sandboxed execute
step of `execute`, withholding for review), `testsource` (a test cell's witness and
reference versions), `remote` (a test cell run here against the student's kernel),
`records` (what its checks record), `judge` (the verdict on one test cell),
`reference_run` (the solution's expected observations), `plan` (the run's sandbox),
`notebook_record` (what our steps write into the graded notebook's metadata, which
everything after reads), `course`, `session`, `student`, `classrun` (the batch command's
class), `report`, `report_export` (the class report as an nbgrader export plugin),
`journal`, `feedback`, `cluster/` (Dask).
"""
