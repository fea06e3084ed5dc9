"""Where a student's code runs at grading time: a throwaway sandbox per kernel.

Isolation is bubblewrap's, with a seccomp filter made by libseccomp, cgroups for memory and
processes where the machine has them, and util-linux's setpriv, prlimit and unshare for the
rest: our code only builds their argument lists and runs them.

- `bubblewrap`: one kernel process, isolated (`probe`, `SandboxSpec`, `command`, `start`
  with a `limits.Limits`; its docstring says what the kernel sees). As root, each kernel
  gets a fresh uid and cgroup limits; as an instructor who is not root, where the machine allows
  unprivileged user namespaces, the same bubblewrap and filter run as that user with
  rlimits, and `probe` says in a sentence what is lost. Where bubblewrap cannot run at
  all, the level "limits" is no sandbox (prlimit's limits and a clean environment only),
  refused as root and said in every run's log.
- `seccomp`: the filter (no new user namespaces, mounts, keyrings, ptrace, ...).
- `cgroups`: a kernel's memory (anonymous, shared and tmpfs together) and process limits,
  cgroup v1 or v2.
- `limits`: what one notebook may use while it is graded (`Limits`, every size in bytes:
  time, memory, disk, output, ...; the grader and bubblewrap read the same object), and
  how many this machine grades at a time.

The grading process (nbgrader's autograde, our `Grader`) never runs student code itself:
nbgrader's Execute step is replaced by `autograder.grading.execute.SandboxedExecute`,
whose kernel manager starts the kernel with `bubblewrap.start` from the plan
`autograder.grading.plan.Sandbox` makes for it. The kernel gets its cells over ZeroMQ (a
socket in a folder only it can write), never the notebook file. `tests/sandbox/` tests
these modules on their own.

Standard library and pyseccomp only: nothing of the rest of `autograder` (nor microgpt,
nbgrader or jupyter) is imported here.
"""
