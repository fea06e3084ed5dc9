"""The pack's grading code, split by where it runs.

In a student's kernel (the only modules a graded kernel may load: `policy.KERNEL_SIDE`):
`checks` (what test cells call, and students too), `compare`, `witness`, `probes`,
`gptchecks`, `diagnosis` with its generated table `fingerprints` (a failing check named
after the known mistake it looks like), `policy` and `gradekernel` (the graded kernel
itself).

In the instructor's process, never in a kernel: `grader/` (the command line, the course
copies, intake, the sandbox, grading and the report), and, beside it for now, `reference`
(the model answers), `testsource` (a test cell's witness version) and `judge` (the verdict
on what a kernel observed). `mutants/` holds the registered wrong answers.
"""
