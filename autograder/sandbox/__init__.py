"""Where a student's code runs at grading time: a throwaway sandbox per notebook.

Two generations live here side by side while the grader moves from one to the other
(issue #26):

- `bubblewrap` (with `seccomp` and `cgroups`): isolation of one kernel process by
  well-kept tools: bubblewrap (namespaces, a read-only view of exactly what a Python
  kernel needs, no network), a seccomp filter made with libseccomp, cgroups for memory
  and processes where the machine has them, util-linux's setpriv, prlimit and unshare for
  the rest. `bubblewrap` is the entry point (`probe`, `Limits`, `SandboxSpec`, `command`,
  `start`), tested on its own in `tests/sandbox/`. The grader uses it wherever it can run
  (`grading.plan.Sandbox` plans each kernel as a `SandboxSpec`,
  `grading.execute.SandboxKernelManager` starts it), also for an instructor who is not
  root where the machine allows unprivileged user namespaces.
- `launcher`, `limits`, `syscalls`: the home-made launcher, the fallback where
  bubblewrap cannot run (`RESIDUAL_PACK_SANDBOX=launcher` asks for it), described below;
  to be retired. (Its warm parents, which forked kernels from a Python that had imported
  their libraries, are gone: they sped up only this fallback, and bubblewrap grades a
  class of 100 as fast as the launcher's cold kernels,
  `results/benchmarks/grade-class-engines-2026-12-03.txt`.)

Standard library and pyseccomp only: nothing of the rest of `autograder` (nor microgpt,
nbgrader or jupyter) is imported here.

The grading process (nbgrader's autograde, our `Grader`) never runs student code itself.
nbgrader's Execute step is replaced by `autograder.grading.execute.SandboxedExecute`,
which starts the kernel in bubblewrap (above; `bubblewrap.py`'s docstring says what the
kernel sees) or, as the fallback, through the launcher
(`python -m autograder.sandbox.launcher launch CONFIG -- KERNEL...`), which gives it:

- **Its own user and a private view of the machine** (`namespaces`, when the grading
  process runs as root on Linux): the kernel runs under a numeric uid of its own (a slot
  held by the grading worker, never shared with another kernel running at the same time)
  in new mount, pid, network and IPC namespaces. Its root is an empty tmpfs holding,
  read-only, only the system (/usr, /etc), Python and the virtual environment, `microgpt`
  and the package `autograder.kernel` (not the grader, not the answers). The
  course folder (source/, solutions/, the gradebook, the work course, every submission)
  does not exist there. It has no network. Its only writable space is a tmpfs of
  `Limits.disk` bytes (HOME, the working folder, /tmp). Killing the pid namespace's first
  process kills everything the student started.
- **Limits** (every level): address space, processes (per uid, so they only count
  against this kernel), CPU seconds, file size, open files, no core dumps; a time limit per
  cell and per notebook, enforced from outside; a cap on the output kept and on the size
  of any message the kernel sends.
- **No shared files with other students**: the kernel gets its cells over ZeroMQ (a
  socket in a folder that only its uid can enter), never the notebook file; nothing of a
  submission but its notebook is handed to nbgrader at all.

When the grading process is not root (a laptop), the level is `limits`: resource limits, a
throwaway folder and a clean environment only. `residual-pack grade` says which level
ran; the README's threat model lists what each one defends.

One module per process, in the order they depend on each other:

- `syscalls`: the few Linux calls (mount, unshare, prctl) that ctypes makes for us;
- `launcher`: the root process between the grading worker and the kernel; only the
  standard library;
- `limits`: what a notebook may use, how many at a time, whether this machine can
  isolate, the uid slots.

The grading process's side (`autograder.grading`): `plan` (the run's sandbox and each
kernel's launch config), `channel` and `execute` (`SandboxedExecute`, nbgrader's step).

This file imports nothing, so that the launcher starts with the standard library only.
"""
