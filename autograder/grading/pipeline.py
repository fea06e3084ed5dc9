"""nbgrader's lists of steps with ours put in: what the course's `nbgrader_config.py`
sets for nbgrader's own commands, and what `residual-pack grade`'s work course gives
nbgrader's autograde (`course.WorkCourse.config`): one grading path. Names only, so
that the config and the work course can read them without importing the steps
(`nbgrader_steps` says what each of ours does).
"""

__all__ = ["SANITIZE_STEPS", "AUTOGRADE_STEPS", "TRUSTED_AUTOGRADE_STEPS", "GENERATE_STEPS",
           "FEEDBACK_STEPS", "EXECUTE_STEP"]

HERE = "autograder.grading"
# nbgrader's Execute with the kernel in the sandbox
EXECUTE_STEP = f"{HERE}.execute.SandboxedExecute"
# nbgrader 0.9's own lists, with our steps: what nbgrader_config.py sets
SANITIZE_STEPS = [
    f"{HERE}.nbgrader_steps.IntakeRepairs",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "nbgrader.preprocessors.OverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# (nbgrader's LimitOutput is not among them: SandboxedExecute applies its rule to each
# cell, where the rest of the output limit is decided: `execute_state.OutputBudget`)
AUTOGRADE_STEPS = [
    EXECUTE_STEP,
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.SaveAutoGrades",
    f"{HERE}.nbgrader_steps.WithholdForReview",
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# a work course without a sandbox (trusted notebooks only: the instructor's, the tests'
# controls) runs them in nbgrader's own Execute, which limits no output: nbgrader's
# LimitOutput goes back in its place in nbgrader's list, before SaveAutoGrades
_SAVE = AUTOGRADE_STEPS.index("nbgrader.preprocessors.SaveAutoGrades")
TRUSTED_AUTOGRADE_STEPS = [
    "nbgrader.preprocessors.Execute", *AUTOGRADE_STEPS[1:_SAVE],
    "nbgrader.preprocessors.LimitOutput", *AUTOGRADE_STEPS[_SAVE:],
]
# nbgrader 0.9's generate_assignment, then the notebook guard's lists of quoted figures out
GENERATE_STEPS = [
    "nbgrader.preprocessors.IncludeHeaderFooter",
    "nbgrader.preprocessors.InstantiateTests",
    "nbgrader.preprocessors.LockCells",
    "nbgrader.preprocessors.ClearSolutions",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.CheckCellMetadata",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.SaveCells",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbgrader.preprocessors.ClearMarkScheme",
    "nbgrader.preprocessors.ComputeChecksums",
    "nbgrader.preprocessors.CheckCellMetadata",
    f"{HERE}.nbgrader_steps.StripQuoteLists",
]
FEEDBACK_STEPS = [
    f"{HERE}.feedback.DropScriptOutputs",
    "nbgrader.preprocessors.GetGrades",
    f"{HERE}.feedback.HideHiddenTestTracebacks",
    f"{HERE}.feedback.ClearHiddenTestsInTestCells",
    f"{HERE}.feedback.MathToMathML",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]
