"""The pack's grading code, split by where it runs.

In a student's kernel (the only modules a graded kernel may load: `policy.KERNEL_SIDE`):
`checks` (what test cells call, and students too), `compare`, `witness`, `probes`,
`gptchecks`, `diagnosis` with its generated table `fingerprints` (a failing check named
after the known mistake it looks like), `policy`, `gradekernel` (the graded kernel itself)
and `snapshot` (the state its tests depend on, recorded before any student code).

In the instructor's reference run only (a kernel of the instructor's solution, never a
student's): `reference`, the model answers the hidden tests compare with.

In the instructor's process, never in a kernel: `grader/` (the command line, the course
copies, intake, the sandbox, a test cell's witness version in `grader/testsource`, the
verdict in `grader/judge`, grading and the report). `mutants/` holds the course's
registered wrong answers, which the self-check grades.
"""
