"""The instructor's answers: `reference` (model answers that the reference versions of
test cells call) and `mutants` (each assignment's registered wrong answers, which the
self-check grades and the fingerprint table names).

Never loaded in a student's kernel: the sandbox copies only `autograder.kernel`, and a
witness cell that would need this package is refused (`grading.testsource`).
"""
